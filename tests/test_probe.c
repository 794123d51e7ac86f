/* test_probe.c -- the one xi / xi_bi (lib/algo/xi_probe.c, theory.md 4.2, 4.4)
 * that theory trajectories and training share: a float32 simulator read the
 * way training reads it and the float64 theory trajectory give the same
 * numbers on an exactly representable run, the probe equals the written
 * definition, and the 4.3 bound's terms add up. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "gc_algo.h"
#include "gc_dtype.h"
#include "gc_errno.h"
#include "gc_ladder.h"
#include "gc_probe.h"
#include "gc_theory.h"

static gc_algo_config topk_cfg(gc_algo_kind kind, size_t k, int dtype)
{
  gc_algo_config cfg;
  gc_algo_config_default(&cfg);
  cfg.kind = kind;
  cfg.dtype = dtype;
  cfg.up = cfg.down = gc_compressor_type_by_name("topk");
  cfg.up_params.k = cfg.down_params.k = k;
  return cfg;
}

static int same(double a, double b)
{
  return a == b || (isnan(a) && isnan(b));
}

/* theory.md 5.2 is dyadic: float32 holds every iterate, memory and
 * gradient exactly, so a float32 simulator probed as train/train.c probes it
 * must give the theory trajectory's xi and xi_bi bit for bit, for every
 * method with memories.  Catches the two callers drifting apart (units,
 * which server memory, the denominator, the float32 reading). */
Test(probe, float32_training_reads_equal_float64_theory)
{
  static const gc_algo_kind kinds[] = { GC_ALGO_UNI, GC_ALGO_BI,
                                        GC_ALGO_DOWNLINK, GC_ALGO_DOUBLESQUEEZE };
  const double lr = 0.5;
  for (size_t j = 0; j < 4; j++) {
    gc_problem *prob;
    cr_assert_eq(gc_problem_parse("cycle9", 0, &prob), GC_SUCCESS);
    size_t n = prob->n, P = prob->workers;
    gc_algo_config c64 = topk_cfg(kinds[j], 1, GC_F64);
    gc_theory_run *th = gc_theory_run_alloc(prob, &c64, NULL);
    cr_assert_not_null(th);
    gc_algo_config c32 = topk_cfg(kinds[j], 1, GC_F32);
    c32.workers = P;
    c32.n = n;
    float x0[2] = { (float) prob->x0[0], (float) prob->x0[1] };
    gc_sim *sim = gc_sim_alloc(&c32, x0);
    gc_xi_probe *w = gc_xi_probe_alloc(&c32);
    cr_assert(sim && w);
    float g[2][2];
    const void *gp[2] = { g[0], g[1] };
    double xd[2], gd[2], xi_max = 0;
    for (int t = 0; t < 40; t++) {
      const float *x = gc_sim_point(sim);
      for (size_t p = 0; p < P; p++) {
        xd[0] = x[0];
        xd[1] = x[1];
        gc_problem_worker_grad(prob, p, xd, gd);
        g[p][0] = (float) gd[0];
        g[p][1] = (float) gd[1];
      }
      gc_probe_row row;
      cr_assert_eq(gc_theory_run_step(th, lr, &row), GC_SUCCESS);
      gc_xi_probe_before(w, sim);
      cr_assert_eq(gc_sim_step(sim, gp, lr), GC_SUCCESS);
      gc_xi_sample s;
      cr_assert_eq(gc_xi_probe_after(w, sim, gp, lr, &s), GC_SUCCESS);
      cr_assert(same(row.xi, s.xi) && same(row.xi_bi, s.xi_bi),
                "%s t=%d: theory xi %.17g xi_bi %.17g, training %.17g %.17g",
                gc_algo_name(kinds[j]), t, row.xi, row.xi_bi, s.xi, s.xi_bi);
      if (isfinite(s.xi))
        xi_max = fmax(xi_max, s.xi);
      if (kinds[j] == GC_ALGO_BI)   /* 5.2: the bi lhs is 0 at every step */
        cr_assert(s.num_bi == 0, "bi t=%d: xi_bi numerator %g", t, s.num_bi);
    }
    /* 5.2: uni reaches xi_t = 5, a quotient of two correctly rounded
     * square roots of exact dyadic sums: 3 ulp of 5 = 3.3e-15 */
    if (kinds[j] == GC_ALGO_UNI)
      cr_assert(fabs(xi_max - 5.0) <= 4e-15, "uni xi max %.17g", xi_max);
    gc_xi_probe_free(w);
    gc_sim_free(sim);
    gc_theory_run_free(th);
    gc_problem_free(prob);
  }
}

/* TopK(x) written out: the k largest |x_i|, the lower index first among
 * equal magnitudes. */
static void topk_by_definition(const double *x, size_t n, size_t k, double *out)
{
  memset(out, 0, n * sizeof *out);
  char *taken = calloc(n, 1);
  for (size_t j = 0; j < k; j++) {
    size_t best = n;
    for (size_t i = 0; i < n; i++)
      if (!taken[i] && (best == n || fabs(x[i]) > fabs(x[best])))
        best = i;
    taken[best] = 1;
    out[best] = x[best];
  }
  free(taken);
}

static double dist(const double *a, const double *b, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (a[i] - b[i]) * (a[i] - b[i]);
  return sqrt(s);
}

/* A float32 run on a noisy heterogeneous quadratic (no exact arithmetic):
 * the probe equals 4.2 and 4.4 written out over the simulator's views, in
 * model units (lr times the memories of DoubleSqueeze). */
Test(probe, equals_the_written_definition)
{
  static const gc_algo_kind kinds[] = { GC_ALGO_UNI, GC_ALGO_BI,
                                        GC_ALGO_DOUBLESQUEEZE };
  enum { P = 3, N = 30, K = 3 };
  const double lr = 0.05;
  gc_problem *prob;
  cr_assert_eq(gc_problem_parse("quadratic:P=3,d=30,sigma=0.5", 2, &prob),
               GC_SUCCESS);
  for (size_t j = 0; j < 3; j++) {
    gc_algo_config cfg = topk_cfg(kinds[j], K, GC_F32);
    cfg.workers = P;
    cfg.n = N;
    float x0[N], g[P][N];
    double xd[N], gd[N], dprev[N], macc[N], msent[N], gbar[N], a[N], b[N],
           ta[N], tb[N];
    for (size_t i = 0; i < N; i++)
      x0[i] = (float) prob->x0[i];
    gc_sim *sim = gc_sim_alloc(&cfg, x0);
    gc_xi_probe *w = gc_xi_probe_alloc(&cfg);
    cr_assert(sim && w);
    const void *gp[P] = { g[0], g[1], g[2] };
    for (uint32_t t = 0; t < 60; t++) {
      const float *x = gc_sim_point(sim);
      for (size_t i = 0; i < N; i++)
        xd[i] = x[i];
      for (size_t p = 0; p < P; p++) {
        gc_problem_worker_grad(prob, p, xd, gd);
        gc_problem_add_noise(prob, p, t, gd);
        for (size_t i = 0; i < N; i++)
          g[p][i] = (float) gd[i];
      }
      const float *sm = gc_server_memory(gc_sim_server(sim));
      for (size_t i = 0; i < N; i++)
        dprev[i] = sm && kinds[j] != GC_ALGO_UNI ? sm[i] : 0;
      gc_xi_probe_before(w, sim);
      cr_assert_eq(gc_sim_step(sim, gp, lr), GC_SUCCESS);
      gc_xi_sample s;
      cr_assert_eq(gc_xi_probe_after(w, sim, gp, lr, &s), GC_SUCCESS);
      memset(macc, 0, sizeof macc);
      memset(msent, 0, sizeof msent);
      memset(gbar, 0, sizeof gbar);
      for (size_t p = 0; p < P; p++) {
        const float *acc = gc_worker_accumulator(gc_sim_worker(sim, p));
        const float *m = gc_worker_sent(gc_sim_worker(sim, p));
        for (size_t i = 0; i < N; i++) {
          macc[i] += acc[i];
          msent[i] += m[i];
          gbar[i] += g[p][i];
        }
      }
      double units = kinds[j] == GC_ALGO_DOUBLESQUEEZE ? lr : 1.0;
      double g2 = 0;
      for (size_t i = 0; i < N; i++) {
        macc[i] /= (double) P;
        msent[i] /= (double) P;
        gbar[i] /= (double) P;
        g2 += gbar[i] * gbar[i];
      }
      double step = lr * sqrt(g2);
      topk_by_definition(macc, N, K, a);
      double xi = units * dist(a, msent, N) / step;
      for (size_t i = 0; i < N; i++) {
        ta[i] = dprev[i] + macc[i];
        tb[i] = dprev[i] + msent[i];
      }
      topk_by_definition(ta, N, K, a);
      topk_by_definition(tb, N, K, b);
      double xi_bi = units * dist(a, b, N) / step;
      /* the same sums, norms in another order: rounding ~ N * 2^-53 */
      cr_assert(fabs(s.xi - xi) <= 1e-12 * xi + 1e-300, "%s t=%u: xi %.17g,"
                " definition %.17g", gc_algo_name(kinds[j]), t, s.xi, xi);
      cr_assert(fabs(s.xi_bi - xi_bi) <= 1e-12 * xi_bi + 1e-300, "%s t=%u:"
                " xi_bi %.17g, definition %.17g", gc_algo_name(kinds[j]), t,
                s.xi_bi, xi_bi);
    }
    gc_xi_probe_free(w);
    gc_sim_free(sim);
  }
  gc_problem_free(prob);
}

/* Methods without error memories have no xi; the bound's terms add up. */
Test(probe, undefined_without_memories_and_bound_terms)
{
  gc_algo_config cfg = topk_cfg(GC_ALGO_SGD, 2, GC_F64);
  cfg.workers = 2;
  cfg.n = 8;
  gc_xi_probe *w = gc_xi_probe_alloc(&cfg);
  cr_assert_not_null(w);
  cr_assert_eq(gc_xi_probe_defined(w), 0);
  gc_xi_probe_free(w);
  double t[3];
  double b = gc_bound_nonconvex_terms(2.0, 0.5, 4, 3.0, 1.5, 0.6, 2.0, t);
  /* t[0] and t[1] are exact (dyadic operands); t[2] = 142.6 carries 0.6's
   * representation error and about 8 roundings through c = 2.6/0.4, squared:
   * ~12 u relative (u = 2^-53), 1.9e-13 absolute, so 1e-12 */
  cr_assert(fabs(t[0] - 2.0) < 1e-15 && fabs(t[1] - 2.25) < 1e-15);
  cr_assert(fabs(t[2] - 9 * 0.25 * 1.5 * 42.25) < 1e-12, "%.17g", t[2]);
  cr_assert(b == gc_bound_nonconvex(2.0, 0.5, 4, 3.0, 1.5, 0.6, 2.0));
  cr_assert(isinf(gc_bound_nonconvex(2.0, 0.5, 0, 3.0, 1.5, 0.6, 2.0)));
}

/* The memories training logs for the ladder (theory.md 4.9) come from the
 * probe's sums: ||E_{t+1}||^2 with the server's delta_{t+1} read as delta_t
 * + mean m^p - TopK_d(delta_t + mean m^p), mean_p ||eps^p||^2 and
 * ||delta||^2.  Against the simulator's own memories (gc_worker_memory,
 * gc_server_memory) on a float64 run of a noisy quadratic, every method
 * with memories of 4.3 and a top-K downlink.  Tolerance: the two sides sum
 * the same n = 12 products in different orders from vectors that differ
 * by a few roundings (relative 2^-52 each), so 1e-12 relative is ample. */
Test(probe, memories_equal_the_simulators)
{
  static const gc_algo_kind kinds[] = { GC_ALGO_UNI, GC_ALGO_BI, GC_ALGO_DOWNLINK,
                                        GC_ALGO_DOUBLESQUEEZE };
  const double lr = 0.05;
  for (size_t j = 0; j < 4; j++) {
    gc_problem *prob;
    cr_assert_eq(gc_problem_parse("quadratic:P=3,d=12,hetero=2,sigma=0.5", 7, &prob),
                 GC_SUCCESS);
    size_t n = prob->n, P = prob->workers;
    gc_algo_config cfg = topk_cfg(kinds[j], 2, GC_F64);
    cfg.workers = P;
    cfg.n = n;
    gc_sim *sim = gc_sim_alloc(&cfg, prob->x0);
    gc_xi_probe *w = gc_xi_probe_alloc(&cfg);
    cr_assert(sim && w);
    double *g = malloc(P * n * sizeof *g), *E = malloc(n * sizeof *E);
    const void *gp[3];
    double c = kinds[j] == GC_ALGO_DOWNLINK || kinds[j] == GC_ALGO_DOUBLESQUEEZE ? lr : 1;
    for (uint32_t t = 0; t < 30; t++) {
      for (size_t p = 0; p < P; p++) {
        gc_problem_worker_grad(prob, p, gc_sim_point(sim), g + p * n);
        gc_problem_add_noise(prob, p, t, g + p * n);
        gp[p] = g + p * n;
      }
      gc_xi_probe_before(w, sim);
      cr_assert_eq(gc_sim_step(sim, gp, lr), GC_SUCCESS);
      gc_xi_sample s;
      cr_assert_eq(gc_xi_probe_after(w, sim, gp, lr, &s), GC_SUCCESS);
      double wm = 0, sm = 0, em = 0;
      memset(E, 0, n * sizeof *E);
      for (size_t p = 0; p < P; p++) {
        const double *eps = gc_worker_memory(gc_sim_worker(sim, p));
        for (size_t i = 0; eps && i < n; i++) {
          E[i] += c * eps[i] / (double) P;
          wm += c * c * eps[i] * eps[i] / (double) P;
        }
      }
      const double *dm = gc_server_memory(gc_sim_server(sim));
      for (size_t i = 0; kinds[j] != GC_ALGO_UNI && i < n; i++) {
        E[i] += c * dm[i];
        sm += c * c * dm[i] * dm[i];
      }
      for (size_t i = 0; i < n; i++)
        em += E[i] * E[i];
      const char *a = gc_algo_name(kinds[j]);
      cr_assert(fabs(s.mem_norm2 - em) <= 1e-12 * em, "%s t=%u: %.17g vs %.17g", a, t,
                s.mem_norm2, em);
      cr_assert(fabs(s.worker_mem2 - wm) <= 1e-12 * wm, "%s t=%u: %.17g vs %.17g", a, t,
                s.worker_mem2, wm);
      cr_assert(fabs(s.server_mem2 - sm) <= 1e-12 * sm, "%s t=%u: %.17g vs %.17g", a, t,
                s.server_mem2, sm);
      /* top-K keeps at least K/d of any input's energy; gamma_hat is a sqrt
       * of a quotient of two n = 12 term sums: (2 n + 2) u ~ 3e-15, so the
       * 1e-12 relative slack only forgives rounding */
      cr_assert(s.gamma_hat <= sqrt(1 - 2.0 / (double) n) * (1 + 1e-12), "%s: %g", a,
                s.gamma_hat);
    }
    free(g);
    free(E);
    gc_xi_probe_free(w);
    gc_sim_free(sim);
    gc_problem_free(prob);
  }
}
