/* gc_vec.h -- dtype-dispatching vector passes (vec.c), shared by the error
 * feedback, algorithm, simulator and compressor files (gc__ names; not
 * installed).  Writing each algorithm once over these keeps float32 and
 * float64 on the same code path, with the same summation order. */
#ifndef GC_VEC_H
#define GC_VEC_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __cplusplus
extern "C" {
#endif

/* dtype is GC_F32 or GC_F64 (the element size in bytes).  The passes up
 * to gc__vmean_finish split vectors of GC__VEC_PAR_MIN (gc_threads.h)
 * entries or more over the caller's OpenMP threads (one inside a parallel
 * region); each entry is its own computation, so the results are those of
 * one thread. */
void gc__vzero(int dt, void *y, size_t n);
void gc__vcopy(int dt, void *y, const void *x, size_t n);
/* y = a*x + b*y, element by element. */
void gc__vaxpby(int dt, void *y, double a, const void *x, double b, size_t n);
/* y = a*x (y may be x). */
void gc__vscale(int dt, void *y, double a, const void *x, size_t n);
/* y = z + a*x in one pass (y may alias z); returns the index of the first
 * non-finite y, or n.  Forms error-feedback accumulators and residuals:
 * the finiteness check rides on the pass that writes the vector. */
size_t gc__vadd_scaled(int dt, void *y, const void *z, double a,
                       const void *x, size_t n);
/* Index of the first non-finite entry, or n when all are finite. */
size_t gc__vfirst_nonfinite(int dt, const void *x, size_t n);
/* Finish an average in one pass: y = y / d (a division, so that d = P is
 * exactly rounded), *nnz = nonzeros of y; returns the index of the first
 * non-finite y, or n. */
size_t gc__vmean_finish(int dt, void *y, double d, size_t n, size_t *nnz);
double gc__vnorm(int dt, const void *x, size_t n);
/* The largest |x_i| of float32 x[0, n) as a bit pattern (the patterns of
 * non-negative floats order as their values): at least 0x7f800000 when
 * some entry is NaN or Inf.  gc__absmax_run is the plain loop, inlined in
 * the dispatched bodies that fold it into other passes; gc__absmax_bits_f32
 * the one-thread pass of the instruction set in use. */
static inline __attribute__((always_inline)) uint32_t gc__absmax_run(const float *x, size_t n)
{
  uint32_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, x + i, sizeof b);
    b &= 0x7fffffffu;
    m = b > m ? b : m;
  }
  return m;
}
uint32_t gc__absmax_bits_f32(const float *x, size_t n);
/* ||x||^2 and ||x - y||^2 of double vectors, summed on one thread in
 * index order: the fixed order the probes' numbers are defined by. */
double gc__dnorm2(const double *x, size_t n);
double gc__ddist2(const double *x, const double *y, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* GC_VEC_H */
