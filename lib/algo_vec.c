/* algo_vec.c -- the dtype-dispatching vector helpers of gc_algo_vec.h. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "gc_algo_vec.h"
#include "gc_errno.h"
#include "gc_npy.h"

#if defined(__GNUC__) && !defined(__clang__)
/* These O(d) passes run several times per worker step; GCC vectorises
 * their flag reductions at -O3 only. */
#pragma GCC optimize("O3")
#endif

void gc__vzero(int dt, void *y, size_t n) { memset(y, 0, n * (size_t) dt); }

void gc__vcopy(int dt, void *y, const void *x, size_t n)
{
  if (y != x)
    memcpy(y, x, n * (size_t) dt);
}

void gc__vaxpby(int dt, void *y, double a, const void *x, double b, size_t n)
{
  if (dt == GC_F64) {
    double *yy = y;
    const double *xx = x;
    if (b == 1.0)
      for (size_t i = 0; i < n; i++) yy[i] += a * xx[i];
    else
      for (size_t i = 0; i < n; i++) yy[i] = a * xx[i] + b * yy[i];
  } else {
    float *yy = y;
    const float *xx = x;
    float af = (float) a, bf = (float) b;
    if (b == 1.0)
      for (size_t i = 0; i < n; i++) yy[i] += af * xx[i];
    else
      for (size_t i = 0; i < n; i++) yy[i] = af * xx[i] + bf * yy[i];
  }
}

void gc__vscale(int dt, void *y, double a, const void *x, size_t n)
{
  if (dt == GC_F64) {
    double *yy = y;
    const double *xx = x;
    for (size_t i = 0; i < n; i++) yy[i] = a * xx[i];
  } else {
    float *yy = y;
    const float *xx = x;
    float af = (float) a;
    for (size_t i = 0; i < n; i++) yy[i] = af * xx[i];
  }
}

/* The flag is or-ed, not branched on, so the loop stays vectorisable; the
 * index is searched for only on the error path. */
size_t gc__vadd_scaled(int dt, void *y, const void *z, double a,
                       const void *x, size_t n)
{
  int bad = 0;
  if (dt == GC_F64) {
    double *yy = y;
    const double *zz = z, *xx = x;
    for (size_t i = 0; i < n; i++) {
      double v = zz[i] + a * xx[i];
      yy[i] = v;
      bad |= !(fabs(v) <= DBL_MAX);
    }
  } else {
    float *yy = y;
    const float *zz = z, *xx = x;
    float af = (float) a;
    for (size_t i = 0; i < n; i++) {
      float v = zz[i] + af * xx[i];
      yy[i] = v;
      bad |= !(fabsf(v) <= FLT_MAX);
    }
  }
  return bad ? gc__vfirst_nonfinite(dt, y, n) : n;
}

/* A branch-free flag pass (vectorisable), then the index search only when
 * something is wrong: the common case is a clean gradient. */
size_t gc__vfirst_nonfinite(int dt, const void *x, size_t n)
{
  int bad = 0;
  if (dt == GC_F64) {
    const double *xx = x;
    for (size_t i = 0; i < n; i++)
      bad |= !(fabs(xx[i]) <= DBL_MAX);
    if (bad)
      for (size_t i = 0; i < n; i++)
        if (!isfinite(xx[i])) return i;
  } else {
    const float *xx = x;
    for (size_t i = 0; i < n; i++)
      bad |= !(fabsf(xx[i]) <= FLT_MAX);
    if (bad)
      for (size_t i = 0; i < n; i++)
        if (!isfinite(xx[i])) return i;
  }
  return n;
}

size_t gc__vmean_finish(int dt, void *y, double d, size_t n, size_t *nnz)
{
  size_t c = 0;
  int bad = 0;
  if (dt == GC_F64) {
    double *yy = y;
    for (size_t i = 0; i < n; i++) {
      double v = yy[i] / d;
      yy[i] = v;
      c += v != 0.0;
      bad |= !(fabs(v) <= DBL_MAX);
    }
  } else {
    float *yy = y;
    float df = (float) d;
    for (size_t i = 0; i < n; i++) {
      float v = yy[i] / df;
      yy[i] = v;
      c += v != 0.0f;
      bad |= !(fabsf(v) <= FLT_MAX);
    }
  }
  *nnz = c;
  return bad ? gc__vfirst_nonfinite(dt, y, n) : n;
}

double gc__vnorm(int dt, const void *x, size_t n)
{
  double s = 0.0;
  if (dt == GC_F64) {
    const double *xx = x;
    for (size_t i = 0; i < n; i++) s += xx[i] * xx[i];
  } else {
    const float *xx = x;
    for (size_t i = 0; i < n; i++) s += (double) xx[i] * xx[i];
  }
  return sqrt(s);
}

int gc__encode(int dt, gc_compressor *c, const void *x, uint32_t step,
               uint8_t *buf, size_t cap, size_t *len, gc_compress_info *info)
{
  if (dt == GC_F64)
    return gc_compress_f64(c, x, step, buf, cap, len, info);
  return gc_compress_f32(c, x, step, buf, cap, len, info);
}

int gc__decode(int dt, const gc_compressor *c, const uint8_t *buf, size_t len,
               uint32_t step, double scale, void *y)
{
  if (dt == GC_F64)
    return gc_decompress_add_f64(c, buf, len, step, scale, y);
  return gc_decompress_add_f32(c, buf, len, step, (float) scale, y);
}

int gc__dense_encode(int dt, const void *x, size_t n, uint8_t *buf,
                     size_t cap, size_t *len)
{
  size_t bytes = n * (size_t) dt;
  if (cap < bytes)
    GC_ERRORF(GC_ENOSPACE, "dense message needs %zu bytes, buffer has %zu",
              bytes, cap);
  memcpy(buf, x, bytes);
  *len = bytes;
  return GC_SUCCESS;
}

int gc__dense_decode(int dt, const uint8_t *buf, size_t len, size_t n,
                     double scale, void *y)
{
  if (len != n * (size_t) dt)
    GC_ERRORF(GC_ECORRUPT, "dense message of %zu bytes, expected %zu", len,
              n * (size_t) dt);
  /* memcpy per element: the buffer need not be aligned.  A message is
   * untrusted input: a NaN or Inf in it is rejected before y is touched. */
  for (size_t i = 0; i < n; i++) {
    double v;
    if (dt == GC_F64) {
      memcpy(&v, buf + i * sizeof v, sizeof v);
    } else {
      float f;
      memcpy(&f, buf + i * sizeof f, sizeof f);
      v = f;
    }
    if (!isfinite(v))
      GC_ERRORF(GC_ECORRUPT, "dense message value %zu is not finite", i);
  }
  if (dt == GC_F64) {
    double *yy = y;
    for (size_t i = 0; i < n; i++) {
      double v;
      memcpy(&v, buf + i * sizeof v, sizeof v);
      yy[i] += scale * v;
    }
  } else {
    float *yy = y;
    float s = (float) scale;
    for (size_t i = 0; i < n; i++) {
      float v;
      memcpy(&v, buf + i * sizeof v, sizeof v);
      yy[i] += s * v;
    }
  }
  return GC_SUCCESS;
}

size_t gc__exact_max_bytes(size_t n, int dt)
{
  size_t s = gc_sparse_max_bytes(n, n, dt);
  size_t d = n * (size_t) dt;
  return s > d ? s : d;
}

int gc__exact_encode(int dt, const void *x, size_t n, uint8_t *buf,
                     size_t cap, size_t *len, size_t *nnz)
{
  int rc = dt == GC_F64
               ? gc_sparse_encode_dense_f64(x, n, buf, cap, len, nnz)
               : gc_sparse_encode_dense_f32(x, n, buf, cap, len, nnz);
  if (rc != GC_SUCCESS)
    return rc;
  if (*len >= n * (size_t) dt)
    return gc__dense_encode(dt, x, n, buf, cap, len);
  return GC_SUCCESS;
}

int gc__exact_decode(int dt, const uint8_t *buf, size_t len, size_t n,
                     double scale, void *y)
{
  if (len == n * (size_t) dt)
    return gc__dense_decode(dt, buf, len, n, scale, y);
  if (dt == GC_F64)
    return gc_sparse_decode_add_f64(buf, len, n, scale, y);
  return gc_sparse_decode_add_f32(buf, len, n, (float) scale, y);
}
