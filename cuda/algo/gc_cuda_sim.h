/* gc_cuda_sim.h -- the in-process transport on one GPU: a device twin of
 * gc_sim (gc_algo.h) for the parameter-server methods.
 *
 * P workers and one server share one device.  Every message is built and
 * decoded in device memory by the twins of gc_cuda.h, so nothing of size
 * P*n crosses PCIe; only statuses and message lengths come back to the
 * host, for the error checks and the ledger.  Each step repeats
 * gc_sim_step's float operations in its order (workers 0..P-1, the server
 * adds the decoded uplinks in worker order and divides once by P), so the
 * model, the ledger, the support count and the checkpoint bytes are the
 * CPU simulator's bit for bit for the same configuration, start and
 * gradients.  float32 only; n < 2^32.
 *
 * Methods: sgd, uni, bi, downlink, doublesqueeze (uni with DGC momentum
 * too).  Compressors: those with a device twin (gc_cuda_supports).
 * Everything runs on a stream of the simulator's own, which waits for work
 * enqueued earlier on the legacy default stream; gradients written on
 * another stream must be complete before gc_cuda_sim_step is called. */
#ifndef GC_CUDA_SIM_H
#define GC_CUDA_SIM_H
#include <stddef.h>
#include <stdint.h>

#include "gc_algo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_cuda_sim gc_cuda_sim;

/* cfg as for gc_sim_alloc, with dtype GC_F32; h_x0: the start (host,
 * length n), copied.  NULL after reporting: GC_EINVAL (gc_algo_config_check
 * or a compressor setting), GC_EUNSUP (a method other than those above,
 * float64, or a compressor without a device twin; found before any CUDA
 * call, so it is reported the same on a machine without a GPU), GC_ENOMEM,
 * GC_ECUDA (no device, or a device allocation failed). */
gc_cuda_sim *gc_cuda_sim_alloc(const gc_algo_config *cfg, const float *h_x0);
void gc_cuda_sim_free(gc_cuda_sim *s);            /* NULL is a no-op */

/* The workers' model copy (device, length n): where the gradients of the
 * next step are evaluated.  Valid until gc_cuda_sim_free. */
const float *gc_cuda_sim_point(const gc_cuda_sim *s);
/* Copy the model copy to h_x (host, length n).  GC_SUCCESS or GC_ECUDA. */
int gc_cuda_sim_get_point(const gc_cuda_sim *s, float *h_x);

/* One synchronous step from the P device gradients d_grads + p*n (each
 * length n, evaluated at gc_cuda_sim_point) at step size lr.  Returns what
 * gc_sim_step returns for the same inputs: GC_SUCCESS; GC_EINVAL (step
 * counter at 2^32 - 1); GC_EDOM (bad lr, a non-finite gradient or memory,
 * naming the worker and step, or an overflowing average on the server);
 * GC_EDIVERGE (a non-finite iterate: the point is then left as the step
 * made it, as on the CPU); GC_ECUDA.  On an error before the apply the
 * point is unchanged; workers before a failing one keep their step, as on
 * the CPU.  Records the step's messages in the ledger (gc_algo_record_step)
 * and counts the step only on success. */
int gc_cuda_sim_step(gc_cuda_sim *s, const float *d_grads, double lr);

uint32_t gc_cuda_sim_steps_done(const gc_cuda_sim *s);
const gc_ledger *gc_cuda_sim_ledger(const gc_cuda_sim *s);
/* Nonzeros of the server's average at the last step, as
 * gc_server_support_union. */
size_t gc_cuda_sim_support_union(const gc_cuda_sim *s);
/* The last step's downlink message as sent (device memory, *len bytes,
 * gc_server_step's bytes); NULL before the first step.  Valid until the
 * next step. */
const uint8_t *gc_cuda_sim_down_message(const gc_cuda_sim *s, size_t *len);

/* Checkpoints in gc_sim_state_save's byte layout (steps, x, each worker's
 * state, the server's), so that a state saved by either simulator resumes
 * on the other with the same configuration.  save writes
 * gc_cuda_sim_state_bytes(s) bytes (GC_SUCCESS or GC_ECUDA); load returns
 * GC_EBADLEN when len is not that size, else GC_SUCCESS or GC_ECUDA. */
size_t gc_cuda_sim_state_bytes(const gc_cuda_sim *s);
int gc_cuda_sim_state_save(const gc_cuda_sim *s, void *buf);
int gc_cuda_sim_state_load(gc_cuda_sim *s, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* GC_CUDA_SIM_H */
