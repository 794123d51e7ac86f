/* gc_cuda_nn.h -- the CPU nets of gc_nn.h on the GPU (C linkage).
 *
 * The same five models, the same flat parameter layout (gc_nn_layer
 * offsets, PyTorch order), the same formulas: lib/nn/nn.c is the oracle.
 * Several workers' mini-batches run in one call: G groups of B examples,
 * each group with its own loss, gradient and BatchNorm statistics, exactly
 * as G separate gc_nn_forward/gc_nn_loss/gc_nn_backward calls would give
 * them, up to float rounding (the sums run in another order; tests state
 * the tolerance).  Dropout masks are bit-identical to the CPU's (gc_rng
 * keyed by element).
 *
 * GEMMs go through cuBLAS in plain float32 (no TF32); every other
 * reduction runs in a fixed order without float atomics, so the same
 * inputs give the same bits on every run (cuBLAS guarantees this for one
 * toolkit version on one GPU model).  Entry points taking d_* pointers
 * only enqueue work on `stream`; the type table gc_cuda_nn_device works on
 * host pointers and synchronises.  Errors: GC_EINVAL for arguments,
 * GC_ENOMEM, GC_ECUDA (CUDA or cuBLAS failure, or no device), reported
 * through gc_error first. */
#ifndef GC_CUDA_NN_H
#define GC_CUDA_NN_H
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#include "gc_errno.h"
#include "gc_train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_cuda_nn gc_cuda_nn;

/* A workspace for `model` (gc_nn_alloc_model's names) and up to `groups`
 * mini-batches of up to `batch` examples each: activations, scratch and a
 * cuBLAS handle.  NULL after reporting GC_EINVAL (unknown model, checked
 * before CUDA is touched; groups or batch 0), GC_ENOMEM or GC_ECUDA
 * (including "no device"). */
gc_cuda_nn *gc_cuda_nn_alloc(const char *model, size_t groups, size_t batch);
void gc_cuda_nn_free(gc_cuda_nn *nn);                 /* NULL is a no-op */

size_t gc_cuda_nn_nparams(const gc_cuda_nn *nn);      /* d              */
size_t gc_cuda_nn_nstats(const gc_cuda_nn *nn);       /* ns             */
size_t gc_cuda_nn_in_dim(const gc_cuda_nn *nn);
size_t gc_cuda_nn_out_dim(const gc_cuda_nn *nn);

/* Losses and gradients of G <= groups mini-batches of B <= batch examples
 * (gc_nn_device_type.grads on device memory).  d_x [G B][in_dim], d_y
 * [G B] labels; group g is rows g B .. g B + B - 1.  d_w [d].
 * d_loss [out] G doubles: the mean loss of group g; d_grads [out] [G][d]:
 * d loss[g] / dw.
 * train != 0: BatchNorm on the group's batch statistics, the running
 * statistics of group g at d_stats + g ns updated in place; dropout keyed
 * by (seed, worker0 + g, step) as gc_nn_forward for worker worker0 + g.
 * train == 0: evaluation mode, d_stats ns long and only read, no dropout.
 * d_stats may be NULL when ns == 0.  Returns GC_SUCCESS, GC_EINVAL (G or B
 * 0 or too large), GC_ECUDA. */
int gc_cuda_nn_grads(gc_cuda_nn *nn, const float *d_w, float *d_stats,
                     const float *d_x, const uint8_t *d_y, size_t G, size_t B,
                     int train, uint64_t seed, uint32_t worker0, uint32_t step,
                     double *d_loss, float *d_grads, cudaStream_t stream);

/* Evaluation-mode forward of n <= groups * batch examples d_x [n][in_dim]
 * with labels d_y: *d_correct += the number whose first maximal output is
 * the label (gc_nn_correct's rule), *d_loss_sum += the sum of their losses
 * (double, added in example order).  n == 0 does nothing.  Returns
 * GC_SUCCESS, GC_EINVAL (n too large), GC_ECUDA. */
int gc_cuda_nn_eval_batch(gc_cuda_nn *nn, const float *d_w,
                          const float *d_stats, const float *d_x,
                          const uint8_t *d_y, size_t n, uint32_t *d_correct,
                          double *d_loss_sum, cudaStream_t stream);

/* The device type for training (gc_train_config.device), name "cuda": its
 * alloc returns a gc_cuda_nn that also holds a stream and pinned and
 * device staging buffers; grads and evaluate take host pointers, copy in
 * and out and synchronise.  evaluate gives gc_nn_evaluate's accuracy and
 * mean loss (the sum of per-example losses over ds->n). */
extern const gc_nn_device_type gc_cuda_nn_device;

#ifdef __cplusplus
}
#endif
#endif /* GC_CUDA_NN_H */
