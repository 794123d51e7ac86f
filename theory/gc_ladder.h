/* gc_ladder.h -- the non-convex bound of theory.md 4.3 and its ladder of
 * 4.9, evaluated from constants measured along a run (ladder.c).  The
 * theory trajectories (bounds.c) and training with --bounds (train/) read
 * them, so a rung means the same in both. */
#ifndef GC_LADDER_H
#define GC_LADDER_H
#include <stddef.h>

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

#endif /* GC_LADDER_H */
