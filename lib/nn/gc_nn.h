/* gc_nn.h -- CPU neural nets in float32 for the reference experiments
 * (theory.md section 6): layers, the five reference models and their
 * data.  Training them through the algorithm (gc_sim) is train/'s
 * (gc_train.h).
 *
 * A net is a chain of layers over ONE flat parameter vector w (length d,
 * PyTorch order: each layer's weight then bias) and one flat gradient of the
 * same layout, so a training step is "gradient at gc_sim_point -> grads[p]
 * -> gc_sim_step".  BatchNorm running statistics live in a separate flat
 * vector `stats` (mean then var per BN layer): they are not trained, and are
 * averaged densely across workers outside compression.
 * A gc_nn is a workspace (activations for up to max_batch examples): one per
 * thread; it holds no model state.  Determinism: dropout draws from gc_rng
 * keyed by (seed, worker, step, element), and BLAS runs single-threaded
 * inside training, so results do not depend on the thread count. */
#ifndef GC_NN_H
#define GC_NN_H
#include <stddef.h>
#include <stdint.h>
#include "gc_data.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

typedef enum gc_nn_kind {
  GC_NN_LINEAR = 0,   /* y = W x + b, W [out][in]                          */
  GC_NN_CONV,         /* 2-D conv, stride 1, zero padding; W [oc][ic][k][k] */
  GC_NN_MAXPOOL,      /* 2x2, stride 2 (floor)                             */
  GC_NN_RELU,
  GC_NN_DROPOUT,      /* inverted dropout with probability p (train only)  */
  GC_NN_BATCHNORM,    /* per channel; gamma, beta; eps 1e-5, momentum 0.1  */
  GC_NN_LOGSOFTMAX    /* over the features of each example                 */
} gc_nn_kind;

enum { GC_LOSS_NLL = 0,   /* output is log-probabilities: mean -out[y]     */
       GC_LOSS_CE = 1 };  /* output is logits: log-softmax + NLL inside    */

/* One layer.  Callers fill kind, the input shape (first layer only), out_c
 * (linear/conv), ksize and pad (conv), p (dropout); gc_nn_alloc fills the
 * remaining shapes and the offsets. */
typedef struct gc_nn_layer {
  gc_nn_kind kind;
  size_t in_c, in_h, in_w;     /* per-example input (linear: in_c features) */
  size_t out_c, out_h, out_w;
  size_t ksize, pad;
  double p;
  size_t woff, nw;             /* weight (or gamma) in w                   */
  size_t boff, nb;             /* bias (or beta) in w                      */
  size_t soff;                 /* BN: running mean at stats[soff], var after */
} gc_nn_layer;

typedef struct gc_nn gc_nn;

/* Build a net from L layer specs for batches of at most max_batch.
 * Returns NULL after reporting GC_EINVAL (bad shapes) or GC_ENOMEM. */
gc_nn *gc_nn_alloc(const gc_nn_layer *spec, size_t L, int loss,
                   size_t max_batch);
/* A reference model by name: "mnist-mlp", "fmnist-mlp", "mnist-cnn",
 * "fmnist-cnn", "cifar-vgg19" (theory.md section 6). */
gc_nn *gc_nn_alloc_model(const char *name, size_t max_batch);
void gc_nn_free(gc_nn *nn);                           /* NULL is a no-op */

/* NULL-terminated list of the model names; the data set a model expects. */
const char *const *gc_nn_model_names(void);
const char *gc_nn_model_dataset(const char *name);   /* NULL if unknown */
/* The model trained on a data set when none is named: "cifar-vgg19" for
 * cifar10, "fmnist-mlp" for fmnist, "mnist-mlp" for any other name. */
const char *gc_nn_model_default(const char *dataset);

size_t gc_nn_nparams(const gc_nn *nn);   /* d */
size_t gc_nn_nstats(const gc_nn *nn);    /* BN running statistics */
size_t gc_nn_nlayers(const gc_nn *nn);
const gc_nn_layer *gc_nn_layer_at(const gc_nn *nn, size_t i);
size_t gc_nn_in_dim(const gc_nn *nn);
size_t gc_nn_out_dim(const gc_nn *nn);
size_t gc_nn_max_batch(const gc_nn *nn);

/* PyTorch's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and
 * biases, gamma = 1, beta = 0; running mean 0, var 1 (stats may be NULL).
 * Draws from gc_rng keyed by (seed, layer, 0, element). */
void gc_nn_init(const gc_nn *nn, float *w, float *stats, uint64_t seed);

/* Forward pass of B <= max_batch examples x [B][in_dim].  train != 0: batch
 * statistics (running ones updated in stats) and dropout keyed by
 * (seed, worker, step); train == 0: running statistics, no dropout.
 * Returns the output [B][out_dim] (valid until the next call) or NULL after
 * reporting GC_EINVAL (B too large). */
const float *gc_nn_forward(gc_nn *nn, const float *w, float *stats,
                           const float *x, size_t B, int train,
                           uint64_t seed, uint32_t worker, uint32_t step);

/* Mean loss over the last forward's B examples with labels y; also stores
 * d(loss)/d(output) for gc_nn_backward.  Computed in double. */
double gc_nn_loss(gc_nn *nn, const uint8_t *y);

/* Backward pass of the last forward: grad [out] (length d) is overwritten
 * with d(loss)/dw.  dout: gradient at the output ([B][out_dim]), or NULL for
 * the one stored by gc_nn_loss.  dx [out] (may be NULL): gradient at the
 * input, [B][in_dim].  Returns GC_SUCCESS. */
int gc_nn_backward(gc_nn *nn, const float *w, const float *dout, float *grad,
                   float *dx);

/* Number of the last forward's examples whose argmax equals y. */
size_t gc_nn_correct(const gc_nn *nn, const uint8_t *y);

/* Test accuracy and mean loss over a data set, in eval mode, in batches. */
int gc_nn_evaluate(gc_nn *nn, const float *w, float *stats,
                   const gc_dataset *ds, double *acc, double *loss);

/* BLAS: force one thread (called by training and the benchmark, so results
 * never depend on BLAS threading) and name the kernel in use. */
void gc_nn_blas_single_thread(void);
const char *gc_nn_blas_core(void);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_NN_H */
