/* dense_wire.c -- the dense and exact vector messages of gc_dense_wire.h. */
#include <math.h>
#include <string.h>

#include "gc_compressor.h"
#include "gc_dense_wire.h"
#include "gc_dtype.h"
#include "gc_errno.h"
#include "gc_threads.h"
#include "gc_wire.h"

#if defined(__GNUC__) && !defined(__clang__)
/* O(d) loops (the gather's 16-entry nonzero test, the dense decode),
 * compiled at -O3 as vec.c's passes are. */
#pragma GCC optimize("O3")
#endif

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

/* The nonzeros of x[lo, hi) (x != 0: a -0.0 is left out, as
 * gc_sparse_encode_dense leaves it) to idx and val from position lo, in
 * ascending order; returns their count.  Sixteen entries are tested at
 * once first: an average of P top-K messages is nearly all zeros. */
enum { NZ_BLOCK = 16, NZ_PIECES_MAX = 64 };

#define NZ_GATHER(name, REAL)                                                \
  static size_t name(const REAL *x, size_t lo, size_t hi, uint32_t *idx,    \
                     REAL *val)                                             \
  {                                                                         \
    size_t c = lo, i = lo;                                                  \
    for (; i + NZ_BLOCK <= hi; i += NZ_BLOCK) {                             \
      int any = 0;                                                          \
      for (size_t k = i; k < i + NZ_BLOCK; k++)                             \
        any |= x[k] != 0;                                                   \
      for (size_t k = i; any && k < i + NZ_BLOCK; k++)                      \
        if (x[k] != 0) {                                                    \
          idx[c] = (uint32_t) k;                                            \
          val[c++] = x[k];                                                  \
        }                                                                   \
    }                                                                       \
    for (; i < hi; i++)                                                     \
      if (x[i] != 0) {                                                      \
        idx[c] = (uint32_t) i;                                              \
        val[c++] = x[i];                                                    \
      }                                                                     \
    return c - lo;                                                          \
  }
NZ_GATHER(nz_gather_f32, float)
NZ_GATHER(nz_gather_f64, double)
#undef NZ_GATHER

static size_t nz_gather(int dt, const void *x, size_t lo, size_t hi, uint32_t *idx,
                        void *val)
{
  return dt == GC_F64 ? nz_gather_f64(x, lo, hi, idx, val)
                      : nz_gather_f32(x, lo, hi, idx, val);
}

/* gc_sparse_encode_dense counts the nonzeros in one pass over x and
 * writes them in a second, an entry at a time on one thread: 50 us a step
 * of MNIST-MLP's server (51k entries), most of uni's aggregation.  Here
 * the threads gather them from their pieces (vrun's), the pieces' lists
 * are joined, and the wire writes the message from the list: the bytes
 * of gc_sparse_encode_dense (both take the coding with the smallest index
 * section, ties raw, delta, bitmap). */
int gc__exact_encode_ws(int dt, const void *x, size_t n, uint32_t *idx, void *val,
                        uint8_t *buf, size_t cap, size_t *len, size_t *nnz)
{
  if (n == 0 || n >= ((size_t) 1 << 32))
    GC_ERRORF(GC_EINVAL, "sparse vector length %zu must be in [1, 2^32)", n);
  size_t e = (size_t) dt, c;
  int T = gc__vec_threads(n);
  if (T > NZ_PIECES_MAX)
    T = NZ_PIECES_MAX;
  if (T == 1) {
    c = nz_gather(dt, x, 0, n, idx, val);
  } else {
    size_t cnt[NZ_PIECES_MAX], piece = (n + (size_t) T - 1) / (size_t) T;
    piece = (piece + GC__VEC_ALIGN - 1) / GC__VEC_ALIGN * GC__VEC_ALIGN;
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T; j++) {
      size_t lo = (size_t) j * piece < n ? (size_t) j * piece : n;
      cnt[j] = nz_gather(dt, x, lo, lo + piece < n ? lo + piece : n, idx, val);
    }
    c = cnt[0];
    for (int j = 1; j < T; j++) {   /* piece j's list starts at its lo */
      size_t lo = (size_t) j * piece < n ? (size_t) j * piece : n;
      memmove(idx + c, idx + lo, cnt[j] * sizeof *idx);
      memmove((uint8_t *) val + c * e, (uint8_t *) val + lo * e, cnt[j] * e);
      c += cnt[j];
    }
  }
  int rc = dt == GC_F64
               ? gc__wire_encode_vals_f64(GC__WIRE_SPARSE, n, idx, c, val, buf, cap, len, nnz)
               : gc__wire_encode_vals_f32(GC__WIRE_SPARSE, n, idx, c, val, buf, cap, len, nnz);
  if (rc != GC_SUCCESS)
    return rc;
  if (*len >= n * e)
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
