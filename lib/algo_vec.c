/* algo_vec.c -- the dtype-dispatching vector helpers of gc_algo_vec.h. */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_algo_vec.h"
#include "gc_threads.h"
#include "gc_errno.h"
#include "gc_npy.h"
#include "gc_wire.h"

#if defined(__GNUC__) && !defined(__clang__)
/* These O(d) passes run several times per worker step; GCC vectorises
 * their flag reductions at -O3 only. */
#pragma GCC optimize("O3")
#endif

/* The passes below are per coordinate (the flags and counts are integer
 * reductions), so they split into contiguous pieces over the caller's
 * OpenMP threads with the same results for any thread count.  Short
 * vectors, and calls from a parallel region (a worker's step among
 * others), run the kernel once over the whole range, without OpenMP.
 * One piece per thread, of equal length: the server's passes over a
 * model of 51k entries (MNIST-MLP) are in the threads' range, and pieces
 * of a fixed 2^15 entries split that into 64% and 36%.  Piece bounds are
 * multiples of 16 entries, so that two threads never write one cache
 * line of float32 (nor of float64: 16 doubles are two lines). */
enum { VALIGN = 16 };

typedef struct {
  int dt;
  void *y;
  const void *x, *z;
  double a, b;
} vargs;

/* A pass over [lo, hi): returns its non-finite flag, adds to *cnt. */
typedef int (*vkernel)(const vargs *v, size_t lo, size_t hi, size_t *cnt);


int gc__threads_any_length = 0;

int gc__vec_threads(size_t n)
{
#ifdef _OPENMP
  static atomic_int procs;   /* 0: not asked yet */
  int T = gc__threads_for(n, GC__VEC_PAR_MIN, 0);
  if (T == 1 || n >= GC__VEC_PAR_OVER_MIN || gc__threads_any_length)
    return T;
  int np = atomic_load_explicit(&procs, memory_order_relaxed);
  if (!np) {
    np = omp_get_num_procs();
    atomic_store_explicit(&procs, np, memory_order_relaxed);
  }
  return T <= np ? T : 1;
#else
  (void) n;
  return 1;
#endif
}

static inline __attribute__((always_inline)) int
vrun(vkernel k, const vargs *v, size_t n, size_t *cnt)
{
  size_t c = 0;
  int bad = 0;
  int T = gc__vec_threads(n);
  if (T == 1) {
    bad = k(v, 0, n, &c);
  } else {
    size_t piece = (n + (size_t) T - 1) / (size_t) T;
    piece = (piece + VALIGN - 1) / VALIGN * VALIGN;
    #pragma omp parallel for schedule(static) num_threads(T) reduction(|:bad) reduction(+:c)
    for (int j = 0; j < T; j++) {
      size_t lo = (size_t) j * piece < n ? (size_t) j * piece : n;
      size_t hi = lo + piece < n ? lo + piece : n, cj = 0;
      bad |= k(v, lo, hi, &cj);
      c += cj;
    }
  }
  if (cnt)
    *cnt = c;
  return bad;
}

static inline int k_zero(const vargs *v, size_t lo, size_t hi, size_t *cnt)
{
  (void) cnt;
  size_t e = (size_t) v->dt;
  memset((uint8_t *) v->y + lo * e, 0, (hi - lo) * e);
  return 0;
}

static inline int k_copy(const vargs *v, size_t lo, size_t hi, size_t *cnt)
{
  (void) cnt;
  size_t e = (size_t) v->dt;
  memcpy((uint8_t *) v->y + lo * e, (const uint8_t *) v->x + lo * e, (hi - lo) * e);
  return 0;
}

void gc__vzero(int dt, void *y, size_t n)
{
  vargs v = { .dt = dt, .y = y };
  vrun(k_zero, &v, n, NULL);
}

void gc__vcopy(int dt, void *y, const void *x, size_t n)
{
  if (y == x)
    return;
  vargs v = { .dt = dt, .y = y, .x = x };
  vrun(k_copy, &v, n, NULL);
}

static inline int k_axpby(const vargs *v, size_t lo, size_t hi, size_t *cnt)
{
  (void) cnt;
  double a = v->a, b = v->b;
  if (v->dt == GC_F64) {
    double *yy = v->y;
    const double *xx = v->x;
    if (b == 1.0)
      for (size_t i = lo; i < hi; i++) yy[i] += a * xx[i];
    else
      for (size_t i = lo; i < hi; i++) yy[i] = a * xx[i] + b * yy[i];
  } else {
    float *yy = v->y;
    const float *xx = v->x;
    float af = (float) a, bf = (float) b;
    if (b == 1.0)
      for (size_t i = lo; i < hi; i++) yy[i] += af * xx[i];
    else
      for (size_t i = lo; i < hi; i++) yy[i] = af * xx[i] + bf * yy[i];
  }
  return 0;
}

void gc__vaxpby(int dt, void *y, double a, const void *x, double b, size_t n)
{
  vargs v = { .dt = dt, .y = y, .x = x, .a = a, .b = b };
  vrun(k_axpby, &v, n, NULL);
}

static inline int k_scale(const vargs *v, size_t lo, size_t hi, size_t *cnt)
{
  (void) cnt;
  if (v->dt == GC_F64) {
    double *yy = v->y, a = v->a;
    const double *xx = v->x;
    for (size_t i = lo; i < hi; i++) yy[i] = a * xx[i];
  } else {
    float *yy = v->y, af = (float) v->a;
    const float *xx = v->x;
    for (size_t i = lo; i < hi; i++) yy[i] = af * xx[i];
  }
  return 0;
}

void gc__vscale(int dt, void *y, double a, const void *x, size_t n)
{
  vargs v = { .dt = dt, .y = y, .x = x, .a = a };
  vrun(k_scale, &v, n, NULL);
}

/* The flag is or-ed, not branched on, so the loop stays vectorisable; the
 * index is searched for only on the error path. */
static inline int k_add_scaled(const vargs *v, size_t lo, size_t hi, size_t *cnt)
{
  (void) cnt;
  int bad = 0;
  if (v->dt == GC_F64) {
    double *yy = v->y, a = v->a;
    const double *zz = v->z, *xx = v->x;
    for (size_t i = lo; i < hi; i++) {
      double t = zz[i] + a * xx[i];
      yy[i] = t;
      bad |= !(fabs(t) <= DBL_MAX);
    }
  } else {
    float *yy = v->y, af = (float) v->a;
    const float *zz = v->z, *xx = v->x;
    for (size_t i = lo; i < hi; i++) {
      float t = zz[i] + af * xx[i];
      yy[i] = t;
      bad |= !(fabsf(t) <= FLT_MAX);
    }
  }
  return bad;
}

size_t gc__vadd_scaled(int dt, void *y, const void *z, double a,
                       const void *x, size_t n)
{
  vargs v = { .dt = dt, .y = y, .x = x, .z = z, .a = a };
  return vrun(k_add_scaled, &v, n, NULL) ? gc__vfirst_nonfinite(dt, y, n) : n;
}

/* A branch-free flag pass (vectorisable), then the index search only when
 * something is wrong: the common case is a clean gradient. */
static inline int k_nonfinite(const vargs *v, size_t lo, size_t hi, size_t *cnt)
{
  (void) cnt;
  int bad = 0;
  if (v->dt == GC_F64) {
    const double *xx = v->x;
    for (size_t i = lo; i < hi; i++)
      bad |= !(fabs(xx[i]) <= DBL_MAX);
  } else {
    const float *xx = v->x;
    for (size_t i = lo; i < hi; i++)
      bad |= !(fabsf(xx[i]) <= FLT_MAX);
  }
  return bad;
}

size_t gc__vfirst_nonfinite(int dt, const void *x, size_t n)
{
  vargs v = { .dt = dt, .x = x };
  if (!vrun(k_nonfinite, &v, n, NULL))
    return n;
  if (dt == GC_F64) {
    const double *xx = x;
    for (size_t i = 0; i < n; i++)
      if (!isfinite(xx[i])) return i;
  } else {
    const float *xx = x;
    for (size_t i = 0; i < n; i++)
      if (!isfinite(xx[i])) return i;
  }
  return n;
}

static inline int k_mean_finish(const vargs *v, size_t lo, size_t hi, size_t *cnt)
{
  size_t c = 0;
  int bad = 0;
  if (v->dt == GC_F64) {
    double *yy = v->y, d = v->a;
    for (size_t i = lo; i < hi; i++) {
      double t = yy[i] / d;
      yy[i] = t;
      c += t != 0.0;
      bad |= !(fabs(t) <= DBL_MAX);
    }
  } else {
    float *yy = v->y, df = (float) v->a;
    for (size_t i = lo; i < hi; i++) {
      float t = yy[i] / df;
      yy[i] = t;
      c += t != 0.0f;
      bad |= !(fabsf(t) <= FLT_MAX);
    }
  }
  *cnt += c;
  return bad;
}

size_t gc__vmean_finish(int dt, void *y, double d, size_t n, size_t *nnz)
{
  vargs v = { .dt = dt, .y = y, .a = d };
  return vrun(k_mean_finish, &v, n, nnz) ? gc__vfirst_nonfinite(dt, y, n) : n;
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
    piece = (piece + VALIGN - 1) / VALIGN * VALIGN;
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
