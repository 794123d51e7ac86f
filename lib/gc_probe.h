/* gc_probe.h -- the one implementation of xi and xi_bi (theory.md 4.2,
 * 4.4), read from a gc_sim around one step, and the non-convex bound of
 * 4.3 that they feed.  The theory trajectories (theory/probe.c) and
 * neural-net training (nn_train.c) both call it, so the two can never
 * compute different quantities under the same name.
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

/* Non-convex bound of theory.md 4.3 on (1/T) sum_{t<T} E||grad f(x_t)||^2:
 *   2 (f0 - f*)/(lr T) + L lr M2 + L^2 lr^2 M2 (gamma + xi)^2/(1 - gamma)^2,
 * valid for L-smooth f >= f*, E||gbar_t||^2 <= M2 and constant lr, with
 * (gamma, xi) = (sqrt(1-K/d), xi) for (a) and (sqrt(1-K_d/d), xi_bi) for
 * (b).  +Inf when T = 0, lr <= 0 or gamma >= 1.  terms (may be NULL)
 * receives the three summands in that order. */
double gc_bound_nonconvex_terms(double f0_gap, double lr, size_t T, double L,
                                double M2, double gamma, double xi,
                                double terms[3]);
double gc_bound_nonconvex(double f0_gap, double lr, size_t T, double L,
                          double M2, double gamma, double xi);

/* ---- the ladder of theory.md 4.9 ---------------------------------------
 * What a run must keep, step by step, for the rungs after the theorem:
 * the running maxima of gamma_hat and ||gbar||, the recursion bound e_t of
 * rung r2_xi run along the path, and the sums of e_t^2, ||E_t||^2 and
 * ||gbar_t||^2.  The theory trajectories and training keep one each. */
typedef struct gc_ladder_path {
  double gh_max, gbar_max;      /* running maxima (gh_max -Inf: none yet)  */
  double rec;                   /* e_t                                     */
  double rec2_sum, mem2_sum, gbar2_sum;
  double rec2_last, mem2_last;  /* the values after the last step          */
  double rec_excess;            /* max_t (||E_t|| - e_t), -Inf: none       */
  double mem_max;               /* max_t ||E_t||                           */
  double gd2_sum, gd2_last;     /* ||grad F(x_t - E_t) - grad F(x_t)||^2   */
  double in_sum, in_last;       /* <grad F(x_t) - grad F(x_t - E_t),
                                    grad F(x_t)>                           */
  double cv_sum;                /* E[gbar_t^T H gbar_t | x_t] (rung 7)     */
  size_t steps;
} gc_ladder_path;

void gc_ladder_path_init(gc_ladder_path *p);
/* After step t: memory = 0 for methods without error memories (E = 0),
 * else gamma_hat_t and the numerator num_t = xi_t lr ||gbar_t|| (model
 * units, gc_xi_sample's num or num_bi), and ||E_{t+1}|| (NaN: not
 * measured).  Returns e_{t+1}:
 *   e_{t+1} = gh (e_t + lr M) + xi_t lr M,  gh, M the running maxima of
 * gamma_hat and ||gbar|| over s <= t (xi_t lr M is num_t where gbar_t = 0),
 * a bound on ||E_{t+1}|| by induction from the recursion of 4.3. */
double gc_ladder_path_step(gc_ladder_path *p, int memory, double gamma_hat,
                           double gbar_norm2, double num, double lr,
                           double mem_norm);
/* Means over t < T = steps of e_t^2 and ||E_t||^2 (E_0 = 0: the values
 * after steps 0..T-2), of ||gbar_t||^2 (steps 0..T-1); NaN before a step. */
double gc_ladder_path_rec2_mean(const gc_ladder_path *p);
double gc_ladder_path_mem2_mean(const gc_ladder_path *p);
double gc_ladder_path_gbar2_mean(const gc_ladder_path *p);
/* After the step that made x_{t+1} and E_{t+1}: with D = grad F(x_{t+1}) -
 * grad F(x_{t+1} - E_{t+1}), ||D||^2 and <D, grad F(x_{t+1})>; their means
 * over t < T (0 at t = 0). */
void gc_ladder_path_gdiff(gc_ladder_path *p, double gdiff2, double inner);
double gc_ladder_path_gdiff2_mean(const gc_ladder_path *p);
double gc_ladder_path_inner_mean(const gc_ladder_path *p);
/* At step t: the curvature term gbar_t^T H gbar_t of the descent lemma
 * (its conditional expectation where known), and its mean over t < T. */
void gc_ladder_path_curv(gc_ladder_path *p, double q);
double gc_ladder_path_curv_mean(const gc_ladder_path *p);

/* The rungs of 4.9 (rung 0, the theorem, included) from measured
 * constants; a rung whose memory bound the measured memories do not meet
 * is NaN. */
typedef struct gc_ladder_in {
  double f0_gap, lr, L;
  size_t T;
  double gamma, xi;             /* rung 0's contraction and xi              */
  double m2;                    /* M^2 of the SGD term, rungs 0-3           */
  double m2_mem;                /* M^2 of the memory term, rungs 0-1        */
  double m2_path;               /* max_t ||gbar_t||^2 (the memory checks)   */
  double gamma_hat;             /* max_t gamma_hat_t (NaN: none: gamma)      */
  double mem_norm_max;          /* max_t ||E_t||                            */
  double rec2_mean, rec_excess; /* rung r2_xi's path recursion              */
  double mem2_mean;             /* mean_{t<T} ||E_t||^2                      */
  double m2_mean;               /* mean_{t<T} E||gbar_t||^2 (rung 4)        */
  double gdiff2_mean;           /* mean_{t<T} ||grad F(x_t - E_t) -
                                   grad F(x_t)||^2 (rung 5; NaN: none)     */
  double inner_mean;            /* mean_{t<T} <grad F(x_t) - grad F(x_t -
                                   E_t), grad F(x_t)> (rung 6; NaN: none)  */
  double curv_mean;             /* mean_{t<T} E gbar_t^T H gbar_t (rung 7;
                                   NaN: none)                               */
} gc_ladder_in;
enum { GC_LADDER_RUNGS = 8 };
void gc_bound_ladder(const gc_ladder_in *in, double rung[GC_LADDER_RUNGS]);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_PROBE_H */
