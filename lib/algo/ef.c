/* ef.c -- error-feedback memories (gc_ef.h). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gc_vec.h"
#include "gc_compressor_internal.h"
#include "gc_ef.h"
#include "gc_errno.h"
#include "gc_dtype.h"

#if defined(__GNUC__) && !defined(__clang__)
/* As in vec.c: DGC's fused passes vectorise at -O3 only (they need
 * alias checks, and the Nesterov and masking tests unswitched). */
#pragma GCC optimize("O3")
#endif

struct gc_ef {
  gc_ef_kind kind;
  size_t n;
  int dt;
  gc_ef_options opt;
  void *mem;     /* eps, v (DGC) or h (EF21); NULL for NONE */
  void *mom;     /* u (DGC) */
  void *acc;     /* the vector compressed last */
  void *sent;    /* decoded C(acc) */
  void *clip;    /* DGC: clipped copy of g, then the new u (swapped with
                    mom once the step succeeds) */
};

void gc_ef_options_default(gc_ef_options *o)
{
  memset(o, 0, sizeof *o);
  o->momentum = 0.9;
  o->masking = 1;
  o->workers = 1;
  o->ef21_init = GC_EF21_INIT_COMPRESSED;
}

gc_ef *gc_ef_alloc(gc_ef_kind kind, size_t n, int dtype,
                   const gc_ef_options *opt)
{
  if (n == 0)
    GC_ERROR_NULL("error-feedback memory of length 0", GC_EINVAL);
  if (dtype != GC_F32 && dtype != GC_F64)
    GC_ERROR_NULL("error-feedback dtype must be float32 or float64",
                  GC_EINVAL);
  if ((unsigned) kind > GC_EF_EF21)
    GC_ERROR_NULL("unknown error-feedback kind", GC_EINVAL);
  gc_ef_options o;
  if (opt)
    o = *opt;
  else
    gc_ef_options_default(&o);
  if (kind == GC_EF_DGC && !(o.momentum >= 0.0 && o.momentum < 1.0))
    GC_ERROR_NULL("DGC momentum must lie in [0,1)", GC_EINVAL);
  if (o.workers == 0)
    o.workers = 1;
  gc_ef *e = calloc(1, sizeof *e);
  if (!e)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  e->kind = kind;
  e->n = n;
  e->dt = dtype;
  e->opt = o;
  size_t bytes = n * (size_t) dtype;
  int ok = (e->acc = calloc(1, bytes)) && (e->sent = calloc(1, bytes));
  if (ok && kind != GC_EF_NONE)
    ok = (e->mem = calloc(1, bytes)) != NULL;
  if (ok && kind == GC_EF_DGC)
    ok = (e->mom = calloc(1, bytes)) && (e->clip = calloc(1, bytes));
  if (!ok) {
    gc_ef_free(e);
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  }
  return e;
}

void gc_ef_free(gc_ef *e)
{
  if (!e)
    return;
  free(e->mem);
  free(e->mom);
  free(e->acc);
  free(e->sent);
  free(e->clip);
  free(e);
}

void gc_ef_reset(gc_ef *e)
{
  void *bufs[] = { e->mem, e->mom, e->acc, e->sent };
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i])
      gc__vzero(e->dt, bufs[i], e->n);
}

gc_ef_kind gc_ef_kind_of(const gc_ef *e) { return e->kind; }

/* Only mem and mom outlive a step: acc, sent and clip are rewritten by
 * every gc_ef_step before they are read. */
size_t gc_ef_state_bytes(const gc_ef *e)
{
  return ((e->mem != NULL) + (e->mom != NULL)) * e->n * (size_t) e->dt;
}

void gc_ef_state_save(const gc_ef *e, void *buf)
{
  size_t bytes = e->n * (size_t) e->dt;
  uint8_t *b = buf;
  if (e->mem)
    memcpy(b, e->mem, bytes), b += bytes;
  if (e->mom)
    memcpy(b, e->mom, bytes);
}

void gc_ef_state_load(gc_ef *e, const void *buf)
{
  size_t bytes = e->n * (size_t) e->dt;
  const uint8_t *b = buf;
  if (e->mem)
    memcpy(e->mem, b, bytes), b += bytes;
  if (e->mom)
    memcpy(e->mom, b, bytes);
}
const void *gc_ef_memory(const gc_ef *e) { return e->mem; }
const void *gc_ef_momentum(const gc_ef *e) { return e->mom; }
const void *gc_ef_accumulator(const gc_ef *e) { return e->acc; }
const void *gc_ef_sent(const gc_ef *e) { return e->sent; }

double gc_ef_apply_scale(gc_ef_kind kind, double lr)
{
  return (kind == GC_EF_NONE || kind == GC_EF_BEFORE) ? 1.0 : lr;
}

/* DGC's accumulator in one pass, into scratch: u' = m u + g (Nesterov:
 * u' = m (u + g)) goes to clip (g may be clip itself: each entry is read
 * before it is overwritten) and v' = v + u' (+ g) to acc, so that u and v
 * stay as they were until the message is out (dgc_commit).  Same
 * operations in the same order as u = m u + g, v = v + u done in place.
 * Returns the index of the first non-finite v', or n. */
static size_t dgc_accumulate(gc_ef *e, const void *g)
{
  size_t n = e->n;
  int nesterov = e->opt.nesterov, bad = 0;
  if (e->dt == GC_F64) {
    const double *gg = g, *u = e->mom, *v = e->mem;
    double m = e->opt.momentum, *un = e->clip, *vn = e->acc;
    for (size_t i = 0; i < n; i++) {
      double gi = gg[i];
      double a = nesterov ? m * (u[i] + gi) : gi + m * u[i];
      double b = nesterov ? (v[i] + a) + gi : v[i] + a;
      un[i] = a;
      vn[i] = b;
      bad |= !(fabs(b) <= DBL_MAX);
    }
  } else {
    const float *gg = g, *u = e->mom, *v = e->mem;
    float m = (float) e->opt.momentum, *un = e->clip, *vn = e->acc;
    for (size_t i = 0; i < n; i++) {
      float gi = gg[i];
      float a = nesterov ? m * (u[i] + gi) : gi + m * u[i];
      float b = nesterov ? (v[i] + a) + gi : v[i] + a;
      un[i] = a;
      vn[i] = b;
      bad |= !(fabsf(b) <= FLT_MAX);
    }
  }
  return bad ? gc__vfirst_nonfinite(e->dt, e->acc, n) : n;
}

/* After the message: u = u', by a swap with the scratch that holds it,
 * and v = v' - C(v'); with masking both are 0 where the message carried
 * an entry.  Elsewhere C(v') is +0 (a decode adds into zeros), so
 * v' - C(v') is v' exactly and masking needs no subtraction. */
static void dgc_commit(gc_ef *e)
{
  void *t = e->mom;
  e->mom = e->clip;
  e->clip = t;
  size_t n = e->n;
  int masking = e->opt.masking;
  if (e->dt == GC_F64) {
    const double *s = e->sent, *vn = e->acc;
    double *u = e->mom, *v = e->mem;
    if (masking)
      for (size_t i = 0; i < n; i++) {
        int drop = s[i] != 0.0;
        v[i] = drop ? 0.0 : vn[i];
        if (drop)
          u[i] = 0.0;
      }
    else
      for (size_t i = 0; i < n; i++)
        v[i] = vn[i] - s[i];
  } else {
    const float *s = e->sent, *vn = e->acc;
    float *u = e->mom, *v = e->mem;
    if (masking)
      for (size_t i = 0; i < n; i++) {
        int drop = s[i] != 0.0f;
        v[i] = drop ? 0.0f : vn[i];
        if (drop)
          u[i] = 0.0f;
      }
    else
      for (size_t i = 0; i < n; i++)
        v[i] = vn[i] - s[i];
  }
}

int gc_ef_step(gc_ef *e, gc_compressor *c, const void *g, double lr,
               uint32_t step, uint8_t *buf, size_t cap, size_t *len,
               gc_compress_info *info)
{
  size_t n = e->n;
  int dt = e->dt;
  if (gc_compressor_n(c) != n)
    GC_ERRORF(GC_EBADLEN, "compressor length %zu differs from memory %zu",
              gc_compressor_n(c), n);
  /* A failed step leaves the state as it was: the memories change only
   * after the message is out.  NONE's scaling checks nothing, so it tests
   * g first.  The other kinds build the accumulator in a pass that flags
   * non-finite results, and a finite state plus a multiple of g is finite
   * only when g is (DGC's clipping turns an Inf into a NaN): testing g
   * again would be one more read of it per step. */
  size_t bad = n;
  if (e->kind == GC_EF_NONE)
    bad = gc__vfirst_nonfinite(dt, g, n);
  if (bad < n)
    GC_ERRORF(GC_EDOM, "non-finite gradient at index %zu", bad);
  switch (e->kind) {
  case GC_EF_NONE:     /* acc = lr*g */
    gc__vscale(dt, e->acc, lr, g, n);
    break;
  case GC_EF_BEFORE:   /* acc = eps + lr*g */
    bad = gc__vadd_scaled(dt, e->acc, e->mem, lr, g, n);
    break;
  case GC_EF_AFTER:    /* acc = g + eps */
    bad = gc__vadd_scaled(dt, e->acc, g, 1.0, e->mem, n);
    break;
  case GC_EF_DGC: {
    const void *gg = g;
    if (e->opt.clip_norm > 0.0) {
      gc__vcopy(dt, e->clip, g, n);
      if (dt == GC_F64)
        gc_clip_global_norm_f64(e->clip, n, e->opt.clip_norm, e->opt.workers);
      else
        gc_clip_global_norm_f32(e->clip, n, e->opt.clip_norm, e->opt.workers);
      gg = e->clip;
    }
    bad = dgc_accumulate(e, gg);
    break;
  }
  case GC_EF_EF21:     /* acc = g - h */
    bad = gc__vadd_scaled(dt, e->acc, g, -1.0, e->mem, n);
    break;
  }
  if (bad < n) {
    size_t gbad = gc__vfirst_nonfinite(dt, g, n);
    if (gbad < n)
      GC_ERRORF(GC_EDOM, "non-finite gradient at index %zu", gbad);
    GC_ERRORF(GC_EDOM, "error-feedback accumulator overflowed at index %zu",
              bad);
  }
  GC_TRY(gc__encode(dt, c, e->acc, step, buf, cap, len, info));
  gc__vzero(dt, e->sent, n);
  GC_TRY(gc__decode(dt, c, buf, *len, step, 1.0, e->sent));
  switch (e->kind) {
  case GC_EF_NONE:
    break;
  case GC_EF_BEFORE:
  case GC_EF_AFTER:    /* eps = acc - C(acc) */
    gc__vadd_scaled(dt, e->mem, e->acc, -1.0, e->sent, n);
    break;
  case GC_EF_DGC:
    dgc_commit(e);
    break;
  case GC_EF_EF21:     /* h = h + c */
    gc__vaxpby(dt, e->mem, 1.0, e->sent, 1.0, n);
    break;
  }
  return GC_SUCCESS;
}

int gc_ef_ef21_set(gc_ef *e, const void *g)
{
  if (e->kind != GC_EF_EF21)
    GC_ERROR("gc_ef_ef21_set needs an EF21 memory", GC_EINVAL);
  size_t bad = gc__vfirst_nonfinite(e->dt, g, e->n);
  if (bad < e->n)
    GC_ERRORF(GC_EDOM, "non-finite input at index %zu", bad);
  gc__vcopy(e->dt, e->mem, g, e->n);
  gc__vcopy(e->dt, e->acc, g, e->n);
  gc__vcopy(e->dt, e->sent, g, e->n);
  return GC_SUCCESS;
}

double gc_dgc_warmup_density(double rho, unsigned warmup_epochs,
                             unsigned epoch)
{
  if (warmup_epochs == 0 || epoch >= warmup_epochs)
    return rho;
  double c = pow(rho, 1.0 / (warmup_epochs + 1.0));
  double r = pow(c, epoch + 1.0);
  return r > rho ? r : rho;
}

/* Scale x to norm at most max_norm / sqrt(workers); returns the factor. */
static double clip_global_norm(int dt, void *x, size_t n, double max_norm,
                               size_t workers)
{
  if (!(max_norm > 0.0))
    return 1.0;
  double thr = max_norm / sqrt((double) (workers ? workers : 1));
  double nrm = gc__vnorm(dt, x, n);
  if (!(nrm > thr))
    return 1.0;
  double f = thr / nrm;
  gc__vscale(dt, x, f, x, n);
  return dt == GC_F64 ? f : (double) (float) f;   /* the factor applied */
}

double gc_clip_global_norm_f64(double *x, size_t n, double max_norm,
                               size_t workers)
{
  return clip_global_norm(GC_F64, x, n, max_norm, workers);
}

double gc_clip_global_norm_f32(float *x, size_t n, double max_norm,
                               size_t workers)
{
  return clip_global_norm(GC_F32, x, n, max_norm, workers);
}
