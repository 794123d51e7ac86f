/* algo.c -- the distributed algorithms of theory.md section 3 as worker and
 * server step functions over byte messages (gc_algo.h).
 *
 * Every method is one combination of: how the uplink is coded (dense, or a
 * compressor behind a worker memory of gc_ef.h), what the server does with
 * the average (forward it exactly, compress it behind its own memory, or
 * accumulate it as EF21's h), and the scale the workers apply the downlink
 * message with.  The server always averages in worker order 0..P-1 and
 * divides once by P, so the result does not depend on the transport. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_algo.h"
#include "gc_algo_rules.h"
#include "gc_vec.h"
#include "gc_dense_wire.h"
#include "gc_ef.h"
#include "gc_errno.h"
#include "gc_algo_internal.h"
#include "gc_compressor_internal.h"
#include "gc_dtype.h"

/* The methods, one row each (gc_algo_rules.h says what the columns mean).
 * The server-side state follows from the server rule: EF21 keeps h,
 * EF21-BC h, its model x and the memory w of the broadcast. */
#define NONE GC_EF_NONE
#define BEFORE GC_EF_BEFORE
#define AFTER GC_EF_AFTER
#define EF21 GC_EF_EF21
static const gc__algo_desc algo_table[] = {
  /*                 name  uplink         downlink         server rule
   *                 worker memory, server memory, apply, collective, 4.3 memory
   *                 flags; bounds */
  [GC_ALGO_SGD] = { "sgd", GC__UP_DENSE, GC__DOWN_DENSE, GC__SERVER_DENSE,
    NONE, NONE, GC__APPLY_GRAD, GC__COLL_NONE, GC__MEM_NONE,
    GC__ALGO_GPU | GC__ALGO_TRAIN_BOUNDS, GC__BOUND_NONCONVEX },
  [GC_ALGO_UNI] = { "uni", GC__UP_COMP, GC__DOWN_EXACT, GC__SERVER_EXACT,
    BEFORE, NONE, GC__APPLY_STEP, GC__COLL_NONE, GC__MEM_WORKER,
    GC__ALGO_DGC | GC__ALGO_GPU | GC__ALGO_TRAIN_BOUNDS,
    GC__BOUND_NONCONVEX | GC__BOUND_EF_SGD | GC__BOUND_MEM_SGD | GC__BOUND_OMEGA_EF },
  [GC_ALGO_BI] = { "bi", GC__UP_COMP, GC__DOWN_COMP, GC__SERVER_EF,
    BEFORE, BEFORE, GC__APPLY_STEP, GC__COLL_NONE, GC__MEM_SERVER,
    GC__ALGO_GPU | GC__ALGO_TRAIN_BOUNDS, GC__BOUND_NONCONVEX },
  [GC_ALGO_DOWNLINK] = { "downlink", GC__UP_DENSE, GC__DOWN_COMP, GC__SERVER_EF,
    NONE, AFTER, GC__APPLY_GRAD, GC__COLL_NONE, GC__MEM_SERVER_GRAD,
    GC__ALGO_GPU | GC__ALGO_TRAIN_BOUNDS, GC__BOUND_NONCONVEX | GC__BOUND_EF_SGD },
  [GC_ALGO_DOUBLESQUEEZE] = { "doublesqueeze", GC__UP_COMP, GC__DOWN_COMP,
    GC__SERVER_EF, AFTER, AFTER, GC__APPLY_GRAD, GC__COLL_NONE,
    GC__MEM_SERVER_GRAD, GC__ALGO_GPU | GC__ALGO_TRAIN_BOUNDS,
    GC__BOUND_NONCONVEX },
  [GC_ALGO_EF21] = { "ef21", GC__UP_COMP, GC__DOWN_DENSE, GC__SERVER_EF21,
    EF21, NONE, GC__APPLY_GRAD, GC__COLL_NONE, GC__MEM_OTHER, 0, GC__BOUND_EF21 },
  [GC_ALGO_EF21_BC] = { "ef21-bc", GC__UP_COMP, GC__DOWN_COMP, GC__SERVER_EF21_BC,
    EF21, NONE, GC__APPLY_MODEL, GC__COLL_NONE, GC__MEM_OTHER, 0, 0 },
  [GC_ALGO_ALLREDUCE] = { "allreduce", GC__UP_DENSE, GC__DOWN_DENSE,
    GC__SERVER_DENSE, NONE, NONE, GC__APPLY_GRAD, GC__COLL_ALLREDUCE,
    GC__MEM_NONE, 0, GC__BOUND_NONCONVEX },
  [GC_ALGO_ALLREDUCE_RANDK] = { "allreduce-randk", GC__UP_COMP, GC__DOWN_EXACT,
    GC__SERVER_EXACT, BEFORE, NONE, GC__APPLY_STEP, GC__COLL_ALLREDUCE,
    GC__MEM_WORKER, GC__ALGO_DGC | GC__ALGO_SHARED_DRAWS, GC__BOUND_NONCONVEX },
  [GC_ALGO_ALLGATHER] = { "allgather", GC__UP_COMP, GC__DOWN_EXACT,
    GC__SERVER_EXACT, BEFORE, NONE, GC__APPLY_STEP, GC__COLL_ALLGATHER,
    GC__MEM_WORKER, GC__ALGO_DGC,
    GC__BOUND_NONCONVEX | GC__BOUND_EF_SGD | GC__BOUND_MEM_SGD | GC__BOUND_OMEGA_EF },
};
#undef NONE
#undef BEFORE
#undef AFTER
#undef EF21
/* A kind without a row fails here; a row left out in the middle is caught
 * by test_algo's algo/table (every kind has a name and round-trips). */
_Static_assert(sizeof algo_table / sizeof algo_table[0] == GC_ALGO_COUNT,
               "gc_algo_kind and algo_table differ: one row per kind");

static const gc__algo_desc unknown_row = {
  "unknown", GC__UP_DENSE, GC__DOWN_DENSE, GC__SERVER_DENSE, GC_EF_NONE,
  GC_EF_NONE, GC__APPLY_GRAD, GC__COLL_NONE, GC__MEM_OTHER, 0, 0 };

const gc__algo_desc *gc__algo(gc_algo_kind k)
{
  return (unsigned) k < GC_ALGO_COUNT && algo_table[k].name ? &algo_table[k]
                                                            : &unknown_row;
}

const char *gc__algo_names(unsigned flags, const char *sep, char *buf,
                           size_t cap)
{
  size_t len = 0;
  if (cap)
    buf[0] = '\0';
  for (unsigned k = 0; k < GC_ALGO_COUNT && len < cap; k++)
    if ((algo_table[k].flags & flags) == flags) {
      int w = snprintf(buf + len, cap - len, "%s%s", len ? sep : "",
                       algo_table[k].name);
      len = w < 0 ? cap : len + (size_t) w;
    }
  return buf;
}

const char *gc_algo_name(gc_algo_kind k)
{
  return gc__algo(k)->name;
}

int gc_algo_by_name(const char *name, gc_algo_kind *k)
{
  for (unsigned i = 0; i < GC_ALGO_COUNT; i++)
    if (algo_table[i].name && strcmp(name, algo_table[i].name) == 0) {
      *k = (gc_algo_kind) i;
      return GC_SUCCESS;
    }
  GC_ERRORF(GC_EINVAL, "unknown algorithm '%s'", name);
}

size_t gc_algo_config_size(void) { return sizeof(gc_algo_config); }

void gc_algo_config_default(gc_algo_config *cfg)
{
  memset(cfg, 0, sizeof *cfg);
  cfg->kind = GC_ALGO_SGD;
  cfg->workers = 1;
  cfg->n = 0;
  cfg->dtype = GC_F64;
  cfg->up = gc_compressor_type_by_name("topk");
  cfg->down = cfg->up;
  gc_compressor_params_default(&cfg->up_params);
  gc_compressor_params_default(&cfg->down_params);
  cfg->ef21_init = GC_EF21_INIT_COMPRESSED;
  cfg->momentum = 0.0;
  cfg->nesterov = 0;
  cfg->clip_norm = 0.0;
}

/* The methods' rules (gc_algo_rules.h), read off the rows. */
int gc__algo_up_coding(gc_algo_kind k) { return gc__algo(k)->up; }

int gc__algo_down_coding(gc_algo_kind k) { return gc__algo(k)->down; }

double gc__algo_apply_scale(gc_algo_kind k, double lr)
{
  switch (gc__algo(k)->apply) {
  case GC__APPLY_STEP:
    return -1.0;            /* the step size is inside the message */
  case GC__APPLY_MODEL:
    return 1.0;             /* w += C_s(x - w) */
  case GC__APPLY_GRAD:
    break;
  }
  return -lr;               /* gradients (SGD, b', DoubleSqueeze, EF21) */
}

int gc__algo_uses_dgc(const gc_algo_config *cfg)
{
  return cfg->momentum > 0.0 && (gc__algo(cfg->kind)->flags & GC__ALGO_DGC);
}

gc_ef_kind gc__algo_worker_ef(const gc_algo_config *cfg)
{
  return gc__algo_uses_dgc(cfg) ? GC_EF_DGC : gc__algo(cfg->kind)->worker_ef;
}

void gc__algo_worker_ef_options(const gc_algo_config *cfg, gc_ef_options *o)
{
  gc_ef_options_default(o);
  o->momentum = cfg->momentum;
  o->nesterov = cfg->nesterov;
  o->clip_norm = cfg->clip_norm;
  o->workers = cfg->workers;
  o->ef21_init = cfg->ef21_init;
}

gc_ef_kind gc__algo_server_ef(gc_algo_kind k) { return gc__algo(k)->server_ef; }

int gc_algo_config_check(const gc_algo_config *cfg)
{
  if ((unsigned) cfg->kind >= GC_ALGO_COUNT)
    GC_ERRORF(GC_EINVAL, "algorithm kind %d unknown", (int) cfg->kind);
  if (cfg->workers == 0)
    GC_ERROR("algorithm: workers (P) must be at least 1", GC_EINVAL);
  if (cfg->n == 0 || cfg->n >= ((size_t) 1 << 32))
    GC_ERRORF(GC_EINVAL, "algorithm: model dimension n = %zu outside "
              "[1, 2^32)", cfg->n);
  if (cfg->dtype != GC_F32 && cfg->dtype != GC_F64)
    GC_ERROR("algorithm: dtype must be float32 or float64", GC_EINVAL);
  if (gc__algo_up_coding(cfg->kind) == GC__UP_COMP && !cfg->up)
    GC_ERRORF(GC_EINVAL, "algorithm %s needs an uplink compressor",
              gc_algo_name(cfg->kind));
  if (gc__algo_down_coding(cfg->kind) == GC__DOWN_COMP && !cfg->down)
    GC_ERRORF(GC_EINVAL, "algorithm %s needs a downlink compressor",
              gc_algo_name(cfg->kind));
  if (gc__algo_up_coding(cfg->kind) == GC__UP_COMP && (cfg->up->flags & GC_COMP_NEEDS_SHAPE)
      && !(cfg->up_params.segments && cfg->up_params.nsegments))
    GC_ERRORF(GC_EINVAL, "algorithm: uplink compressor %s needs layer shapes"
              " (up_params.segments)", cfg->up->name);
  if (gc__algo_down_coding(cfg->kind) == GC__DOWN_COMP &&
      (cfg->down->flags & GC_COMP_NEEDS_SHAPE) &&
      !(cfg->down_params.segments && cfg->down_params.nsegments))
    GC_ERRORF(GC_EINVAL, "algorithm: downlink compressor %s needs layer shapes"
              " (down_params.segments)", cfg->down->name);
  if (!(cfg->momentum >= 0.0 && cfg->momentum < 1.0))
    GC_ERROR("algorithm: momentum must lie in [0,1)", GC_EINVAL);
  /* refused rather than ignored: a run records the momentum it was given */
  if (cfg->momentum > 0.0 && gc__algo_worker_ef(cfg) != GC_EF_DGC) {
    char names[256];
    GC_ERRORF(GC_EINVAL, "algorithm %s does not apply momentum (DGC momentum"
              " works in %s): use momentum 0", gc_algo_name(cfg->kind),
              gc__algo_names(GC__ALGO_DGC, ", ", names, sizeof names));
  }
  if (cfg->ef21_init != GC_EF21_INIT_COMPRESSED &&
      cfg->ef21_init != GC_EF21_INIT_GRADIENT)
    GC_ERROR("algorithm: ef21_init must be GC_EF21_INIT_*", GC_EINVAL);
  return GC_SUCCESS;
}

static gc_compressor *alloc_up(const gc_algo_config *cfg, size_t rank)
{
  gc_compressor_params p = cfg->up_params;
  /* shared-seed random-K: every rank draws the same index set; PowerSGD
   * (shaped types): every rank starts from the same Q */
  if (!(gc__algo(cfg->kind)->flags & GC__ALGO_SHARED_DRAWS) &&
      !(cfg->up->flags & GC_COMP_NEEDS_SHAPE))
    p.stream = (uint32_t) rank;
  return gc_compressor_alloc(cfg->up, cfg->n, &p);
}

static gc_compressor *alloc_down(const gc_algo_config *cfg)
{
  return gc_compressor_alloc(cfg->down, cfg->n, &cfg->down_params);
}

/* ---- worker ------------------------------------------------------------ */

struct gc_worker {
  gc_algo_config cfg;
  size_t rank;
  gc_compressor *up;     /* uplink encoder (compressed uplinks)       */
  gc_compressor *down;   /* downlink decoder (GC__DOWN_COMP)              */
  gc_ef *ef;             /* worker memory (compressed uplinks)        */
  void *sent;            /* dense uplinks: the gradient sent          */
  void *scaled;          /* DGC: lr * g                                */
  double lr;             /* of the last worker_step, for apply         */
  int started;
  size_t selected;       /* entries the last uplink sent (compressed)  */
};

void gc_worker_free(gc_worker *w)
{
  if (!w)
    return;
  gc_compressor_free(w->up);
  gc_compressor_free(w->down);
  gc_ef_free(w->ef);
  free(w->sent);
  free(w->scaled);
  free(w);
}

/* The allocators report GC_ENOMEM for their own buffers; when an
 * allocation they call fails, they return NULL keeping its report (a bad
 * compressor setting stays GC_EINVAL, with its reason: gc_last_error_code). */
gc_worker *gc_worker_alloc(const gc_algo_config *cfg, size_t rank)
{
  if (gc_algo_config_check(cfg) != GC_SUCCESS)
    return NULL;
  if (rank >= cfg->workers)
    GC_ERROR_NULL("worker rank out of range", GC_EINVAL);
  gc_worker *w = calloc(1, sizeof *w);
  if (!w)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  w->cfg = *cfg;
  w->rank = rank;
  size_t bytes = cfg->n * (size_t) cfg->dtype;
  int ok = 1;
  if (gc__algo_up_coding(cfg->kind) != GC__UP_COMP)
    ok = (w->sent = calloc(1, bytes)) != NULL;
  else if (gc__algo_uses_dgc(cfg))
    ok = (w->scaled = malloc(bytes)) != NULL;
  if (!ok) {
    gc_worker_free(w);
    GC_ERROR_NULL("worker: out of memory", GC_ENOMEM);
  }
  if (gc__algo_up_coding(cfg->kind) == GC__UP_COMP) {
    gc_ef_options o;
    gc__algo_worker_ef_options(cfg, &o);
    ok = (w->up = alloc_up(cfg, rank)) &&
         (w->ef = gc_ef_alloc(gc__algo_worker_ef(cfg), cfg->n, cfg->dtype, &o));
  }
  if (ok && gc__algo_down_coding(cfg->kind) == GC__DOWN_COMP)
    ok = (w->down = alloc_down(cfg)) != NULL;
  if (!ok) {
    gc_worker_free(w);
    return NULL;
  }
  return w;
}

size_t gc_first_nonfinite(int dtype, const void *x, size_t n)
{
  return gc__vfirst_nonfinite(dtype, x, n);
}

int gc_worker_step(gc_worker *w, const void *grad, double lr, uint32_t step,
                   uint8_t *up, size_t cap, size_t *len)
{
  const gc_algo_config *cfg = &w->cfg;
  int dt = cfg->dtype;
  size_t n = cfg->n;
  if (!(lr >= 0.0) || lr > 1e300)
    GC_ERRORF(GC_EDOM, "worker %zu: step size %g is not finite and >= 0",
              w->rank, lr);
  w->lr = lr;
  if (!w->ef) {   /* no memory to check the gradient: do it here */
    size_t bad = gc__vfirst_nonfinite(dt, grad, n);
    if (bad < n)
      GC_ERRORF(GC_EDOM, "worker %zu: non-finite gradient at index %zu "
                "(step %u)", w->rank, bad, (unsigned) step);
    gc__vcopy(dt, w->sent, grad, n);
    w->selected = n;
    return gc__dense_encode(dt, grad, n, up, cap, len);
  }
  int rc;
  gc_compress_info info = {0, n, 0};
  if (gc__algo_worker_ef(cfg) == GC_EF_EF21 && !w->started &&
      cfg->ef21_init == GC_EF21_INIT_GRADIENT) {
    GC_TRY(gc_ef_ef21_set(w->ef, grad));
    rc = gc__dense_encode(dt, grad, n, up, cap, len);
  } else if (w->scaled) {      /* DGC works on lr*g: the message is a step */
    gc__vscale(dt, w->scaled, lr, grad, n);
    rc = gc_ef_step(w->ef, w->up, w->scaled, 1.0, step, up, cap, len, &info);
  } else {
    rc = gc_ef_step(w->ef, w->up, grad, lr, step, up, cap, len, &info);
  }
  w->selected = info.selected;
  /* the memory checks the gradient and its own overflow; name the worker */
  if (rc == GC_EDOM)
    GC_ERRORF(GC_EDOM, "worker %zu (step %u): %s", w->rank, (unsigned) step,
              gc_last_error());
  if (rc == GC_SUCCESS)
    w->started = 1;
  return rc;
}

int gc_worker_apply(gc_worker *w, const uint8_t *down, size_t len,
                    uint32_t step, void *x)
{
  return gc_worker_decode_down(w, down, len, step,
                               gc__algo_apply_scale(w->cfg.kind, w->lr), x);
}

int gc_worker_decode_down(gc_worker *w, const uint8_t *down, size_t len,
                          uint32_t step, double s, void *x)
{
  const gc_algo_config *cfg = &w->cfg;
  int rc = GC_EINVAL;   /* set by every coding */
  switch (gc__algo(cfg->kind)->down) {
  case GC__DOWN_DENSE:
    rc = gc__dense_decode(cfg->dtype, down, len, cfg->n, s, x);
    break;
  case GC__DOWN_EXACT:
    rc = gc__exact_decode(cfg->dtype, down, len, cfg->n, s, x);
    break;
  case GC__DOWN_COMP:
    rc = gc__decode(cfg->dtype, w->down, down, len, step, s, x);
    break;
  }
  if (rc != GC_SUCCESS)
    GC_ERRORF(rc, "worker %zu: downlink message of step %u is malformed",
              w->rank, (unsigned) step);
  return GC_SUCCESS;
}

void gc__worker_set_lr(gc_worker *w, double lr) { w->lr = lr; }

const void *gc_worker_memory(const gc_worker *w)
{
  return w->ef ? gc_ef_memory(w->ef) : NULL;
}

size_t gc_worker_selected(const gc_worker *w) { return w->selected; }

const void *gc_worker_accumulator(const gc_worker *w)
{
  return w->ef ? gc_ef_accumulator(w->ef) : NULL;
}

const void *gc_worker_sent(const gc_worker *w)
{
  return w->ef ? gc_ef_sent(w->ef) : w->sent;
}

/* ---- server ------------------------------------------------------------ */

struct gc_server {
  gc_algo_config cfg;
  gc_compressor **dec;   /* [P] uplink decoders (compressed uplinks) */
  gc_compressor *down;   /* downlink encoder (GC__DOWN_COMP)             */
  gc_ef *ef;             /* server memory: bi, b', DoubleSqueeze     */
  gc_ef *bc;             /* EF21-BC: EF21 memory w of the broadcast
                            x, sending C_s(x - w)                    */
  void *agg;             /* (1/P) sum of the decoded uplinks         */
  void *h, *x;           /* EF21 h; EF21-BC model x                  */
  uint32_t *nzidx;       /* exact downlinks: the average's nonzeros, */
  void *nzval;           /* gathered for the message (n each)        */
  size_t support;
  int started;
};

void gc_server_free(gc_server *s)
{
  if (!s)
    return;
  if (s->dec)
    for (size_t p = 0; p < s->cfg.workers; p++)
      gc_compressor_free(s->dec[p]);
  free(s->dec);
  gc_compressor_free(s->down);
  gc_ef_free(s->ef);
  gc_ef_free(s->bc);
  free(s->agg);
  free(s->h);
  free(s->x);
  free(s->nzidx);
  free(s->nzval);
  free(s);
}

gc_server *gc_server_alloc(const gc_algo_config *cfg)
{
  if (gc_algo_config_check(cfg) != GC_SUCCESS)
    return NULL;
  gc_server *s = calloc(1, sizeof *s);
  if (!s)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  s->cfg = *cfg;
  size_t bytes = cfg->n * (size_t) cfg->dtype;
  gc_algo_kind k = cfg->kind;
  gc__server_rule rule = gc__algo(k)->server;
  int ok = (s->agg = calloc(1, bytes)) != NULL;
  if (ok && gc__algo_up_coding(k) == GC__UP_COMP)
    ok = (s->dec = calloc(cfg->workers, sizeof *s->dec)) != NULL;
  if (ok && (rule == GC__SERVER_EF21 || rule == GC__SERVER_EF21_BC))
    ok = (s->h = calloc(1, bytes)) != NULL;
  if (ok && rule == GC__SERVER_EF21_BC)
    ok = (s->x = calloc(1, bytes)) != NULL;
  if (ok && gc__algo_down_coding(k) == GC__DOWN_EXACT)
    ok = (s->nzidx = malloc(cfg->n * sizeof *s->nzidx)) &&
         (s->nzval = malloc(bytes));
  if (!ok) {
    gc_server_free(s);
    GC_ERROR_NULL("server: out of memory", GC_ENOMEM);
  }
  if (s->dec)
    for (size_t p = 0; ok && p < cfg->workers; p++)
      ok = (s->dec[p] = alloc_up(cfg, p)) != NULL;
  if (ok && gc__algo_down_coding(k) == GC__DOWN_COMP)
    ok = (s->down = alloc_down(cfg)) != NULL;
  if (ok && gc__algo_server_ef(k) != GC_EF_NONE)
    ok = (s->ef = gc_ef_alloc(gc__algo_server_ef(k), cfg->n, cfg->dtype,
                              NULL)) != NULL;
  if (ok && rule == GC__SERVER_EF21_BC)
    ok = (s->bc = gc_ef_alloc(GC_EF_EF21, cfg->n, cfg->dtype, NULL)) != NULL;
  if (!ok) {
    gc_server_free(s);
    return NULL;
  }
  return s;
}

int gc_server_set_model(gc_server *s, const void *x0)
{
  if (!s->x)
    return GC_SUCCESS;   /* only EF21-BC keeps a model on the server */
  gc__vcopy(s->cfg.dtype, s->x, x0, s->cfg.n);
  return gc_ef_ef21_set(s->bc, x0);   /* w = x0 */
}

const void *gc_server_model(const gc_server *s) { return s->x; }

int gc_server_step(gc_server *s, const uint8_t *const *up,
                   const size_t *up_len, double lr, uint32_t step,
                   uint8_t *down, size_t cap, size_t *len)
{
  const gc_algo_config *cfg = &s->cfg;
  int dt = cfg->dtype;
  size_t n = cfg->n, P = cfg->workers;
  gc_algo_kind k = cfg->kind;
  int first_dense = gc__algo(k)->worker_ef == GC_EF_EF21 &&
                    !s->started && cfg->ef21_init == GC_EF21_INIT_GRADIENT;
  gc__vzero(dt, s->agg, n);
  for (size_t p = 0; p < P; p++) {   /* fixed order 0..P-1 */
    int rc = (gc__algo_up_coding(k) == GC__UP_DENSE || first_dense)
                 ? gc__dense_decode(dt, up[p], up_len[p], n, 1.0, s->agg)
                 : gc__decode(dt, s->dec[p], up[p], up_len[p], step, 1.0,
                              s->agg);
    if (rc != GC_SUCCESS)
      GC_ERRORF(rc, "server: uplink message of worker %zu (step %u) is "
                "malformed", p, (unsigned) step);
  }
  size_t bad = gc__vmean_finish(dt, s->agg, (double) P, n, &s->support);
  if (bad < n)
    GC_ERRORF(GC_EDOM, "server: the average overflowed at index %zu (step "
              "%u)", bad, (unsigned) step);
  int rc = GC_SUCCESS;
  switch (gc__algo(k)->server) {
  case GC__SERVER_DENSE:
    rc = gc__dense_encode(dt, s->agg, n, down, cap, len);
    break;
  case GC__SERVER_EXACT: {
    size_t nnz;
    rc = gc__exact_encode_ws(dt, s->agg, n, s->nzidx, s->nzval, down, cap, len, &nnz);
    break;
  }
  case GC__SERVER_EF:   /* bi: u = delta + m, q = C_d(u); downlink-only:
                           u = g + delta, DoubleSqueeze: w = v + delta
                           (gradient units) */
    rc = gc_ef_step(s->ef, s->down, s->agg, 1.0, step, down, cap, len, NULL);
    break;
  case GC__SERVER_EF21:            /* h += (1/P) sum c_i; send h */
    gc__vaxpby(dt, s->h, 1.0, s->agg, 1.0, n);
    rc = gc__dense_encode(dt, s->h, n, down, cap, len);
    break;
  case GC__SERVER_EF21_BC:         /* x -= lr h; q = C_s(x - w); w += q */
    gc__vaxpby(dt, s->h, 1.0, s->agg, 1.0, n);
    gc__vaxpby(dt, s->x, -lr, s->h, 1.0, n);
    rc = gc_ef_step(s->bc, s->down, s->x, 1.0, step, down, cap, len, NULL);
    break;
  }
  if (rc == GC_EDOM)
    GC_ERRORF(GC_EDOM, "server: memory overflowed at step %u",
              (unsigned) step);
  if (rc == GC_SUCCESS)
    s->started = 1;
  return rc;
}

const void *gc_server_memory(const gc_server *s)
{
  if (s->ef)
    return gc_ef_memory(s->ef);
  return s->h;
}

const void *gc_server_aggregate(const gc_server *s) { return s->agg; }
/* The decoded downlink, kept where the step already holds it: the exact
 * and dense kinds broadcast the average itself, EF21 its h. */
const void *gc_server_sent(const gc_server *s)
{
  switch (gc__algo(s->cfg.kind)->server) {
  case GC__SERVER_EF:
    return gc_ef_sent(s->ef);
  case GC__SERVER_EF21:
    return s->h;
  case GC__SERVER_EF21_BC:
    return gc_ef_sent(s->bc);
  case GC__SERVER_DENSE: case GC__SERVER_EXACT:
    break;
  }
  return s->agg;
}
size_t gc_server_support_union(const gc_server *s) { return s->support; }

/* ---- message bounds and the ledger ----------------------------------- */

static size_t comp_max_bytes(const gc_compressor_type *T, size_t n,
                             const gc_compressor_params *p)
{
  gc_compressor *c = gc_compressor_alloc(T, n, p);
  if (!c)
    return 0;
  size_t b = gc_compressor_max_bytes(c);
  gc_compressor_free(c);
  return b;
}

size_t gc_algo_max_up_bytes(const gc_algo_config *cfg)
{
  size_t dense = cfg->n * (size_t) cfg->dtype;
  if (gc__algo_up_coding(cfg->kind) == GC__UP_DENSE)
    return dense;
  size_t b = comp_max_bytes(cfg->up, cfg->n, &cfg->up_params);
  if (gc__algo(cfg->kind)->worker_ef == GC_EF_EF21 &&
      cfg->ef21_init == GC_EF21_INIT_GRADIENT && b < dense)
    b = dense;
  return b;
}

size_t gc_algo_max_down_bytes(const gc_algo_config *cfg)
{
  switch (gc__algo(cfg->kind)->down) {
  case GC__DOWN_DENSE:
    return cfg->n * (size_t) cfg->dtype;
  case GC__DOWN_EXACT:
    return gc__exact_max_bytes(cfg->n, cfg->dtype);
  case GC__DOWN_COMP:
    break;
  }
  return comp_max_bytes(cfg->down, cfg->n, &cfg->down_params);
}

/* Ring allreduce of m values over P ranks, chunk c of size m/P (+1 for the
 * first m%P chunks): rank p forwards every chunk but (p+1)%P in
 * reduce-scatter and every chunk but (p+2)%P in allgather. */
static size_t ring_bytes(size_t m, size_t P, size_t p, size_t vb)
{
  if (P <= 1)
    return 0;
  size_t c1 = (p + 1) % P, c2 = (p + 2) % P;
  size_t n1 = m / P + (c1 < m % P), n2 = m / P + (c2 < m % P);
  return (2 * m - n1 - n2) * vb;
}

/* ---- checkpoints ------------------------------------------------------- */

/* One walk over an object's persistent state serves size, save and load,
 * so the three cannot drift apart: with out set each part is copied there,
 * with in set it is restored from there, and the size is always summed. */
typedef struct state_walk {
  uint8_t *out;
  const uint8_t *in;
  size_t bytes;
} state_walk;

static void walk_raw(state_walk *sw, void *field, size_t len)
{
  if (sw->out)
    memcpy(sw->out + sw->bytes, field, len);
  if (sw->in)
    memcpy(field, sw->in + sw->bytes, len);
  sw->bytes += len;
}

static void walk_ef(state_walk *sw, gc_ef *e)
{
  if (!e)
    return;
  if (sw->out)
    gc_ef_state_save(e, sw->out + sw->bytes);
  if (sw->in)
    gc_ef_state_load(e, sw->in + sw->bytes);
  sw->bytes += gc_ef_state_bytes(e);
}

static void walk_compressor(state_walk *sw, gc_compressor *c)
{
  if (!c)
    return;
  if (sw->out)
    gc_compressor_state_save(c, sw->out + sw->bytes);
  if (sw->in)
    gc_compressor_state_load(c, sw->in + sw->bytes);
  sw->bytes += gc_compressor_state_bytes(c);
}

/* The worker's lr and scratch vectors are rewritten by every step before
 * they are read; the downlink decoder keeps nothing between messages. */
static size_t worker_walk(gc_worker *w, uint8_t *out, const uint8_t *in)
{
  state_walk sw = { out, in, 0 };
  walk_raw(&sw, &w->started, sizeof w->started);
  walk_ef(&sw, w->ef);
  walk_compressor(&sw, w->up);
  return sw.bytes;
}

static size_t server_walk(gc_server *s, uint8_t *out, const uint8_t *in)
{
  state_walk sw = { out, in, 0 };
  size_t bytes = s->cfg.n * (size_t) s->cfg.dtype;
  walk_raw(&sw, &s->started, sizeof s->started);
  walk_ef(&sw, s->ef);
  walk_compressor(&sw, s->down);
  void *vecs[2] = { s->h, s->x };
  for (int i = 0; i < 2; i++)
    if (vecs[i])
      walk_raw(&sw, vecs[i], bytes);
  walk_ef(&sw, s->bc);   /* w */
  return sw.bytes;
}

size_t gc_worker_state_bytes(const gc_worker *w)
{
  return worker_walk((gc_worker *) w, NULL, NULL);
}

void gc_worker_state_save(const gc_worker *w, void *buf)
{
  worker_walk((gc_worker *) w, buf, NULL);   /* reads w only */
}

void gc_worker_state_load(gc_worker *w, const void *buf)
{
  worker_walk(w, NULL, buf);
}

size_t gc_server_state_bytes(const gc_server *s)
{
  return server_walk((gc_server *) s, NULL, NULL);
}

void gc_server_state_save(const gc_server *s, void *buf)
{
  server_walk((gc_server *) s, buf, NULL);   /* reads s only */
}

void gc_server_state_load(gc_server *s, const void *buf)
{
  server_walk(s, NULL, buf);
}

int gc_algo_record_step(const gc_algo_config *cfg, gc_ledger *l,
                        uint32_t step, const size_t *up_len, size_t down_len)
{
  size_t P = cfg->workers;
  switch (gc__algo(cfg->kind)->collective) {
  case GC__COLL_ALLREDUCE: {
    /* the n values of a dense uplink, or the K every rank shares */
    size_t m = gc__algo_up_coding(cfg->kind) == GC__UP_COMP &&
               (cfg->up->flags & GC_COMP_KEEPS_K)
                   ? gc__resolve_k(cfg->n, &cfg->up_params) : cfg->n;
    for (size_t p = 0; p < P; p++)
      GC_TRY(gc_ledger_record(l, step, p, GC_UP,
                              ring_bytes(m, P, p, (size_t) cfg->dtype)));
    return GC_SUCCESS;
  }
  case GC__COLL_ALLGATHER:
    for (size_t p = 0; p < P; p++)
      GC_TRY(gc_ledger_record(l, step, p, GC_UP, (P - 1) * up_len[p]));
    return GC_SUCCESS;
  case GC__COLL_NONE:
    break;
  }
  for (size_t p = 0; p < P; p++)
    GC_TRY(gc_ledger_record(l, step, p, GC_UP, up_len[p]));
  for (size_t p = 0; p < P; p++)
    GC_TRY(gc_ledger_record(l, step, p, GC_DOWN, down_len));
  return gc_ledger_record_broadcast(l, step, down_len);
}
