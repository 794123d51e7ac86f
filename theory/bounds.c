/* bounds.c -- the bound formulas (docs/theory.md 4.6, 4.7), the checks of
 * their theorems' assumptions against a measured run, the runs that measure
 * the constants, and the Gaussian top-K tail share of 4.5.  The formula of
 * the 4.3 bound is the library's gc_bound_nonconvex (gc_probe.h), which
 * training evaluates too. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "gc_algo_rules.h"
#include "gc_ef.h"
#include "gc_errno.h"
#include "gc_theory.h"

double gc_bound_ef_sgd(double f0_gap, double lr, size_t T, double L,
                       double s2, double delta)
{
  if (!(lr > 0) || !(delta > 0))
    return INFINITY;
  /* The second term is lr L s2, not the lr L s2/2 of the statement as
   * recalled: the descent lemma on the virtual iterate gives
   * (lr/2)||grad f||^2 <= f~_t - f~_{t+1} + (L lr^2/2) s2 + (lr L^2/2)
   * ||e_t||^2, and multiplying by 2/lr doubles every term (docs/theory.md
   * 4.6). */
  return 2.0 * f0_gap / (lr * (double) (T + 1)) + lr * L * s2
         + 4.0 * lr * lr * L * L * s2 * (1.0 - delta) / (delta * delta);
}

double gc_bound_ef21(double f0_gap, double lr, size_t T, double L,
                     double L_tilde, double delta, double G0)
{
  if (T == 0 || !(lr > 0) || !(delta > 0) || delta > 1)
    return INFINITY;
  double theta = 1.0 - sqrt(1.0 - delta);
  double beta = (1.0 - delta) / theta;
  /* The guarantee only holds below this step size; report +Inf above it
   * rather than a number that no theorem backs. */
  double lr_max = 1.0 / (L + L_tilde * sqrt(beta / theta));
  if (lr > lr_max)
    return INFINITY;
  return 2.0 * f0_gap / (lr * (double) T) + G0 / (theta * (double) T);
}

/* S_T = sum_{t<T} (a+t)^2 in closed form. */
static double weight_sum(size_t T, double a)
{
  double t = (double) T;
  return t * a * a + a * t * (t - 1.0) + (t - 1.0) * t * (2.0 * t - 1.0) / 6.0;
}

double gc_bound_mem_sgd(size_t T, double a, double mu, double L, double G2,
                        double D2, double dk, double alpha)
{
  if (T == 0 || !(mu > 0) || !(alpha > 4))
    return INFINITY;
  double t = (double) T, S = weight_sum(T, a);
  return 4.0 * t * (t + 2.0 * a) * G2 / (mu * S) + mu * a * a * a * D2 / (8.0 * S)
         + 64.0 * t * (1.0 + 2.0 * L / mu) * (4.0 * alpha / (alpha - 4.0)) * dk * dk * G2
           / (mu * S);
}

/* (alpha+1) d/k + rho/(rho+1) of Theorem 2.4, rho/(rho+1) written without
 * the pole of rho at alpha = 4. */
static double shift_needed(double alpha, double dk)
{
  double r = 4.0 * alpha / (4.0 * alpha + (alpha - 4.0) * (alpha + 1.0) * (alpha + 1.0));
  return (alpha + 1.0) * dk + r;
}

double gc_theory_mem_sgd_alpha(double a, double dk)
{
  /* shift_needed > (alpha+1) dk, so alpha < a/dk - 1; it rises with alpha
   * except just above 4, hence a scan from the top, then bisection */
  double hi = a / dk - 1.0;
  if (!(dk > 0) || !(hi > 4))
    return NAN;
  enum { GRID = 4096 };
  double infeasible = hi;
  for (int j = 1; j < GRID; j++) {
    double al = 4.0 + (hi - 4.0) * (double) (GRID - j) / GRID;
    if (shift_needed(al, dk) <= a) {
      double lo = al;
      for (int i = 0; i < 100; i++) {
        double mid = 0.5 * (lo + infeasible);
        if (shift_needed(mid, dk) <= a)
          lo = mid;
        else
          infeasible = mid;
      }
      return lo;
    }
    infeasible = al;
  }
  return NAN;
}

double gc_bound_omega_ef(double f0_gap, double lr, size_t T, double L,
                         double M2, double Mp2, double omega, size_t P)
{
  if (T == 0 || P == 0 || !(lr > 0) || !(omega >= 0) || !(omega < 1))
    return INFINITY;
  double g = 1.0 - sqrt(omega);
  return 2.0 * f0_gap / (lr * (double) T) + L * lr * M2
         + L * L * lr * lr * omega * Mp2 / (g * g * (double) P);
}

/* random-K scaled by d/K: E||C(x) - x||^2 = (d/K - 1)||x||^2 (theory.md 2.3) */
static double randk_unbiased_omega(double d, double k) { return d / k - 1.0; }

double gc_theory_omega(const gc_compressor_type *t, const gc_compressor_params *p,
                       size_t d)
{
  if (!t || d == 0)
    return NAN;
  double n = (double) d;
  if (!strcmp(t->name, "randk-unbiased")) {
    double k = p->k ? (double) p->k : fmax(1.0, floor(p->density * n));
    return k >= 1 && k <= n ? randk_unbiased_omega(n, k) : NAN;
  }
  if (!strcmp(t->name, "qsgd")) {
    double b = p->bucket && (double) p->bucket < n ? (double) p->bucket : n;
    double s = (double) p->levels;
    return s >= 1 ? fmin(b / (s * s), sqrt(b) / s) : NAN;
  }
  if (!strcmp(t->name, "terngrad"))
    return p->clip == 0 ? sqrt(n) - 1.0 : NAN;   /* clipping biases it */
  return NAN;
}

double gc_theory_gauss_share(double rho)
{
  if (!(rho > 0) || rho >= 1)
    return rho >= 1 ? 0.0 : 1.0;
  double tau = gsl_cdf_ugaussian_Pinv(1.0 - 0.5 * rho);
  double phi = exp(-0.5 * tau * tau) / 2.5066282746310002 /* sqrt(2 pi) */;
  return 1.0 - rho - 2.0 * tau * phi;
}

double gc_theory_chi2_max_mean(size_t T, size_t d)
{
  if (T <= 1 || d == 0)
    return (double) d;
  double lt = log((double) T), n = (double) d;
  /* (lt - (n/2) ln(1-2l))/l is convex in l on (0, 1/2): golden section */
  double lo = 0, hi = 0.5, g = 0.5 * (sqrt(5.0) - 1.0);
#define CHI2_OBJ(l) ((lt - 0.5 * n * log1p(-2.0 * (l))) / (l))
  double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
  double fa = CHI2_OBJ(a), fb = CHI2_OBJ(b);
  for (int i = 0; i < 200; i++) {
    if (fa < fb) {
      hi = b;
      b = a;
      fb = fa;
      a = hi - g * (hi - lo);
      fa = CHI2_OBJ(a);
    } else {
      lo = a;
      a = b;
      fa = fb;
      b = lo + g * (hi - lo);
      fb = CHI2_OBJ(b);
    }
  }
  return fmin(fa, fb);   /* any l gives an upper bound; this is the least found */
#undef CHI2_OBJ
}

const char *gc_rung_name(int rung)
{
  static const char *names[GC_RUNG_COUNT] = { "r0_theorem", "r1_delta", "r2_xi",
                                              "r3_memory", "r4_m2", "r5_gradient",
                                              "r6_inner", "r7_curvature" };
  return rung >= 0 && rung < GC_RUNG_COUNT ? names[rung] : "?";
}

/* ---- which bound applies --------------------------------------------------
 * Each bound checks its theorem's assumptions in the order of its proof and
 * refuses with the first one that fails, naming the measured value. */

/* Relative slack for comparisons of measured quantities (rounding of
 * norms), as in the probe tests. */
#define SLACK 1e-9

/* Which of the configured compressors the algorithm actually runs. */
static int uses_up(gc_algo_kind k)
{
  return gc__algo(k)->up == GC__UP_COMP;
}

static int uses_down(gc_algo_kind k)
{
  return gc__algo(k)->down == GC__DOWN_COMP;
}

static int is_random(const gc_compressor_type *t)
{
  return t && (t->flags & GC_COMP_RANDOM);
}

/* Memories of 4.3 at the server (bi, downlink-only, DoubleSqueeze), or at
 * the workers only (gc_algo_rules.h: the row's memory). */
static int server_memory(gc_algo_kind k)
{
  gc__memory m = gc__algo(k)->memory;
  return m == GC__MEM_SERVER || m == GC__MEM_SERVER_GRAD;
}

static int worker_memory_only(gc_algo_kind k)
{
  return gc__algo(k)->memory == GC__MEM_WORKER;
}

/* Whether the algorithm is the one of a theorem (the row's bounds). */
static int is_algorithm_of(gc_algo_kind k, unsigned bound)
{
  return (gc__algo(k)->bounds & bound) != 0;
}

static const gc_bound_info INFO[GC_BOUND_COUNT] = {
  { "nonconvex_4.3", "docs/theory.md 4.3 (derived)",
    "mean_t ||grad F(x_t)||^2 (path; E[] with noisy gradients)",
    "an algorithm with the memory of 4.3; plain error feedback (no DGC momentum); "
    "a top-K downlink for bi/downlink/doublesqueeze; constant step; "
    "xi finite; measured max ||E_t|| <= (gamma+xi)/(1-gamma) lr M" },
  { "ef_sgd_4.6", "Karimireddy et al. 2019 (EF-SGD)",
    "min_t ||grad F(x_t)||^2 (E[] with noisy gradients or a random compressor)",
    "one EF node (uni/allgather with P = 1; or downlink); plain error feedback; "
    "constant step; delta > 0 (deterministic C: worst on the path; randk: K/d; "
    "other random C: multi-draw lower estimate)" },
  { "ef21_3d", "Richtarik et al. 2021 (EF21)",
    "mean_t ||grad F(x_t)||^2 (E[] with a random compressor)",
    "algorithm ef21; exact gradients (sigma = 0); constant step; delta > 0 (as for "
    "ef_sgd_4.6); "
    "lr <= 1/(L + L~ sqrt(beta/theta))" },
  { "mem_sgd_2.4", "Stich Cordonnier Jaggi 2018 (Mem-SGD) Thm 2.4",
    "F(xbar_T) - F* of the weighted average xbar_T = sum_t (a+t)^2 x_t / S_T "
    "(E[] with noisy gradients or a random compressor)",
    "Mem-SGD: uni/allgather with P = 1; plain error feedback; mu > 0; steps "
    "8/(mu(a+t)) (--lr-schedule mem-sgd:a=A); T >= 1; a k-contraction with "
    "d/k = 1/delta (delta as for ef_sgd_4.6); some alpha > 4 with "
    "(alpha+1) d/k + rho/(rho+1) <= a (the largest is used); "
    "G^2 = max_t ||grad F(x_t)||^2 + sigma^2 d" },
  { "omega_ef_4.8", "docs/theory.md 4.8 (derived)",
    "mean_t E||grad F(x_t)||^2 (always E[]: random compressor)",
    "uni/allgather (worker memories; independent draws per worker); plain "
    "error feedback; an unbiased uplink with known omega (randk-unbiased; qsgd; "
    "terngrad without clipping); omega < 1; constant step; T >= 1" },
};

const char *gc_bound_on_name(int on)
{
  return on == GC_BOUND_ON_MIN ? "min_t_grad2"
         : on == GC_BOUND_ON_MEAN ? "mean_t_grad2" : "wavg_fgap";
}

const gc_bound_info *gc_theory_bound_info(size_t i)
{
  return i < GC_BOUND_COUNT ? &INFO[i] : NULL;
}

/* Record the failed assumption; returns 0 so that checks can `return refuse(...)`. */
static int refuse(gc_bound_row *r, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->failed, sizeof r->failed, fmt, ap);
  va_end(ap);
  for (char *p = r->failed; *p; p++)
    if (*p == ',')
      *p = ';';   /* one CSV field, readable without quoting */
  r->value = NAN;
  return 0;
}

static void row_init(gc_bound_row *r, size_t which, int on, const gc_bound_case *c)
{
  memset(r, 0, sizeof *r);
  r->name = INFO[which].name;
  r->source = INFO[which].source;
  r->on = on;
  r->gamma = r->xi = r->delta = r->alpha = NAN;
  r->value = NAN;
  for (int i = 0; i < GC_RUNG_COUNT; i++)
    r->rung[i] = NAN;
  r->expectation = c->sigma > 0;
  r->measured = on == GC_BOUND_ON_MIN ? c->min_grad2
                : on == GC_BOUND_ON_MEAN ? c->mean_grad2 : c->wavg_gap;
}

/* The exact contraction in expectation of the random compressors whose
 * distribution fixes it for every input (docs/theory.md 2.3): randk keeps a
 * uniform K-subset, so E||x - R_K(x)||^2 = (1 - K/d)||x||^2; randk-unbiased
 * has omega = d/K - 1, i.e. delta = 1 - omega.  NaN for the others. */
static double exact_delta(const gc_compressor_type *t, size_t k, size_t d)
{
  if (!t || !k || !d)
    return NAN;
  if (!strcmp(t->name, "randk"))
    return (double) k / (double) d;
  if (!strcmp(t->name, "randk-unbiased"))
    return 1.0 - randk_unbiased_omega((double) d, (double) k);
  return NAN;
}

/* The contraction a bound may use for compressor t (K entries of d): for a
 * deterministic one its worst value on the path (the proofs use it only on
 * the inputs met); for a random one its exact expectation where the
 * distribution fixes it, else the multi-draw lower estimate (the theorems
 * need it in expectation).  Refuses (returns 0) when there is none or it is
 * not positive. */
static int usable_delta(gc_bound_row *r, const char *side, const gc_compressor_type *t,
                        size_t k, size_t dim, double path, double draws, size_t M,
                        double *delta)
{
  const char *name = t ? t->name : "none";
  double d = path, exact = exact_delta(t, k, dim);
  if (is_random(t) && isfinite(exact)) {
    if (!(exact > 0)) {
      refuse(r, "%s compressor %s: delta = %.4g for K = %zu of d = %zu (theorem: delta > 0)",
             side, name, exact, k, dim);
      return 0;
    }
    *delta = exact;
    return 1;
  }
  if (is_random(t)) {
    if (M == 0) {
      refuse(r, "%s compressor %s is random and the multi-draw probe is off (draws = 0)",
             side, name);
      return 0;
    }
    d = draws;
  }
  if (!isfinite(d)) {
    refuse(r, "%s compressor %s: no contraction measured", side, name);
    return 0;
  }
  if (!(d > 0)) {
    refuse(r, "%s compressor %s: measured delta = %.4g (theorem: delta > 0)", side, name, d);
    return 0;
  }
  *delta = fmin(d, 1.0);
  return 1;
}

/* With momentum > 0 the workers of uni, allgather and allreduce-randk keep
 * DGC's memory (momentum correction, masking, clipping) instead of the
 * plain residual, which none of the theorems analyses. */
static int plain_ef(gc_bound_row *r, const gc_bound_case *c)
{
  if (worker_memory_only(c->kind) && c->momentum > 0) {
    refuse(r, "momentum = %g (theorem: plain error feedback)", c->momentum);
    return 0;
  }
  return 1;
}

/* The eval_* functions fill one row and return 1 when the bound was
 * evaluated, 0 when an assumption failed. */

/* Non-convex bound of 4.3 on mean_t ||grad F||^2. */
static int eval_nonconvex(const gc_bound_case *c, gc_bound_row *r)
{
  row_init(r, 0, GC_BOUND_ON_MEAN, c);
  gc_algo_kind k = c->kind;
  if (!is_algorithm_of(k, GC__BOUND_NONCONVEX))
    return refuse(r, "algorithm %s keeps no error memory of 4.3", gc_algo_name(k));
  if (!plain_ef(r, c))
    return 0;
  if (c->recursion_fails)
    return refuse(r, "downlink compressor %s is not top-K (xi_bi and the recursion use "
                  "TopK_d)", c->down ? c->down->name : "none");
  if (!c->constant_lr)
    return refuse(r, "the step size varies (theorem: constant)");
  double g = 0, xi = 0;
  if (worker_memory_only(k)) {
    g = c->gamma;
    xi = c->xi_max;
  } else if (server_memory(k)) {
    g = c->gamma_d;
    xi = c->xi_bi_max;
  }
  if (!isfinite(xi))
    return refuse(r, "xi was never finite (gbar_t = 0 at every step)");
  r->gamma = g;
  r->xi = xi;
  /* The proof uses ||E_t|| <= (gamma + xi)/(1 - gamma) lr M on the path
   * (the unrolled recursion); check it on what was measured. */
  double unrolled = (g + xi) / (1.0 - g) * c->lr * sqrt(c->M2);
  if (c->mem_norm_max > unrolled * (1 + SLACK) + 1e-300)
    return refuse(r, "max ||E_t|| = %.6g exceeds (gamma+xi)/(1-gamma) lr M = %.6g",
                  c->mem_norm_max, unrolled);
  /* M^2 (4.7): on the path the largest ||gbar_t||^2; with noise of known
   * sigma the SGD term takes the exact conditional second moment
   * ||grad F(x_t)||^2 + sigma^2 d/P at its largest (G2) and the memory
   * term an upper estimate of E max_t ||gbar_t||^2 (M2_path), not one
   * draw's maximum. */
  gc_ladder_in in = {
    .f0_gap = c->f0_gap, .lr = c->lr, .L = c->L, .T = c->T, .gamma = g, .xi = xi,
    .m2 = c->sigma > 0 ? c->G2 : c->M2,
    .m2_mem = c->sigma > 0 ? c->M2_path : c->M2,
    .m2_path = c->M2, .gamma_hat = c->gamma_hat, .mem_norm_max = c->mem_norm_max,
    .rec2_mean = c->rec2_mean, .rec_excess = c->rec_excess, .mem2_mean = c->mem2_mean,
    /* E[||gbar_t||^2 | x_t] = ||grad F(x_t)||^2 + sigma^2 d/P, averaged */
    .m2_mean = c->mean_grad2 + c->sigma * c->sigma * (double) c->d / (double) c->P,
    .gdiff2_mean = c->gdiff2_mean, .inner_mean = c->inner_mean,
    .curv_mean = c->curv_mean,
  };
  gc_bound_ladder(&in, r->rung);
  r->value = r->rung[GC_RUNG_THEOREM];
  return 1;
}

/* EF-SGD of Karimireddy et al. (4.6) on min_t ||grad F||^2. */
static int eval_ef_sgd(const gc_bound_case *c, gc_bound_row *r)
{
  row_init(r, 1, GC_BOUND_ON_MIN, c);
  gc_algo_kind k = c->kind;
  const gc_compressor_type *t;
  double path, draws;
  const char *side;
  int on_up = uses_up(k);   /* the EF node: the worker's, or the server's */
  if (!is_algorithm_of(k, GC__BOUND_EF_SGD)) {
    return refuse(r, "algorithm %s is not EF-SGD on one node", gc_algo_name(k));
  } else if (on_up) {
    if (c->P != 1)
      return refuse(r, "P = %zu (theorem: one worker)", c->P);
    t = c->up;
    path = c->delta_up;
    draws = c->delta_up_draws;
    side = "uplink";
  } else {   /* one EF node on gbar: the server */
    t = c->down;
    path = c->delta_down;
    draws = c->delta_down_draws;
    side = "downlink";
  }
  r->expectation = c->sigma > 0 || is_random(t);
  if (!plain_ef(r, c))
    return 0;
  if (!c->constant_lr)
    return refuse(r, "the step size varies (theorem: constant)");
  if (c->T < 1)
    return refuse(r, "T = 0 steps");
  double delta;
  if (!usable_delta(r, side, t, on_up ? c->k : c->k_down, c->d, path, draws,
                    c->draws, &delta))
    return 0;
  r->delta = delta;
  r->gamma = sqrt(1.0 - delta);
  /* the theorem's T + 1 iterates x_0..x_T are the T measured ones */
  /* sigma^2 bounds E||g_t||^2: with noise of known sigma, its exact
   * conditional value at its largest (G2, 4.7) rather than one draw */
  r->value = gc_bound_ef_sgd(c->f0_gap, c->lr, c->T - 1, c->L,
                             c->sigma > 0 ? c->G2 : c->M2, delta);
  return 1;
}

/* EF21 (3 d) on mean_t ||grad F||^2. */
static int eval_ef21(const gc_bound_case *c, gc_bound_row *r)
{
  row_init(r, 2, GC_BOUND_ON_MEAN, c);
  if (!is_algorithm_of(c->kind, GC__BOUND_EF21))
    return refuse(r, "algorithm %s is not EF21", gc_algo_name(c->kind));
  r->expectation = c->sigma > 0 || is_random(c->up);
  if (c->sigma > 0)
    return refuse(r, "sigma = %g (theorem: exact gradients)", c->sigma);
  if (!c->constant_lr)
    return refuse(r, "the step size varies (theorem: constant)");
  if (c->T < 1)
    return refuse(r, "T = 0 steps");
  double delta;
  if (!usable_delta(r, "uplink", c->up, c->k, c->d, c->delta_up, c->delta_up_draws, c->draws,
                    &delta))
    return 0;
  r->delta = delta;
  r->gamma = sqrt(1.0 - delta);
  double theta = 1.0 - sqrt(1.0 - delta);
  double cap = 1.0 / (c->L + c->L_tilde * sqrt((1.0 - delta) / (theta * theta)));
  if (c->lr > cap)
    return refuse(r, "lr = %.6g exceeds the step cap 1/(L + L~ sqrt(beta/theta)) = %.6g",
                  c->lr, cap);
  r->value = gc_bound_ef21(c->f0_gap, c->lr, c->T, c->L, c->L_tilde, delta, c->G0);
  return 1;
}

/* Mem-SGD of Stich, Cordonnier, Jaggi (Theorem 2.4) on F(xbar_T) - F*. */
static int eval_mem_sgd(const gc_bound_case *c, gc_bound_row *r)
{
  row_init(r, 3, GC_BOUND_ON_WAVG_GAP, c);
  r->expectation = c->sigma > 0 || is_random(c->up);
  if (!is_algorithm_of(c->kind, GC__BOUND_MEM_SGD))
    return refuse(r, "algorithm %s is not Mem-SGD (uni or allgather with one worker)",
                  gc_algo_name(c->kind));
  if (c->P != 1)
    return refuse(r, "P = %zu (theorem: one worker)", c->P);
  if (!plain_ef(r, c))
    return 0;
  if (!(c->mu > 0))
    return refuse(r, "mu = %g (theorem: strongly convex)", c->mu);
  const gc_lr_schedule *s = &c->schedule;
  if (s->kind != GC_LR_INVERSE)
    return refuse(r, "constant step lr = %g (theorem: steps 8/(mu(a+t)))", s->lr);
  if (fabs(s->c * c->mu / 8.0 - 1.0) > 1e-12)
    return refuse(r, "steps %g/(a+t) are not 8/(mu(a+t)) = %g/(a+t)", s->c, 8.0 / c->mu);
  if (c->T < 1)
    return refuse(r, "T = 0 steps");
  double delta;
  if (!usable_delta(r, "uplink", c->up, c->k, c->d, c->delta_up, c->delta_up_draws,
                    c->draws, &delta))
    return 0;
  r->delta = delta;
  r->gamma = sqrt(1.0 - delta);
  double dk = 1.0 / delta, alpha = gc_theory_mem_sgd_alpha(s->a, dk);
  if (!isfinite(alpha))
    return refuse(r, "shift a = %g: no alpha > 4 has (alpha+1) d/k + rho/(rho+1) <= a "
                  "(d/k = %.6g; a >= %.6g suffices)", s->a, dk, 6.0 * dk + 1.0);
  r->alpha = alpha;
  r->value = gc_bound_mem_sgd(c->T, s->a, c->mu, c->L, c->G2, c->x0_dist2, dk, alpha);
  return 1;
}

/* Unbiased compressors with worker error feedback (4.8) on mean_t. */
static int eval_omega_ef(const gc_bound_case *c, gc_bound_row *r)
{
  row_init(r, 4, GC_BOUND_ON_MEAN, c);
  r->expectation = 1;
  if (!is_algorithm_of(c->kind, GC__BOUND_OMEGA_EF))
    return refuse(r, "algorithm %s is not uni or allgather (derivation: worker memories "
                  "with independent draws; the mean applied)", gc_algo_name(c->kind));
  if (!plain_ef(r, c))
    return 0;
  const char *name = c->up ? c->up->name : "none";
  if (!isfinite(c->omega_up))
    return refuse(r, "uplink compressor %s is not unbiased with a known omega "
                  "(derivation: E C(x) = x and E||C(x)-x||^2 <= omega ||x||^2)", name);
  r->alpha = c->omega_up;
  if (!(c->omega_up < 1))
    return refuse(r, "uplink compressor %s: omega = %.6g >= 1 (derivation: the memories "
                  "contract only for omega < 1)", name, c->omega_up);
  if (!c->constant_lr)
    return refuse(r, "the step size varies (derivation: constant)");
  if (c->T < 1)
    return refuse(r, "T = 0 steps");
  r->gamma = sqrt(c->omega_up);
  r->value = gc_bound_omega_ef(c->f0_gap, c->lr, c->T, c->L, c->G2, c->worker_G2,
                               c->omega_up, c->P);
  return 1;
}

/* Rounding lost half the path's movement or more (sum_t ||lost_t|| /
 * sum_t ||u_t||; 1: the iterates never moved although the steps are not
 * 0).  A sum, not a per-step maximum: a tiny update absorbed next to a
 * large x_i is ordinary rounding and moves nothing the bounds see. */
#define FLOAT_LOSS_MAX 0.5

void gc_theory_bounds_eval(const gc_bound_case *c, gc_bound_row *rows)
{
  eval_nonconvex(c, &rows[0]);
  eval_ef_sgd(c, &rows[1]);
  eval_ef21(c, &rows[2]);
  eval_mem_sgd(c, &rows[3]);
  eval_omega_ef(c, &rows[4]);
  for (size_t i = 0; i < GC_BOUND_COUNT; i++)   /* rung 0: the bound as stated */
    rows[i].rung[GC_RUNG_THEOREM] = rows[i].value;
  /* Every analysis assumes x_{t+1} = x_t - u_t in exact arithmetic; a run
   * whose updates round away is not the algorithm they analyse (its
   * ||grad F||^2 stays put while the bounds expect it to fall). */
  if (c->float_loss >= FLOAT_LOSS_MAX)
    for (size_t i = 0; i < GC_BOUND_COUNT; i++) {
      gc_bound_row *r = &rows[i];
      if (r->failed[0])
        continue;
      refuse(r, "the iterates stop moving in floating point: rounding lost %.3g of "
             "the updates' total length (at step %zu %.3g of the update next to |x| = "
             "%.3g; theorem: exact arithmetic)", c->float_loss, c->float_loss_step,
             c->float_loss_step_max, c->float_loss_x);
      for (int k = 0; k < GC_RUNG_COUNT; k++)
        r->rung[k] = NAN;
    }
}

/* (1/P) sum_p ||C(grad f_p(x0)) - grad f_p(x0)||^2 with the run's
 * compressor draw of step 0: G0 of EF21 with h_p^0 = C(grad f_p(x_0)). */
static int ef21_g0(const gc_problem *prob, const gc_algo_config *cfg, double *g0)
{
  size_t n = prob->n;
  double *g = malloc(n * sizeof *g), *y = malloc(n * sizeof *y), s = 0;
  int st = g && y ? GC_SUCCESS : GC_ENOMEM;
  for (size_t p = 0; st == GC_SUCCESS && p < prob->workers; p++) {
    gc_compressor_params par = cfg->up_params;
    par.stream = (uint32_t) p;
    gc_compressor *c = gc_compressor_alloc(cfg->up, n, &par);
    uint8_t *buf = c ? malloc(gc_compressor_max_bytes(c)) : NULL;
    double dl;
    gc_problem_worker_grad(prob, p, prob->x0, g);
    if (!buf)
      st = GC_ENOMEM;
    else if ((st = gc_theory_delta(c, g, 0, buf, y, &dl)) == GC_SUCCESS)
      for (size_t i = 0; i < n; i++)
        s += (y[i] - g[i]) * (y[i] - g[i]);
    free(buf);
    gc_compressor_free(c);
  }
  free(g);
  free(y);
  *g0 = s / (double) prob->workers;
  return st;
}

int gc_theory_bounds_run(gc_problem *prob, const gc_algo_config *cfg,
                         double lr, size_t steps, size_t runs, size_t draws,
                         uint64_t seed, gc_bound_case *out)
{
  gc_lr_schedule s;
  gc_lr_schedule_constant(lr, &s);
  return gc_theory_bounds_run_schedule(prob, cfg, &s, steps, runs, draws, seed, out);
}

int gc_theory_bounds_run_schedule(gc_problem *prob, const gc_algo_config *cfg,
                                  const gc_lr_schedule *sched, size_t steps,
                                  size_t runs, size_t draws, uint64_t seed,
                                  gc_bound_case *out)
{
  gc_algo_kind k = cfg->kind;
  int random = prob->sigma > 0 || (uses_up(k) && is_random(cfg->up)) ||
               (uses_down(k) && is_random(cfg->down));
  if (!random || runs == 0)
    runs = 1;
  double lr = gc_lr_schedule_at(sched, 0);
  int inverse = sched->kind == GC_LR_INVERSE;
  if (steps == 0 || !(lr > 0) || (inverse && !(sched->a > 0)))
    GC_ERROR("bounds: steps and lr must be positive", GC_EINVAL);
  double *grad2 = calloc(steps, sizeof *grad2);
  if (!grad2)
    GC_ERROR("out of memory", GC_ENOMEM);
  memset(out, 0, sizeof *out);
  out->kind = k;
  out->up = uses_up(k) ? cfg->up : NULL;
  out->down = uses_down(k) ? cfg->down : NULL;
  out->ef21_init = cfg->ef21_init;
  out->momentum = cfg->momentum;
  out->P = prob->workers;
  out->d = prob->n;
  out->T = steps;
  out->runs = runs;
  out->lr = lr;
  out->constant_lr = !inverse;
  out->schedule = *sched;
  out->omega_up = uses_up(k) ? gc_theory_omega(cfg->up, &cfg->up_params, prob->n) : NAN;
  for (size_t i = 0; i < prob->n; i++)
    out->x0_dist2 += (prob->x0[i] - prob->xstar[i]) * (prob->x0[i] - prob->xstar[i]);
  /* the exact second moment of the noise: sigma^2 per coordinate */
  double noise2 = prob->sigma * prob->sigma * (double) prob->n;
  double wavg_sum = 0;
  out->L = prob->L;
  out->L_tilde = prob->L_tilde;
  out->mu = prob->mu;
  out->sigma = prob->sigma;
  out->recursion_fails = gc_theory_recursion_failure(cfg);
  out->delta_up = out->delta_down = INFINITY;
  out->delta_up_draws = out->delta_down_draws = INFINITY;
  out->gamma_hat = NAN;
  out->rec_excess = -INFINITY;
  double grad2_top = 0;
  uint64_t noise_seed = prob->seed;
  int st = GC_SUCCESS;
  int probe_draws = draws > 0 && random;
  for (size_t r = 0; r < runs && st == GC_SUCCESS; r++) {
    gc_algo_config c = *cfg;
    c.up_params.seed = cfg->up_params.seed + seed + r;
    c.down_params.seed = cfg->down_params.seed + seed + r;
    prob->seed = noise_seed + seed + r;
    gc_theory_run *run = gc_theory_run_alloc(prob, &c, NULL);
    if (!run) {
      st = GC_ENOMEM;
      break;
    }
    if (probe_draws)
      st = gc_theory_run_set_draws(run, draws);
    if (st == GC_SUCCESS && inverse)
      st = gc_theory_run_set_average(run, sched->a);
    gc_probe_row row;
    for (size_t t = 0; t < steps && st == GC_SUCCESS; t++) {
      st = gc_theory_run_step(run, gc_lr_schedule_at(sched, t), &row);
      if (st == GC_SUCCESS && !isfinite(row.grad_norm2))
        st = GC_EDIVERGE;
      if (st == GC_SUCCESS)
        grad2[t] += row.grad_norm2;
    }
    gc_probe_summary s;
    gc_theory_run_summary(run, &s);
    gc_theory_run_free(run);
    if (st == GC_SUCCESS && !isfinite(s.final_gap))
      st = GC_EDIVERGE;
    if (st != GC_SUCCESS)
      break;
    out->f0_gap = s.f0_gap;
    out->k = s.k;
    out->k_down = s.k_down;
    out->gamma = s.gamma;
    out->gamma_d = s.gamma_d;
    out->M2 = fmax(out->M2, s.M2);
    out->G2 = fmax(out->G2, s.grad2_max + noise2 / (double) prob->workers);
    out->worker_G2 = fmax(out->worker_G2, s.worker_grad2_max_mean + noise2);
    wavg_sum += s.wavg_gap;
    out->xi_max = r ? fmax(out->xi_max, s.xi_max) : s.xi_max;
    out->xi_bi_max = r ? fmax(out->xi_bi_max, s.xi_bi_max) : s.xi_bi_max;
    out->mem_norm_max = fmax(out->mem_norm_max, s.mem_norm_max);
    out->gamma_hat = fmax(out->gamma_hat, s.gamma_hat_max);   /* NaN-ignoring */
    out->mem2_mean += s.mem2_mean / (double) runs;
    out->rec2_mean += s.rec2_mean / (double) runs;
    out->gdiff2_mean += s.gdiff2_mean / (double) runs;
    out->inner_mean += s.inner_mean / (double) runs;
    out->curv_mean += s.curv_mean / (double) runs;
    out->rec_excess = fmax(out->rec_excess, s.rec_excess_max);
    grad2_top = fmax(grad2_top, s.grad2_max);
    if (s.float_loss_share > out->float_loss) {
      out->float_loss = s.float_loss_share;
      out->float_loss_step_max = s.float_loss_max;
      out->float_loss_step = s.float_loss_step;
      out->float_loss_x = s.float_loss_x;
    }
    /* fmin ignores a NaN side, so a run without a measurement keeps the others' */
    out->delta_up = fmin(out->delta_up, s.delta_up_worst);
    out->delta_down = fmin(out->delta_down, s.delta_down_worst);
    out->delta_up_draws = fmin(out->delta_up_draws, s.delta_up_draws);
    out->delta_down_draws = fmin(out->delta_down_draws, s.delta_down_draws);
    if (gc__algo(k)->worker_ef == GC_EF_EF21) {
      double g0 = 0;
      if (cfg->ef21_init == GC_EF21_INIT_COMPRESSED)
        st = ef21_g0(prob, &c, &g0);
      out->G0 += g0 / (double) runs;
    }
  }
  prob->seed = noise_seed;
  if (st == GC_SUCCESS) {
    out->draws = probe_draws ? draws : 0;
    if (isinf(out->delta_up)) out->delta_up = NAN;
    if (isinf(out->delta_down)) out->delta_down = NAN;
    if (isinf(out->delta_up_draws)) out->delta_up_draws = NAN;
    if (isinf(out->delta_down_draws)) out->delta_down_draws = NAN;
    double mn = INFINITY, sum = 0;
    for (size_t t = 0; t < steps; t++) {
      double v = grad2[t] / (double) runs;
      mn = fmin(mn, v);
      sum += v;
    }
    out->min_grad2 = mn;
    out->mean_grad2 = sum / (double) steps;
    out->wavg_gap = inverse ? wavg_sum / (double) runs : NAN;
    /* E max_t ||gbar_t||^2 <= (sqrt(E max_t ||grad F(x_t)||^2) + sqrt(E max_t
     * ||n_t||^2))^2 (Minkowski), the noise n_t ~ N(0, sigma^2/P I) drawn
     * independently per step: ||n_t||^2 = (sigma^2/P) chi-square(d).  The
     * gradient part is the largest met in the R runs (4.7). */
    out->M2_path = out->M2;
    if (prob->sigma > 0) {
      double q = prob->sigma * prob->sigma / (double) prob->workers *
                 gc_theory_chi2_max_mean(steps, prob->n);
      double m = sqrt(grad2_top) + sqrt(q);
      out->M2_path = fmax(out->M2, m * m);
    }
  }
  free(grad2);
  return st;
}
