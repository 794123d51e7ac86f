/* train.c -- data-parallel training of the reference models through
 * gc_sim (gc_train.h: gc_train_alloc / gc_train_step / gc_train_eval /
 * gc_train_free): every step, each local worker's gradient at
 * gc_sim_point on its own mini-batch, then gc_sim_step, in-process or over
 * a transport.  Worker gradients are independent (one per OpenMP
 * iteration, BLAS single-threaded) and every reduction runs in worker
 * order, so neither the thread count nor the transport changes a bit.
 * It prints nothing: the run folder, logs, checkpoint files and messages
 * are the driver's (run.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_algo.h"
#include "gc_algo_rules.h"
#include "gc_clock.h"
#include "gc_compressor_internal.h"
#include "gc_dtype.h"
#include "gc_errno.h"
#include "gc_error_internal.h"
#include "gc_ladder.h"
#include "gc_probe.h"
#include "gc_rng.h"
#include "gc_train.h"

void gc_train_config_default(gc_train_config *c)
{
  memset(c, 0, sizeof *c);
  c->dataset = "mnist";
  c->data_dir = NULL;
  c->workers = 10;
  c->batch = 10;
  c->epochs = 1;
  c->lr = 0.1;
  c->algorithm = "bi";
  c->compressor = "topk";
  c->density = 0.001;
  c->density_down = 0;        /* 0: same as density */
  c->rank = 2;
  c->out = "runs/train";
  c->bounds_samples = 3;
  c->bounds_hvps = 10;
  c->bounds_batch = 1000;
}

/* --bounds: the measuring apparatus and the constants read at every step
 * (the driver keeps f(x0), L and the full-gradient samples). */
typedef struct bounds {
  int on;
  gc_nn **nets;               /* T nets of batch BOUND_CHUNK             */
  void *dev;                  /* or the device's: BOUND_SLICES chunks    */
  float *xb, *g, *pt;         /* inputs, chunk gradients, x +- h v       */
  uint8_t *yb;
  double *slices;             /* BOUND_SLICES * d partial sums           */
  double *grad, *gp, *v;      /* d: a full gradient, g(x + h v), v       */
  uint32_t *lids;             /* the fixed batch for L                   */
  size_t nl;
  double gamma;               /* sqrt(1-K/d) or sqrt(1-K_d/d); 0 for SGD */
  const char *xi_name;        /* "xi", "xi_bi" or "none"                 */
  double m2max, m2sum, ximax, xisum;
  size_t m2n, xin;
  gc_ladder_path lad;         /* the ladder of theory.md 4.9             */
  double wmem2, smem2;        /* the last step's mean_p ||eps^p||^2 and
                                 ||delta||^2, model units                */
} bounds;

/* Everything a run holds; freed by gc_train_free. */
struct gc_train {
  gc_train_config cfg;        /* the caller's, copied                    */
  const gc_train_config *c;   /* = &cfg                                  */
  gc_dataset train, test;
  uint32_t *idx, *order;      /* partition; per-worker epoch order       */
  size_t *off;
  size_t T;                   /* threads                                 */
  gc_nn **nets, *evalnet;
  void *dev;                  /* c->device's workspace: P batches of B    */
  void *dstep;                /* the device's step, or NULL: gc_sim only  */
  char dstep_refused[256];    /* why a device steps on the CPU, or ""     */
  int dcur;                   /* the device's step holds the latest state */
  uint8_t *dbuf;              /* gc_sim_state_bytes: moving the state     */
  float *xb;                  /* T * B * dim gathered inputs (device: P)  */
  uint8_t *yb;                /* T * B labels                            */
  float *grads, *stats, *wstats;
  double *loss;               /* per worker, last step                   */
  float *x0;
  gc_sim *sim;
  gc_algo_config acfg;
  gc_segment *segs;           /* layer shapes for shaped compressors     */
  size_t nsegs;
  size_t d, ns, K, Kd;
  /* probes, decided in setup */
  gc_xi_probe *xip;           /* xi / xi_bi (gc_probe.h), NULL: none     */
  int xi_log;                 /* log.csv's xi column is defined          */
  int contraction;            /* log the uplink contraction              */
  bounds b;                   /* --bounds                                */
  /* scale-out (c->transport): this process's workers and role */
  const gc_transport *tr;     /* NULL: every node here                   */
  size_t lo, hi;              /* local workers [lo, hi)                  */
  int leader;                 /* evaluates and writes the run folder     */
  size_t ntrain;              /* training examples of the whole run      */
  uint8_t *aux;               /* P * auxlen: losses and statistics       */
  size_t auxlen;              /* 8 + 4 ns                                */
  uint64_t stats_bytes;       /* statistics bytes moved, all steps       */
  uint8_t *pbuf;              /* probed steps: the workers' vectors      */
  size_t plen;
  /* the steps */
  const void **gp;            /* [P] pointers into grads                 */
  double *c2;                 /* [2P] the contraction probe's sums       */
  size_t steps;               /* steps done                              */
  double tdev;                /* seconds of the steps taken on the device */
  size_t taken;               /* steps counted by gc_train_take_bytes    */
  uint64_t stats_taken;
};

void gc_train_free(gc_train *r)
{
  if (!r)
    return;
  gc_dataset_free(&r->train);
  gc_dataset_free(&r->test);
  free(r->idx); free(r->order); free(r->off);
  if (r->nets)
    for (size_t t = 0; t < r->T; t++)
      gc_nn_free(r->nets[t]);
  free(r->nets);
  gc_nn_free(r->evalnet);
  if (r->c->device) {
    if (r->c->device->step_free)
      r->c->device->step_free(r->dstep);
    free(r->dbuf);
    r->c->device->free(r->dev);
    r->c->device->free(r->b.dev);
  }
  free(r->xb); free(r->yb); free(r->grads); free(r->stats); free(r->wstats);
  free(r->loss); free(r->x0); free(r->aux); free(r->pbuf); free(r->gp);
  free(r->c2);
  gc_sim_free(r->sim);
  free(r->segs);
  gc_xi_probe_free(r->xip);
  bounds *b = &r->b;
  if (b->nets)
    for (size_t t = 0; t < r->T; t++)
      gc_nn_free(b->nets[t]);
  free(b->nets); free(b->xb); free(b->g); free(b->pt); free(b->yb);
  free(b->slices); free(b->grad); free(b->gp); free(b->v); free(b->lids);
  free(r);
}

const char *gc_train_config_model(const gc_train_config *c)
{
  return c->model && *c->model ? c->model : gc_nn_model_default(c->dataset);
}

double gc_train_config_density_down(const gc_train_config *c)
{
  return c->density_down > 0 ? c->density_down : c->density;
}

/* ---- probes: the uplink contraction (4.1); xi is gc_probe.h's ---------- */

/* One worker's ||acc - m||^2 into c2[0] and ||acc||^2 into c2[1], in index
 * order (in one process and under a transport alike: the same bits). */
static void contraction_sums(const float *acc, const float *m, size_t d, double *c2)
{
  double e2 = 0, a2 = 0;
  for (size_t i = 0; i < d; i++) {
    e2 += (double) (acc[i] - m[i]) * (acc[i] - m[i]);
    a2 += (double) acc[i] * acc[i];
  }
  c2[0] = e2;
  c2[1] = a2;
}

/* The workers' mean uplink contraction 1 - ||acc - m||^2/||acc||^2 after a
 * step; NaN where undefined.  Each worker's two sums on a thread of its
 * own (r->c2, two per worker), the mean in worker order. */
static double probe_contraction(gc_train *r)
{
  size_t P = r->c->workers, d = r->d;
  #pragma omp parallel for schedule(static) num_threads((int) r->T)
  for (size_t p = 0; p < P; p++) {
    const gc_worker *w = gc_sim_worker(r->sim, p);
    contraction_sums(gc_worker_accumulator(w), gc_worker_sent(w), d, r->c2 + 2 * p);
  }
  double csum = 0;
  int cn = 0;
  for (size_t p = 0; p < P; p++)
    if (r->c2[2 * p + 1] > 0) {
      csum += 1 - r->c2[2 * p] / r->c2[2 * p + 1];
      cn++;
    }
  return cn ? csum / cn : NAN;
}

/* The method's own assumption: xi (4.2) with worker memories only, xi_bi
 * (4.4) with a server memory (bi, DoubleSqueeze; downlink-only: 0). */
static double method_xi(const gc_train *r, const gc_xi_sample *s)
{
  return gc_xi_probe_has_server_memory(r->xip) ? s->xi_bi : s->xi;
}

/* ---- setup -------------------------------------------------------------- */

/* The model's layer shapes for shaped compressors (PowerSGD): each linear
 * weight out x in and conv weight out x (in k k) as a matrix, each bias and
 * BatchNorm gamma/beta as a 1 x len vector. */
static int build_segments(const gc_nn *nn, gc_segment **segs, size_t *nsegs)
{
  size_t L = gc_nn_nlayers(nn), m = 0;
  gc_segment *sg = malloc((2 * L + 1) * sizeof *sg);
  if (!(*segs = sg))
    GC_ERROR("out of memory for the layer shapes", GC_ENOMEM);
  for (size_t i = 0; i < L; i++) {
    const gc_nn_layer *y = gc_nn_layer_at(nn, i);
    if (y->nw) {
      int mat = (y->kind == GC_NN_LINEAR || y->kind == GC_NN_CONV) && y->out_c;
      size_t rows = mat ? y->out_c : 1;
      sg[m++] = (gc_segment){ y->woff, rows, y->nw / rows };
    }
    if (y->nb)
      sg[m++] = (gc_segment){ y->boff, 1, y->nb };
  }
  *nsegs = m;
  return GC_SUCCESS;
}

/* The algorithm's configuration for c on the net nn (its shapes). */
static int algo_config(const gc_train_config *c, const gc_nn *nn,
                       gc_algo_config *a, gc_segment **segs, size_t *nsegs)
{
  *segs = NULL;
  *nsegs = 0;
  gc_algo_config_default(a);
  GC_TRY(gc_algo_by_name(c->algorithm, &a->kind));
  a->workers = c->workers;
  a->n = gc_nn_nparams(nn);
  a->dtype = GC_F32;
  a->momentum = c->momentum;
  const gc_compressor_type *T_up = gc_compressor_type_by_name(c->compressor);
  if (!T_up)
    GC_ERRORF(GC_EINVAL, "unknown compressor '%s' (see gradcomp compress --list)",
              c->compressor);
  a->up = a->down = T_up;
  gc_compressor_params_default(&a->up_params);
  gc_compressor_params_default(&a->down_params);
  if (c->up_params)
    a->up_params = *c->up_params;
  if (c->down_params)
    a->down_params = *c->down_params;
  a->up_params.rank = a->down_params.rank = c->rank;
  if (T_up->flags & GC_COMP_NEEDS_SHAPE) {
    GC_TRY(build_segments(nn, segs, nsegs));
    a->up_params.segments = a->down_params.segments = *segs;
    a->up_params.nsegments = a->down_params.nsegments = *nsegs;
  }
  a->up_params.density = c->density;
  a->up_params.seed = a->down_params.seed = c->seed;
  a->down_params.density = gc_train_config_density_down(c);
  return GC_SUCCESS;
}

int gc_train_algo_config(const gc_train_config *c, gc_algo_config *a,
                         gc_segment **segs)
{
  gc_nn *nn = gc_nn_alloc_model(gc_train_config_model(c), 1);
  if (!nn)
    return gc_last_error_code();
  size_t nsegs;
  int st = algo_config(c, nn, a, segs, &nsegs);
  gc_nn_free(nn);
  if (st != GC_SUCCESS) {
    free(*segs);
    *segs = NULL;
  }
  return st;
}

/* Under a transport: read only the examples of the local workers' shards
 * (idx[off[lo] .. off[hi])), renumbered 0.. in that order, so that the
 * epoch shuffles of the shard positions pick the same examples as in one
 * process, while the process never holds the other images. */
static int load_local_shards(gc_train *r, const char *dir, const uint8_t *labels,
                             size_t nlabels)
{
  size_t a = r->off[r->lo], b = r->off[r->hi];
  GC_TRY(gc_data_load_records(dir, r->c->dataset, 1, labels, nlabels, r->idx + a, b - a,
                              &r->train));
  for (size_t j = 0; j < b - a; j++)
    r->idx[a + j] = (uint32_t) j;
  return GC_SUCCESS;
}

/* ---- --bounds: theory.md 4.3 evaluated with measured constants --------- */

enum { BOUND_SLICES = 8, BOUND_CHUNK = 100 };
static const double bound_fd_step = 1e-3;   /* h of the Hessian-vector FD */

/* The bound covers plain SGD steps of the methods of 4.3 / 4.4 with
 * top-K, whose contraction gamma = sqrt(1-K/d) it uses; refuse the rest
 * and name the assumption that fails. */
static int bounds_check(gc_train *r)
{
  const gc_train_config *c = r->c;
  bounds *b = &r->b;
  const gc__algo_desc *A = gc__algo(r->acfg.kind);
  if (!(A->flags & GC__ALGO_TRAIN_BOUNDS)) {
    char names[256];
    GC_ERRORF(GC_EINVAL, "--bounds: the bound of theory.md 4.3 covers %s, not %s",
              gc__algo_names(GC__ALGO_TRAIN_BOUNDS, ", ", names, sizeof names),
              c->algorithm);
  }
  if (A->memory != GC__MEM_NONE && strcmp(c->compressor, "topk") != 0)
    GC_ERRORF(GC_EINVAL, "--bounds: the bound needs top-K's contraction gamma ="
              " sqrt(1-K/d); compressor %s has no such constant", c->compressor);
  if (c->momentum != 0)
    GC_ERROR("--bounds: the bound is for plain SGD steps (momentum 0)", GC_EINVAL);
  if (c->resume)
    GC_ERROR("--bounds cannot resume: the running constants (M^2, xi, f(x0),"
             " gradient samples) are not in the checkpoint", GC_EINVAL);
  if (!c->bounds_samples || !c->bounds_hvps || !c->bounds_batch)
    GC_ERROR("--bounds: samples per epoch, Hessian-vector products and the L"
             " batch must be at least 1", GC_EINVAL);
  double d = (double) r->d;
  b->xi_name = "none";
  b->gamma = 0;
  if (A->memory == GC__MEM_WORKER) {
    b->xi_name = "xi";
    b->gamma = sqrt(1.0 - (double) r->K / d);
  } else if (A->memory != GC__MEM_NONE) {   /* a server memory: xi_bi */
    b->xi_name = "xi_bi";
    b->gamma = sqrt(1.0 - (double) r->Kd / d);
  }
  return GC_SUCCESS;
}

static int bounds_alloc(gc_train *r)
{
  bounds *b = &r->b;
  size_t d = r->d, dim = r->train.dim, N = r->off[r->c->workers];
  size_t T = r->T, rows = r->c->device ? BOUND_SLICES : T;
  b->on = 1;
  gc_ladder_path_init(&b->lad);
  b->nl = r->c->bounds_batch < N ? r->c->bounds_batch : N;
  b->nets = calloc(T, sizeof *b->nets);
  b->xb = malloc(rows * BOUND_CHUNK * dim * sizeof *b->xb);
  b->yb = malloc(rows * BOUND_CHUNK);
  b->g = malloc(rows * d * sizeof *b->g);
  b->pt = malloc(d * sizeof *b->pt);
  b->slices = malloc(BOUND_SLICES * d * sizeof *b->slices);
  b->grad = malloc(d * sizeof *b->grad);
  b->gp = malloc(d * sizeof *b->gp);
  b->v = malloc(d * sizeof *b->v);
  b->lids = malloc(b->nl * sizeof *b->lids);
  if (!b->nets || !b->xb || !b->yb || !b->g || !b->pt || !b->slices ||
      !b->grad || !b->gp || !b->v || !b->lids)
    GC_ERROR("out of memory for --bounds", GC_ENOMEM);
  if (r->c->device) {
    if (!(b->dev = r->c->device->alloc(gc_train_config_model(r->c), BOUND_SLICES, BOUND_CHUNK)))
      return gc_last_error_code();
  } else {
    for (size_t t = 0; t < T; t++)
      if (!(b->nets[t] = gc_nn_alloc_model(gc_train_config_model(r->c), BOUND_CHUNK)))
        return GC_ENOMEM;
  }
  /* L's batch: every (N/nl)-th example of the partition, so that it spans
   * every worker's shard (non-IID shards are sorted by label). */
  for (size_t j = 0; j < b->nl; j++)
    b->lids[j] = r->idx[j * N / b->nl];
  double v2 = 0;
  for (size_t i = 0; i < d; i++) {
    b->v[i] = gc_rng_normal(r->c->seed, 0xb0d5u, 0, i);
    v2 += b->v[i] * b->v[i];
  }
  for (size_t i = 0; i < d; i++)
    b->v[i] /= sqrt(v2);
  return GC_SUCCESS;
}

/* eval_grad on the device: chunks of BOUND_CHUNK examples, up to
 * BOUND_SLICES of them per call (a short last chunk alone), each chunk's
 * mean gradient weighted by its size and added in chunk order. */
static int eval_grad_device(gc_train *r, const float *w, const uint32_t *ids,
                            size_t n, double *grad, double *loss)
{
  bounds *b = &r->b;
  size_t d = r->d, dim = r->train.dim;
  double l = 0, gl[BOUND_SLICES];
  memset(grad, 0, d * sizeof *grad);
  for (size_t at = 0; at < n;) {
    size_t B = n - at < BOUND_CHUNK ? n - at : BOUND_CHUNK;
    size_t G = B < BOUND_CHUNK ? 1 : (n - at) / BOUND_CHUNK;
    if (G > BOUND_SLICES)
      G = BOUND_SLICES;
    for (size_t k = 0; k < G * B; k++) {
      memcpy(b->xb + k * dim, r->train.x + (size_t) ids[at + k] * dim,
             dim * sizeof *b->xb);
      b->yb[k] = r->train.y[ids[at + k]];
    }
    GC_TRY(r->c->device->grads(b->dev, w, r->stats, b->xb, b->yb, G, B, 0, 0,
                               0, 0, gl, b->g));
    for (size_t g = 0; g < G; g++) {
      const float *gg = b->g + g * d;
      l += gl[g] * (double) B;
      for (size_t i = 0; i < d; i++)
        grad[i] += (double) gg[i] * (double) B;
    }
    at += G * B;
  }
  for (size_t i = 0; i < d; i++)
    grad[i] /= (double) n;
  if (loss)
    *loss = l / (double) n;
  return GC_SUCCESS;
}

/* Mean loss and gradient over the examples ids[0..n) at w, in evaluation
 * mode (no dropout, BatchNorm running statistics): the deterministic f the
 * bound speaks of.  Fixed slices, each summed in order by one thread, then
 * added in slice order: the thread count changes no bit. */
static int eval_grad(gc_train *r, const float *w, const uint32_t *ids, size_t n,
                     double *grad, double *loss)
{
  if (r->c->device)
    return eval_grad_device(r, w, ids, n, grad, loss);
  bounds *b = &r->b;
  size_t d = r->d, dim = r->train.dim;
  double sl[BOUND_SLICES];
  int bad = 0;
  #pragma omp parallel for schedule(static) num_threads((int) r->T) reduction(|:bad)
  for (size_t j = 0; j < BOUND_SLICES; j++) {
    size_t t = 0;
#ifdef _OPENMP
    t = (size_t) omp_get_thread_num();
#endif
    float *xb = b->xb + t * BOUND_CHUNK * dim, *g = b->g + t * d;
    uint8_t *yb = b->yb + t * BOUND_CHUNK;
    double *acc = b->slices + j * d;
    memset(acc, 0, d * sizeof *acc);
    sl[j] = 0;
    for (size_t at = j * n / BOUND_SLICES, hi = (j + 1) * n / BOUND_SLICES;
         at < hi && !bad; at += BOUND_CHUNK) {
      size_t B = hi - at < BOUND_CHUNK ? hi - at : BOUND_CHUNK;
      for (size_t k = 0; k < B; k++) {
        memcpy(xb + k * dim, r->train.x + (size_t) ids[at + k] * dim,
               dim * sizeof *xb);
        yb[k] = r->train.y[ids[at + k]];
      }
      if (!gc_nn_forward(b->nets[t], w, r->stats, xb, B, 0, 0, 0, 0)) {
        bad = 1;
        break;
      }
      sl[j] += gc_nn_loss(b->nets[t], yb) * (double) B;
      gc_nn_backward(b->nets[t], w, NULL, g, NULL);
      for (size_t i = 0; i < d; i++)
        acc[i] += (double) g[i] * (double) B;
    }
  }
  if (bad)
    return GC_EINVAL;   /* reported by gc_nn_forward */
  double l = 0;
  for (size_t j = 0; j < BOUND_SLICES; j++)
    l += sl[j];
  for (size_t i = 0; i < d; i++) {
    double s = 0;
    for (size_t j = 0; j < BOUND_SLICES; j++)
      s += b->slices[j * d + i];
    grad[i] = s / (double) n;
  }
  if (loss)
    *loss = l / (double) n;
  return GC_SUCCESS;
}

/* Local smoothness at x: power iteration on H v ~ (g(x+hv) - g(x-hv))/2h
 * over the fixed batch, warm-started from the last direction; the largest
 * ||H v|| seen (each is <= ||H||: an estimate from below of the local
 * constant; ReLU nets are not globally L-smooth). */
static int estimate_L(gc_train *r, const float *x, double *L)
{
  bounds *b = &r->b;
  size_t d = r->d;
  double h = bound_fd_step, best = 0;
  for (size_t k = 0; k < r->c->bounds_hvps; k++) {
    for (size_t i = 0; i < d; i++)
      b->pt[i] = (float) (x[i] + h * b->v[i]);
    GC_TRY(eval_grad(r, b->pt, b->lids, b->nl, b->gp, NULL));
    for (size_t i = 0; i < d; i++)
      b->pt[i] = (float) (x[i] - h * b->v[i]);
    GC_TRY(eval_grad(r, b->pt, b->lids, b->nl, b->grad, NULL));
    double n2 = 0;
    for (size_t i = 0; i < d; i++) {
      double hv = (b->gp[i] - b->grad[i]) / (2 * h);
      b->gp[i] = hv;
      n2 += hv * hv;
    }
    double nrm = sqrt(n2);
    if (!(nrm > 0) || !isfinite(nrm))
      break;   /* flat (or broken) here: keep the last direction */
    best = fmax(best, nrm);
    for (size_t i = 0; i < d; i++)
      b->v[i] = b->gp[i] / nrm;
  }
  *L = best;
  return GC_SUCCESS;
}

/* ||grad f(x)||^2 over the whole training partition; *loss = f(x). */
static int full_grad2(gc_train *r, const float *x, double *g2, double *loss)
{
  bounds *b = &r->b;
  GC_TRY(eval_grad(r, x, r->idx, r->off[r->c->workers], b->grad, loss));
  double s = 0;
  for (size_t i = 0; i < r->d; i++)
    s += b->grad[i] * b->grad[i];
  *g2 = s;
  return GC_SUCCESS;
}

/* The algorithm's step on the device when it has one for this method and
 * compressor; --bounds reads the CPU's memories at every step, so it keeps
 * the step there. */
static int device_step_alloc(gc_train *r)
{
  const gc_nn_device_type *D = r->c->device;
  if (!D || !D->step_alloc || r->c->bounds_every)
    return GC_SUCCESS;
  if (!(r->dstep = D->step_alloc(r->dev, &r->acfg, r->x0))) {
    if (gc_last_error_code() != GC_EUNSUP)
      return gc_last_error_code();
    snprintf(r->dstep_refused, sizeof r->dstep_refused, "%s",
             gc_last_error());
    return GC_SUCCESS;
  }
  size_t n = gc_sim_state_bytes(r->sim);
  if (D->step_state_bytes(r->dstep) != n)
    GC_ERRORF(GC_EBADLEN, "the %s step's state is %zu bytes, gc_sim's %zu",
              D->name, D->step_state_bytes(r->dstep), n);
  if (!(r->dbuf = malloc(n)))
    GC_ERROR("out of memory for the state", GC_ENOMEM);
  r->dcur = 1;   /* both start from x0 */
  return GC_SUCCESS;
}

/* Under a transport no process holds every worker: at a probed step each
 * worker sends process 0 its gradient, accumulator and sent message
 * (float32, the probe's dtype) and its own uplink contraction, and process
 * 0 forms the same sums in the same worker order as gc_xi_probe_after and
 * probe_contraction do in one process, so xi and delta are the same bits.
 * Measurement traffic: not in the ledger. */
enum { PROBE_HDR = 2 * sizeof(double) };

static int probe_remote_setup(gc_train *r)
{
  const gc_transport *tr = r->tr;
  uint8_t f[2] = { 0, 0 };   /* xi_log, contraction */
  if (r->leader && !(r->acfg.up->flags & GC_COMP_RANDOM)) {
    gc_worker *w = gc_worker_alloc(&r->acfg, 0);   /* asked, then freed */
    if (!w)
      return gc_last_error_code();
    f[1] = gc_worker_accumulator(w) != NULL;
    gc_worker_free(w);
    r->xip = gc_xi_probe_alloc(&r->acfg);
    f[0] = r->xip && gc_xi_probe_defined(r->xip);
    if (!f[0]) {   /* a diagnostic: the run goes on without xi */
      gc_xi_probe_free(r->xip);
      r->xip = NULL;
    }
  }
  GC_TRY(tr->type->bcast_aux(tr->state, 0, f, sizeof f));
  r->xi_log = f[0];
  r->contraction = f[1];
  if (!r->xi_log && !r->contraction)
    return GC_SUCCESS;
  r->plen = PROBE_HDR + 3 * r->d * sizeof(float);
  size_t msgs = r->leader ? r->c->workers : r->hi - r->lo;
  if (!(r->pbuf = malloc((msgs ? msgs : 1) * r->plen)))
    GC_ERROR("out of memory for the probes' messages", GC_ENOMEM);
  return GC_SUCCESS;
}

/* After a probed step under a transport (every process): process 0 gets
 * *xs (when xi is logged) and *ct, the workers' mean contraction. */
static int probe_remote(gc_train *r, double lr, gc_xi_sample *xs, double *ct)
{
  size_t d = r->d, len = r->plen, vb = d * sizeof(float);
  for (size_t p = r->lo; p < r->hi; p++) {
    uint8_t *m = r->pbuf + (p - r->lo) * len;
    gc_worker *wk = gc_sim_worker(r->sim, p);
    const float *g = r->grads + p * d, *acc = gc_worker_accumulator(wk);
    const float *sent = gc_worker_sent(wk);
    double c[2] = { 0, 0 };   /* 1 - ||acc - m||^2/||acc||^2, defined */
    if (r->contraction) {
      double c2[2];
      contraction_sums(acc, sent, d, c2);
      if (c2[1] > 0) {
        c[0] = 1 - c2[0] / c2[1];
        c[1] = 1;
      }
    }
    if (!acc)
      acc = g;   /* dense uplink, as gc_xi_probe_sums_add */
    if (!sent)
      sent = acc;
    memcpy(m, c, PROBE_HDR);
    memcpy(m + PROBE_HDR, g, vb);
    memcpy(m + PROBE_HDR + vb, acc, vb);
    memcpy(m + PROBE_HDR + 2 * vb, sent, vb);
  }
  uint32_t t = gc_sim_steps_done(r->sim) - 1;
  GC_TRY(r->tr->type->gather_aux(r->tr->state, t, r->pbuf, len));
  if (!r->leader)
    return GC_SUCCESS;
  double csum = 0;
  int cn = 0;
  for (size_t p = 0; p < r->c->workers; p++) {
    double c[2];
    memcpy(c, r->pbuf + p * len, PROBE_HDR);
    if (c[1] != 0) {
      csum += c[0];
      cn++;
    }
  }
  *ct = cn ? csum / cn : NAN;
  if (!r->xip)
    return GC_SUCCESS;
  gc_xi_probe_sums_begin(r->xip);
  for (size_t p = 0; p < r->c->workers; p++) {
    const uint8_t *m = r->pbuf + p * len + PROBE_HDR;
    gc_xi_probe_sums_add(r->xip, m, m + vb, m + 2 * vb);
  }
  return gc_xi_probe_sums_end(r->xip, lr, xs);
}

static int setup(gc_train *r)
{
  const gc_train_config *c = r->c;
  const char *model = gc_train_config_model(c);
  const char *want = gc_nn_model_dataset(model);
  if (!want)
    GC_ERRORF(GC_EINVAL, "unknown model '%s'", model);
  if (strcmp(want, c->dataset) != 0)
    GC_ERRORF(GC_EINVAL, "model %s takes %s, not %s", model, want, c->dataset);
  if (c->workers == 0 || c->batch == 0)
    GC_ERROR("workers and batch must be positive", GC_EINVAL);
  r->tr = c->transport;
  r->lo = 0;
  r->hi = c->workers;
  r->leader = 1;
  if (r->tr) {
    const gc_transport *tr = r->tr;
    if (c->device)
      GC_ERROR("--transport: the nets run on the CPU under a transport "
               "(--device cuda is not supported with it)", GC_EINVAL);
    if (c->bounds_every)
      GC_ERROR("--bounds needs full gradients over every shard in one "
               "process: not supported with --transport", GC_EINVAL);
    if (!tr->type->gather_aux || !tr->type->bcast_aux)
      GC_ERRORF(GC_EINVAL, "transport %s cannot carry the BatchNorm "
                "statistics and losses (no gather_aux/bcast_aux)",
                tr->type->name);
    if (tr->worker_lo > tr->worker_hi || tr->worker_hi > c->workers)
      GC_ERROR("transport: local workers outside [0, P)", GC_EINVAL);
    if (c->proc == 0 && !tr->server)
      GC_ERROR("transport: process 0 must run the server", GC_EINVAL);
    r->lo = tr->worker_lo;
    r->hi = tr->worker_hi;
    r->leader = c->proc == 0;
  }
  const char *dir = c->data_dir ? c->data_dir : gc_data_dir("data");
  /* The partition needs only the labels; under a transport the images
   * are read afterwards, those of the local shards alone. */
  uint8_t *labels;
  size_t n, nlabels = 0;   /* nlabels: every label of the split, under a transport */
  if (r->tr) {
    GC_TRY(gc_data_load_labels(dir, c->dataset, 1, &labels, &nlabels));
    n = nlabels;
  } else {
    GC_TRY(gc_data_load(dir, c->dataset, 1, &r->train));
    if (c->train_subset)
      gc_dataset_truncate(&r->train, c->train_subset);
    labels = r->train.y;
    n = r->train.n;
  }
  if (c->train_subset && c->train_subset < n)
    n = c->train_subset;
  size_t P = c->workers;
  r->idx = malloc(n * sizeof *r->idx);
  r->order = malloc(n * sizeof *r->order);
  r->off = malloc((P + 1) * sizeof *r->off);
  if (!r->idx || !r->order || !r->off) {
    if (r->tr)
      free(labels);
    GC_ERROR("out of memory", GC_ENOMEM);
  }
  int st = c->noniid ? gc_data_partition_noniid(labels, n, P, c->seed, r->idx, r->off)
                     : gc_data_partition_iid(n, P, c->seed, r->idx, r->off);
  int enough = st == GC_SUCCESS && r->off[1] - r->off[0] >= c->batch;
  if (r->tr && enough)   /* with the labels already read */
    st = load_local_shards(r, dir, labels, nlabels);
  if (r->tr)
    free(labels);
  GC_TRY(st);
  if (!enough)
    GC_ERRORF(GC_EINVAL, "each worker holds %zu examples, fewer than the batch %zu",
              r->off[1] - r->off[0], c->batch);
  r->ntrain = n;
  if (r->leader)   /* evaluation happens where the folder is written */
    GC_TRY(gc_data_load(dir, c->dataset, 0, &r->test));
  if (c->test_subset)
    gc_dataset_truncate(&r->test, c->test_subset);

  size_t T = c->threads;
#ifdef _OPENMP
  if (T == 0)
    T = (size_t) omp_get_max_threads();
#else
  T = 1;
#endif
  if (T > r->hi - r->lo)
    T = r->hi - r->lo;
  if (T == 0)
    T = 1;
  r->T = T;
  gc_nn_blas_single_thread();
  r->nets = calloc(T, sizeof *r->nets);
  if (!r->nets)
    GC_ERROR("out of memory", GC_ENOMEM);
  /* On a device the CPU keeps one net of batch 1: the shapes and the
   * initial weights (gc_nn_init) come from it, nothing else. */
  size_t cpu_nets = c->device ? 1 : T, xrows = c->device ? P : T;
  for (size_t t = 0; t < cpu_nets; t++)
    if (!(r->nets[t] = gc_nn_alloc_model(model, c->device ? 1 : c->batch)))
      return GC_ENOMEM;
  if (c->device) {
    if (!(r->dev = c->device->alloc(model, P, c->batch)))
      return gc_last_error_code();
  } else if (r->leader && !(r->evalnet = gc_nn_alloc_model(model, 100))) {
    return GC_ENOMEM;
  }
  r->d = gc_nn_nparams(r->nets[0]);
  r->ns = gc_nn_nstats(r->nets[0]);
  size_t dim = r->train.dim, d = r->d, ns = r->ns;
  r->xb = malloc(xrows * c->batch * dim * sizeof *r->xb);
  r->yb = malloc(xrows * c->batch);
  r->grads = malloc(P * d * sizeof *r->grads);
  r->stats = calloc(ns + 1, sizeof *r->stats);
  r->wstats = calloc(P * ns + 1, sizeof *r->wstats);
  r->loss = calloc(P, sizeof *r->loss);
  r->x0 = malloc(d * sizeof *r->x0);
  r->auxlen = sizeof(double) + ns * sizeof(float);
  r->aux = malloc(P * r->auxlen);
  if (!r->xb || !r->yb || !r->grads || !r->stats || !r->wstats || !r->loss ||
      !r->x0 || !r->aux)
    GC_ERROR("out of memory for the model state", GC_ENOMEM);
  gc_nn_init(r->nets[0], r->x0, r->stats, c->seed);

  gc_algo_config *a = &r->acfg;
  GC_TRY(algo_config(c, r->nets[0], a, &r->segs, &r->nsegs));
  const gc_compressor_type *T_up = a->up;
  r->K = gc__resolve_k(d, &a->up_params);
  r->Kd = gc__resolve_k(d, &a->down_params);
  /* a bad setting is named by the compressor that rejects it */
  if (!(r->sim = r->tr ? gc_sim_alloc_transport(a, r->x0, r->tr)
                       : gc_sim_alloc(a, r->x0)))
    return gc_last_error_code();
  gc_sim_set_threads(r->sim, r->T);   /* workers' compression in parallel */
  GC_TRY(device_step_alloc(r));
  if (c->bounds_every)
    GC_TRY(bounds_check(r));
  /* Probes (deterministic compressors only): xi through the library's one
   * definition (gc_probe.h, as theory/trajectory.c), undefined without memories
   * (SGD, allreduce) and for EF21 / EF21-BC; the contraction needs the
   * workers' accumulators.  --bounds reads the probe at every step.  Under
   * a transport process 0 decides and tells the others, who send it their
   * vectors at the probed steps (probe_remote). */
  if (r->tr)
    return probe_remote_setup(r);
  if (!(T_up->flags & GC_COMP_RANDOM)) {
    r->contraction = gc_worker_accumulator(gc_sim_worker(r->sim, 0)) != NULL;
    r->xi_log = 1;
  }
  if (r->xi_log || c->bounds_every) {
    r->xip = gc_xi_probe_alloc(a);
    if (!r->xip) {
      if (c->bounds_every)
        return gc_last_error_code();
      r->xi_log = 0;   /* a diagnostic: the run goes on without xi */
      return GC_SUCCESS;
    }
    r->xi_log = r->xi_log && gc_xi_probe_defined(r->xip);
    if (!r->xi_log && !c->bounds_every) {   /* nothing to read: free d-sized scratch */
      gc_xi_probe_free(r->xip);
      r->xip = NULL;
    }
  }
  if (c->bounds_every)
    GC_TRY(bounds_alloc(r));
  return GC_SUCCESS;
}

/* ---- the loop ------------------------------------------------------------- */

/* The step's messages beside the algorithm's.  The BatchNorm running
 * statistics are averaged densely across the workers, outside
 * compression: each worker sends its loss (8 bytes, for the log: not
 * counted, like a message length) and its statistics (ns float32) to the
 * server, which averages both in worker order and sends the mean loss and
 * statistics back to every worker (P copies of ns float32).  The
 * statistics' bytes both ways are counted (log.csv's bytes_stats).  In one
 * process the same messages are written and read back, so a transport
 * changes no bit.  On return every process holds the mean statistics in
 * r->stats and the mean loss in *loss. */
static int exchange_stats(gc_train *r, uint32_t t, double *loss)
{
  size_t P = r->c->workers, ns = r->ns, len = r->auxlen;
  const size_t h = sizeof(double);
  for (size_t p = r->lo; p < r->hi; p++) {
    uint8_t *m = r->aux + (p - r->lo) * len;   /* gather_aux's layout */
    memcpy(m, &r->loss[p], h);
    memcpy(m + h, r->wstats + p * ns, ns * sizeof(float));
  }
  if (r->tr)
    GC_TRY(r->tr->type->gather_aux(r->tr->state, t, r->aux, len));
  if (r->leader) {   /* the server's process: decode, average, encode */
    double l = 0;
    for (size_t p = 0; p < P; p++) {
      double lp;
      memcpy(&lp, r->aux + p * len, h);
      l += lp;
    }
    l /= (double) P;
    for (size_t i = 0; i < ns; i++) {
      double a = 0;
      for (size_t p = 0; p < P; p++) {
        float v;
        memcpy(&v, r->aux + p * len + h + i * sizeof v, sizeof v);
        a += v;
      }
      r->stats[i] = (float) (a / (double) P);
    }
    memcpy(r->aux, &l, h);   /* the downlink replaces worker 0's message */
    memcpy(r->aux + h, r->stats, ns * sizeof(float));
  }
  if (r->tr)
    GC_TRY(r->tr->type->bcast_aux(r->tr->state, t, r->aux, len));
  memcpy(loss, r->aux, h);
  memcpy(r->stats, r->aux + h, ns * sizeof(float));
  r->stats_bytes += 2 * (uint64_t) P * ns * sizeof(float);
  return GC_SUCCESS;
}

/* For a device: step s's batches of the P workers gathered in worker
 * order, and each worker's copy of the running statistics. */
static void gather_batches(gc_train *r, size_t s)
{
  size_t P = r->c->workers, B = r->c->batch, dim = r->train.dim, ns = r->ns;
  #pragma omp parallel for schedule(static) num_threads((int) r->T)
  for (size_t p = 0; p < P; p++) {
    const uint32_t *ord = r->order + r->off[p] + s * B;
    for (size_t b = 0; b < B; b++) {
      memcpy(r->xb + (p * B + b) * dim, r->train.x + (size_t) ord[b] * dim,
             dim * sizeof *r->xb);
      r->yb[p * B + b] = r->train.y[ord[b]];
    }
    memcpy(r->wstats + p * ns, r->stats, ns * sizeof *r->wstats);
  }
}

/* The state moves to where the next step runs: the device's step for the
 * plain steps, the CPU's gc_sim for probed steps, checkpoints and the
 * evaluation.  The two step bit-identically, so the trajectory does not
 * depend on where each step ran. */
static int device_step_sync(gc_train *r, int to_device)
{
  if (!r->dstep || r->dcur == to_device)
    return GC_SUCCESS;
  const gc_nn_device_type *D = r->c->device;
  size_t n = gc_sim_state_bytes(r->sim);
  if (to_device) {
    gc_sim_state_save(r->sim, r->dbuf);
    GC_TRY(D->step_state_load(r->dstep, r->dbuf, n));
  } else {
    GC_TRY(D->step_state_save(r->dstep, r->dbuf));
    GC_TRY(gc_sim_state_load(r->sim, r->dbuf, n));
  }
  r->dcur = to_device;
  return GC_SUCCESS;
}

/* Step s's gradients on the device's step, at its own point, kept there. */
static int device_step_grads(gc_train *r, size_t s, size_t steps)
{
  const gc_train_config *c = r->c;
  gather_batches(r, s);
  return c->device->step_grads(r->dstep, r->wstats, r->xb, r->yb, c->batch, c->seed,
                               (uint32_t) steps, r->loss);
}

/* Step s on the device: one call for every worker's loss and gradient
 * (worker p keyed as on the CPU), into the host's grads. */
static int device_grads(gc_train *r, const float *x, size_t s, size_t steps)
{
  const gc_train_config *c = r->c;
  gather_batches(r, s);
  return c->device->grads(r->dev, x, r->wstats, r->xb, r->yb, c->workers, c->batch,
                          1, c->seed, 0, (uint32_t) steps, r->loss, r->grads);
}

/* ---- the API: INITIALIZE / ITERATE / TEST -------------------------------- */

gc_train *gc_train_alloc(const gc_train_config *c)
{
  gc_train *r = calloc(1, sizeof *r);
  if (!r)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  r->cfg = *c;
  r->c = &r->cfg;
  int st = setup(r);
  if (st != GC_SUCCESS) {   /* reported; freeing must not lose the reason */
    char why[1024];
    snprintf(why, sizeof why, "%s", gc_last_error());
    gc_train_free(r);
    gc__error_restore(why, st);
    return NULL;
  }
  size_t P = c->workers;
  if (!(r->gp = malloc(P * sizeof *r->gp)) ||
      !(r->c2 = malloc(2 * P * sizeof *r->c2))) {
    gc_train_free(r);
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  }
  for (size_t p = 0; p < P; p++)
    r->gp[p] = r->grads + p * r->d;
  return r;
}

void gc_train_describe(const gc_train *r, gc_train_info *out)
{
  memset(out, 0, sizeof *out);
  out->d = r->d;
  out->ns = r->ns;
  out->k = r->K;
  out->k_down = r->Kd;
  out->threads = r->T;
  out->steps_per_epoch = (r->off[1] - r->off[0]) / r->c->batch;
  out->train_examples = r->ntrain;
  out->test_examples = r->test.n;
  out->leader = r->leader;
  out->bounds_gamma = r->b.gamma;
  out->bounds_xi = r->b.xi_name ? r->b.xi_name : "none";
  out->bounds_batch = r->b.nl;
  out->bounds_fd_step = bound_fd_step;
  out->device_step_refused = r->dstep_refused[0] ? r->dstep_refused : NULL;
}

const gc_algo_config *gc_train_algo(const gc_train *r) { return &r->acfg; }
size_t gc_train_steps_done(const gc_train *r) { return r->steps; }

int gc_train_epoch(gc_train *r, size_t e)
{
  size_t shard = r->off[1] - r->off[0];
  memcpy(r->order, r->idx, r->ntrain * sizeof *r->order);
  for (size_t p = r->lo; p < r->hi; p++)
    gc_data_shuffle(r->order + r->off[p], shard, r->c->seed, (uint32_t) (p + 1),
                    (uint32_t) e);
  return GC_SUCCESS;
}

/* This process's workers' losses and gradients of step s at x, on the
 * CPU: one OpenMP iteration per worker, each with its own net. */
static void cpu_grads(gc_train *r, const float *x, size_t s)
{
  const gc_train_config *c = r->c;
  size_t B = c->batch, d = r->d, ns = r->ns, dim = r->train.dim;
  size_t steps = r->steps;
  #pragma omp parallel for schedule(static) num_threads((int) r->T)
  for (size_t p = r->lo; p < r->hi; p++) {
    size_t t = 0;
#ifdef _OPENMP
    t = (size_t) omp_get_thread_num();
#endif
    gc_nn *net = r->nets[t];
    float *xb = r->xb + t * B * dim;
    uint8_t *yb = r->yb + t * B;
    const uint32_t *ord = r->order + r->off[p] + s * B;
    for (size_t b = 0; b < B; b++) {
      memcpy(xb + b * dim, r->train.x + (size_t) ord[b] * dim, dim * sizeof *xb);
      yb[b] = r->train.y[ord[b]];
    }
    float *ws = r->wstats + p * ns;
    memcpy(ws, r->stats, ns * sizeof *ws);
    gc_nn_forward(net, x, ws, xb, B, 1, c->seed, (uint32_t) p, (uint32_t) steps);
    r->loss[p] = gc_nn_loss(net, yb);
    gc_nn_backward(net, x, NULL, r->grads + p * d, NULL);
  }
}

/* --threads holds for every OpenMP loop of the library that a step or an
 * evaluation reaches (the evaluation's batches, the probes, the server):
 * set for the call and the caller's setting put back. */
static int threads_enter(const gc_train *r)
{
#ifdef _OPENMP
  int caller = omp_get_max_threads();
  omp_set_num_threads((int) r->T);
  return caller;
#else
  (void) r;
  return 1;
#endif
}

static void threads_leave(int caller)
{
#ifdef _OPENMP
  omp_set_num_threads(caller);
#else
  (void) caller;
#endif
}

static int train_step(gc_train *r, size_t e, size_t s, int probe,
                      gc_train_step_info *out)
{
  const gc_train_config *c = r->c;
  size_t steps = r->steps;
  memset(out, 0, sizeof *out);
  out->xi = out->delta = NAN;
  if (s >= (r->off[1] - r->off[0]) / c->batch)
    GC_ERRORF(GC_EINVAL, "step %zu of an epoch of %zu steps", s,
              (r->off[1] - r->off[0]) / c->batch);
  /* the device's step for the plain steps, the CPU's for probed ones */
  int on_dev = r->dstep && !(probe && (r->xi_log || r->contraction));
  GC_TRY(device_step_sync(r, on_dev));
  const float *x = gc_sim_point(r->sim);
  double ta = gc__now();
  if (on_dev)
    GC_TRY(device_step_grads(r, s, steps));
  else if (c->device)
    GC_TRY(device_grads(r, x, s, steps));
  else
    cpu_grads(r, x, s);
  double tb = gc__now();
  double l;
  GC_TRY(exchange_stats(r, (uint32_t) steps, &l));
  if (!isfinite(l))
    GC_ERRORF(GC_EDIVERGE, "training diverged: loss is %g at epoch %zu, step"
              " %zu (lr %g too large?)", l, e + 1, steps, c->lr);
  out->loss = l;
  int probe_xi = r->xip && (r->b.on || (probe && r->xi_log));
  if (probe_xi)
    gc_xi_probe_before(r->xip, r->sim);
  double tc = gc__now();
  size_t support = 0;
  int st;
  if (on_dev) {
    st = c->device->step_run(r->dstep, c->lr, &support);
    r->tdev += gc__now() - tc;
  } else {
    st = gc_sim_step(r->sim, r->gp, c->lr);
    if (gc_sim_server(r->sim))   /* NULL where the server runs elsewhere */
      support = gc_server_support_union(gc_sim_server(r->sim));
  }
  /* the counts of the compressed uplinks that this process computed */
  out->selected_min = out->selected_max = out->selected_workers = 0;
  out->selected_sum = 0;
  int counted = !on_dev && st == GC_SUCCESS &&
                gc__algo_up_coding(r->acfg.kind) == GC__UP_COMP;
  for (size_t p = r->lo; counted && p < r->hi; p++) {
    const gc_worker *w = gc_sim_worker(r->sim, p);
    if (!w)
      continue;
    size_t m = gc_worker_selected(w);
    out->selected_min = out->selected_workers && out->selected_min < m ? out->selected_min : m;
    out->selected_max = out->selected_max > m ? out->selected_max : m;
    out->selected_sum += (double) m;
    out->selected_workers++;
  }
  if (st == GC_EDIVERGE || st == GC_EDOM)
    GC_ERRORF(GC_EDIVERGE, "training diverged at epoch %zu, step %zu "
              "(non-finite gradient or iterate; lr %g too large?)", e + 1,
              steps, c->lr);
  GC_TRY(st);
  out->support = support;
  gc_xi_sample xs;
  double ct = NAN;
  if (r->tr && probe && (r->xi_log || r->contraction))
    GC_TRY(probe_remote(r, c->lr, &xs, &ct));
  if (probe_xi && !r->tr)
    GC_TRY(gc_xi_probe_after(r->xip, r->sim, r->gp, c->lr, &xs));
  if (probe_xi) {
    double xi = method_xi(r, &xs);
    if (probe && r->xi_log)
      out->xi = xi;
    if (r->b.on) {
      r->b.m2max = fmax(r->b.m2max, xs.gbar_norm2);
      r->b.m2sum += xs.gbar_norm2;
      r->b.m2n++;
      if (!isnan(xi)) {   /* +Inf (gbar = 0, memories not) is kept */
        r->b.ximax = fmax(r->b.ximax, xi);
        r->b.xisum += xi;
        r->b.xin++;
      }
      /* the memories of 4.3 and rung r2_xi's recursion (theory.md 4.9) */
      int memory = gc_xi_probe_defined(r->xip);
      double num = gc_xi_probe_has_server_memory(r->xip) ? xs.num_bi : xs.num;
      gc_ladder_path_step(&r->b.lad, memory, xs.gamma_hat, xs.gbar_norm2, num, c->lr,
                          memory ? sqrt(xs.mem_norm2) : 0.0);
      r->b.wmem2 = memory ? xs.worker_mem2 : 0;
      r->b.smem2 = memory ? xs.server_mem2 : 0;
    }
  }
  if (probe && r->contraction)
    out->delta = r->tr ? ct : probe_contraction(r);
  out->compute_s = tb - ta;
  out->stats_s = tc - tb;
  r->steps++;
  return GC_SUCCESS;
}

int gc_train_step(gc_train *r, size_t e, size_t s, int probe,
                  gc_train_step_info *out)
{
  int caller = threads_enter(r);
  int st = train_step(r, e, s, probe, out);
  threads_leave(caller);
  return st;
}

static int train_eval(gc_train *r, double *acc, double *loss)
{
  *acc = *loss = NAN;
  GC_TRY(device_step_sync(r, 0));
  if (!r->leader)
    return GC_SUCCESS;   /* the test set is where the folder is written */
  const gc_train_config *c = r->c;
  return c->device ? c->device->evaluate(r->dev, gc_sim_model(r->sim), r->stats,
                                         &r->test, acc, loss)
                   : gc_nn_evaluate(r->evalnet, gc_sim_model(r->sim), r->stats,
                                    &r->test, acc, loss);
}

int gc_train_eval(gc_train *r, double *acc, double *loss)
{
  int caller = threads_enter(r);
  int st = train_eval(r, acc, loss);
  threads_leave(caller);
  return st;
}

void gc_train_times(const gc_train *r, double *worker_s, double *server_s)
{
  gc_sim_times(r->sim, worker_s, server_s);
  *worker_s += r->tdev;
}

void gc_train_take_bytes(gc_train *r, const gc_net_model *net, uint64_t *up,
                         uint64_t *down, uint64_t *stats, double *net_s)
{
  const gc_ledger *lg = gc_sim_ledger(r->sim);
  const gc_ledger *dlg = r->dstep ? r->c->device->step_ledger(r->dstep) : NULL;
  *up = gc_ledger_total(lg, GC_UP);
  *down = gc_ledger_total(lg, GC_DOWN);
  /* the network model per step, before the ledgers are cleared (a step
   * is in one of them: the CPU's or the device's) */
  double ns = 0;
  for (size_t t = r->taken; net && t < r->steps; t++)
    ns += gc_net_ledger_step_time(net, &r->acfg, lg, (uint32_t) t) +
          (dlg ? gc_net_ledger_step_time(net, &r->acfg, dlg, (uint32_t) t) : 0);
  if (dlg) {   /* the steps taken on the device */
    *up += gc_ledger_total(dlg, GC_UP);
    *down += gc_ledger_total(dlg, GC_DOWN);
    gc_ledger_clear((gc_ledger *) dlg);
  }
  gc_ledger_clear((gc_ledger *) lg);   /* keep memory flat over long runs */
  *stats = r->stats_bytes - r->stats_taken;
  if (net_s)
    *net_s = ns;
  r->taken = r->steps;
  r->stats_taken = r->stats_bytes;
}

const float *gc_train_weights(gc_train *r)
{
  if (device_step_sync(r, 0) != GC_SUCCESS)
    return NULL;
  return gc_sim_model(r->sim);
}

const float *gc_train_stats(const gc_train *r) { return r->stats; }

size_t gc_train_state_bytes(const gc_train *r)
{
  return r->ns * sizeof *r->stats + gc_sim_state_bytes(r->sim);
}

int gc_train_state_save(gc_train *r, void *buf)
{
  GC_TRY(device_step_sync(r, 0));
  size_t sb = r->ns * sizeof *r->stats;
  memcpy(buf, r->stats, sb);
  gc_sim_state_save(r->sim, (uint8_t *) buf + sb);
  return GC_SUCCESS;
}

int gc_train_state_load(gc_train *r, const void *buf, size_t len)
{
  size_t sb = r->ns * sizeof *r->stats;
  if (len != gc_train_state_bytes(r))
    GC_ERRORF(GC_EBADLEN, "training state of %zu bytes, expected %zu for this"
              " configuration", len, gc_train_state_bytes(r));
  GC_TRY(gc_sim_state_load(r->sim, (const uint8_t *) buf + sb, len - sb));
  memcpy(r->stats, buf, sb);
  r->dcur = 0;   /* the state is in the CPU's gc_sim now */
  r->steps = r->taken = gc_sim_steps_done(r->sim);
  gc_ledger_clear((gc_ledger *) gc_sim_ledger(r->sim));
  return GC_SUCCESS;
}

int gc_train_full_grad2(gc_train *r, double *g2, double *f)
{
  if (!r->b.on)
    GC_ERROR("full gradients need a run allocated with bounds_every",
             GC_EINVAL);
  int caller = threads_enter(r);
  int st = full_grad2(r, gc_sim_model(r->sim), g2, f);
  threads_leave(caller);
  return st;
}

/* ||grad f(x - E) - grad f(x)||^2 at the model x with the run's memories
 * E (theory.md 4.3: mean_p eps^p plus the server's delta, in model units),
 * over the whole training partition; b->grad holds grad f(x) from the
 * full_grad2 just before. */
static int memory_gdiff2(gc_train *r, double *gd2, double *inner)
{
  bounds *b = &r->b;
  size_t d = r->d, P = r->c->workers;
  gc__memory mem = gc__algo(r->acfg.kind)->memory;
  *gd2 = *inner = 0;
  if (mem == GC__MEM_NONE)
    return GC_SUCCESS;   /* no memory: x~ = x */
  double c = mem == GC__MEM_SERVER_GRAD ? r->c->lr : 1.0;
  double *E = b->gp;
  memset(E, 0, d * sizeof *E);
  for (size_t p = 0; p < P; p++) {
    const float *eps = gc_worker_memory(gc_sim_worker(r->sim, p));
    if (eps)
      for (size_t i = 0; i < d; i++)
        E[i] += (double) eps[i] / (double) P;
  }
  const float *dm = gc_server_memory(gc_sim_server(r->sim));
  if (dm && mem != GC__MEM_WORKER)
    for (size_t i = 0; i < d; i++)
      E[i] += (double) dm[i];
  const float *x = gc_sim_model(r->sim);
  for (size_t i = 0; i < d; i++)
    b->pt[i] = (float) ((double) x[i] - c * E[i]);
  GC_TRY(eval_grad(r, b->pt, r->idx, r->off[r->c->workers], b->gp, NULL));
  double s = 0, ip = 0;
  for (size_t i = 0; i < d; i++) {
    double e = b->grad[i] - b->gp[i];
    s += e * e;
    ip += e * b->grad[i];
  }
  *gd2 = s;
  *inner = ip;
  return GC_SUCCESS;
}

int gc_train_memory_gdiff2(gc_train *r, double *gd2, double *inner)
{
  if (!r->b.on)
    GC_ERROR("the memory's gradient difference needs a run allocated with "
             "bounds_every", GC_EINVAL);
  int caller = threads_enter(r);
  int st = memory_gdiff2(r, gd2, inner);
  threads_leave(caller);
  return st;
}

int gc_train_smoothness(gc_train *r, double *L)
{
  if (!r->b.on)
    GC_ERROR("the smoothness estimate needs a run allocated with "
             "bounds_every", GC_EINVAL);
  int caller = threads_enter(r);
  int st = estimate_L(r, gc_sim_model(r->sim), L);
  threads_leave(caller);
  return st;
}

void gc_train_bound_constants(const gc_train *r, gc_train_bound_consts *out)
{
  const bounds *b = &r->b;
  out->m2_max = b->m2max;
  out->m2_mean = b->m2n ? b->m2sum / (double) b->m2n : NAN;
  out->xi_max = b->xin ? b->ximax : NAN;
  out->xi_mean = b->xin ? b->xisum / (double) b->xin : NAN;
  out->xi_samples = b->xin;
  out->gamma_hat_max = isfinite(b->lad.gh_max) ? b->lad.gh_max : NAN;
  out->mem_norm_max = b->lad.mem_max;
  out->mem_norm2 = b->lad.mem2_last;
  out->mem2_mean = gc_ladder_path_mem2_mean(&b->lad);
  out->rec2_mean = gc_ladder_path_rec2_mean(&b->lad);
  out->rec_excess = b->lad.rec_excess;
  out->worker_mem2 = b->wmem2;
  out->server_mem2 = b->smem2;
}
