/* gc_theory.h -- synthetic problems, probes along trajectories, bound
 * formulas and the exact-arithmetic helpers of the counterexamples
 * (docs/theory.md sections 3-5 and 7).
 *
 * Every trajectory is run by the library's in-process transport (gc_sim):
 * this module never re-implements an algorithm.  It only evaluates
 * gradients of its problems, reads the probe views of gc_algo.h and turns
 * them into measured constants (gc_theory_<check>() return them; tiny
 * drivers in experiments/ and counterexamples/ print them).
 * All arithmetic is float64.  Functions return GC_SUCCESS or a gc_errno.h
 * code and never exit. */
#ifndef GC_THEORY_H
#define GC_THEORY_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "gc_algo.h"
#include "gc_ladder.h"
#include "gc_probe.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- problems ------------------------------------------------------------
 * f_p(x) = 1/2 (x - b_p)^T A_p (x - b_p), F = (1/P) sum_p f_p.
 * DIAG stores the diagonals of A_p (P x n); DENSE stores A_p (P x n x n,
 * row-major, exactly symmetric). */
enum { GC_PROBLEM_DIAG = 0, GC_PROBLEM_DENSE = 1 };

typedef struct gc_problem {
  char name[96];
  int kind;
  size_t workers;     /* P */
  size_t n;           /* d */
  double *a;          /* DIAG: P*n; DENSE: P*n*n */
  double *b;          /* P*n targets */
  double *x0;         /* n start */
  double sigma;       /* Gaussian gradient noise (std per coordinate) */
  uint64_t seed;      /* noise key: gc_rng_normal(seed, worker, step, i) */
  /* filled by gc_problem_finalize(): */
  double L, mu;       /* largest/smallest eigenvalue of Abar = mean A_p */
  double L_tilde;     /* sqrt((1/P) sum_p L_p^2), L_p = ||A_p||_2 */
  double *xstar;      /* n, minimiser of F: Abar x* = (1/P) sum A_p b_p */
  double fstar;       /* F(x*) */
  double *work;       /* 2n doubles of scratch for the evaluations below */
} gc_problem;

/* Allocate a zeroed problem (a, b, x0, xstar, work allocated). NULL on
 * error. */
gc_problem *gc_problem_alloc(size_t workers, size_t n, int kind);
void gc_problem_free(gc_problem *p);   /* NULL is a no-op */
/* Exact constants from LAPACK: L and mu from a symmetric eigensolver
 * (dsyev) of Abar, x* from a Cholesky solve (dposv), F*.  GC_EDOM if Abar
 * is not positive definite (F has no minimiser). */
int gc_problem_finalize(gc_problem *p);

/* Quadratic with prescribed spectra: A_p = Q_p diag(lambda_p) Q_p^T, with
 * Q_p Haar-distributed (QR of a Gaussian matrix from the counter RNG keyed
 * by (seed, 1000 + p), columns sign-fixed by diag(R) > 0).  lambda: P*n
 * eigenvalues (row p for worker p).  b_p ~ hetero * N(0, I), x0 ~
 * x0_scale * N(0, I), all from the counter RNG. */
int gc_problem_quadratic(size_t workers, size_t n, const double *lambda,
                         double hetero, double x0_scale, double sigma,
                         uint64_t seed, gc_problem **out);
/* The reference toy of section 5.1: P = 3, d = 100, f_p = 1/2||x - a_p 1||^2,
 * a = (1,5,10), x0 = 20*1 + x0_sigma * N(0,I) (counter RNG, stream 0). */
int gc_problem_toy(double x0_sigma, uint64_t seed, gc_problem **out);
/* The 2-d example of section 5.2: P = 2, b = (0,-1), (0,1), x0 = (-3,-1). */
int gc_problem_cycle9(gc_problem **out);
/* A problem from DIR/A.npy (shape (P,d,d), (d,d) shared, or (P,d) diagonals;
 * absent: identity), DIR/b.npy (shape (P,d)) and DIR/x0.npy (shape (d)). */
int gc_problem_load_npy(const char *dir, gc_problem **out);
/* "toy", "cycle9", "npy:DIR" or "quadratic[:key=val,...]" with keys
 * P, d, L, mu (spectrum between mu and L), spectrum=geom|lin, hetero, x0,
 * sigma, seed, rotate=0|1 (0: diagonal problem, any d).  seed is the
 * default for the spec's seed.  GC_EINVAL names the bad part. */
int gc_problem_parse(const char *text, uint64_t seed, gc_problem **out);

/* The evaluations below run every step, so they allocate nothing: they use
 * p->work, and one problem must not be evaluated by two threads at once. */
double gc_problem_value(const gc_problem *p, const double *x);   /* F(x) */
/* F(x) - F* computed as 1/2 (x-x*)^T Abar (x-x*): no cancellation. */
double gc_problem_gap(const gc_problem *p, const double *x);
/* Exact gradient of f_w at x into g (length n). */
void gc_problem_worker_grad(const gc_problem *p, size_t w, const double *x,
                            double *g);
/* Stochastic gradient of f_w: g (the exact gradient) += sigma * N(0,I)
 * keyed by (seed, w, step); nothing when sigma = 0. */
void gc_problem_add_noise(const gc_problem *p, size_t w, uint32_t step,
                          double *g);
/* Gradient of F at x. */
void gc_problem_grad(const gc_problem *p, const double *x, double *g);

/* ---- trajectories with probes -------------------------------------------
 * One row per step t, computed around gc_sim_step():
 *   f_gap, grad_norm2   at the model x_t before the step (||grad F||^2 exact)
 *   xi       (4.2)  ||TopK(mean acc) - mean m^p|| / ||u gbar||
 *   xi_bi    (4.4)  ||TopK_d(delta + mean acc) - TopK_d(delta + mean m^p)||
 *                   / ||u gbar||
 *            u = lr when memories are in model units (uni, bi), 1 when in
 *            gradient units (downlink, DoubleSqueeze); NaN where the method
 *            has no such quantity (SGD, EF21, collectives).  TopK by
 *            magnitude via the library's topk, K of the uplink (K_d of the
 *            downlink), with the configured tie rule.
 *   mem_norm   ||E_{t+1}||, E = mean eps^p (+ delta), times u
 *   mem_bound  gamma ||E_t|| + (gamma + xi) lr ||gbar_t||  (4.3; bi uses
 *              gamma_d and xi_bi).  mem_norm <= mem_bound is property 13.
 *   bytes_up/down, support_union  from the ledger and the server view. */
typedef struct gc_probe_row {
  uint32_t step;
  double f_gap, grad_norm2, xi, xi_bi, mem_norm, mem_bound;
  uint64_t bytes_up, bytes_down;
  size_t support_union;
  double gbar_norm2;            /* ||gbar_t||^2 of the stochastic gradients */
  double delta_up_min, delta_up_mean;  /* 1-||C(acc)-acc||^2/||acc||^2 over workers */
  double delta_down;            /* same for the server's input (NaN if none) */
  /* the ladder of 4.9 */
  double gamma_hat;             /* ||a_t - TopK(a_t)||/||a_t||, a_t = E_t + lr
                                   gbar_t, with the recursion's top-K (K_d
                                   with a server memory); NaN: no memory   */
  double rec_bound;             /* e_{t+1} of rung r2_xi (4.9): a bound on
                                   ||E_{t+1}|| with the running maxima of
                                   gamma_hat and ||gbar|| and this xi_t   */
  double float_loss;            /* ||(x_t - x_{t+1}) - u_t|| / ||u_t|| for the
                                   update u_t the server applied: 1 when it
                                   rounds to no change (NaN: u_t = 0)      */
} gc_probe_row;

/* Aggregates over all steps done so far. */
typedef struct gc_probe_summary {
  size_t steps;
  double f0_gap;                 /* F(x_0) - F* */
  double final_gap;              /* F(x_T) - F* after the last step */
  double min_grad2, mean_grad2;  /* over t < T */
  double M2;                     /* max_t ||gbar_t||^2 */
  double xi_max, xi_mean;        /* over steps where xi is finite */
  double xi_bi_max, xi_bi_mean;
  double delta_up_worst, delta_up_mean;     /* empirical contraction 4.1 */
  double delta_down_worst, delta_down_mean;
  double mem_excess_max;         /* max(mem_norm - mem_bound) (<= 0 expected) */
  double mem_norm_max;           /* max_t ||E_t|| */
  const char *recursion_fails;   /* why mem_bound is no bound here, or NULL */
  size_t draws;                  /* M of the multi-draw probes (0: off)      */
  double delta_up_draws;         /* min over the path of 1 - (mean_M + 3 standard
                                    errors) of ||C(x)-x||^2/||x||^2 on the
                                    uplink inputs (random C; NaN otherwise)  */
  double delta_down_draws;       /* same on the server's inputs             */
  double support_mean;           /* mean |S| */
  double gamma, gamma_d;         /* sqrt(1-K/d), sqrt(1-K_d/d) */
  size_t k, k_down;              /* resolved K, K_d (0 if not sparse) */
  double grad2_max;              /* max_t ||grad F(x_t)||^2 (exact)          */
  double worker_grad2_max_mean;  /* (1/P) sum_p max_t ||grad f_p(x_t)||^2 of
                                    the exact worker gradients (no noise)  */
  double wavg_gap;               /* F(xbar_T) - F*, xbar_T = sum_t w_t x_t /
                                    sum_t w_t, w_t = (a+t)^2 over t < T
                                    (gc_theory_run_set_average; NaN: off)  */
  /* the ladder of 4.9, over t < T (E_0 = 0) */
  double gamma_hat_max;          /* max_t gamma_hat (NaN: never measured)   */
  double mem2_mean;              /* (1/T) sum_{t<T} ||E_t||^2                */
  double rec2_mean;              /* (1/T) sum_{t<T} e_t^2 of rung r2_xi      */
  double rec_excess_max;         /* max_t (||E_t|| - e_t), <= 0 expected     */
  double gbar2_mean;             /* (1/T) sum_{t<T} ||gbar_t||^2             */
  double gdiff2_mean;            /* (1/T) sum_{t<T} ||Abar E_t||^2           */
  double inner_mean;             /* (1/T) sum_{t<T} <Abar E_t, grad F(x_t)>  */
  double curv_mean;              /* (1/T) sum_{t<T} E[gbar_t^T Abar gbar_t |
                                    x_t] = grad F^T Abar grad F + sigma^2
                                    tr(Abar)/P                              */
  double float_loss_share;       /* sum_t ||lost_t|| / sum_t ||u_t||: the share
                                    of the path's movement lost to rounding */
  double float_loss_max;         /* max_t float_loss (0 when never defined) */
  size_t float_loss_step;        /* the step of that maximum                */
  double float_loss_x;           /* max_i |x_t,i| at that step              */
} gc_probe_summary;

typedef struct gc_theory_run gc_theory_run;

/* Start a run of cfg on prob (cfg->n, workers and dtype are overwritten
 * from the problem: n = d, workers = P, dtype = GC_F64).  The start is
 * prob->x0 unless x0 != NULL.  NULL on error (reported). */
gc_theory_run *gc_theory_run_alloc(const gc_problem *prob,
                                   const gc_algo_config *cfg,
                                   const double *x0);
/* The same on transport tr (gc_transport.h), for one process of a run
 * spread over several: it steps the workers tr holds.  Each worker's probe
 * values travel as a record (gather_aux, required) to the leader, the
 * process where gather_aux lands them (one of those that run the server
 * step: rank 0's under MPI), which alone fills the rows and the summary:
 * bit-identical to the in-process run's.  Every process must make the
 * same calls (gc_theory_run_set_draws included) with the same step sizes;
 * the rows of the others hold the step number only.  GC_EINVAL for
 * workers outside [0, P), a transport without gather_aux, or a leader
 * that does not run the server step. */
struct gc_transport;
gc_theory_run *gc_theory_run_alloc_transport(const gc_problem *prob,
                                             const gc_algo_config *cfg,
                                             const double *x0,
                                             const struct gc_transport *tr,
                                             int leader);
void gc_theory_run_free(gc_theory_run *r);
/* One step with step size lr; fills row (may be NULL).  GC_EDIVERGE if the
 * model becomes NaN/Inf, other codes from gc_sim_step. */
int gc_theory_run_step(gc_theory_run *r, double lr, gc_probe_row *row);
void gc_theory_run_summary(const gc_theory_run *r, gc_probe_summary *s);
/* Turn on the multi-draw contraction probe of 4.1 for random compressors:
 * at every step each input of a random compressor is compressed `draws`
 * more times by a second instance with another seed, and the mean
 * contraction is recorded (delta_*_draws).  Call before the first step.
 * GC_EINVAL if already set to another value or after a step, GC_ENOMEM. */
int gc_theory_run_set_draws(gc_theory_run *r, size_t draws);
gc_sim *gc_theory_run_sim(gc_theory_run *r);
/* Keep the weighted average of the models x_0..x_{T-1} with weights
 * w_t = (a+t)^2 (Stich et al. 2018, Theorem 2.4), reported as wavg_gap.
 * Call before the first step; GC_EINVAL if set twice, after a step or with
 * a < 0, GC_ENOMEM. */
int gc_theory_run_set_average(gc_theory_run *r, double shift);

/* ---- step-size schedules --------------------------------------------------
 * CONSTANT: lr_t = lr.  INVERSE: lr_t = c/(a+t), t = 0, 1, ...; the steps of
 * Mem-SGD (Stich, Cordonnier, Jaggi 2018, Theorem 2.4) are c = 8/mu. */
enum { GC_LR_CONSTANT = 0, GC_LR_INVERSE = 1 };
typedef struct gc_lr_schedule {
  int kind;
  double lr;          /* CONSTANT */
  double c, a;        /* INVERSE: c > 0, a > 0 */
  int mem_sgd;        /* INVERSE written as "mem-sgd:a=A" (c = 8/mu) */
} gc_lr_schedule;

void gc_lr_schedule_constant(double lr, gc_lr_schedule *s);
/* Parse "constant" (the step lr), "inverse:c=C,a=A" or "mem-sgd:a=A"
 * (c = 8/mu with the problem's mu).  GC_EINVAL names the bad part. */
int gc_lr_schedule_parse(const char *text, double lr, double mu,
                         gc_lr_schedule *s);
double gc_lr_schedule_at(const gc_lr_schedule *s, size_t t);
/* The schedule as text without commas ("constant:lr=0.1",
 * "mem-sgd:a=40;c=0.8", "inverse:c=1;a=3"), for tables and CSV fields. */
void gc_lr_schedule_name(const gc_lr_schedule *s, char *buf, size_t cap);

/* Write the trajectory CSV header / one row (then fflush). */
void gc_probe_csv_header(FILE *f);
void gc_probe_csv_row(FILE *f, const gc_probe_row *row);

/* ---- contraction (4.1, 4.5) ----------------------------------------------- */
/* 1 - ||C(x)-x||^2/||x||^2 for one input (NaN if x = 0), with a given
 * compressor instance (f64), at `step`.  scratch: n doubles; buf: message
 * capacity gc_compressor_max_bytes(c). */
int gc_theory_delta(gc_compressor *c, const double *x, uint32_t step,
                    uint8_t *buf, double *scratch, double *delta);
/* The same, also returning what the compress call reported (the entries
 * sent, selected, is the achieved count of Gaussian-k and DGC). */
int gc_theory_delta_info(gc_compressor *c, const double *x, uint32_t step,
                         uint8_t *buf, double *scratch, double *delta,
                         gc_compress_info *info);
/* The Gaussian tail share 1 - rho - 2 tau phi(tau), tau = Phi^{-1}(1-rho/2):
 * ||x - TopK(x)||^2/||x||^2 for i.i.d. N(0,1) entries as d -> infinity. */
double gc_theory_gauss_share(double rho);

/* Input distributions of `gradcomp theory contraction`. */
enum { GC_DIST_GAUSSIAN = 0, GC_DIST_LAPLACE, GC_DIST_STUDENT_T3,
       GC_DIST_EQUAL, GC_DIST_COUNT };
const char *gc_theory_dist_name(int dist);
/* Fill x (length n) with trial number `trial` of distribution dist. */
void gc_theory_fill(int dist, uint64_t seed, uint32_t trial, double *x,
                    size_t n);

/* ---- bounds ---------------------------------------------------------------- *
 * The formula functions take plain numbers; the assumption checks and the
 * choice of which bound applies to a run are below them (docs/theory.md
 * 4.7 lists each bound, its source, its assumptions and what it
 * bounds).  The non-convex bound of 4.3 is gc_bound_nonconvex in
 * gc_probe.h: the library evaluates it during training too. */
/* EF-SGD (Karimireddy et al., 4.6), bound on min_t ||grad f||^2:
 * 2 (f0-f*)/(lr (T+1)) + lr L s2 + 4 lr^2 L^2 s2 (1-delta)/delta^2 (the
 * second term re-derived: the statement as recalled has lr L s2/2). */
double gc_bound_ef_sgd(double f0_gap, double lr, size_t T, double L,
                       double s2, double delta);
/* EF21 (section 3 d): 2 (f0-f*)/(lr T) + G0/(theta T), theta =
 * 1 - sqrt(1-delta); +Inf when lr > 1/(L + L_tilde sqrt(beta/theta)). */
double gc_bound_ef21(double f0_gap, double lr, size_t T, double L,
                     double L_tilde, double delta, double G0);
/* Mem-SGD (Stich, Cordonnier, Jaggi 2018, Theorem 2.4; docs/theory.md
 * 4.6), bound on E f(xbar_T) - f* for steps 8/(mu(a+t)), a k-contraction
 * with d/k = dk and shift a, alpha > 4 with (alpha+1) dk + rho/(rho+1) <= a:
 * 4T(T+2a) G2/(mu S_T) + mu a^3 D2/(8 S_T)
 *   + 64 T (1 + 2L/mu) (4 alpha/(alpha-4)) dk^2 G2/(mu S_T),
 * S_T = sum_{t<T} (a+t)^2, D2 = ||x_0 - x*||^2. */
double gc_bound_mem_sgd(size_t T, double a, double mu, double L, double G2,
                        double D2, double dk, double alpha);
/* The largest alpha > 4 (to grid resolution, checked exactly) with
 * (alpha+1) dk + rho/(rho+1) <= a, rho = 4 alpha/((alpha-4)(alpha+1)^2):
 * the last term of gc_bound_mem_sgd falls with alpha.  NaN if none. */
double gc_theory_mem_sgd_alpha(double a, double dk);
/* Unbiased compressors with worker error feedback (4.8, derived), bound on
 * mean_t E||grad F(x_t)||^2 for P workers with independent draws and
 * omega < 1: 2 (f0-f*)/(lr T) + L lr M2 + L^2 lr^2 omega Mp2/((1-sqrt
 * omega)^2 P), M2 >= E||gbar_t||^2, Mp2 = (1/P) sum_p max_t E||g_p,t||^2. */
double gc_bound_omega_ef(double f0_gap, double lr, size_t T, double L,
                         double M2, double Mp2, double omega, size_t P);
/* The variance omega of an unbiased compressor with these parameters on
 * vectors of length d (docs/theory.md 2.3, 2.7, 2.9): randk-unbiased
 * d/K - 1, qsgd min(b/s^2, sqrt(b)/s) with b the bucket (d without),
 * terngrad sqrt(d) - 1 without clipping.  NaN for the others (biased, or
 * no worst-case omega). */
double gc_theory_omega(const gc_compressor_type *t, const gc_compressor_params *p,
                       size_t d);

/* NULL when the memory recursion of 4.3, ||E_{t+1}|| <= gamma ||E_t|| +
 * (gamma + xi) lr ||gbar_t||, holds on every path of cfg's algorithm (and so
 * mem_bound is a bound), else the reason: the downlink compressor of bi,
 * downlink-only and DoubleSqueeze must be the top-K that xi_bi is measured
 * against; EF21 keeps no such memory.  (In theory/trajectory.c, which measures
 * the recursion; the bounds read it from there.) */
const char *gc_theory_recursion_failure(const gc_algo_config *cfg);

/* Everything the assumption checks need to know about a run (or R runs
 * with different seeds), filled by gc_theory_bounds_run(). */
typedef struct gc_bound_case {
  gc_algo_kind kind;
  const gc_compressor_type *up, *down;
  int ef21_init;                 /* cfg.ef21_init */
  double momentum;               /* cfg.momentum: > 0 is DGC's memory */
  size_t P, d, k, k_down, T;     /* T: steps of each run */
  size_t runs, draws;            /* R runs averaged; M draws of the probes */
  double lr;
  int constant_lr;               /* 1: the same lr at every step */
  double L, L_tilde, mu, sigma;  /* from the problem */
  double f0_gap;                 /* F(x_0) - F* */
  double M2;                     /* max over runs and steps of ||gbar_t||^2 */
  double gamma, gamma_d;         /* sqrt(1-K/d), sqrt(1-K_d/d) */
  double xi_max, xi_bi_max;      /* max over runs */
  double mem_norm_max;           /* max over runs of max_t ||E_t|| */
  const char *recursion_fails;   /* gc_theory_recursion_failure() */
  double delta_up, delta_down;   /* worst contraction along the paths */
  double delta_up_draws, delta_down_draws;   /* multi-draw probes (random C) */
  double G0;                     /* EF21: mean over runs of (1/P) sum
                                    ||h_i^0 - grad f_i(x_0)||^2 */
  double min_grad2;              /* min_t of the run mean of ||grad F(x_t)||^2 */
  double mean_grad2;             /* mean_t of the same */
  gc_lr_schedule schedule;       /* the steps actually used */
  double G2;                     /* max over runs and t of E[||gbar_t||^2 | x_t]
                                    = ||grad F(x_t)||^2 + sigma^2 d/P */
  double worker_G2;              /* max over runs of (1/P) sum_p max_t
                                    (||grad f_p(x_t)||^2 + sigma^2 d) */
  double x0_dist2;               /* ||x_0 - x*||^2 */
  double wavg_gap;               /* mean over runs of F(xbar_T) - F*, w_t =
                                    (a+t)^2 of an INVERSE schedule (else NaN) */
  double omega_up;               /* gc_theory_omega of the uplink (NaN: none) */
  /* the ladder of 4.9 (means over runs of each run's mean over t < T) */
  double gamma_hat;              /* max over runs and steps of gamma_hat_t  */
  double mem2_mean;              /* (1/T) sum_{t<T} ||E_t||^2               */
  double rec2_mean;              /* (1/T) sum_{t<T} e_t^2 of rung r2_xi     */
  double rec_excess;             /* max over runs of max_t (||E_t|| - e_t)  */
  double gdiff2_mean;            /* (1/T) sum_{t<T} ||Abar E_t||^2 (= ||grad F
                                    (x_t - E_t) - grad F(x_t)||^2)          */
  double inner_mean;             /* (1/T) sum_{t<T} <Abar E_t, grad F(x_t)>  */
  double curv_mean;              /* (1/T) sum_{t<T} E[gbar_t^T Abar gbar_t |
                                    x_t] = grad F^T Abar grad F + sigma^2
                                    tr(Abar)/P                              */
  double M2_path;                /* an upper estimate of E max_t ||gbar_t||^2
                                    (4.7: the measured gradient part plus the
                                    noise's expected maximum; M2 without
                                    noise)                                  */
  /* floating point (4.7): the share of the updates lost to rounding */
  double float_loss;             /* max over runs of float_loss_share        */
  double float_loss_step_max;    /* that run's largest per-step loss ...     */
  size_t float_loss_step;        /* ... its step ...                         */
  double float_loss_x;           /* ... and max_i |x_i| there                */
} gc_bound_case;

/* What a bound is a bound on. */
enum { GC_BOUND_ON_MIN = 0,      /* min_t ||grad F(x_t)||^2  */
       GC_BOUND_ON_MEAN = 1,     /* mean_t ||grad F(x_t)||^2 */
       GC_BOUND_ON_WAVG_GAP = 2 };   /* F(xbar_T) - F*, weighted average */
/* Short label of what a row bounds: "min_t_grad2", "mean_t_grad2",
 * "wavg_fgap". */
const char *gc_bound_on_name(int on);

typedef struct gc_bound_row {
  const char *name;       /* "nonconvex_4.3", "ef_sgd_4.6", "ef21_3d",
                             "mem_sgd_2.4", "omega_ef_4.8" */
  const char *source;     /* short citation */
  int on;                 /* GC_BOUND_ON_* */
  int expectation;        /* 1: bounds E[...] (measured: mean over runs);
                             0: holds on the path itself */
  double gamma, xi, delta;/* the constants put into the formula (NaN: unused) */
  double alpha;           /* mem_sgd_2.4: the alpha chosen; omega_ef_4.8:
                             omega (NaN: unused) */
  double value;           /* the bound; NaN when an assumption fails */
  double measured;        /* the measured quantity it bounds */
  char failed[192];       /* "" or the failed assumption with the measured
                             value, e.g. "P = 2 (theorem: one worker)";
                             no commas, so CSV readers need no quoting */
  double rung[8];         /* the ladder of 4.9 (GC_RUNG_*): rung[0] = value;
                             the others only for nonconvex_4.3, NaN where a
                             rung's own check fails or the row is refused */
} gc_bound_row;

/* The rungs of 4.9: the theorem, then one assumption at a time replaced by
 * its value measured along the run. */
enum { GC_RUNG_THEOREM = 0,   /* gamma = sqrt(1-K/d), xi_max, M^2 max      */
       GC_RUNG_DELTA = 1,     /* + the measured contraction gamma_hat      */
       GC_RUNG_XI = 2,        /* + xi_t per step (recursion run on the path) */
       GC_RUNG_MEMORY = 3,    /* + the measured ||E_t||^2                  */
       GC_RUNG_M2 = 4,        /* + ||gbar_t||^2 per step (mean, not max)   */
       GC_RUNG_GRADIENT = 5,  /* + ||grad F(x~_t) - grad F(x_t)||^2 for
                                 L^2 ||E_t||^2                             */
       GC_RUNG_INNER = 6,     /* + <grad F(x_t) - grad F(x~_t), grad F(x_t)>
                                 without the Young step                    */
       GC_RUNG_CURVATURE = 7, /* + gbar^T Abar gbar for L ||gbar||^2 in the
                                 descent lemma                              */
       GC_RUNG_COUNT = 8 };
/* "r0_theorem", "r1_delta", "r2_xi", "r3_memory", "r4_m2", "r5_gradient",
 * "r6_inner", "r7_curvature". */
const char *gc_rung_name(int rung);
/* E max_{t<T} X_t for T independent chi-square(d) variables, bounded above
 * by min over 0 < l < 1/2 of (ln T - (d/2) ln(1 - 2l))/l (Jensen on
 * exp(l max X)); d at T = 1. */
double gc_theory_chi2_max_mean(size_t T, size_t d);

enum { GC_BOUND_COUNT = 5 };
/* What each bound declares, in the order of gc_theory_bounds_eval's rows:
 * its name, source, the measured quantity it bounds and its theorem's
 * assumptions in the order they are checked. */
typedef struct gc_bound_info {
  const char *name, *source, *bounds, *assumptions;
} gc_bound_info;
const gc_bound_info *gc_theory_bound_info(size_t i);   /* NULL past the end */
/* Check each bound's assumptions against the case and evaluate the bounds
 * whose assumptions hold: rows[GC_BOUND_COUNT], in a fixed order, one per
 * bound, refused ones included. */
void gc_theory_bounds_eval(const gc_bound_case *c, gc_bound_row *rows);

/* Run cfg on prob `runs` times (1 when neither the gradients nor the
 * compressors are random) for `steps` steps at the constant step size lr,
 * with compressor seeds and gradient noise keyed by seed + r, multi-draw
 * probes of `draws` draws (0: off), and fill the case.  prob->seed is
 * restored on return.  GC_EDIVERGE if a run diverges, other codes from the
 * run. */
int gc_theory_bounds_run(gc_problem *prob, const gc_algo_config *cfg,
                         double lr, size_t steps, size_t runs, size_t draws,
                         uint64_t seed, gc_bound_case *out);
/* The same with the step sizes of a schedule; an INVERSE schedule also
 * keeps the weighted average of the iterates with w_t = (a+t)^2. */
int gc_theory_bounds_run_schedule(gc_problem *prob, const gc_algo_config *cfg,
                                  const gc_lr_schedule *sched, size_t steps,
                                  size_t runs, size_t draws, uint64_t seed,
                                  gc_bound_case *out);

/* ---- exact (dyadic) arithmetic for the counterexamples -------------------- */
/* 1 if v * 2^40 is an integer and |v| < 2^10 (v then has at most 50
 * significant bits, so the sum of two such values, halvings and averages
 * over P = 2 workers stay exact in float64). */
int gc_dyadic_ok(double v);
/* 1 if every entry of x (length n) passes gc_dyadic_ok. */
int gc_dyadic_vec_ok(const double *x, size_t n);
/* Write v as an exact reduced fraction "p/q" (q a power of two) or integer
 * "p"; v must be dyadic.  Returns the length written. */
int gc_dyadic_format(double v, char *buf, size_t cap);
/* 1 if TopK of x (length n) with k < n has a tie that the tie rule must
 * break: the k-th and (k+1)-th largest |x_i| are equal and non-zero.
 * work: n doubles of scratch (overwritten). */
int gc_topk_has_tie(const double *x, size_t n, size_t k, double *work);

/* ---- counterexample checks ------------------------------------------------ */
/* Section 5.2 run with gc_sim for uni and bi, topk K = K_d = 1, lr = 1/2. */
typedef struct gc_cycle_report {
  int exact;              /* every value seen was dyadic (gc_dyadic_ok)   */
  int ties;               /* number of decisive top-K ties met            */
  long uni_start;         /* first t of the cycle of uni's full state     */
  long uni_period;        /* its period (0: none found within the run)    */
  double uni_mean_gap;    /* mean F-F* over the cycle                     */
  double uni_max_gap;
  long bi_fixed_from;     /* first t from which x_t = x* to the end       */
  long bi_state_from;     /* first t from which x = x* and every memory
                             is 0 (the step of t-1 flushed the last of
                             them), kept to the end                       */
  double bi_final_gap;
  long steps;             /* steps run                                    */
} gc_cycle_report;
/* Per-step record of the 2-d example (n = 2, P = 2), GC_CYCLE9_REC doubles:
 * x_t(2), m^1(2), m^2(2), applied x_t - x_{t+1}(2), eps^1 after(2),
 * eps^2 after(2), delta after(2). */
enum { GC_CYCLE9_REC = 14 };
/* Run both methods for `steps` steps with the tie rule `ties`.
 * uni_trace/bi_trace (optional): steps * GC_CYCLE9_REC doubles. */
int gc_theory_cycle9(int ties, long steps, gc_cycle_report *rep,
                     double *uni_trace, double *bi_trace);

/* Generic exact run with cycle detection of the full state (x, all
 * memories).  Runs until a state repeats or max_steps; *limit is the mean
 * F-F* over the cycle (or over the last half when none was found). */
typedef struct gc_cycle_result {
  int exact;          /* all values dyadic along the run */
  int ties;           /* decisive ties met */
  long start, period; /* period 0: no cycle within max_steps */
  double limit;       /* mean F - F* in the limit */
} gc_cycle_result;
int gc_theory_cycle_run(const gc_problem *prob, gc_algo_kind kind, size_t k,
                        size_t k_down, int ties, double lr, long max_steps,
                        gc_cycle_result *res);

/* The toy of 5.1: uni, bi and downlink-only, K = K_d = 1. */
typedef struct gc_toy_report {
  long mean_from;                /* 500, or steps/2 for shorter runs   */
  double uni_mean, bi_mean;      /* mean F-F* over [mean_from, steps) */
  double down_final;             /* F-F* of downlink-only at the end   */
  double down_f0;                /* its start gap                      */
  long xi_from, xi_to;           /* [200, 1000) cut to [0, steps)      */
  double uni_xi_mean;            /* mean uni xi_t over [xi_from, xi_to)
                                    (NaN if empty)                     */
  double uni_xi_max;
} gc_toy_report;
/* gaps: optional (steps) x 3 array [uni, bi, down] of F-F* at each t.
 * x0/x0_down: optional starts (NULL: toy start with sigma 1 / 5 from seed). */
int gc_theory_toy(uint64_t seed, int ties, long steps, double lr,
                  const double *x0, const double *x0_down,
                  gc_toy_report *rep, double *gaps);

#ifdef __cplusplus
}
#endif
#endif /* GC_THEORY_H */
