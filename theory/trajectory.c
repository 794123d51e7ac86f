/* trajectory.c -- trajectories of the library's algorithms (driven by gc_sim)
 * on the synthetic problems, with the probes of docs/theory.md 4.1-4.4: the
 * empirical contraction on the inputs the compressors actually received,
 * xi_t and xi_bi,t, the error recursion of 4.3 and |support union|.
 *
 * A step has a worker half and a server half.  Each process steps its own
 * workers and writes, per worker, a record: the scalars only a worker can
 * compute (its contractions, its exact gradient's norm) and the vectors the
 * server sums (gradients, accumulator, message, memory).  Under a
 * transport the records travel to the leader (gather_aux; rank 0 under
 * MPI); in one process the server half reads them in place.  Either way it
 * sums the same numbers in worker order, so the rows are bit-identical and
 * no process reads another's workers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gc_algo_rules.h"
#include "gc_errno.h"
#include "gc_npy.h"
#include "gc_probe.h"
#include "gc_vec.h"
#include "gc_rng.h"
#include "gc_theory.h"
#include "gc_transport.h"

/* How a method keeps its error memories, which decides the probes: the
 * row's GC__MEM_* (gc_algo_rules.h), one for one. */
enum {
  MEM_NONE,     /* SGD, allreduce: E = 0                               */
  MEM_UNI,      /* worker residuals in model units, exact aggregate     */
  MEM_BI,       /* worker + server residuals, model units               */
  MEM_GRAD,     /* downlink-only, DoubleSqueeze: gradient units         */
  MEM_OTHER     /* EF21, EF21-BC: no xi / recursion                      */
};

struct gc_theory_run {
  const gc_problem *prob;
  gc_algo_config cfg;
  gc_sim *sim;
  size_t n, P;
  int mem;
  int has_tr;                /* on a transport (tr below), else in-process */
  gc_transport tr;
  size_t lo, hi;             /* the local workers [lo, hi)                 */
  int leader;                /* the records land here: the server half    */
  double **clean;            /* local workers' exact gradients (P slots)   */
  double **grads;            /* the same plus noise (or clean itself)      */
  /* the workers' records as the server half reads them (P each) */
  double *stat;              /* NSTAT scalars per worker                   */
  const double **v_clean, **v_noisy, **v_acc, **v_sent, **v_mem;
  size_t rec_len;            /* bytes of one record on a transport         */
  int rec_noisy, rec_acc, rec_mem;   /* which vectors a record carries    */
  uint8_t *aux;              /* records, gather_aux's layout               */
  double *E;                 /* E_t in model units                        */
  double Enorm;              /* ||E_t||                                   */
  double *dprev;             /* server memory before the step             */
  double *t1, *t2, *t3;      /* scratch                                   */
  gc_xi_probe *xi;           /* xi, xi_bi: the library's one definition   */
  size_t k, kd;
  double gamma, gamma_d;
  /* running summary */
  double f0_gap, sum_grad2, min_grad2, M2;
  double xi_max, xi_sum, xi_bi_max, xi_bi_sum;
  size_t xi_cnt, xi_bi_cnt, steps;
  double dup_worst, dup_sum, ddown_worst, ddown_sum;
  size_t dup_cnt, ddown_cnt;
  double mem_excess, support_sum, mem_max;
  const char *recursion_fails;   /* why mem_bound is not a bound, or NULL */
  /* multi-draw contraction probes of random compressors (4.1) */
  size_t draws;
  gc_compressor *draw_up, *draw_down;
  uint8_t *draw_buf;             /* one message of either draw compressor */
  double dup_draws, ddown_draws;
  /* quantities of the bounds of 4.6 and 4.8 */
  double grad2_max;              /* max_t ||grad F(x_t)||^2                */
  double *worker_grad2_max;      /* P: max_t ||grad f_p(x_t)||^2           */
  double avg_shift;              /* a of w_t = (a+t)^2; NaN: no average     */
  double avg_weight;             /* S_t = sum of the weights so far         */
  double *avg_sum;               /* sum_t w_t x_t (NULL: no average)        */
  /* the ladder of 4.9 and the floating-point check */
  double *xprev;                 /* x_t while the step makes x_{t+1}         */
  gc_ladder_path lad;             /* rung r2_xi's recursion and the means    */
  double fl_max, fl_x;           /* the largest per-step loss, |x| there     */
  size_t fl_step;
  double fl_lost, fl_moved;      /* sums of ||lost_t|| and ||u_t||           */
  double *grad0;                 /* grad F(0), for Abar v = grad F(v) - grad F(0) */
  double noise_curv;             /* sigma^2 tr(Abar)/P = E n^T Abar n        */
};

/* out = C(x) at `step` through the library's compressor (encode, then
 * decode); buf holds gc_compressor_max_bytes(c). */
static int roundtrip_info(gc_compressor *c, const double *x, uint32_t step,
                          uint8_t *buf, double *out, gc_compress_info *info)
{
  size_t len;
  GC_TRY(gc_compress_f64(c, x, step, buf, gc_compressor_max_bytes(c), &len,
                         info));
  memset(out, 0, gc_compressor_n(c) * sizeof *out);
  return gc_decompress_add_f64(c, buf, len, step, 1.0, out);
}

static int roundtrip(gc_compressor *c, const double *x, uint32_t step,
                     uint8_t *buf, double *out)
{
  return roundtrip_info(c, x, step, buf, out, NULL);
}

void gc_theory_run_free(gc_theory_run *r)
{
  if (!r)
    return;
  gc_sim_free(r->sim);
  for (size_t p = 0; p < r->P; p++) {
    if (r->grads && r->grads[p] != r->clean[p])
      free(r->grads[p]);
    if (r->clean)
      free(r->clean[p]);
  }
  free(r->clean);
  free(r->grads);
  free(r->stat);
  free(r->v_clean);
  free(r->v_noisy);
  free(r->v_acc);
  free(r->v_sent);
  free(r->v_mem);
  free(r->aux);
  free(r->E);
  free(r->dprev);
  free(r->t1);
  free(r->t2);
  free(r->t3);
  free(r->worker_grad2_max);
  free(r->avg_sum);
  free(r->xprev);
  free(r->grad0);
  gc_xi_probe_free(r->xi);
  gc_compressor_free(r->draw_up);
  gc_compressor_free(r->draw_down);
  free(r->draw_buf);
  free(r);
}

/* The scalars of a worker's record. */
enum {
  STAT_GRAD2,     /* ||grad f_p(x_t)||^2 before the noise                 */
  STAT_DELTA,     /* 1 - ||acc - m||^2/||acc||^2 (NaN: no accumulator)     */
  STAT_DRAWS,     /* the multi-draw contraction of acc (NaN: none)         */
  STAT_HAS_MEM,   /* 1 when the worker keeps a memory                     */
  NSTAT
};

/* Which vectors a record carries: those the server half reads.  The exact
 * gradient always (grad F = their mean), the noisy one where noise makes
 * it differ, accumulator and message where xi is defined, the memory
 * where the error recursion is. */
static void record_layout(gc_theory_run *r)
{
  r->rec_noisy = r->prob->sigma > 0;
  r->rec_acc = gc_xi_probe_defined(r->xi);
  r->rec_mem = r->mem == MEM_UNI || r->mem == MEM_BI || r->mem == MEM_GRAD;
  size_t vectors = 1 + (size_t) r->rec_noisy + 2 * (size_t) r->rec_acc +
                   (size_t) r->rec_mem;
  r->rec_len = (NSTAT + vectors * r->n) * sizeof(double);
}

/* Here, with the probes that measure the recursion, so that the bounds
 * (theory/bounds.c) read the probes and never the other way round. */
const char *gc_theory_recursion_failure(const gc_algo_config *cfg)
{
  switch (gc__algo(cfg->kind)->memory) {
  case GC__MEM_NONE: case GC__MEM_WORKER:
    return NULL;   /* E = 0, or xi is measured against the messages sent */
  case GC__MEM_SERVER: case GC__MEM_SERVER_GRAD:
    return cfg->down && !strcmp(cfg->down->name, "topk") ? NULL
           : "the downlink compressor is not top-K (the recursion contracts with TopK_d)";
  case GC__MEM_OTHER:
    break;
  }
  return "the algorithm keeps no error memory of 4.3";
}

gc_theory_run *gc_theory_run_alloc_transport(const gc_problem *prob,
                                             const gc_algo_config *cfg,
                                             const double *x0,
                                             const gc_transport *tr,
                                             int leader)
{
  /* the worker range is gc_sim_alloc_transport's to check */
  if (tr && (!tr->type->gather_aux || (leader && !tr->server)))
    GC_ERROR_NULL("theory run: the transport must carry the probes' records"
                  " (gather_aux) and run the server where they land", GC_EINVAL);
  gc_theory_run *r = calloc(1, sizeof *r);
  if (!r)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  r->prob = prob;
  r->cfg = *cfg;
  r->cfg.n = r->n = prob->n;
  r->cfg.workers = r->P = prob->workers;
  r->cfg.dtype = GC_F64;
  size_t n = r->n, P = r->P;
  r->has_tr = tr != NULL;
  if (tr)
    r->tr = *tr;
  r->lo = tr ? tr->worker_lo : 0;
  r->hi = tr ? tr->worker_hi : P;
  r->leader = tr ? leader : 1;
  switch (gc__algo(cfg->kind)->memory) {
  case GC__MEM_NONE: r->mem = MEM_NONE; break;
  case GC__MEM_WORKER: r->mem = MEM_UNI; break;
  case GC__MEM_SERVER: r->mem = MEM_BI; break;
  case GC__MEM_SERVER_GRAD: r->mem = MEM_GRAD; break;
  case GC__MEM_OTHER: r->mem = MEM_OTHER; break;
  }
  /* The xi probe's reference TopK's (magnitude top-K with the configured
   * K or density and tie rule, whatever the method's compressors are)
   * resolve K and K_d (and reject K > d). */
  int ok = (r->xi = gc_xi_probe_alloc(&r->cfg)) != NULL;
  if (ok) {
    r->k = gc_xi_probe_k(r->xi);
    r->kd = gc_xi_probe_k_down(r->xi);
    r->gamma = sqrt(1.0 - (double) r->k / (double) n);
    r->gamma_d = sqrt(1.0 - (double) r->kd / (double) n);
    record_layout(r);
    ok = (r->clean = calloc(P, sizeof *r->clean)) &&
         (r->grads = calloc(P, sizeof *r->grads)) &&
         (r->stat = calloc(P * NSTAT, sizeof *r->stat)) &&
         (r->v_clean = calloc(P, sizeof *r->v_clean)) &&
         (r->v_noisy = calloc(P, sizeof *r->v_noisy)) &&
         (r->v_acc = calloc(P, sizeof *r->v_acc)) &&
         (r->v_sent = calloc(P, sizeof *r->v_sent)) &&
         (r->v_mem = calloc(P, sizeof *r->v_mem)) &&
         (r->E = calloc(n, sizeof *r->E)) &&
         (r->dprev = calloc(n, sizeof *r->dprev)) &&
         (r->t1 = calloc(n, sizeof *r->t1)) &&
         (r->t2 = calloc(n, sizeof *r->t2)) &&
         (r->t3 = calloc(n, sizeof *r->t3)) &&
         (r->xprev = calloc(n, sizeof *r->xprev)) &&
         (r->grad0 = calloc(n, sizeof *r->grad0)) &&
         (r->worker_grad2_max = calloc(P, sizeof *r->worker_grad2_max));
    /* without noise the step takes the exact gradients themselves */
    for (size_t p = r->lo; ok && p < r->hi; p++)
      ok = (r->clean[p] = calloc(n, sizeof **r->clean)) &&
           (r->grads[p] = r->rec_noisy ? calloc(n, sizeof **r->grads) : r->clean[p]);
    /* gather_aux: the local records, and all P where the server runs */
    if (ok && tr)
      ok = (r->aux = malloc((r->leader ? P : r->hi - r->lo) * r->rec_len +
                            1)) != NULL;
    if (!ok)
      gc_error("theory run: out of memory", __FILE__, __LINE__, GC_ENOMEM);
  }
  if (ok)
    ok = (r->sim = gc_sim_alloc_transport(&r->cfg, x0 ? x0 : prob->x0,
                                          tr)) != NULL;
  if (!ok) {
    gc_theory_run_free(r);
    return NULL;
  }
  r->f0_gap = gc_problem_gap(prob, gc_sim_model(r->sim));
  r->min_grad2 = INFINITY;
  r->dup_worst = r->ddown_worst = INFINITY;
  r->mem_excess = -INFINITY;
  r->recursion_fails = gc_theory_recursion_failure(&r->cfg);
  r->dup_draws = r->ddown_draws = INFINITY;
  r->avg_shift = NAN;
  gc_ladder_path_init(&r->lad);
  /* rung r7: Abar v = grad F(v) - grad F(0); the noise n of gbar has
   * covariance (sigma^2/P) I, so E n^T Abar n = sigma^2 tr(Abar)/P */
  memset(r->t1, 0, n * sizeof *r->t1);
  gc_problem_grad(prob, r->t1, r->grad0);
  double trace = 0;   /* P tr(Abar) */
  for (size_t p = 0; p < P; p++)
    for (size_t i = 0; i < n; i++)
      trace += prob->kind == GC_PROBLEM_DIAG ? prob->a[p * n + i]
                                             : prob->a[(p * n + i) * n + i];
  r->noise_curv = prob->sigma * prob->sigma * trace / (double) P / (double) P;
  return r;
}

gc_theory_run *gc_theory_run_alloc(const gc_problem *prob,
                                   const gc_algo_config *cfg,
                                   const double *x0)
{
  return gc_theory_run_alloc_transport(prob, cfg, x0, NULL, 1);
}

int gc_theory_run_set_average(gc_theory_run *r, double shift)
{
  if (r->avg_sum || gc_sim_steps_done(r->sim) || !(shift >= 0) || !isfinite(shift))
    GC_ERROR("weighted average: set once, before the first step, with a >= 0",
             GC_EINVAL);
  if (!(r->avg_sum = calloc(r->n, sizeof *r->avg_sum)))
    GC_ERROR("weighted average: out of memory", GC_ENOMEM);
  r->avg_shift = shift;
  return GC_SUCCESS;
}

/* A second instance of a random compressor with its own seed, so that the
 * probe's draws never coincide with the run's. */
static gc_compressor *draw_instance(const gc_compressor_type *T, size_t n,
                                    const gc_compressor_params *of)
{
  if (!T || !(T->flags & GC_COMP_RANDOM))
    return NULL;
  gc_compressor_params p = *of;
  p.seed = of->seed ^ UINT64_C(0x9e3779b97f4a7c15);
  return gc_compressor_alloc(T, n, &p);
}

int gc_theory_run_set_draws(gc_theory_run *r, size_t draws)
{
  if (draws == r->draws)
    return GC_SUCCESS;
  if (draws == 0 || r->draws || gc_sim_steps_done(r->sim))
    GC_ERROR("multi-draw probe: set once, before the first step", GC_EINVAL);
  r->draw_up = draw_instance(r->cfg.up, r->n, &r->cfg.up_params);
  r->draw_down = draw_instance(r->cfg.down, r->n, &r->cfg.down_params);
  int need_up = r->cfg.up && (r->cfg.up->flags & GC_COMP_RANDOM);
  int need_down = r->cfg.down && (r->cfg.down->flags & GC_COMP_RANDOM);
  if ((need_up && !r->draw_up) || (need_down && !r->draw_down))
    GC_ERROR("multi-draw probe: out of memory", GC_ENOMEM);
  size_t a = r->draw_up ? gc_compressor_max_bytes(r->draw_up) : 0;
  size_t b = r->draw_down ? gc_compressor_max_bytes(r->draw_down) : 0;
  if ((a || b) && !(r->draw_buf = malloc(a > b ? a : b)))
    GC_ERROR("multi-draw probe: out of memory", GC_ENOMEM);
  r->draws = draws;
  return GC_SUCCESS;
}

/* The contraction of a random compressor in expectation (4.1) from M draws
 * at draw steps t*M .. t*M+M-1: 1 - (mean + 3 standard errors) of
 * ||C(x)-x||^2/||x||^2, so that sampling error makes delta smaller (the
 * bound looser), not larger. */
static int draws_contraction(gc_theory_run *r, gc_compressor *c,
                             const double *x, uint32_t t, double *out)
{
  double nx = gc__dnorm2(x, r->n), sum = 0, sum2 = 0, M = (double) r->draws;
  *out = NAN;
  if (!(nx > 0))
    return GC_SUCCESS;
  for (size_t j = 0; j < r->draws; j++) {
    GC_TRY(roundtrip(c, x, (uint32_t) (t * r->draws + j), r->draw_buf, r->t2));
    double e = gc__ddist2(x, r->t2, r->n) / nx;
    sum += e;
    sum2 += e * e;
  }
  double mean = sum / M;
  double var = M > 1 ? fmax(0.0, (sum2 - M * mean * mean) / (M - 1)) : 0.0;
  *out = 1.0 - (mean + 3.0 * sqrt(var / M));
  return GC_SUCCESS;
}

gc_sim *gc_theory_run_sim(gc_theory_run *r) { return r->sim; }

static double contraction(const double *x, const double *cx, size_t n)
{
  double nx = gc__dnorm2(x, n);
  if (!(nx > 0))
    return NAN;
  return 1.0 - gc__ddist2(x, cx, n) / nx;
}

/* Worker half, after the step: local worker p's scalars, and the views of
 * its vectors as gc_xi_probe_sums_add takes them (no accumulator: the
 * gradient; no message: the accumulator). */
static int worker_record(gc_theory_run *r, size_t p, uint32_t t)
{
  size_t n = r->n;
  gc_worker *w = gc_sim_worker(r->sim, p);
  const double *acc = gc_worker_accumulator(w), *sent = gc_worker_sent(w);
  double *st = r->stat + p * NSTAT;
  st[STAT_GRAD2] = gc__dnorm2(r->clean[p], n);
  st[STAT_DELTA] = acc ? contraction(acc, sent ? sent : acc, n) : NAN;
  st[STAT_DRAWS] = NAN;
  if (r->draw_up && acc) {
    memcpy(r->t1, acc, n * sizeof *r->t1);
    GC_TRY(draws_contraction(r, r->draw_up, r->t1, t, &st[STAT_DRAWS]));
  }
  const double *mem = gc_worker_memory(w);
  st[STAT_HAS_MEM] = mem != NULL;
  r->v_clean[p] = r->clean[p];
  r->v_noisy[p] = r->rec_noisy ? r->grads[p] : r->clean[p];
  r->v_acc[p] = acc ? acc : r->v_noisy[p];
  r->v_sent[p] = sent ? sent : r->v_acc[p];
  r->v_mem[p] = mem;
  return GC_SUCCESS;
}

/* Under a transport: the local records into gather_aux's layout, then to
 * the leader, whose views then point into the gathered ones. */
static int move_records(gc_theory_run *r, uint32_t t)
{
  size_t n = r->n, vb = n * sizeof(double);
  for (size_t p = r->lo; p < r->hi; p++) {
    uint8_t *m = r->aux + (p - r->lo) * r->rec_len;
    memcpy(m, r->stat + p * NSTAT, NSTAT * sizeof(double));
    m += NSTAT * sizeof(double);
    const double *vec[4] = { r->v_noisy[p], r->v_acc[p], r->v_sent[p],
                             r->v_mem[p] };
    memcpy(m, r->v_clean[p], vb);
    m += vb;
    int carried[4] = { r->rec_noisy, r->rec_acc, r->rec_acc, r->rec_mem };
    for (int j = 0; j < 4; j++)
      if (carried[j]) {
        if (vec[j])
          memcpy(m, vec[j], vb);
        else
          memset(m, 0, vb);   /* no memory: never read (STAT_HAS_MEM) */
        m += vb;
      }
  }
  GC_TRY(r->tr.type->gather_aux(r->tr.state, t, r->aux, r->rec_len));
  if (!r->leader)
    return GC_SUCCESS;
  for (size_t p = 0; p < r->P; p++) {
    const uint8_t *m = r->aux + p * r->rec_len;
    memcpy(r->stat + p * NSTAT, m, NSTAT * sizeof(double));
    const double *v = (const double *) (const void *) (m + NSTAT * sizeof(double));
    r->v_clean[p] = v;
    v += n;
    r->v_noisy[p] = r->v_clean[p];
    if (r->rec_noisy) {
      r->v_noisy[p] = v;
      v += n;
    }
    if (r->rec_acc) {
      r->v_acc[p] = v;
      r->v_sent[p] = v + n;
      v += 2 * n;
    } else {
      r->v_acc[p] = r->v_sent[p] = r->v_noisy[p];
    }
    r->v_mem[p] = r->rec_mem && r->stat[p * NSTAT + STAT_HAS_MEM] != 0 ? v
                                                                        : NULL;
  }
  return GC_SUCCESS;
}

/* ||(1/P) sum_p v[p]||^2, the sum in worker order into out (the order of
 * gc_xi_probe_sums_*). */
static double norm2_of_mean(const double *const *v, size_t P, size_t n, double *out)
{
  memset(out, 0, n * sizeof *out);
  for (size_t p = 0; p < P; p++)
    for (size_t i = 0; i < n; i++)
      out[i] += v[p][i];
  for (size_t i = 0; i < n; i++)
    out[i] /= (double) P;
  return gc__dnorm2(out, n);
}

/* The update u_t of this step against what the model did: *lost =
 * ||(x_t - x_{t+1}) - u_t||, *moved = ||u_t||, for the decoded downlink D
 * (x -= D: uni, bi, allgather, allreduce-randk; x -= lr D: the others;
 * EF21-BC's model moves by lr h).  The rounding of x - u_t leaves *lost
 * near 2^-53 ||x||; it is ||u_t|| when every entry of u_t is below half an
 * ulp of its x_i and the model does not move.  *xmax: max_i |x_t,i|. */
static void float_loss(const gc_theory_run *r, double lr, double *lost,
                       double *moved, double *xmax)
{
  gc_server *srv = gc_sim_server(r->sim);
  const double *x1 = gc_sim_model(r->sim), *D = gc_server_sent(srv);
  double s = lr;
  switch (gc__algo(r->cfg.kind)->apply) {
  case GC__APPLY_STEP:
    s = 1.0;
    break;
  case GC__APPLY_MODEL:
    D = gc_server_memory(srv);   /* h */
    break;
  case GC__APPLY_GRAD:
    break;
  }
  double l2 = 0, u2 = 0, xm = 0;
  for (size_t i = 0; i < r->n; i++) {
    double u = s * D[i], e = (r->xprev[i] - x1[i]) - u;
    l2 += e * e;
    u2 += u * u;
    xm = fmax(xm, fabs(r->xprev[i]));
  }
  *lost = sqrt(l2);
  *moved = sqrt(u2);
  *xmax = xm;
}

int gc_theory_run_step(gc_theory_run *r, double lr, gc_probe_row *row)
{
  size_t n = r->n, P = r->P;
  double xmax = 0;
  const gc_problem *prob = r->prob;
  gc_probe_row rw;
  memset(&rw, 0, sizeof rw);
  uint32_t t = gc_sim_steps_done(r->sim);
  rw.step = t;
  const double *model = gc_sim_model(r->sim);
  const double *point = gc_sim_point(r->sim);

  /* Worker half: the gradients at the point, noise keyed by worker and
   * step (the bounds add its exact second moment sigma^2 d). */
  for (size_t p = r->lo; p < r->hi; p++) {
    gc_problem_worker_grad(prob, p, point, r->clean[p]);
    if (r->rec_noisy) {
      memcpy(r->grads[p], r->clean[p], n * sizeof *r->grads[p]);
      gc_problem_add_noise(prob, p, t, r->grads[p]);
    }
  }
  /* Server half, before the step: what it reads of the model x_t. */
  if (r->leader) {
    rw.f_gap = gc_problem_gap(prob, model);
    /* grad F at the model is the mean of the exact worker gradients (taken
     * below), except for EF21-BC, whose workers' point is not the model */
    if (point != model) {
      gc_problem_grad(prob, model, r->t1);
      rw.grad_norm2 = gc__dnorm2(r->t1, n);
    }
    if (r->avg_sum) {   /* x_t enters the average with w_t = (a+t)^2 */
      double w = (r->avg_shift + (double) t) * (r->avg_shift + (double) t);
      for (size_t i = 0; i < n; i++)
        r->avg_sum[i] += w * model[i];
      r->avg_weight += w;
    }
    gc_xi_probe_before(r->xi, r->sim);
    memcpy(r->xprev, model, n * sizeof *r->xprev);
    const void *sm = gc_server_memory(gc_sim_server(r->sim));
    if (sm && (r->mem == MEM_BI || r->mem == MEM_GRAD))
      memcpy(r->dprev, sm, n * sizeof *r->dprev);
    else
      memset(r->dprev, 0, n * sizeof *r->dprev);
  }

  int st = gc_sim_step(r->sim, (const void *const *) r->grads, lr);
  if (st != GC_SUCCESS)
    return st;

  for (size_t p = r->lo; p < r->hi; p++)
    GC_TRY(worker_record(r, p, t));
  if (r->has_tr)
    GC_TRY(move_records(r, t));
  if (!r->leader) {
    r->steps++;
    if (row)
      *row = rw;
    return GC_SUCCESS;
  }

  /* Server half, after the step: the workers' records in worker order. */
  for (size_t p = 0; p < P; p++)
    r->worker_grad2_max[p] = fmax(r->worker_grad2_max[p],
                                  r->stat[p * NSTAT + STAT_GRAD2]);
  /* xi (4.2), xi_bi (4.4), in model units: the library's probe, whose
   * sums also give ||gbar||^2, gbar the mean of the noisy gradients */
  gc_xi_sample xs;
  gc_xi_probe_sums_begin(r->xi);
  for (size_t p = 0; p < P; p++)
    gc_xi_probe_sums_add(r->xi, r->v_noisy[p], r->v_acc[p], r->v_sent[p]);
  GC_TRY(gc_xi_probe_sums_end(r->xi, lr, &xs));
  rw.xi = xs.xi;
  rw.xi_bi = xs.xi_bi;
  rw.gbar_norm2 = xs.gbar_norm2;
  double gnorm = sqrt(rw.gbar_norm2);
  /* without noise the exact gradients are the noisy ones: the same mean */
  if (point == model)
    rw.grad_norm2 = r->rec_noisy ? norm2_of_mean(r->v_clean, P, n, r->t1)
                                 : xs.gbar_norm2;
  double num_model = xs.num, num_bi_model = xs.num_bi;

  /* The empirical uplink contraction (4.1) of each worker. */
  double dmin = INFINITY, dsum = 0;
  size_t dcnt = 0;
  for (size_t p = 0; p < P; p++) {
    double d = r->stat[p * NSTAT + STAT_DELTA];
    if (isfinite(d)) {
      dmin = fmin(dmin, d);
      dsum += d;
      dcnt++;
    }
  }
  rw.delta_up_min = dcnt ? dmin : NAN;
  rw.delta_up_mean = dcnt ? dsum / (double) dcnt : NAN;
  if (dcnt) {
    r->dup_worst = fmin(r->dup_worst, dmin);
    r->dup_sum += dsum;
    r->dup_cnt += dcnt;
  }
  rw.delta_down = NAN;
  gc_server *srv = gc_sim_server(r->sim);
  if (r->mem == MEM_BI || r->mem == MEM_GRAD) {
    const double *agg = gc_server_aggregate(srv), *q = gc_server_sent(srv);
    for (size_t i = 0; i < n; i++)
      r->t3[i] = r->dprev[i] + agg[i];
    rw.delta_down = contraction(r->t3, q, n);
    if (isfinite(rw.delta_down)) {
      r->ddown_worst = fmin(r->ddown_worst, rw.delta_down);
      r->ddown_sum += rw.delta_down;
      r->ddown_cnt++;
    }
  }

  /* c converts the method's units to model units; denom = lr ||gbar||. */
  double c = r->mem == MEM_GRAD ? lr : 1.0;
  double denom = lr * gnorm;

  /* The error recursion of 4.3 in model units. */
  rw.mem_norm = rw.mem_bound = NAN;
  if (r->mem != MEM_OTHER) {
    memset(r->E, 0, n * sizeof *r->E);
    if (r->mem != MEM_NONE) {
      for (size_t p = 0; p < P; p++) {
        const double *eps = r->v_mem[p];
        if (eps)
          for (size_t i = 0; i < n; i++)
            r->E[i] += eps[i] / (double) P;
      }
      const double *dm = gc_server_memory(srv);
      if (dm && (r->mem == MEM_BI || r->mem == MEM_GRAD))
        for (size_t i = 0; i < n; i++)
          r->E[i] += dm[i];
      for (size_t i = 0; i < n; i++)
        r->E[i] *= c;
    }
    rw.mem_norm = sqrt(gc__dnorm2(r->E, n));
    if (r->mem == MEM_NONE) {
      rw.mem_bound = 0;
    } else {
      /* gamma ||E_t|| + (gamma + xi) lr ||gbar||, with xi lr ||gbar|| written
       * as the numerator itself so that gbar = 0 stays finite. */
      int down = r->mem != MEM_UNI;
      double g = down ? r->gamma_d : r->gamma;
      double num = down ? num_bi_model : num_model;
      rw.mem_bound = g * r->Enorm + g * denom + num;
    }
    /* not a bound when the recursion's contraction step does not hold */
    if (r->recursion_fails)
      rw.mem_bound = NAN;
    r->mem_max = fmax(r->mem_max, rw.mem_norm);
    r->Enorm = rw.mem_norm;
  }

  /* Rung r2_xi of 4.9: the recursion of 4.3 run along the path */
  rw.gamma_hat = rw.rec_bound = NAN;
  if (r->mem != MEM_OTHER) {
    int down = r->mem != MEM_UNI;
    if (r->mem != MEM_NONE)
      rw.gamma_hat = xs.gamma_hat;
    rw.rec_bound = gc_ladder_path_step(&r->lad, r->mem != MEM_NONE, rw.gamma_hat,
                                       rw.gbar_norm2, down ? num_bi_model : num_model,
                                       lr, rw.mem_norm);
    /* rung r7: E[gbar^T Abar gbar | x_t] = g^T Abar g + sigma^2 tr(Abar)/P,
     * g = grad F(x_t) the mean of the exact worker gradients */
    norm2_of_mean(r->v_clean, P, n, r->t2);
    gc_problem_grad(prob, r->t2, r->t1);
    double q = 0;
    for (size_t i = 0; i < n; i++)
      q += r->t2[i] * (r->t1[i] - r->grad0[i]);
    gc_ladder_path_curv(&r->lad, q + r->noise_curv);
    /* rung r5: grad F(x - E) - grad F(x) = -Abar E on a quadratic, formed
     * as grad F(E) - grad F(0) */
    double gd2 = 0, in = 0;
    if (r->mem != MEM_NONE) {
      gc_problem_grad(prob, r->E, r->t1);
      memset(r->t3, 0, n * sizeof *r->t3);
      gc_problem_grad(prob, r->t3, r->t2);
      gd2 = gc__ddist2(r->t1, r->t2, n);
      gc_problem_grad(prob, gc_sim_model(r->sim), r->t3);   /* grad F(x_{t+1}) */
      for (size_t i = 0; i < n; i++)
        in += (r->t1[i] - r->t2[i]) * r->t3[i];
    }
    gc_ladder_path_gdiff(&r->lad, gd2, in);
  }

  /* The update the server applied, against what the model did: the
   * analyses assume x_{t+1} = x_t - u_t exactly. */
  double lost, moved;
  float_loss(r, lr, &lost, &moved, &xmax);
  r->fl_lost += lost;
  r->fl_moved += moved;
  rw.float_loss = moved > 0 ? lost / moved : NAN;
  if (isfinite(rw.float_loss) && rw.float_loss > r->fl_max) {
    r->fl_max = rw.float_loss;
    r->fl_step = t;
    r->fl_x = xmax;
  }

  /* Multi-draw contraction on the inputs the random compressors received:
   * the workers' from their records, the server's here. */
  for (size_t p = 0; p < P; p++) {
    double d = r->stat[p * NSTAT + STAT_DRAWS];
    if (isfinite(d))
      r->dup_draws = fmin(r->dup_draws, d);
  }
  if (r->draw_down && (r->mem == MEM_BI || r->mem == MEM_GRAD)) {
    const double *agg = gc_server_aggregate(srv);
    double d;
    for (size_t i = 0; i < n; i++)
      r->t1[i] = r->dprev[i] + agg[i];
    GC_TRY(draws_contraction(r, r->draw_down, r->t1, t, &d));
    if (isfinite(d))
      r->ddown_draws = fmin(r->ddown_draws, d);
  }

  rw.bytes_up = gc_ledger_step_total(gc_sim_ledger(r->sim), t, GC_UP);
  rw.bytes_down = gc_ledger_step_total(gc_sim_ledger(r->sim), t, GC_DOWN);
  rw.support_union = gc_server_support_union(srv);

  /* summary */
  r->steps++;
  r->sum_grad2 += rw.grad_norm2;
  r->min_grad2 = fmin(r->min_grad2, rw.grad_norm2);
  r->grad2_max = fmax(r->grad2_max, rw.grad_norm2);
  r->M2 = fmax(r->M2, rw.gbar_norm2);
  if (isfinite(rw.xi)) {
    r->xi_max = fmax(r->xi_max, rw.xi);
    r->xi_sum += rw.xi;
    r->xi_cnt++;
  }
  if (isfinite(rw.xi_bi)) {
    r->xi_bi_max = fmax(r->xi_bi_max, rw.xi_bi);
    r->xi_bi_sum += rw.xi_bi;
    r->xi_bi_cnt++;
  }
  if (isfinite(rw.mem_norm) && isfinite(rw.mem_bound))
    r->mem_excess = fmax(r->mem_excess, rw.mem_norm - rw.mem_bound);
  r->support_sum += (double) rw.support_union;
  if (row)
    *row = rw;
  return GC_SUCCESS;
}

void gc_theory_run_summary(const gc_theory_run *r, gc_probe_summary *s)
{
  memset(s, 0, sizeof *s);
  s->steps = r->steps;
  s->f0_gap = r->f0_gap;
  s->final_gap = gc_problem_gap(r->prob, gc_sim_model(r->sim));
  double T = r->steps ? (double) r->steps : NAN;
  s->min_grad2 = r->steps ? r->min_grad2 : NAN;
  s->mean_grad2 = r->sum_grad2 / T;
  s->M2 = r->M2;
  s->xi_max = r->xi_cnt ? r->xi_max : NAN;
  s->xi_mean = r->xi_cnt ? r->xi_sum / (double) r->xi_cnt : NAN;
  s->xi_bi_max = r->xi_bi_cnt ? r->xi_bi_max : NAN;
  s->xi_bi_mean = r->xi_bi_cnt ? r->xi_bi_sum / (double) r->xi_bi_cnt : NAN;
  s->delta_up_worst = r->dup_cnt ? r->dup_worst : NAN;
  s->delta_up_mean = r->dup_cnt ? r->dup_sum / (double) r->dup_cnt : NAN;
  s->delta_down_worst = r->ddown_cnt ? r->ddown_worst : NAN;
  s->delta_down_mean = r->ddown_cnt ? r->ddown_sum / (double) r->ddown_cnt : NAN;
  s->mem_excess_max = r->mem_excess;
  s->mem_norm_max = r->mem_max;
  s->recursion_fails = r->recursion_fails;
  s->draws = r->draws;
  s->delta_up_draws = r->draw_up && isfinite(r->dup_draws) ? r->dup_draws : NAN;
  s->delta_down_draws = r->draw_down && isfinite(r->ddown_draws) ? r->ddown_draws : NAN;
  s->support_mean = r->support_sum / T;
  s->gamma = r->gamma;
  s->gamma_d = r->gamma_d;
  s->k = r->k;
  s->k_down = r->kd;
  s->grad2_max = r->steps ? r->grad2_max : NAN;
  double wsum = 0;
  for (size_t p = 0; p < r->P; p++)
    wsum += r->worker_grad2_max[p];
  s->worker_grad2_max_mean = r->steps ? wsum / (double) r->P : NAN;
  /* means over t < T of quantities measured after steps 0..T-2 (E_0 = 0) */
  s->gamma_hat_max = isfinite(r->lad.gh_max) ? r->lad.gh_max : NAN;
  s->mem2_mean = gc_ladder_path_mem2_mean(&r->lad);
  s->rec2_mean = gc_ladder_path_rec2_mean(&r->lad);
  s->rec_excess_max = r->lad.rec_excess;
  s->gbar2_mean = gc_ladder_path_gbar2_mean(&r->lad);
  s->gdiff2_mean = gc_ladder_path_gdiff2_mean(&r->lad);
  s->inner_mean = gc_ladder_path_inner_mean(&r->lad);
  s->curv_mean = gc_ladder_path_curv_mean(&r->lad);
  s->float_loss_max = r->fl_max;
  s->float_loss_share = r->fl_moved > 0 ? r->fl_lost / r->fl_moved : 0;
  s->float_loss_step = r->fl_step;
  s->float_loss_x = r->fl_x;
  s->wavg_gap = NAN;
  if (r->avg_sum && r->avg_weight > 0) {
    /* t1 is free between steps */
    for (size_t i = 0; i < r->n; i++)
      r->t1[i] = r->avg_sum[i] / r->avg_weight;
    s->wavg_gap = gc_problem_gap(r->prob, r->t1);
  }
}

void gc_probe_csv_header(FILE *f)
{
  fprintf(f, "step,f_gap,grad_norm2,xi,xi_bi,mem_norm,mem_bound,bytes_up,"
             "bytes_down,support_union\n");
  fflush(f);
}

void gc_probe_csv_row(FILE *f, const gc_probe_row *w)
{
  fprintf(f, "%u,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%llu,%llu,%zu\n",
          (unsigned) w->step, w->f_gap, w->grad_norm2, w->xi, w->xi_bi,
          w->mem_norm, w->mem_bound, (unsigned long long) w->bytes_up,
          (unsigned long long) w->bytes_down, w->support_union);
  fflush(f);
}

int gc_theory_delta_info(gc_compressor *c, const double *x, uint32_t step,
                         uint8_t *buf, double *scratch, double *delta,
                         gc_compress_info *info)
{
  GC_TRY(roundtrip_info(c, x, step, buf, scratch, info));
  *delta = contraction(x, scratch, gc_compressor_n(c));
  return GC_SUCCESS;
}

int gc_theory_delta(gc_compressor *c, const double *x, uint32_t step,
                    uint8_t *buf, double *scratch, double *delta)
{
  return gc_theory_delta_info(c, x, step, buf, scratch, delta, NULL);
}

const char *gc_theory_dist_name(int dist)
{
  static const char *names[GC_DIST_COUNT] = { "gaussian", "laplace",
                                              "student-t3", "equal" };
  return dist >= 0 && dist < GC_DIST_COUNT ? names[dist] : "?";
}

void gc_theory_fill(int dist, uint64_t seed, uint32_t trial, double *x,
                    size_t n)
{
  /* Streams 100+dist keep the distributions independent of each other. */
  uint32_t s = 100u + (uint32_t) dist;
  for (size_t i = 0; i < n; i++) {
    switch (dist) {
    case GC_DIST_LAPLACE: {   /* inverse CDF of Laplace(0,1) */
      double u = gc_rng_uniform(seed, s, trial, i) - 0.5;
      double a = 1.0 - 2.0 * fabs(u);
      x[i] = (u < 0 ? 1.0 : -1.0) * log(a > 0 ? a : 1e-300);
      break;
    }
    case GC_DIST_STUDENT_T3: {   /* N / sqrt(chi2_3 / 3) */
      double z = gc_rng_normal(seed, s, trial, 4 * (uint64_t) i);
      double c2 = 0;
      for (uint64_t j = 1; j <= 3; j++) {
        double v = gc_rng_normal(seed, s, trial, 4 * (uint64_t) i + j);
        c2 += v * v;
      }
      x[i] = z / sqrt(c2 / 3.0);
      break;
    }
    case GC_DIST_EQUAL:   /* |x_i| all equal: top-K's worst case */
      x[i] = (gc_rng_u32(seed, s, trial, i) & 1) ? 1.0 : -1.0;
      break;
    default:
      x[i] = gc_rng_normal(seed, s, trial, i);
      break;
    }
  }
}
