/* gc_train_run.h -- the driver of `gradcomp train` (run.c): the
 * epoch loop over the library's training steps (gc_nn.h: gc_train_alloc,
 * gc_train_step, gc_train_eval) and the files a run leaves behind. */
#ifndef GC_TRAIN_RUN_H
#define GC_TRAIN_RUN_H
#include "gc_train.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Summary of a run. */
typedef struct gc_train_result {
  size_t epochs_done, steps_done;
  double train_loss, test_acc;
  double epoch_seconds;     /* mean wall time of the epochs run here       */
} gc_train_result;

/* Run (or resume) a training run writing out/log.csv, out/config.json,
 * out/steps.csv (a row every c->log_every steps and at each epoch's end),
 * out/model.npy (float32: the d weights, then the BatchNorm running
 * statistics), out/model.json (each tensor's name, shape and offset in
 * it) and a checkpoint every epoch (checkpoint-eN.bin, or one
 * checkpoint-eN-rR.bin per process under a transport, then
 * checkpoint.json commits it).  Returns GC_SUCCESS, GC_EDIVERGE (NaN/Inf
 * loss: rows so far are kept), or the data/IO/argument errors.
 * The folder: GC_EINVAL if it holds a run (finished or not) and neither
 * resume nor force is set, or both are; force removes the old run's files
 * before the new run writes any.  The process that writes it (rank 0 under
 * a transport) holds out/.lock (flock) for the whole run: GC_EINVAL
 * names the holder while another run has it.  Under a transport, when
 * rank 0 refuses the folder the other processes return GC_SUCCESS having
 * run nothing (rank 0 reports; its status is the job's).  Resume: each checkpoint file
 * records the trajectory's options, its rank and epoch; one of another
 * configuration, rank or epoch, or of the first format, is GC_EINVAL
 * (checkpoint.json's options) or GC_EFORMAT (the file's), naming the
 * option with both values or the rank; log.csv must hold the header and
 * one whole row per epoch up to the checkpoint (GC_EFORMAT names the line)
 * and nothing is written before these checks pass.  Resume without a
 * checkpoint.json starts over unless the log holds more than one epoch.
 * With bounds_every > 0 it also writes out/bounds.json (what was measured
 * and assumed) and out/bounds.csv: per row, T steps so far, the local
 * smoothness L (power iteration on finite-difference Hessian-vector
 * products over a fixed batch; max over the estimates so far), M2 (max
 * and mean of ||gbar_t||^2 over every step), f(x_0) (f* >= 0 for the
 * cross-entropy), xi (uni) or xi_bi (server memory) max over every step,
 * the bound and its three terms, and the mean of ||grad f(x_t)||^2 over
 * full-training-set gradients at sampled steps, with bound/measured.
 * f and its gradients are taken in evaluation mode.  GC_EINVAL names the
 * assumption that fails for methods the bound does not cover (not top-K,
 * momentum, EF21, --resume). */
int gc_train_run(const gc_train_config *c, gc_train_result *res);

#ifdef __cplusplus
}
#endif
#endif /* GC_TRAIN_RUN_H */
