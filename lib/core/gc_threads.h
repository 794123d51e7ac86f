/* gc_threads.h -- how many OpenMP threads a library loop takes (gc__
 * names; not installed). */
#ifndef GC_THREADS_H
#define GC_THREADS_H
#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __cplusplus
extern "C" {
#endif

/* Nonzero: the threaded loops take the caller's threads at any length
 * (gc__threads_for ignores min, gc__vec_threads the processors), so that
 * tests reach every piece split of short vectors: ragged tails, pieces
 * shorter than a block, more threads than blocks, empty pieces.  Off by
 * default; the bytes never depend on it (tests set it, test_threads.c). */
extern int gc__threads_any_length;

/* The threads a loop over n entries takes: the caller's setting
 * (omp_set_num_threads), at most cap (0: no cap), and one below min
 * entries (unless gc__threads_any_length), inside a parallel region or
 * without OpenMP.  Every threaded loop of the library gives the
 * one-thread bits, so this only decides where the threads pay. */
static inline int gc__threads_for(size_t n, size_t min, int cap)
{
#ifdef _OPENMP
  if ((n < min && !gc__threads_any_length) || omp_in_parallel())
    return 1;
  int T = omp_get_max_threads();
  return cap > 0 && T > cap ? cap : T;
#else
  (void) n; (void) min; (void) cap;
  return 1;
#endif
}

/* Whether a loop over n entries may take threads (gc__threads_for
 * above): where a workspace that only the threaded path uses is sized. */
static inline int gc__threads_may(size_t n, size_t min)
{
  return n >= min || gc__threads_any_length;
}

/* Whether a per-coordinate vector pass of length n is worth the threads
 * (one size for the error-feedback passes and the probes' sums).  2^14,
 * not 2^16: the server's passes over MNIST-MLP's 51k entries ran on one
 * thread of two, and in cache a pass of 16k float32 entries took 2.4 us
 * on one thread and 1.8 on two (y = z + a x, Zen 4): the region's cost
 * is paid back from about there. */
enum { GC__VEC_PAR_MIN = 1 << 14 };

/* The threads of one such pass: all from GC__VEC_PAR_MIN entries, except
 * that with more threads than processors (omp_get_num_procs, asked once) a
 * pass shorter than GC__VEC_PAR_OVER_MIN (the threshold before 2^14) runs
 * on one.  The team then spins only briefly, so each pass of microseconds
 * waits for sleeping threads to wake: MNIST-MLP's server (six passes a
 * step) took 0.15-0.19 s an epoch on 3 threads of 2 cores, 0.05 on 2 of
 * the 3 and 0.03 on one. */
enum { GC__VEC_PAR_OVER_MIN = 1 << 16 };
int gc__vec_threads(size_t n);

/* The pieces of such a pass start at multiples of this many entries, so
 * that two threads never write one cache line of float32 (nor of
 * float64: 16 doubles are two lines). */
enum { GC__VEC_ALIGN = 16 };

#ifdef __cplusplus
}
#endif
#endif /* GC_THREADS_H */
