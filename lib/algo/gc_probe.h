/* gc_probe.h -- the one implementation of xi and xi_bi (theory.md 4.2,
 * 4.4), read from a gc_sim around one step.  The theory trajectories
 * (theory/trajectory.c) and neural-net training (train/train.c) both call
 * it, so the two can never compute different quantities under the same
 * name.  The bound of 4.3 they feed is theory/'s (gc_ladder.h).
 *
 * Around gc_sim_step(sim, grads, lr):
 *   gc_xi_probe_before(w, sim);                     server memory delta_t
 *   gc_sim_step(sim, grads, lr);
 *   gc_xi_probe_after(w, sim, grads, lr, &sample);  xi_t, xi_bi,t
 * with, in model units (u = lr for memories kept in gradient units:
 * downlink-only, DoubleSqueeze; 1 otherwise),
 *   xi    = u ||TopK(mean acc^p) - mean m^p|| / (lr ||gbar||)
 *   xi_bi = u ||TopK_d(delta + mean acc^p) - TopK_d(delta + mean m^p)||
 *           / (lr ||gbar||)
 * TopK is the library's magnitude top-K with the K (or density) and tie
 * rule of the uplink (K_d: downlink) parameters, whatever compressor the
 * method uses.  A dense uplink counts its gradient as acc^p = m^p, so
 * xi_bi is exactly 0 there (downlink-only).  delta is 0 for methods
 * without a server memory.  The means are taken in double, in worker
 * order, whatever the sim's dtype: float32 and float64 runs of the same
 * exactly representable trajectory give the same numbers. */
#ifndef GC_PROBE_H
#define GC_PROBE_H
#include <stddef.h>
#include "gc_algo.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

typedef struct gc_xi_probe gc_xi_probe;

/* One step's values.  xi, xi_bi: NaN for methods without error memories of
 * this kind (SGD, dense allreduce, EF21, EF21-BC), +Inf or NaN when
 * lr ||gbar|| = 0.  num, num_bi: the numerators in model units (finite
 * even when gbar = 0), for the error recursion of 4.3. */
typedef struct gc_xi_sample {
  double xi, xi_bi;
  double num, num_bi;
  double gbar_norm2;            /* ||gbar_t||^2, gbar = mean of grads     */
  /* The rest feeds the ladder of theory.md 4.9; NaN where the method has
   * no error memory of 4.3.  a_t = E_t + lr gbar_t is the input of the
   * recursion's reference top-K (mean acc^p, plus delta_t with a server
   * memory, in model units). */
  double gamma_hat;             /* ||a_t - TopK(a_t)|| / ||a_t|| (TopK_d with
                                   a server memory); NaN when a_t = 0     */
  double mem_norm2;             /* ||E_{t+1}||^2 in model units: mean_p eps^p
                                   (+ delta_{t+1}), with delta_{t+1} read as
                                   delta_t + mean m^p - TopK_d(delta_t + mean
                                   m^p): the server's own when its downlink
                                   is that top-K (the case 4.3 covers)     */
  double worker_mem2;           /* mean_p ||eps^p_{t+1}||^2, model units   */
  double server_mem2;           /* ||delta_{t+1}||^2, model units (0: none) */
} gc_xi_sample;

/* For the configuration cfg (kind, n, dtype, workers, up/down params).
 * NULL after reporting GC_ENOMEM or a bad K (K > n). */
gc_xi_probe *gc_xi_probe_alloc(const gc_algo_config *cfg);
void gc_xi_probe_free(gc_xi_probe *w);     /* NULL is a no-op */
/* 1 when the method has xi (worker or server error memories), else 0. */
int gc_xi_probe_defined(const gc_xi_probe *w);
/* 1 when the method keeps a server memory (bi, downlink-only,
 * DoubleSqueeze): its assumption is 4.4's xi_bi with gamma_d. */
int gc_xi_probe_has_server_memory(const gc_xi_probe *w);
size_t gc_xi_probe_k(const gc_xi_probe *w);        /* resolved K   */
size_t gc_xi_probe_k_down(const gc_xi_probe *w);   /* resolved K_d */

/* Copy the server memory delta_t (zero when the method has none). */
void gc_xi_probe_before(gc_xi_probe *w, gc_sim *sim);
/* After the step: grads[p] (length n, the sim's dtype) are the gradients
 * given to gc_sim_step, lr its step size.  GC_SUCCESS, or a compressor's
 * error code. */
int gc_xi_probe_after(gc_xi_probe *w, gc_sim *sim, const void *const *grads,
                      double lr, gc_xi_sample *out);
/* gc_xi_probe_after from vectors gathered elsewhere (a process that holds
 * no worker, under a transport): begin, then for p = 0..P-1 in order
 * worker p's gradient, accumulator and sent message (the sim's dtype,
 * length n; acc NULL: the gradient, sent NULL: acc, as a dense uplink),
 * then end.  The same sums in the same order: the same sample, bit for
 * bit.  gc_xi_probe_before still reads the server's memory. */
void gc_xi_probe_sums_begin(gc_xi_probe *w);
void gc_xi_probe_sums_add(gc_xi_probe *w, const void *grad, const void *acc,
                          const void *sent);
int gc_xi_probe_sums_end(gc_xi_probe *w, double lr, gc_xi_sample *out);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_PROBE_H */
