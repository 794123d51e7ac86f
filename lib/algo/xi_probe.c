/* xi_probe.c -- xi and xi_bi (theory.md 4.2, 4.4) around one gc_sim step, for
 * float32 and float64 simulators alike.  Everything
 * is computed in double, in a fixed order, so the result is a function of
 * the simulator's state alone (never of the thread count): the passes
 * that are per coordinate (the sums over workers, the means) run over the
 * caller's OpenMP threads, the norms on one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_algo_rules.h"
#include "gc_errno.h"
#include "gc_threads.h"
#include "gc_dtype.h"
#include "gc_probe.h"
#include "gc_vec.h"

enum { UNITS_NONE, UNITS_MODEL, UNITS_GRAD };

struct gc_xi_probe {
  gc_algo_kind kind;
  size_t n, P;
  int dtype, units, server_memory;
  gc_compressor *topk_up, *topk_down;
  uint8_t *buf;                 /* messages of both reference TopK's      */
  double *dprev;                /* server memory before the step          */
  double *macc, *msent, *t1, *t2;
  double wmem2;                 /* sum_p ||acc^p - m^p||^2 of this step   */
};

/* Where each method keeps its memories (gc_algo.h: the probe views). */
static int units_of(gc_algo_kind kind)
{
  switch (gc__algo(kind)->memory) {
  case GC__MEM_WORKER: case GC__MEM_SERVER:
    return UNITS_MODEL;
  case GC__MEM_SERVER_GRAD:
    return UNITS_GRAD;
  case GC__MEM_NONE: case GC__MEM_OTHER:
    break;
  }
  return UNITS_NONE;
}

/* The reference TopK's parameters: K (or density) and tie rule of `of`. */
static void topk_params(const gc_compressor_params *of, gc_compressor_params *p)
{
  gc_compressor_params_default(p);
  p->k = of->k;
  p->density = of->density;
  p->ties = of->ties;
}

void gc_xi_probe_free(gc_xi_probe *w)
{
  if (!w)
    return;
  gc_compressor_free(w->topk_up);
  gc_compressor_free(w->topk_down);
  free(w->buf);
  free(w->dprev);
  free(w->macc);
  free(w->msent);
  free(w->t1);
  free(w->t2);
  free(w);
}

gc_xi_probe *gc_xi_probe_alloc(const gc_algo_config *cfg)
{
  const gc_compressor_type *tk = gc_compressor_type_by_name("topk");
  if (!tk)
    GC_ERROR_NULL("the topk compressor is not in this build", GC_EUNSUP);
  gc_xi_probe *w = calloc(1, sizeof *w);
  if (!w)
    GC_ERROR_NULL("out of memory for the xi probe", GC_ENOMEM);
  size_t n = cfg->n;
  w->kind = cfg->kind;
  w->n = n;
  w->P = cfg->workers;
  w->dtype = cfg->dtype;
  w->units = units_of(cfg->kind);
  w->server_memory = gc__algo(cfg->kind)->memory == GC__MEM_SERVER ||
                     gc__algo(cfg->kind)->memory == GC__MEM_SERVER_GRAD;
  gc_compressor_params pu, pd;
  topk_params(&cfg->up_params, &pu);
  topk_params(&cfg->down_params, &pd);
  if (!(w->topk_up = gc_compressor_alloc(tk, n, &pu)) ||
      !(w->topk_down = gc_compressor_alloc(tk, n, &pd))) {
    gc_xi_probe_free(w);
    return NULL;   /* reported by gc_compressor_alloc */
  }
  size_t a = gc_compressor_max_bytes(w->topk_up);
  size_t b = gc_compressor_max_bytes(w->topk_down);
  if (!(w->buf = malloc(a > b ? a : b)) ||
      !(w->dprev = calloc(n, sizeof *w->dprev)) ||
      !(w->macc = calloc(n, sizeof *w->macc)) ||
      !(w->msent = calloc(n, sizeof *w->msent)) ||
      !(w->t1 = calloc(n, sizeof *w->t1)) ||
      !(w->t2 = calloc(n, sizeof *w->t2))) {
    gc_xi_probe_free(w);
    GC_ERROR_NULL("out of memory for the xi probe", GC_ENOMEM);
  }
  return w;
}

int gc_xi_probe_defined(const gc_xi_probe *w) { return w->units != UNITS_NONE; }
int gc_xi_probe_has_server_memory(const gc_xi_probe *w) { return w->server_memory; }
size_t gc_xi_probe_k(const gc_xi_probe *w) { return gc_compressor_k(w->topk_up); }
size_t gc_xi_probe_k_down(const gc_xi_probe *w) { return gc_compressor_k(w->topk_down); }

/* Element i of a vector of the probe's dtype, as a double. */
static double at(const gc_xi_probe *w, const void *v, size_t i)
{
  return w->dtype == GC_F32 ? (double) ((const float *) v)[i]
                            : ((const double *) v)[i];
}

void gc_xi_probe_before(gc_xi_probe *w, gc_sim *sim)
{
  const void *sm = gc_server_memory(gc_sim_server(sim));
  size_t n = w->n;
  if (sm && w->server_memory) {
    #pragma omp parallel for schedule(static) num_threads(gc__vec_threads(n))
    for (size_t i = 0; i < n; i++)
      w->dprev[i] = at(w, sm, i);
  }
  else
    memset(w->dprev, 0, w->n * sizeof *w->dprev);
}

/* out = TopK(x) through the library's compressor (encode, then decode). */
static int roundtrip(gc_xi_probe *w, gc_compressor *c, const double *x,
                     double *out)
{
  size_t len;
  GC_TRY(gc_compress_f64(c, x, 0, w->buf, gc_compressor_max_bytes(c), &len,
                         NULL));
  memset(out, 0, w->n * sizeof *out);
  return gc_decompress_add_f64(c, w->buf, len, 0, 1.0, out);
}

void gc_xi_probe_sums_begin(gc_xi_probe *w)
{
  size_t n = w->n;
  #pragma omp parallel for schedule(static) num_threads(gc__vec_threads(n))
  for (size_t i = 0; i < n; i++)
    w->t1[i] = w->macc[i] = w->msent[i] = 0;
  w->wmem2 = 0;
}

void gc_xi_probe_sums_add(gc_xi_probe *w, const void *grad, const void *acc,
                          const void *sent)
{
  if (!acc)
    acc = grad;   /* dense uplink: the input is the gradient */
  if (!sent)
    sent = acc;
  size_t n = w->n;
  #pragma omp parallel for schedule(static) num_threads(gc__vec_threads(n))
  for (size_t i = 0; i < n; i++) {
    w->t1[i] += at(w, grad, i);
    w->macc[i] += at(w, acc, i);
    w->msent[i] += at(w, sent, i);
  }
  /* the worker's memory after the step, acc^p - m^p (plain error
   * feedback): a norm, so on one thread */
  double e2 = 0;
  for (size_t i = 0; i < n; i++) {
    double e = at(w, acc, i) - at(w, sent, i);
    e2 += e * e;
  }
  w->wmem2 += e2;
}

int gc_xi_probe_sums_end(gc_xi_probe *w, double lr, gc_xi_sample *out)
{
  size_t n = w->n, P = w->P;
  #pragma omp parallel for schedule(static) num_threads(gc__vec_threads(n))
  for (size_t i = 0; i < n; i++) {
    w->t1[i] /= (double) P;
    w->macc[i] /= (double) P;
    w->msent[i] /= (double) P;
  }
  double g2 = 0;
  for (size_t i = 0; i < n; i++)
    g2 += w->t1[i] * w->t1[i];
  out->gbar_norm2 = g2;
  out->xi = out->xi_bi = out->num = out->num_bi = NAN;
  out->gamma_hat = out->mem_norm2 = out->worker_mem2 = out->server_mem2 = NAN;
  if (w->units == UNITS_NONE)
    return GC_SUCCESS;
  double c = w->units == UNITS_GRAD ? lr : 1.0;
  double denom = lr * sqrt(g2);
  out->worker_mem2 = c * c * w->wmem2 / (double) P;
  out->server_mem2 = 0;
  GC_TRY(roundtrip(w, w->topk_up, w->macc, w->t1));
  out->num = c * sqrt(gc__ddist2(w->t1, w->msent, n));
  out->xi = out->num / denom;
  if (!w->server_memory) {
    /* a_t = mean acc^p; E_{t+1} = mean acc^p - mean m^p */
    double a2 = gc__dnorm2(w->macc, n);
    out->gamma_hat = a2 > 0 ? sqrt(gc__ddist2(w->macc, w->t1, n) / a2) : NAN;
    out->mem_norm2 = c * c * gc__ddist2(w->macc, w->msent, n);
  }
  /* the means are not needed again */
  #pragma omp parallel for schedule(static) num_threads(gc__vec_threads(n))
  for (size_t i = 0; i < n; i++) {
    w->macc[i] += w->dprev[i];
    w->msent[i] += w->dprev[i];
  }
  GC_TRY(roundtrip(w, w->topk_down, w->macc, w->t2));
  GC_TRY(roundtrip(w, w->topk_down, w->msent, w->t1));
  out->num_bi = c * sqrt(gc__ddist2(w->t2, w->t1, n));
  out->xi_bi = out->num_bi / denom;
  if (!w->server_memory)
    return GC_SUCCESS;
  /* a_t = delta_t + mean acc^p; the server sends q = TopK_d(delta_t +
   * mean m^p) (t1) and keeps delta_{t+1} = delta_t + mean m^p - q, so
   * E_{t+1} = mean acc^p - mean m^p + delta_{t+1} = a_t - q */
  double a2 = gc__dnorm2(w->macc, n);
  out->gamma_hat = a2 > 0 ? sqrt(gc__ddist2(w->macc, w->t2, n) / a2) : NAN;
  out->mem_norm2 = c * c * gc__ddist2(w->macc, w->t1, n);
  out->server_mem2 = c * c * gc__ddist2(w->msent, w->t1, n);
  return GC_SUCCESS;
}

int gc_xi_probe_after(gc_xi_probe *w, gc_sim *sim, const void *const *grads,
                      double lr, gc_xi_sample *out)
{
  /* gbar, then the means of the accumulators and decoded messages: sums in
   * worker order, then one division, so identical inputs give identical
   * means (identity uplink => xi_bi exactly 0). */
  gc_xi_probe_sums_begin(w);
  for (size_t p = 0; p < w->P; p++) {
    gc_worker *wk = gc_sim_worker(sim, p);
    gc_xi_probe_sums_add(w, grads[p], gc_worker_accumulator(wk),
                         gc_worker_sent(wk));
  }
  return gc_xi_probe_sums_end(w, lr, out);
}
