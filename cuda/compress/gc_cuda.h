/* gc_cuda.h -- GPU twins of the compressors (C linkage, includable from C).
 *
 * The library (lib/) is the oracle: every entry point here computes the
 * same thing as its CPU compressor, with the same tie rule and the same
 * counter-based random numbers (gc_rng.h keyed by element, never by
 * thread), so that selected indices, values and wire bytes are
 * bit-identical to gc_compress_f32().  Vectors are float32 (design.md:
 * gradients run in float32); indices are uint32_t, so n < 2^32.
 *
 * Conventions (style.md §2.3-2.4, CUB's two-phase temporary storage):
 *  - Calls that need scratch take (d_tmp, tmp_bytes).  With d_tmp == NULL
 *    only *tmp_bytes is written and no work is done.  Calls without
 *    scratch take none.
 *  - Every call takes a cudaStream_t and only enqueues work on it: nothing
 *    synchronises with the host unless its name ends in _sync.
 *  - The return value reports argument errors (GC_EINVAL, GC_EBADLEN) and
 *    launch failures (GC_ECUDA, with cudaGetErrorString as the reason).
 *    Data-dependent outcomes (NaN/Inf input -> GC_EDOM, the number of
 *    entries selected, the message length) are only known on the device:
 *    they are written to a gc_cuda_info in device memory, which the caller
 *    reads after synchronising the stream (gc_cuda_info_sync() does both).
 *  - Pointers named d_* are device memory, h_* host memory. */
#ifndef GC_CUDA_H
#define GC_CUDA_H
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#include "gc_compressor.h"
#include "gc_ef.h"
#include "gc_errno.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Map a failing CUDA runtime call to GC_ECUDA (reported through gc_error
 * with cudaGetErrorString) and return it from the enclosing function. */
#define GC_CUDA_TRY(call)                                                 \
  do {                                                                    \
    cudaError_t gc_cuda_err_ = (call);                                    \
    if (gc_cuda_err_ != cudaSuccess) {                                    \
      gc_errorf(__FILE__, __LINE__, GC_ECUDA, "%s: %s", #call,            \
                cudaGetErrorString(gc_cuda_err_));                        \
      return GC_ECUDA;                                                    \
    }                                                                     \
  } while (0)

/* What one device call produced; lives in device memory. */
typedef struct gc_cuda_info {
  int32_t status;     /* GC_SUCCESS, or GC_EDOM when x holds NaN or Inf   */
  uint32_t selected;  /* entries selected (sparsifiers) / sent            */
  uint32_t nnz;       /* nonzeros of the decoded C(x) (sparsifiers)       */
  uint32_t loops;     /* threshold evaluations (gaussk, dgc)              */
  uint64_t len;       /* wire message length in bytes (encoders)          */
} gc_cuda_info;

/* Is a device usable?  GC_SUCCESS, or GC_ECUDA with the runtime's reason
 * copied to why (cap bytes, may be NULL).  Does not report via gc_error:
 * "no device" is an expected answer, not a failure. */
int gc_cuda_available(char *why, size_t cap);

/* Wait for `stream`, copy *d_info to *h_info and return h_info->status
 * (GC_ECUDA when the stream failed). */
int gc_cuda_info_sync(const gc_cuda_info *d_info, gc_cuda_info *h_info,
                      cudaStream_t stream);

/* ---- selection ---------------------------------------------------------
 * Sparsifier outputs are (d_idx, d_val) with indices strictly ascending and
 * d_val[j] = d_x[d_idx[j]]; d_info->selected says how many. */

/* Exact top-k of |x| (gc_compressor_topk): exactly k entries; among equal
 * |x| the lower index wins (ties == GC_TIES_LOW) or the higher one
 * (GC_TIES_HIGH); -0 and +0 tie.  Multi-block radix select on the |x| bit
 * patterns (3 histogram passes, no sort), then a stable compaction, so the
 * result is deterministic.  1 <= k <= n < 2^32.  d_idx, d_val hold k.
 * NaN/Inf in x: d_info->status = GC_EDOM and selected = 0. */
int gc_cuda_topk_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                     size_t n, size_t k, int ties, uint32_t *d_idx,
                     float *d_val, gc_cuda_info *d_info, cudaStream_t stream);

/* Fused error feedback + top-k: d_acc[i] <- d_acc[i] + alpha * d_g[i]
 * (rounded as the CPU does: product, then sum, no FMA), select top-k of the
 * result as gc_cuda_topk_f32, then zero the selected entries of d_acc (the
 * residual acc - C(acc)).  One pass fewer than ef update + topk. */
int gc_cuda_ef_topk_f32(void *d_tmp, size_t *tmp_bytes, float *d_acc,
                        const float *d_g, float alpha, size_t n, size_t k,
                        int ties, uint32_t *d_idx, float *d_val,
                        gc_cuda_info *d_info, cudaStream_t stream);

/* Hard threshold (gc_compressor_threshold): keep |x_i| > v (strict, the
 * comparison done in double as on the CPU).  d_idx, d_val hold n. */
int gc_cuda_threshold_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                          size_t n, double v, uint32_t *d_idx, float *d_val,
                          gc_cuda_info *d_info, cudaStream_t stream);

/* Gaussian-k (gc_compressor_gaussk, theory.md §2.5): threshold from the
 * mean and standard deviation, `loops` >= 1 adjustments, keep |x_i| > thr.
 * The shifted sums follow sparse_gaussk.c's order exactly (16 float lanes
 * per block of 1024, block partials in double, pairwise tree over the
 * blocks), so thr and the selection are the CPU's bit for bit.
 * rho (0 < rho <= 1) is the density the initial z = |Phi^-1(rho/2)| is
 * drawn from, as sparse_gaussk.c draws it: params.density when k was derived from
 * it (k = floor(density n), which can differ from rho n), (double) k / n
 * when params.k is set.  1 <= k <= n.  d_idx, d_val hold n.
 * d_info->loops = threshold evaluations. */
int gc_cuda_gaussk_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                       size_t n, size_t k, double rho, unsigned loops,
                       uint32_t *d_idx, float *d_val, gc_cuda_info *d_info,
                       cudaStream_t stream);

/* DGC sampled threshold (gc_compressor_dgc, theory.md §2.6): the CPU's
 * strided sample of |x| (start from gc_rng for (seed, rng_stream, step)),
 * the exact rank-th largest sample as thr, I = {|x_i| >= thr}, at most ten
 * adaptation rounds (thr <- (float)(0.8 thr) while |I| < 0.8 k; the exact
 * top-k with tie rule `ties` when |I| > 1.3 k), then the first k of I in
 * index order.  1 <= k <= n, 0 < sample_ratio <= 1.  d_idx, d_val hold k.
 * d_info->loops = threshold evaluations; d_info->nnz is left 0 (the
 * encoder counts it). */
int gc_cuda_dgc_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                    size_t n, size_t k, double sample_ratio, int ties,
                    uint64_t seed, uint32_t rng_stream, uint32_t step,
                    uint32_t *d_idx, float *d_val, gc_cuda_info *d_info,
                    cudaStream_t stream);

/* Random-k (gc_compressor_randk / _unbiased): the k distinct indices that
 * sparse_randk.c's Floyd draw takes from gc_rng for (seed, rng_stream, step),
 * computed in parallel, ascending (randk) or in draw order (ascending == 0:
 * randk-unbiased, whose values travel in draw order); d_val[j] =
 * d_x[d_idx[j]] (the n/k factor is applied by the encoder).  d_idx, d_val
 * hold k.  Only these k entries of x are read, so, as on the CPU, only they
 * are checked: NaN/Inf among them gives d_info->status = GC_EDOM. */
int gc_cuda_randk_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                      size_t n, size_t k, uint64_t seed, uint32_t rng_stream,
                      uint32_t step, int ascending, uint32_t *d_idx,
                      float *d_val, gc_cuda_info *d_info, cudaStream_t stream);

/* ---- norms ------------------------------------------------------------- */

/* Deterministic sum of |x_i| and of x_i^2 in double: fixed per-block
 * partial sums in a fixed order, so the result does not depend on timing
 * (it can differ from a sequential CPU sum in the last bits). */
int gc_cuda_norms_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                      size_t n, double *d_l1, double *d_l2sq, double *d_sum,
                      cudaStream_t stream);

/* ---- wire messages ------------------------------------------------------
 * The same bytes as gc_compress_f32(c, x, step, ...) for the instance c
 * (its type, n and parameters are read on the host when the call is
 * enqueued).  d_buf has room for cap >= gc_compressor_max_bytes(c) bytes;
 * d_info->len receives the message length, d_info->status GC_EDOM for
 * NaN/Inf input (and for a QSGD bucket norm that overflows float).
 * QSGD adds each bucket's sum of squares in index order, as the CPU does:
 * buckets run in parallel, but one bucket (params.bucket == 0) is a chain
 * of n dependent adds.  Bytes of d_buf past the message may be rewritten
 * with their own value (QSGD ORs zero bits into the last word it touches).
 * Returns GC_EUNSUP for a type without a GPU encoder. */
int gc_cuda_compress_f32(const gc_compressor *c, void *d_tmp,
                         size_t *tmp_bytes, const float *d_x, uint32_t step,
                         uint8_t *d_buf, size_t cap, gc_cuda_info *d_info,
                         cudaStream_t stream);
/* Does this type have a device twin, i.e. both gc_cuda_compress_f32 and
 * gc_cuda_decompress_add_f32?  (1/0; host-only.)  The twins are found by
 * the type pointer, never by name; every registered type without
 * GC_COMP_NEEDS_SHAPE has one (test_cuda_compress checks the registry). */
int gc_cuda_supports(const gc_compressor_type *T);

/* Decode-accumulate on the device: d_y += scale * C(x) from the message of
 * len bytes at d_buf, the same floats as gc_decompress_add_f32 (float
 * product then sum, no FMA).  `step` as for the encoder (randk-unbiased
 * redraws its indices from it).  d_info->status receives GC_SUCCESS or
 * GC_ECORRUPT, with the CPU's checks; d_y is untouched on GC_ECORRUPT.
 * Two-phase scratch.  Returns GC_EUNSUP for a type without a device twin. */
int gc_cuda_decompress_add_f32(const gc_compressor *c, void *d_tmp,
                               size_t *tmp_bytes, const uint8_t *d_buf,
                               size_t len, uint32_t step, float scale,
                               float *d_y, gc_cuda_info *d_info,
                               cudaStream_t stream);

/* ---- error-feedback memories (gc_ef.h on the device, float32) -----------
 * The same kinds and options as gc_ef_alloc, the same float operations in
 * the same order, so that a worker step on the device sends the CPU's
 * bytes and leaves the CPU's memories bit for bit.  The memories live in
 * device memory; the struct itself is host memory. */
typedef struct gc_cuda_ef gc_cuda_ef;

/* NULL after reporting GC_EINVAL (as gc_ef_alloc), GC_ENOMEM or GC_ECUDA. */
gc_cuda_ef *gc_cuda_ef_alloc(gc_ef_kind kind, size_t n, const gc_ef_options *opt);
void gc_cuda_ef_free(gc_cuda_ef *e);          /* NULL is a no-op */

/* gc_ef_step on the device: acc from d_g (length n) and the memory, the
 * message C(acc) into d_buf (cap >= gc_compressor_max_bytes(c)), then the
 * memory update from the decoded message (enqueued last, not waited for).
 * Synchronises `stream` twice
 * (the host needs the status and the length, as gc_ef_step returns them);
 * *len and info (may be NULL) as gc_ef_step.  Two-phase scratch (d_tmp ==
 * NULL: only *tmp_bytes).  Returns what gc_ef_step would (GC_EDOM for a
 * non-finite g or an overflowing acc, the memory then left as it was),
 * GC_EUNSUP for a compressor without a device twin, GC_ECUDA. */
int gc_cuda_ef_step_sync(gc_cuda_ef *e, gc_compressor *c, void *d_tmp,
                         size_t *tmp_bytes, const float *d_g, double lr,
                         uint32_t step, uint8_t *d_buf, size_t cap,
                         size_t *len, gc_compress_info *info,
                         cudaStream_t stream);

/* Device probes, length n (NULL where the kind has none), as gc_ef.h's:
 * memory eps / v / h, momentum u (DGC), sent = decoded C(acc). */
const float *gc_cuda_ef_memory(const gc_cuda_ef *e);
const float *gc_cuda_ef_momentum(const gc_cuda_ef *e);
const float *gc_cuda_ef_sent(const gc_cuda_ef *e);

#ifdef __cplusplus
}
#endif
#endif /* GC_CUDA_H */
