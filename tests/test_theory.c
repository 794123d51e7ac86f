/* test_theory.c -- problems, probes, bounds and the counterexample checks
 * (docs/theory.md section 7, properties 13, 14, 16-19). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <lapacke.h>

#include "gc_algo.h"
#include "gc_errno.h"
#include "gc_npy.h"
#include "gc_test.h"
#include "gc_theory.h"

static int by_value(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* ---- problems ------------------------------------------------------------- */

Test(problem, quadratic_spectra_match_request)
{
  enum { P = 3, N = 24 };
  double lam[P * N], w[N], a[N * N];
  for (size_t p = 0; p < P; p++)
    for (size_t i = 0; i < N; i++)   /* distinct, "high-entropy" spectra */
      lam[p * N + i] = 0.137 + 2.385 * (double) (i * i) / (double) N + 0.71 * (double) p;
  gc_problem *prob;
  cr_assert(eq(int, gc_problem_quadratic(P, N, lam, 1.0, 2.0, 0.0, 7, &prob), GC_SUCCESS));
  for (size_t p = 0; p < P; p++) {
    memcpy(a, prob->a + p * N * N, sizeof a);
    for (size_t i = 0; i < N; i++)
      for (size_t j = 0; j < N; j++)
        cr_assert(a[i * N + j] == a[j * N + i], "A_%zu not exactly symmetric", p);
    cr_assert(eq(int, LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', N, a, N, w), 0));
    double want[N];
    memcpy(want, lam + p * N, sizeof want);
    qsort(want, N, sizeof *want, by_value);
    /* QR, the product and dsyev are backward stable: each moves the
     * eigenvalues by <= c N u ||A|| (N = 24, u = 2^-53, ||A|| <= 55:
     * 1.5e-13 for c = 1), whatever the LAPACK kernel; 1e-10 absolute covers
     * c up to ~600 */
    gc_test_assert_close(w, want, N, 1e-10, 0, "eigenvalues of A_p");
  }
  /* L, mu are the extreme eigenvalues of Abar; x* zeroes grad F exactly
   * up to the solve's residual. */
  double g[N];
  gc_problem_grad(prob, prob->xstar, g);
  double gn = 0;
  for (size_t i = 0; i < N; i++)
    gn += g[i] * g[i];
  /* a backward stable solve leaves a residual <= c N u L ||x*||, ~1e-14 L
   * for N = 24 and ||x*|| of order 1; 1e-10 L covers any kernel's c */
  cr_assert(sqrt(gn) < 1e-10 * prob->L, "||grad F(x*)|| = %g", sqrt(gn));
  cr_assert(prob->mu > 0 && prob->L >= prob->mu);
  cr_assert(fabs(gc_problem_value(prob, prob->xstar) - prob->fstar) == 0);
  cr_assert(eq(dbl, gc_problem_gap(prob, prob->xstar), 0.0));
  /* gap(x) equals F(x) - F* (no cancellation in the former); the latter
   * loses u (|F(x)| + |F*|) / |F(x) - F*| to the subtraction on top of the
   * N-term sums' N u: with F* and the gap of the same order, ~1e-14
   * relative, so 1e-10 */
  double gapv = gc_problem_gap(prob, prob->x0);
  double diff = gc_problem_value(prob, prob->x0) - prob->fstar;
  cr_assert(fabs(gapv - diff) <= 1e-10 * fabs(diff), "%g vs %g", gapv, diff);
  gc_problem_free(prob);
}

/* The evaluations share the problem's scratch: interleaved calls must not
 * disturb each other, and the dense gradient equals (1/P) sum of the
 * worker gradients computed separately. */
Test(problem, evaluations_share_scratch_safely)
{
  enum { N = 16 };
  gc_problem *prob;
  cr_assert(eq(int, gc_problem_parse("quadratic:P=3,d=16,L=4,mu=0.5", 9, &prob),
               GC_SUCCESS));
  cr_assert(eq(int, prob->kind, GC_PROBLEM_DENSE));
  double g[N], gw[N], sum[N] = { 0 };
  double gap1 = gc_problem_gap(prob, prob->x0);
  gc_problem_grad(prob, prob->x0, g);
  for (size_t w = 0; w < 3; w++) {
    gc_problem_worker_grad(prob, w, prob->x0, gw);
    for (size_t i = 0; i < N; i++)
      sum[i] += gw[i];
  }
  for (size_t i = 0; i < N; i++)
    cr_assert(g[i] == sum[i] / 3.0, "i=%zu: %.17g vs %.17g", i, g[i], sum[i] / 3.0);
  cr_assert(gc_problem_gap(prob, prob->x0) == gap1);
  gc_problem_free(prob);
}

Test(problem, quadratic_is_deterministic_and_haar_sign_fixed)
{
  gc_problem *p1, *p2;
  cr_assert(eq(int, gc_problem_parse("quadratic:P=2,d=16,L=4,mu=0.5", 3, &p1), GC_SUCCESS));
  cr_assert(eq(int, gc_problem_parse("quadratic:P=2,d=16,L=4,mu=0.5", 3, &p2), GC_SUCCESS));
  cr_assert(memcmp(p1->a, p2->a, 2 * 16 * 16 * sizeof(double)) == 0);
  /* extreme eigenvalues of the built mean: within c N u L = 1.4e-14 c of
   * the request (N = 16, L = 4) */
  cr_assert(p1->L <= 4 + 1e-12 && p1->mu >= 0.5 - 1e-12);
  gc_problem_free(p1);
  gc_problem_free(p2);
}

Test(problem, toy_and_cycle9_constants)
{
  gc_problem *t;
  cr_assert(eq(int, gc_problem_toy(1.0, 0, &t), GC_SUCCESS));
  cr_assert(eq(sz, t->workers, 3));
  cr_assert(eq(sz, t->n, 100));
  /* x* is one rounded quotient of exact integers: within 1 ulp (8.9e-16)
   * of 16/3; F* = 677.8 sums 300 terms: 300 u 677.8 = 2.3e-11, so 1e-10 */
  for (size_t i = 0; i < 100; i++)
    cr_assert(fabs(t->xstar[i] - 16.0 / 3.0) < 1e-15);
  cr_assert(fabs(t->fstar - 6100.0 / 9.0) < 1e-10, "F* = %.17g", t->fstar);
  cr_assert(eq(dbl, t->L, 1.0));
  gc_problem_free(t);
  gc_problem *c;
  cr_assert(eq(int, gc_problem_cycle9(&c), GC_SUCCESS));
  cr_assert(eq(dbl, c->fstar, 0.5));
  cr_assert(eq(dbl, c->xstar[0], 0.0));
  cr_assert(eq(dbl, gc_problem_gap(c, c->x0), 5.0));
  gc_problem_free(c);
}

Test(problem, npy_round_trip)
{
  char dir[512];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("theory-npy"));
  char cmd[600];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
  cr_assert(eq(int, system(cmd), 0));
  double b[2 * 3] = { 1, 2, 3, -1, 0.5, 2.385 }, x0[3] = { 4, -2, 0.25 };
  double A[2 * 3] = { 1, 2, 3, 3, 2, 1 };   /* diagonals */
  size_t sb[2] = { 2, 3 }, sx[1] = { 3 };
  char path[700];
  snprintf(path, sizeof path, "%s/b.npy", dir);
  cr_assert(eq(int, gc_npy_write(path, GC_F64, 2, sb, b), GC_SUCCESS));
  snprintf(path, sizeof path, "%s/x0.npy", dir);
  cr_assert(eq(int, gc_npy_write(path, GC_F64, 1, sx, x0), GC_SUCCESS));
  snprintf(path, sizeof path, "%s/A.npy", dir);
  cr_assert(eq(int, gc_npy_write(path, GC_F64, 2, sb, A), GC_SUCCESS));
  char spec[720];
  snprintf(spec, sizeof spec, "npy:%s", dir);
  gc_problem *p;
  cr_assert(eq(int, gc_problem_parse(spec, 0, &p), GC_SUCCESS));
  cr_assert(eq(int, p->kind, GC_PROBLEM_DIAG));
  cr_assert(eq(sz, p->workers, 2));
  /* x*_i = (sum a_pi b_pi)/(sum a_pi) */
  cr_assert(fabs(p->xstar[0] - (1 * 1 + 3 * -1) / 4.0) < 1e-15);
  cr_assert(eq(dbl, p->L, 2.0));
  gc_problem_free(p);
}

Test(problem, bad_specs_are_rejected, .init = gc_test_quiet)
{
  gc_problem *p;
  cr_assert(eq(int, gc_problem_parse("nope", 0, &p), GC_EINVAL));
  cr_assert(eq(int, gc_problem_parse("quadratic:P=0", 0, &p), GC_EINVAL));
  cr_assert(eq(int, gc_problem_parse("quadratic:mu=2,L=1", 0, &p), GC_EINVAL));
  cr_assert(eq(int, gc_problem_parse("quadratic:zz=1", 0, &p), GC_EINVAL));
  cr_assert(ne(int, gc_problem_parse("npy:/nonexistent-dir", 0, &p), GC_SUCCESS));
}

/* ---- exact helpers and bounds -------------------------------------------- */

Test(exact, dyadic_helpers)
{
  char buf[64];
  gc_dyadic_format(-3.0 / 16.0, buf, sizeof buf);
  cr_assert(eq(str, buf, "-3/16"));
  gc_dyadic_format(5.0, buf, sizeof buf);
  cr_assert(eq(str, buf, "5"));
  cr_assert(gc_dyadic_ok(9.0 / 512.0));
  cr_assert(gc_dyadic_ok(1.0 / 3.0) == 0);
  cr_assert(gc_dyadic_ok(NAN) == 0);
  double x[4] = { 1, -2, 2, 0.5 }, z[3] = { 0, 0, 0 }, work[4];
  cr_assert(gc_topk_has_tie(x, 4, 1, work));    /* |-2| = |2| at the boundary */
  cr_assert(gc_topk_has_tie(x, 4, 2, work) == 0);
  cr_assert(gc_topk_has_tie(z, 3, 1, work) == 0);   /* ties among zeros change nothing */
  /* the input is left alone; only the scratch is overwritten */
  cr_assert(x[1] == -2 && x[2] == 2);
}

/* Tolerances: the dyadic cases are exact up to a rounding (< 1e-15 at
 * 4.25); the gamma = sqrt(3/4) case loses ~7 u to 1 - g, doubled by the
 * square, ~20 u of 141 = 3e-13; EF21's 20 is a few roundings, ~1e-14;
 * gauss_share is checked against docs/theory.md 4.5's printed digits, half
 * a unit in their last place (5e-5 for 0.9873, 5e-6 for 0.91551). */
Test(bounds, formulas)
{
  /* gamma = xi = 0: SGD's 2 f0/(lr T) + L lr M2 */
  cr_assert(fabs(gc_bound_nonconvex(2.0, 0.5, 4, 3.0, 1.5, 0, 0) - (2.0 + 2.25)) < 1e-15);
  double g = sqrt(1 - 0.25);
  double want = 2.0 + 2.25 + 9 * 0.25 * 1.5 * (g / (1 - g)) * (g / (1 - g));
  cr_assert(fabs(gc_bound_nonconvex(2.0, 0.5, 4, 3.0, 1.5, g, 0) - want) < 1e-12);
  /* EF-SGD with delta = 1: 2 f0/(lr (T+1)) + lr L s2 (the second term
   * re-derived in theory.md 4.6: lr L s2, not lr L s2/2) */
  cr_assert(fabs(gc_bound_ef_sgd(2.0, 0.5, 3, 3.0, 1.5, 1.0) - (2.0 + 2.25)) < 1e-15);
  /* EF21: above the admissible step the bound is +Inf */
  cr_assert(isinf(gc_bound_ef21(1.0, 10.0, 100, 1.0, 1.0, 0.5, 0.0)));
  cr_assert(fabs(gc_bound_ef21(1.0, 1e-3, 100, 1.0, 1.0, 1.0, 0.0) - 20.0) < 1e-12);
  /* 4.5: 0.9873 at rho = 0.001, 0.9155 at 0.01 */
  cr_assert(fabs(gc_theory_gauss_share(0.001) - 0.9873) < 5e-5);
  cr_assert(fabs(gc_theory_gauss_share(0.01) - 0.91551) < 5e-6);
}

/* The contraction probe reports the count each compressor sent: exactly k
 * for top-K; for Gaussian-k on Gaussian data within [2k/3, 4k/3] (7.10). */
Test(contraction, reports_selected_count)
{
  size_t n = 100000;
  double *x = malloc(n * sizeof *x), *scratch = malloc(n * sizeof *scratch);
  cr_assert(x && scratch);
  gc_theory_fill(GC_DIST_GAUSSIAN, 7, 0, x, n);
  const char *names[] = { "topk", "gaussk" };
  for (int c = 0; c < 2; c++) {
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.density = 0.01;
    gc_compressor *comp = gc_compressor_alloc(gc_compressor_type_by_name(names[c]), n, &p);
    cr_assert(comp != NULL);
    uint8_t *buf = malloc(gc_compressor_max_bytes(comp));
    gc_compress_info info = { 0 };
    double delta;
    cr_assert(eq(int, gc_theory_delta_info(comp, x, 0, buf, scratch, &delta, &info),
                 GC_SUCCESS));
    if (c == 0)
      cr_assert(eq(sz, info.selected, 1000));
    else
      cr_assert(info.selected >= 667 && info.selected <= 1333, "selected %zu",
                info.selected);
    /* at least K/d of the energy kept; delta is a quotient of float64 sums
     * of up to n = 1e5 terms: gamma_n = n 2^-53 = 1.1e-11, so 1e-10 */
    cr_assert(delta > 0.01 * (1 - 1e-10));
    free(buf);
    gc_compressor_free(comp);
  }
  free(x);
  free(scratch);
}

/* ---- probes ------------------------------------------------------------------ */

static gc_algo_config topk_cfg(gc_algo_kind kind, size_t k, size_t kd, int ties)
{
  gc_algo_config cfg;
  gc_algo_config_default(&cfg);
  cfg.kind = kind;
  cfg.up = cfg.down = gc_compressor_type_by_name("topk");
  cfg.up_params.k = k;
  cfg.down_params.k = kd;
  cfg.up_params.ties = cfg.down_params.ties = ties;
  return cfg;
}

/* Property 13: ||E_{t+1}|| <= gamma ||E_t|| + (gamma + xi) lr ||gbar|| at
 * every step (triangle inequality plus the top-K contraction; the slack
 * covers rounding of the norms: d <= 40 term sums and a sqrt, (d + 2) u =
 * 5e-15 relative; the 1e-12 absolute term covers memories of norm 0). */
static void check_recursion(const char *problem, gc_algo_kind kind, size_t k,
                            double lr, size_t steps)
{
  gc_problem *prob;
  cr_assert(eq(int, gc_problem_parse(problem, 1, &prob), GC_SUCCESS));
  gc_algo_config cfg = topk_cfg(kind, k, k, GC_TIES_LOW);
  gc_theory_run *r = gc_theory_run_alloc(prob, &cfg, NULL);
  cr_assert(r != NULL);
  for (size_t t = 0; t < steps; t++) {
    gc_probe_row row;
    cr_assert(eq(int, gc_theory_run_step(r, lr, &row), GC_SUCCESS));
    cr_assert(row.mem_norm <= row.mem_bound * (1 + 1e-12) + 1e-12,
              "%s %s t=%zu: ||E|| = %.17g > bound %.17g", problem,
              gc_algo_name(kind), t, row.mem_norm, row.mem_bound);
  }
  gc_theory_run_free(r);
  gc_problem_free(prob);
}

Test(probe, memory_recursion_holds_every_step)
{
  static const gc_algo_kind kinds[] = { GC_ALGO_UNI, GC_ALGO_BI, GC_ALGO_DOWNLINK,
                                        GC_ALGO_DOUBLESQUEEZE };
  for (size_t j = 0; j < 4; j++) {
    check_recursion("toy", kinds[j], 1, 0.01, 400);
    check_recursion("quadratic:P=4,d=40,L=5,mu=0.2,sigma=0.3", kinds[j], 4, 0.05, 200);
  }
}

/* Property 14: identity uplink => xi_bi = 0 exactly (both aggregates are the
 * same vector, bit for bit). */
Test(probe, identity_uplink_gives_zero_xi_bi)
{
  gc_problem *prob;
  cr_assert(eq(int, gc_problem_parse("quadratic:P=3,d=30,sigma=0.5", 2, &prob), GC_SUCCESS));
  gc_algo_config cfg = topk_cfg(GC_ALGO_BI, 3, 3, GC_TIES_LOW);
  cfg.up = gc_compressor_type_by_name("identity");
  cr_assert(cfg.up != NULL);
  for (int v = 0; v < 2; v++) {
    if (v)
      cfg.kind = GC_ALGO_DOWNLINK;
    gc_theory_run *r = gc_theory_run_alloc(prob, &cfg, NULL);
    cr_assert(r != NULL);
    for (size_t t = 0; t < 100; t++) {
      gc_probe_row row;
      cr_assert(eq(int, gc_theory_run_step(r, 0.05, &row), GC_SUCCESS));
      cr_assert(row.xi_bi == 0.0, "%s t=%zu xi_bi=%g", gc_algo_name(cfg.kind), t, row.xi_bi);
    }
    gc_theory_run_free(r);
  }
  gc_problem_free(prob);
}

/* Property 18: |S|/K lies in [1, P] and grows with P on a heterogeneous
 * quadratic. */
Test(probe, support_union_ratio)
{
  double prev = 0;
  static const size_t Ps[] = { 2, 4, 8 };
  for (size_t j = 0; j < 3; j++) {
    char spec[128];
    snprintf(spec, sizeof spec, "quadratic:P=%zu,d=2000,rotate=0,hetero=1,sigma=1", Ps[j]);
    gc_problem *prob;
    cr_assert(eq(int, gc_problem_parse(spec, 5, &prob), GC_SUCCESS));
    gc_algo_config cfg = topk_cfg(GC_ALGO_UNI, 20, 20, GC_TIES_LOW);
    gc_theory_run *r = gc_theory_run_alloc(prob, &cfg, NULL);
    double s = 0;
    for (size_t t = 0; t < 50; t++) {
      gc_probe_row row;
      cr_assert(eq(int, gc_theory_run_step(r, 0.05, &row), GC_SUCCESS));
      double ratio = (double) row.support_union / 20.0;
      cr_assert(ratio >= 1 && ratio <= (double) Ps[j], "P=%zu ratio %g", Ps[j], ratio);
      s += ratio;
    }
    s /= 50;
    cr_assert(s > prev, "mean |S|/K = %g at P=%zu, not above %g", s, Ps[j], prev);
    prev = s;
    gc_theory_run_free(r);
    gc_problem_free(prob);
  }
}

/* Properties 17 and 19 on the toy of 5.1. */
Test(counterexample, toy_bi_below_uni_and_downlink_converges)
{
  for (uint64_t seed = 0; seed < 4; seed++) {
    gc_toy_report rep;
    cr_assert(eq(int, gc_theory_toy(seed, GC_TIES_HIGH, 1000, 0.01, NULL, NULL, &rep, NULL),
                 GC_SUCCESS));
    cr_assert(rep.bi_mean < rep.uni_mean, "seed %llu: bi %g uni %g",
              (unsigned long long) seed, rep.bi_mean, rep.uni_mean);
    cr_assert(rep.down_final <= 1e-6 * rep.down_f0, "seed %llu: down %g from %g",
              (unsigned long long) seed, rep.down_final, rep.down_f0);
    /* xi is large here (about 30-40, docs/theory.md 5.1); never assert xi < 1 */
    cr_assert(isfinite(rep.uni_xi_mean) && rep.uni_xi_mean > 10 && rep.uni_xi_mean < 100,
              "uni xi mean %g", rep.uni_xi_mean);
    cr_assert(eq(long, rep.mean_from, 500));
    cr_assert(eq(long, rep.xi_from, 200));
    cr_assert(eq(long, rep.xi_to, 1000));
  }
}

/* The report names the windows it averaged over, cut to the run. */
Test(counterexample, toy_windows_follow_the_run_length)
{
  gc_toy_report rep;
  cr_assert(eq(int, gc_theory_toy(0, GC_TIES_HIGH, 300, 0.01, NULL, NULL, &rep, NULL),
               GC_SUCCESS));
  cr_assert(eq(long, rep.mean_from, 150));
  cr_assert(eq(long, rep.xi_from, 200));
  cr_assert(eq(long, rep.xi_to, 300));
  cr_assert(isfinite(rep.uni_xi_mean));
  cr_assert(eq(int, gc_theory_toy(0, GC_TIES_HIGH, 120, 0.01, NULL, NULL, &rep, NULL),
               GC_SUCCESS));
  cr_assert(eq(long, rep.mean_from, 60));
  cr_assert(eq(long, rep.xi_from, 120));   /* empty window: no xi */
  cr_assert(eq(long, rep.xi_to, 120));
  cr_assert(isnan(rep.uni_xi_mean) && isnan(rep.uni_xi_max));
}

Test(probe, xi_finite_when_gbar_nonzero)
{
  gc_problem *prob;
  cr_assert(eq(int, gc_problem_toy(1.0, 0, &prob), GC_SUCCESS));
  gc_algo_config cfg = topk_cfg(GC_ALGO_UNI, 1, 1, GC_TIES_HIGH);
  gc_theory_run *r = gc_theory_run_alloc(prob, &cfg, NULL);
  for (size_t t = 0; t < 500; t++) {
    gc_probe_row row;
    cr_assert(eq(int, gc_theory_run_step(r, 0.01, &row), GC_SUCCESS));
    if (row.gbar_norm2 > 0)
      cr_assert(isfinite(row.xi) && isfinite(row.xi_bi), "t=%zu", t);
  }
  gc_theory_run_free(r);
  gc_problem_free(prob);
}

/* Property 16: the exact period-9 cycle and bi's fixed point, both ties. */
Test(counterexample, cycle9_exact)
{
  static const int rules[2] = { GC_TIES_LOW, GC_TIES_HIGH };
  for (int j = 0; j < 2; j++) {
    gc_cycle_report rep;
    cr_assert(eq(int, gc_theory_cycle9(rules[j], 2000, &rep, NULL, NULL), GC_SUCCESS));
    cr_assert(rep.exact);
    cr_assert(eq(int, rep.ties, 0));
    cr_assert(eq(long, rep.uni_start, 3));
    cr_assert(eq(long, rep.uni_period, 9));
    cr_assert(rep.uni_mean_gap == 9.0 / 256.0, "mean %.17g", rep.uni_mean_gap);
    cr_assert(rep.uni_max_gap == 9.0 / 128.0);
    cr_assert(eq(long, rep.bi_fixed_from, 3));
    cr_assert(eq(dbl, rep.bi_final_gap, 0.0));
  }
}

Test(counterexample, cycle_run_finds_the_same_cycle)
{
  gc_problem *prob;
  cr_assert(eq(int, gc_problem_cycle9(&prob), GC_SUCCESS));
  gc_cycle_result u, b;
  cr_assert(eq(int, gc_theory_cycle_run(prob, GC_ALGO_UNI, 1, 1, GC_TIES_LOW, 0.5, 500, &u),
               GC_SUCCESS));
  cr_assert(eq(int, gc_theory_cycle_run(prob, GC_ALGO_BI, 1, 1, GC_TIES_LOW, 0.5, 500, &b),
               GC_SUCCESS));
  cr_assert(u.exact && b.exact);
  cr_assert(eq(long, u.start, 3));
  cr_assert(eq(long, u.period, 9));
  cr_assert(u.limit == 9.0 / 256.0);
  cr_assert(eq(long, b.period, 1));
  cr_assert(b.limit == 0.0);
  gc_problem_free(prob);
}

/* ---- the front end ----------------------------------------------------------- */

static int run_theory(const char *args, char *out, size_t cap)
{
  char cmd[2600];
  snprintf(cmd, sizeof cmd, "%.1500s theory %.1024s", gc_test_builddir("experiments/gradcomp"), args);
  return gc_test_run(cmd, out, cap);
}

/* The command fails and its output names the reason. */
static void expect_failure(const char *args, const char *needle)
{
  char out[4096];
  cr_assert(ne(int, run_theory(args, out, sizeof out), 0), "%s", args);
  cr_assert(strstr(out, needle) != NULL, "%s", out);
}

Test(frontend, bad_input_names_the_problem)
{
#define TRAJ(opts) "trajectory " opts " --lr 0.1 --steps 5"
  expect_failure(TRAJ("--problem nope --algorithm uni --compressor topk"), "gradcomp theory:");
  expect_failure(TRAJ("--problem toy --algorithm nope --compressor topk"), "unknown algorithm");
  expect_failure(TRAJ("--problem toy --algorithm uni --compressor nope"), "unknown compressor");
  expect_failure(TRAJ("--problem toy --algorithm uni --compressor topk --k 101"), "exceeds");
#undef TRAJ
  expect_failure("trajectory --problem toy --algorithm uni --compressor topk "
                 "--lr 0 --steps 5", "--lr");
}

Test(frontend, divergence_keeps_rows)
{
  char args[1024];
  const char *csv = gc_test_tmp("theory-diverge.csv");
  char path[512];
  snprintf(path, sizeof path, "%s", csv);
  snprintf(args, sizeof args, "trajectory --problem cycle9 --algorithm sgd --compressor topk "
           "--lr 100 --steps 400 --csv %s", path);
  expect_failure(args, "gradcomp theory:");
  FILE *f = fopen(path, "r");
  cr_assert(f != NULL);
  char line[512];
  size_t lines = 0;
  while (fgets(line, sizeof line, f))
    lines++;
  fclose(f);
  cr_assert(lines > 10, "only %zu lines kept", lines);
}

/* zou-toy: 1 means "did not reproduce", so a bad command line exits 2, and
 * a conflict is found before --csv is created. */
Test(counterexample, zou_toy_argument_errors_exit_2)
{
  char out[4096], cmd[2048];
  const char *prog = gc_test_builddir("counterexamples/zou-toy");
  char path[512];
  snprintf(path, sizeof path, "%s", gc_test_tmp("zou-toy-conflict.csv"));
  static const char *bad[] = { "--ties middle", "--steps 1", "--lr 0", "--lr -1",
                               "--steps x" };
  for (size_t j = 0; j < sizeof bad / sizeof *bad; j++) {
    snprintf(cmd, sizeof cmd, "%.1500s %s", prog, bad[j]);
    cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s: %s", bad[j], out);
    cr_assert(strstr(out, "gradcomp zou-toy:") != NULL, "%s", out);
  }
  /* a valid --x0 with --sweep: rejected, and an existing --csv is kept */
  char x0path[512];
  snprintf(x0path, sizeof x0path, "%s", gc_test_tmp("zou-toy-x0.npy"));
  double x0[100];
  for (size_t i = 0; i < 100; i++)
    x0[i] = 20.0;
  size_t shape[1] = { 100 };
  cr_assert(eq(int, gc_npy_write(x0path, GC_F64, 1, shape, x0), GC_SUCCESS));
  FILE *f = fopen(path, "w");
  cr_assert(f != NULL);
  fputs("keep\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%.700s --sweep 2 --x0 %.500s --csv %.500s", prog, x0path, path);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s", out);
  cr_assert(strstr(out, "--sweep") != NULL, "%s", out);
  char line[64] = "";
  f = fopen(path, "r");
  cr_assert(f != NULL);
  cr_assert(fgets(line, sizeof line, f) != NULL, "--csv was truncated");
  fclose(f);
  cr_assert(eq(str, line, "keep\n"));
  remove(path);
  remove(x0path);
  /* a library failure is printed once, by the program with the reason,
   * not also by the library's default handler ("gradcomp: reason (...)") */
  snprintf(cmd, sizeof cmd, "%.1500s --x0 /nonexistent.npy", prog);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2));
  cr_assert(strstr(out, "cannot open") != NULL, "%s", out);
  cr_assert(strstr(out, "gradcomp: ") == NULL, "%s", out);
}

Test(frontend, help_on_each_subcommand)
{
  char out[8192];
  cr_assert(eq(int, run_theory("contraction --help", out, sizeof out), 0));
  cr_assert(strstr(out, "delta_worst") != NULL);
  cr_assert(eq(int, run_theory("trajectory --help", out, sizeof out), 0));
  cr_assert(eq(int, run_theory("bounds --help", out, sizeof out), 0));
}

/* `theory contraction --csv` logs QSGD's levels and each message's length:
 * the paper reads bits per entry from it (QSGD's bits, DGC's ratio, sign's
 * one bit).  Sign sends d bits plus a small header; top-K's K values are
 * float64 (the contraction codes doubles) with at most 4 bytes of index
 * each behind a 7-byte header (lib/compress/gc_wire.h); --levels reaches the row. */
Test(frontend, contraction_logs_levels_and_bytes)
{
  char out[8192], args[1024], line[1024];
  const char *csv = gc_test_tmp("theory-contraction-bytes.csv");
  snprintf(args, sizeof args, "contraction --d 1000 --trials 2 --densities 0.01 "
           "--compressors sign,topk,qsgd --levels 4 --csv %s", csv);
  cr_assert(eq(int, run_theory(args, out, sizeof out), 0), "%s", out);
  FILE *f = fopen(csv, "r");
  cr_assert(f != NULL);
  cr_assert(fgets(line, sizeof line, f) != NULL);
  cr_assert(strstr(line, ",selected_mean,levels,bytes_mean\n") != NULL, "%s", line);
  size_t rows = 0;
  while (fgets(line, sizeof line, f)) {
    char name[32];
    unsigned levels;
    double bytes;
    /* compressor,distribution,d,density,k,trials,worst,mean,rho,share,
     * selected_mean,levels,bytes_mean */
    const char *p = line;
    for (int comma = 0; comma < 11; comma++) {
      p = strchr(p, ',');
      cr_assert(p != NULL, "%s", line);
      p++;
    }
    cr_assert(eq(int, sscanf(line, "%31[^,]", name), 1));
    cr_assert(eq(int, sscanf(p, "%u,%lf", &levels, &bytes), 2), "%s", line);
    cr_assert(eq(u32, levels, 4), "%s", line);
    if (!strcmp(name, "sign"))
      cr_assert(bytes * 8 >= 1000 && bytes * 8 <= 1000 + 64, "%s", line);
    else if (!strcmp(name, "topk"))
      cr_assert(bytes >= 7 + 10 * 8 && bytes <= 7 + 10 * (8 + 4), "%s", line);
    else
      cr_assert(bytes > 0 && bytes < 4 * 1000, "%s", line);   /* below float32 */
    rows++;
  }
  fclose(f);
  remove(csv);
  cr_assert(eq(sz, rows, 3 * 5));   /* 3 compressors x 5 input kinds */
}
