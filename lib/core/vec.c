/* vec.c -- the dtype-dispatching vector passes of gc_vec.h. */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_dispatch.h"
#include "gc_dtype.h"
#include "gc_threads.h"
#include "gc_vec.h"

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
 * multiples of GC__VEC_ALIGN entries (gc_threads.h). */

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
    piece = (piece + GC__VEC_ALIGN - 1) / GC__VEC_ALIGN * GC__VEC_ALIGN;
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

/* The largest magnitude's bits (gc_vec.h), and from it whether x holds a
 * NaN or Inf: integer maxima, which every instruction set vectorises,
 * where the float comparison with NaN does not.  This pass is all that
 * random-K reads of x, TernGrad's scale, and the hook's check of every
 * bucket, so it runs at memory speed. */
#define INLINE static inline __attribute__((always_inline))
#define TARGET_AVX2 __attribute__((target("avx2")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
enum { AHEAD = 2048 };   /* entries prefetched ahead (8 KiB), as the sparse scans */

/* gc__absmax_run with AVX-512 and AVX2 by hand: several loads per
 * iteration and a software prefetch keep more of x in flight than GCC's
 * loop of the plain body, which falls short of a streaming read. */
TARGET_AVX512 static uint32_t absmax_avx512(const float *x, size_t n)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  __m512i m = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    if (i + AHEAD + 64 <= n)
      for (int v = 0; v < 4; v++)
        _mm_prefetch((const char *) (x + i + AHEAD + 16 * v), _MM_HINT_T0);
    __m512i a[4];
    for (int v = 0; v < 4; v++)
      a[v] = _mm512_and_si512(_mm512_loadu_si512((const void *) (x + i + 16 * v)), absmask);
    m = _mm512_max_epu32(m, _mm512_max_epu32(_mm512_max_epu32(a[0], a[1]),
                                              _mm512_max_epu32(a[2], a[3])));
  }
  uint32_t r = _mm512_reduce_max_epu32(m), t = gc__absmax_run(x + i, n - i);
  return t > r ? t : r;
}

TARGET_AVX2 static uint32_t absmax_avx2(const float *x, size_t n)
{
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch((const char *) (x + i + 1024), _MM_HINT_T0);
    m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256((const __m256i *) (x + i)),
                                               absmask));
    m1 = _mm256_max_epu32(m1, _mm256_and_si256(
                                  _mm256_loadu_si256((const __m256i *) (x + i + 8)), absmask));
  }
  uint32_t t[8], m = gc__absmax_run(x + i, n - i);
  _mm256_storeu_si256((__m256i *) t, _mm256_max_epu32(m0, m1));
  for (int j = 0; j < 8; j++)
    m = t[j] > m ? t[j] : m;
  return m;
}
#endif

uint32_t gc__absmax_bits_f32(const float *x, size_t n)
{
  return ISA_KERNEL(absmax, gc__absmax_run)(x, n);
}

INLINE int nonfinite_f64_body(const double *x, size_t n)
{
  uint64_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t u;
    memcpy(&u, x + i, sizeof u);
    bad |= (u & 0x7fffffffffffffffu) >= 0x7ff0000000000000u;
  }
  return bad != 0;
}

DISPATCH(int, nonfinite_f64, nonfinite_f64_body, (const double *x, size_t n), x, n)

/* The flag pass, then the index search only when something is wrong: the
 * common case is a clean gradient. */
static inline int k_nonfinite(const vargs *v, size_t lo, size_t hi, size_t *cnt)
{
  (void) cnt;
  if (v->dt == GC_F64)
    return nonfinite_f64((const double *) v->x + lo, hi - lo);
  return gc__absmax_bits_f32((const float *) v->x + lo, hi - lo) >= 0x7f800000u;
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
  if (dt == GC_F64)
    return sqrt(gc__dnorm2(x, n));
  double s = 0.0;
  const float *xx = x;
  for (size_t i = 0; i < n; i++)
    s += (double) xx[i] * xx[i];
  return sqrt(s);
}

double gc__dnorm2(const double *x, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += x[i] * x[i];
  return s;
}

double gc__ddist2(const double *x, const double *y, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++) {
    double d = x[i] - y[i];
    s += d * d;
  }
  return s;
}
