/* gc_internal.h -- declarations shared between library files (gc__ names,
 * as libuv does); not installed. */
#ifndef GC_INTERNAL_H
#define GC_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "gc_compressor.h"
#ifdef _OPENMP
#include <omp.h>
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

/* The precision templates (sparse_source.c, quant_source.c, wire_source.c,
 * lowrank_source.c) are included once per REAL with SFX = f32 or f64;
 * FN(encode) names encode_f32 or encode_f64 there. */
#define GC__CAT2(a, b) a##_##b
#define GC__CAT(a, b) GC__CAT2(a, b)
#define FN(name) GC__CAT(name, SFX)

/* The vector instruction set of the dispatched loops (isa.c).  Every
 * path gives bit-identical results: they differ in speed only.
 * gc__isa: the best the CPU has, capped by GC_ISA=sse2|avx2|avx512 in the
 * environment (read once); gc__isa_force caps it from now on (at most
 * what the CPU has) and returns the previous choice, for tests and
 * benchmarks; gc__isa_cpu: what the CPU has.  avx512 means F+BW+VL+DQ. */
enum { GC__ISA_SSE2 = 0, GC__ISA_AVX2 = 1, GC__ISA_AVX512 = 2 };
int gc__isa(void);
int gc__isa_cpu(void);
int gc__isa_force(int isa);
int gc__isa_by_name(const char *name);   /* -1 when unknown */

/* Dense messages (identity, fp16, bf16) of this many bytes or more are
 * written with streaming stores on AVX-512 (quant.c): 32 MiB is the L3
 * of the CPUs measured (a Zen CCD), so such a message cannot stay in
 * cache for whoever reads it next, and the line read of a plain store
 * buys nothing.  Tests size their inputs by it. */
enum { GC__STREAM_MIN_BYTES = 1 << 25 };

/* Random-K's dense walk uses AVX-512 VBMI2 where the CPU has it and this
 * is nonzero (sparse.c); tests clear it to see the plain AVX-512 walk
 * write the same bytes. */
extern int gc__sparse_vbmi2;

/* Philox blocks b .. b + nblk - 1 of (seed, stream, step) into out, 16
 * bytes a block: its four words little-endian, the stream gc_rng_u32
 * reads as words and gc_rng_u16 as 16-bit units (rng_words.c), with the
 * vector lanes of instruction set isa (at most gc__isa()); the same bytes
 * on every path. */
void gc__philox_blocks(int isa, uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                       size_t nblk, void *out);
/* out[c] = gc_rng_u32(seed, stream, step, first + c) for c < m, in bulk
 * on the vector paths (rng_words.c); the same words on every path. */
void gc__rng_words(uint64_t seed, uint32_t stream, uint32_t step, uint64_t first,
                   size_t m, uint32_t *out);
const char *gc__isa_name(int isa);

/* Set this thread's gc_last_error without calling the handler: an error
 * reported on a worker thread, passed on to the calling thread. */
void gc__error_restore(const char *reason, int code);

/* Monotonic wall-clock seconds, for the timing columns. */
double gc__now(void);

/* NULL-terminated family lists, one per family file. */
extern const gc_compressor_type *const gc__sparse_types[];
extern const gc_compressor_type *const gc__quant_types[];
extern const gc_compressor_type *const gc__lowrank_types[];

/* k from params: p->k if set, else max(1, floor(density * n)). */
size_t gc__resolve_k(size_t n, const gc_compressor_params *p);

/* Sums whose order a GPU can reproduce bit for bit (cuda/ mirrors it):
 * block partials p[0..m) are combined by the pairwise tree
 *     while m > 1: p[i] = p[2i] + p[2i+1] (i < m/2), an odd m carries
 *     p[m-1] to p[m/2], m = (m+1)/2.
 * The tree is evaluated as the partials stream in: neighbours of equal
 * size merge at once (a binary counter), and what is left folds from the
 * right at the end, which performs the tree's additions in its order.
 * Start from gc__pairwise t = {0}; total of no partials: 0. */
typedef struct gc__pairwise {
  double v[64];      /* subtotals of 2^a, 2^b, ... partials, a > b > ... */
  uint64_t count;
  unsigned top;
} gc__pairwise;

static inline void gc__pairwise_push(gc__pairwise *t, double p)
{
  t->v[t->top++] = p;
  for (uint64_t c = ++t->count; !(c & 1); c >>= 1) {
    t->top--;
    t->v[t->top - 1] += t->v[t->top];
  }
}

static inline double gc__pairwise_total(const gc__pairwise *t)
{
  if (t->top == 0)
    return 0;
  double s = t->v[t->top - 1];
  for (unsigned i = t->top - 1; i-- > 0;)
    s = t->v[i] + s;
  return s;
}

/* 3x3 and 5x5 stride-1 convolution by Winograd F(2x2, 3x3) (winograd.c;
 * a 5x5 kernel as four 3x3 sub-kernels), for the layers of nn.c where it
 * applies: out[n][o] (B x O x Ho x Wo, Ho = H + 2 pad - (k - 1)) = sum
 * over c of the zero-padded in[n][c] (B x C x H x W) correlated with
 * filter (o, c), plus bias[o] (bias may be NULL), for the shapes that
 * gc__wino3_applies accepts (5x5: C and O multiples of 4, or the four
 * sub-kernels' channels would not line up).  U is the transformed
 * filter, 16 x O x C (3x3, from gc__wino3_filter) or 16 x O x 4C (5x5,
 * from gc__wino5_filter).  With turned != 0 (3x3 only), U is the
 * transform of a layer with O inputs and C outputs and the convolution
 * runs its kernel turned 180 degrees with channels swapped: that is the
 * layer's input gradient, computed from dout with pad k - 1 - pad (for
 * 5x5, gc__wino5_filter turns the kernel itself).  Scratch sizes (floats)
 * come from gc__wino3_sizes for the largest batch; bias holds O + 3
 * floats. */
typedef struct gc__wino3_scratch {
  float *V, *M, *work, *bias;
} gc__wino3_scratch;
int gc__wino3_applies(size_t ksize, size_t pad, size_t in_c, size_t out_c);
int gc__wino3_pays(size_t B, size_t Ho, size_t Wo);   /* for this batch? */
void gc__wino3_filter(const float *w, size_t O, size_t C, float *U);
/* U (16 x O2 x 4 C2) of the 5x5 filters w (O x C x 5 x 5): those of w
 * (O2 = O, C2 = C), or turned, of its input gradient (O2 = C, C2 = O);
 * tmp: scratch of 36 O C floats (the work buffer). */
void gc__wino5_filter(const float *w, size_t O, size_t C, int turned,
                      float *tmp, float *U);
void gc__wino3_conv(const float *in, size_t B, size_t C, size_t H, size_t W,
                    size_t pad, size_t k, const float *U, int turned, size_t O,
                    const float *bias, float *out, const gc__wino3_scratch *s);
/* dW (O x C x k x k) of the same convolution from its input and dout, by
 * F(3x3, 2x2) per sub-kernel; Mw is scratch of 16 O C (5x5: 64 O C)
 * floats (the filter buffer). */
void gc__wino3_wgrad(const float *in, const float *dout, size_t B, size_t C,
                     size_t H, size_t W, size_t pad, size_t k, size_t O,
                     float *dW, float *Mw, const gc__wino3_scratch *s);
void gc__wino3_sizes(size_t C, size_t H, size_t W, size_t pad, size_t k,
                     size_t O, size_t max_batch, size_t *nV, size_t *nM,
                     size_t *nwork);

/* Message checks shared by the quantizers and PowerSGD (compressor.c),
 * GC_ECORRUPT with a reason prefixed by `who`: the header (len >= hdr,
 * buf[0] == tag, buf[1] == prec), and the exact length. */
int gc__check_msg(const uint8_t *buf, size_t len, size_t hdr, unsigned tag,
                  unsigned prec, const char *who);
int gc__check_msg_len(size_t len, size_t want, const char *who);

/* The step size gc_worker_apply scales with, for a process that applies
 * the downlink without stepping a worker (sim.c, over a transport). */
struct gc_worker;
void gc__worker_set_lr(struct gc_worker *w, double lr);

#endif /* GC_INTERNAL_H */
