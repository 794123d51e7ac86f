/* test_algo.c -- the distributed algorithms through the in-process
 * transport: the error-feedback invariant (theory.md 7.12) for every method
 * and every contractive compressor, the reductions of 7.14 and 7.15, k = d
 * equals SGD, the ledger, the support union, determinism, and NaN input. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "algo_testcomp.h"
#include "gc_algo.h"
#include "gc_algo_rules.h"
#include "gc_dtype.h"
#include "gc_ef.h"
#include "gc_errno.h"
#include "gc_test.h"

enum { P = 3, D = 40, PMAX = 8 };

/* Heterogeneous quadratics f_p(x) = 1/2 sum_i a_pi (x_i - b_pi)^2, with
 * curvatures in [0.5, 2.5] and targets of very different scales. */
typedef struct quad {
  size_t P, d;
  double a[PMAX][D], b[PMAX][D];
} quad;

static void quad_init(quad *q, size_t nw, uint64_t seed)
{
  q->P = nw;
  q->d = D;
  for (size_t p = 0; p < nw; p++) {
    gc_test_fill_normal(q->a[p], D, seed + 2 * p);
    gc_test_fill_normal(q->b[p], D, seed + 2 * p + 1);
    for (size_t i = 0; i < D; i++) {
      q->a[p][i] = 1.5 + 0.5 * tanh(q->a[p][i]) * 2.0;
      q->b[p][i] *= (double) (p + 1) * (p + 1);
    }
  }
}

static void quad_grads(const quad *q, const double *x, double g[][D])
{
  for (size_t p = 0; p < q->P; p++)
    for (size_t i = 0; i < D; i++)
      g[p][i] = q->a[p][i] * (x[i] - q->b[p][i]);
}

static void config(gc_algo_config *c, gc_algo_kind k,
                   const gc_compressor_type *up, const gc_compressor_type *down,
                   size_t kup, size_t kdown)
{
  gc_algo_config_default(c);
  c->kind = k;
  c->workers = P;
  c->n = D;
  c->dtype = GC_F64;
  c->up = up;
  c->down = down;
  c->up_params.k = kup;
  c->up_params.seed = 1234;
  c->down_params.k = kdown;
  c->down_params.seed = 99;
}

static double max_abs_diff(const double *a, const double *b, size_t n,
                           double *scale)
{
  double m = 0, s = 1;
  for (size_t i = 0; i < n; i++) {
    double d = fabs(a[i] - b[i]);
    if (d > m) m = d;
    if (fabs(b[i]) > s) s = fabs(b[i]);
  }
  *scale = s;
  return m;
}

/* x_t - alpha_mem * [(1/P) sum eps^p + delta] == x_0 - lr sum_s gbar_s. */
static void check_virtual_iterate(gc_algo_kind k, const gc_compressor_type *T,
                                  size_t kk)
{
  gc_algo_config c;
  config(&c, k, T, T, kk, kk);
  quad q;
  quad_init(&q, P, 7);
  double x0[D], g[P][D], virt[D];
  gc_test_fill_normal(x0, D, 3);
  memcpy(virt, x0, sizeof virt);
  gc_sim *s = gc_sim_alloc(&c, x0);
  cr_assert_not_null(s, "%s/%s: %s", gc_algo_name(k), T->name, gc_last_error());
  const double lr = 0.05;
  /* memories in gradient units for (b') and DoubleSqueeze */
  double mscale = (k == GC_ALGO_DOWNLINK || k == GC_ALGO_DOUBLESQUEEZE) ? lr : 1.0;
  const void *gp[P] = { g[0], g[1], g[2] };
  for (uint32_t t = 1; t <= 60; t++) {
    quad_grads(&q, gc_sim_point(s), g);
    cr_assert(eq(int, gc_sim_step(s, gp, lr), GC_SUCCESS), "%s/%s step %u: %s",
              gc_algo_name(k), T->name, t, gc_last_error());
    for (size_t i = 0; i < D; i++) {
      double gb = (g[0][i] + g[1][i] + g[2][i]) / P;
      virt[i] -= lr * gb;
    }
    double xt[D];
    memcpy(xt, gc_sim_point(s), sizeof xt);
    for (size_t p = 0; p < P; p++) {
      const double *eps = gc_worker_memory(gc_sim_worker(s, p));
      if (eps)
        for (size_t i = 0; i < D; i++) xt[i] -= mscale * eps[i] / P;
    }
    const double *delta = gc_server_memory(gc_sim_server(s));
    if (delta)
      for (size_t i = 0; i < D; i++) xt[i] -= mscale * delta[i];
    /* the same sums kept two ways in double: each step adds a few
     * roundings (u = 1.1e-16) of values up to sc / lr = 20 sc to each
     * side, so the gap grows at most linearly, ~1e-14 t sc; 1e-10 t sc
     * leaves room for memories far larger than the iterate */
    double sc, err = max_abs_diff(xt, virt, D, &sc);
    cr_assert(err <= 1e-10 * t * sc, "%s/%s: step %u, |x~ - v| = %g",
              gc_algo_name(k), T->name, t, err);
  }
  gc_sim_free(s);
}

static const gc_algo_kind ef_kinds[] = {
  GC_ALGO_SGD, GC_ALGO_UNI, GC_ALGO_BI, GC_ALGO_DOWNLINK,
  GC_ALGO_DOUBLESQUEEZE, GC_ALGO_ALLREDUCE, GC_ALGO_ALLREDUCE_RANDK,
  GC_ALGO_ALLGATHER };

Test(algo, ef_invariant_every_method_every_compressor, .init = gc_test_quiet)
{
  size_t tried = 0;
  for (size_t j = 0; j < sizeof ef_kinds / sizeof ef_kinds[0]; j++) {
    check_virtual_iterate(ef_kinds[j], &tc_topk_type, 4);
    tried++;
    for (const gc_compressor_type *const *T = gc_compressor_types(); *T; T++) {
      /* randk is a k-contraction in expectation (theory.md 2.3) */
      int contractive = ((*T)->flags & GC_COMP_CONTRACTIVE) ||
                        strcmp((*T)->name, "randk") == 0;
      if (!contractive || ((*T)->flags & GC_COMP_NEEDS_SHAPE))
        continue;
      check_virtual_iterate(ef_kinds[j], *T, 4);
      tried++;
    }
  }
  cr_log_info("EF invariant: %zu method x compressor pairs", tried);
}

/* Runs two configs from the same start on the same problem and returns the
 * largest relative iterate difference over the run. */
static double run_pair(const gc_algo_config *c1, const gc_algo_config *c2,
                       double lr, unsigned steps, gc_sim **keep1,
                       gc_sim **keep2)
{
  quad q;
  quad_init(&q, c1->workers, 11);
  double x0[D], g1[PMAX][D], g2[PMAX][D];
  gc_test_fill_normal(x0, D, 5);
  gc_sim *a = gc_sim_alloc(c1, x0), *b = gc_sim_alloc(c2, x0);
  cr_assert(a && b, "%s", gc_last_error());
  const void *p1[PMAX], *p2[PMAX];
  for (size_t p = 0; p < c1->workers; p++) { p1[p] = g1[p]; p2[p] = g2[p]; }
  double worst = 0;
  for (unsigned t = 0; t < steps; t++) {
    quad_grads(&q, gc_sim_point(a), g1);
    quad_grads(&q, gc_sim_point(b), g2);
    cr_assert(eq(int, gc_sim_step(a, p1, lr), GC_SUCCESS), "%s", gc_last_error());
    cr_assert(eq(int, gc_sim_step(b, p2, lr), GC_SUCCESS), "%s", gc_last_error());
    double sc, d = max_abs_diff(gc_sim_point(a), gc_sim_point(b), D, &sc);
    if (d / sc > worst) worst = d / sc;
  }
  if (keep1) *keep1 = a; else gc_sim_free(a);
  if (keep2) *keep2 = b; else gc_sim_free(b);
  return worst;
}

/* 7.14: with the identity on the uplink, bi is single-node EF-top-K on
 * gbar (worker memories stay 0). */
Test(algo, bi_identity_uplink_is_single_node_ef, .init = gc_test_quiet)
{
  gc_algo_config c;
  config(&c, GC_ALGO_BI, tc_identity(), tc_topk(), D, 3);
  quad q;
  quad_init(&q, P, 21);
  double x0[D], g[P][D], gbar[D], xr[D];
  gc_test_fill_normal(x0, D, 8);
  memcpy(xr, x0, sizeof xr);
  gc_sim *s = gc_sim_alloc(&c, x0);
  gc_compressor *C = gc_compressor_alloc(tc_topk(), D, &c.down_params);
  gc_ef *e = gc_ef_alloc(GC_EF_BEFORE, D, GC_F64, NULL);
  uint8_t buf[4096];
  size_t len;
  const void *gp[P] = { g[0], g[1], g[2] };
  const double lr = 0.0625;   /* a power of 2: scaling commutes with rounding */
  for (uint32_t t = 0; t < 80; t++) {
    quad_grads(&q, gc_sim_point(s), g);
    for (size_t i = 0; i < D; i++) gbar[i] = (g[0][i] + g[1][i] + g[2][i]) / P;
    cr_assert(eq(int, gc_sim_step(s, gp, lr), GC_SUCCESS));
    cr_assert(eq(int, gc_ef_step(e, C, gbar, lr, t, buf, sizeof buf, &len, NULL),
                 GC_SUCCESS));
    const double *sent = gc_ef_sent(e);
    for (size_t i = 0; i < D; i++) xr[i] -= sent[i];
    /* the same operations but for the mean (3 terms, /P) and the order of
     * the updates: a few u = 1.1e-16 per step, contracted by the
     * quadratic, ~1e-15 sc; 1e-13 keeps a factor 100 over 80 steps */
    double sc, d = max_abs_diff(gc_sim_point(s), xr, D, &sc);
    cr_assert(d <= 1e-13 * sc, "step %u: %g", t, d);
    for (size_t p = 0; p < P; p++) {
      const double *eps = gc_worker_memory(gc_sim_worker(s, p));
      for (size_t i = 0; i < D; i++) cr_assert(eq(dbl, eps[i], 0.0));
    }
  }
  gc_ef_free(e);
  gc_compressor_free(C);
  gc_sim_free(s);
}

/* 7.15: DoubleSqueeze with top-K both ways is bi at constant lr, with the
 * memories scaled by lr. */
Test(algo, doublesqueeze_equals_bi_topk, .init = gc_test_quiet)
{
  gc_algo_config a, b;
  config(&a, GC_ALGO_BI, tc_topk(), tc_topk(), 4, 6);
  config(&b, GC_ALGO_DOUBLESQUEEZE, tc_topk(), tc_topk(), 4, 6);
  gc_sim *sa, *sb;
  const double lr = 0.03125;
  double worst = run_pair(&a, &b, lr, 100, &sa, &sb);
  /* lr a power of 2: the scaled memories round alike; what differs is
   * the order of a few additions per step, ~u = 1.1e-16 relative each,
   * contracted by the quadratic: 1e-13 keeps a factor 10 over 100 steps.
   * The memories themselves (values up to 1/lr larger): 1e-12. */
  cr_assert(worst <= 1e-13, "iterates differ by %g", worst);
  const double *da = gc_server_memory(gc_sim_server(sa)),
               *db = gc_server_memory(gc_sim_server(sb));
  for (size_t i = 0; i < D; i++)
    cr_assert(fabs(da[i] - lr * db[i]) <= 1e-12 * (1 + fabs(da[i])));
  for (size_t p = 0; p < P; p++) {
    const double *ea = gc_worker_memory(gc_sim_worker(sa, p)),
                 *eb = gc_worker_memory(gc_sim_worker(sb, p));
    for (size_t i = 0; i < D; i++)
      cr_assert(fabs(ea[i] - lr * eb[i]) <= 1e-12 * (1 + fabs(ea[i])));
  }
  gc_sim_free(sa);
  gc_sim_free(sb);
}

/* k = d: nothing is dropped, every compressed method is dense SGD. */
Test(algo, full_k_equals_sgd, .init = gc_test_quiet)
{
  gc_algo_kind ks[] = { GC_ALGO_UNI, GC_ALGO_BI, GC_ALGO_DOWNLINK,
                        GC_ALGO_DOUBLESQUEEZE, GC_ALGO_ALLGATHER,
                        GC_ALGO_ALLREDUCE_RANDK, GC_ALGO_EF21,
                        GC_ALGO_EF21_BC, GC_ALGO_ALLREDUCE };
  gc_algo_config sgd;
  config(&sgd, GC_ALGO_SGD, tc_topk(), tc_topk(), D, D);
  for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
    gc_algo_config c;
    config(&c, ks[j], tc_topk(), tc_topk(), D, D);
    double worst = run_pair(&sgd, &c, 0.05, 50, NULL, NULL);
    /* nothing dropped: the methods add the same terms in other orders
     * (memories of 0, server means): a few u = 1.1e-16 per step, 50
     * steps, ~1e-14 relative; 1e-12 keeps a factor 100 */
    cr_assert(worst <= 1e-12, "%s differs from SGD by %g",
              gc_algo_name(ks[j]), worst);
  }
}

/* The ledger holds exactly the message lengths; uplink bytes equal P times
 * what the compressor writes for the accumulators; |S| in [K, min(d, PK)]. */
Test(algo, ledger_and_support_union, .init = gc_test_quiet)
{
  const size_t K = 3;
  gc_algo_config c;
  config(&c, GC_ALGO_UNI, tc_topk(), tc_topk(), K, K);
  quad q;
  quad_init(&q, P, 31);
  double x[D], g[P][D];
  gc_test_fill_normal(x, D, 9);
  gc_worker *w[P];
  for (size_t p = 0; p < P; p++) w[p] = gc_worker_alloc(&c, p);
  gc_server *s = gc_server_alloc(&c);
  gc_sim *sim = gc_sim_alloc(&c, x);
  gc_ledger *l = gc_ledger_alloc(P);
  gc_compressor *probe = gc_compressor_alloc(c.up, D, &c.up_params);
  size_t cap = gc_algo_max_up_bytes(&c), dcap = gc_algo_max_down_bytes(&c);
  uint8_t up[P][4096], down[8192];
  cr_assert(cap <= sizeof up[0] && dcap <= sizeof down);
  const uint8_t *ups[P] = { up[0], up[1], up[2] };
  const void *gp[P] = { g[0], g[1], g[2] };
  size_t len[P], dlen;
  uint64_t sum_up = 0, sum_down = 0;
  for (uint32_t t = 0; t < 40; t++) {
    quad_grads(&q, x, g);
    size_t want = 0;
    for (size_t p = 0; p < P; p++) {
      cr_assert(eq(int, gc_worker_step(w[p], g[p], 0.05, t, up[p], cap, &len[p]),
                   GC_SUCCESS));
      uint8_t tmp[4096];
      size_t tl;
      gc_compress_f64(probe, gc_worker_accumulator(w[p]), t, tmp, sizeof tmp,
                      &tl, NULL);
      want += tl;
      sum_up += len[p];
    }
    cr_assert(eq(int, gc_server_step(s, ups, len, 0.05, t, down, dcap, &dlen),
                 GC_SUCCESS));
    /* decode_down is apply's decoding: scale -1 is apply itself, scale 1
     * into zeros the server's decoded downlink (the DDP hook's update) */
    double y[D], dd[D];
    memcpy(y, x, sizeof y);
    memset(dd, 0, sizeof dd);
    cr_assert(eq(int, gc_worker_decode_down(w[0], down, dlen, t, -1.0, y), GC_SUCCESS));
    cr_assert(eq(int, gc_worker_decode_down(w[0], down, dlen, t, 1.0, dd), GC_SUCCESS));
    cr_assert(eq(int, memcmp(dd, gc_server_sent(s), sizeof dd), 0));
    cr_assert(eq(int, gc_worker_apply(w[0], down, dlen, t, x), GC_SUCCESS));
    cr_assert(eq(int, memcmp(y, x, sizeof y), 0));
    sum_down += P * dlen;
    cr_assert(eq(int, gc_algo_record_step(&c, l, t, len, dlen), GC_SUCCESS));
    cr_assert(eq(u64, gc_ledger_step_total(l, t, GC_UP), want));
    cr_assert(want <= P * gc_compressor_max_bytes(probe));
    size_t S = gc_server_support_union(s);
    cr_assert(S >= K && S <= (P * K < D ? P * K : D), "|S| = %zu", S);
    cr_assert(eq(int, gc_sim_step(sim, gp, 0.05), GC_SUCCESS));
    /* the simulator applies the same algorithm */
    cr_assert(eq(int, memcmp(gc_sim_point(sim), x, sizeof x), 0));
  }
  cr_assert(eq(u64, gc_ledger_total(l, GC_UP), sum_up));
  cr_assert(eq(u64, gc_ledger_total(l, GC_DOWN), sum_down));
  cr_assert(eq(u64, gc_ledger_total(l, GC_LEDGER_BCAST), sum_down / P));
  cr_assert(eq(u64, gc_ledger_total(gc_sim_ledger(sim), GC_UP), sum_up));
  cr_assert(eq(u64, gc_ledger_total(gc_sim_ledger(sim), GC_DOWN), sum_down));
  gc_compressor_free(probe);
  gc_ledger_free(l);
  gc_sim_free(sim);
  gc_server_free(s);
  for (size_t p = 0; p < P; p++) gc_worker_free(w[p]);
}

/* Collectives: ring allreduce sends 2(P-1)/P n values per rank (2(P-1) n
 * in all); allgather (P-1) times each message; nothing on the downlink. */
Test(algo, collective_ledger, .init = gc_test_quiet)
{
  gc_algo_config a, g, u;
  config(&a, GC_ALGO_ALLREDUCE, tc_topk(), tc_topk(), 4, 4);
  config(&g, GC_ALGO_ALLGATHER, tc_topk(), tc_topk(), 4, 4);
  config(&u, GC_ALGO_UNI, tc_topk(), tc_topk(), 4, 4);
  gc_sim *sa, *sg, *su;
  run_pair(&a, &a, 0.05, 5, &sa, NULL);
  cr_assert(run_pair(&g, &u, 0.05, 30, &sg, &su) == 0.0,
            "allgather and uni apply the same average");
  const gc_ledger *la = gc_sim_ledger(sa);
  cr_assert(eq(u64, gc_ledger_total(la, GC_UP), 5ull * 2 * (P - 1) * D * 8));
  for (size_t p = 0; p < P; p++) {
    uint64_t b = gc_ledger_worker_total(la, p, GC_UP) / 5;
    cr_assert(b >= 2 * (P - 1) * (D / P) * 8 && b <= 2 * (P - 1) * (D / P + 1) * 8);
  }
  cr_assert(eq(u64, gc_ledger_total(la, GC_DOWN), 0));
  cr_assert(eq(u64, gc_ledger_total(gc_sim_ledger(sg), GC_UP),
               (P - 1) * gc_ledger_total(gc_sim_ledger(su), GC_UP)));
  cr_assert(eq(int, memcmp(gc_sim_point(sg), gc_sim_point(su), D * 8), 0));
  gc_sim_free(sa);
  gc_sim_free(sg);
  gc_sim_free(su);
}

/* Same seed, same bytes: two runs of a randomised compressor agree
 * bit for bit (and with the test compressor when randk is absent). */
Test(algo, same_seed_bit_identical, .init = gc_test_quiet)
{
  const gc_compressor_type *T = gc_compressor_type_by_name("randk");
  if (!T) T = tc_topk();
  gc_algo_kind ks[] = { GC_ALGO_BI, GC_ALGO_ALLREDUCE_RANDK, GC_ALGO_EF21 };
  for (size_t j = 0; j < 3; j++) {
    gc_algo_config c;
    config(&c, ks[j], T, T, 5, 5);
    cr_assert(run_pair(&c, &c, 0.05, 40, NULL, NULL) == 0.0, "%s",
              gc_algo_name(ks[j]));
  }
}

/* EF21: the server's h is the mean of the workers' h_i, and
 * x_{t+1} = x_t - lr h^{t+1}; gradient initialisation sends g densely. */
Test(algo, ef21_state_and_update, .init = gc_test_quiet)
{
  for (int init = 0; init < 2; init++) {
    gc_algo_config c;
    config(&c, GC_ALGO_EF21, tc_topk(), tc_topk(), 4, 4);
    c.ef21_init = init;
    quad q;
    quad_init(&q, P, 41);
    double x0[D], g[P][D], prev[D];
    gc_test_fill_normal(x0, D, 2);
    gc_sim *s = gc_sim_alloc(&c, x0);
    const void *gp[P] = { g[0], g[1], g[2] };
    for (uint32_t t = 0; t < 30; t++) {
      memcpy(prev, gc_sim_point(s), sizeof prev);
      quad_grads(&q, prev, g);
      cr_assert(eq(int, gc_sim_step(s, gp, 0.05), GC_SUCCESS));
      const double *h = gc_server_memory(gc_sim_server(s));
      const double *x = gc_sim_point(s);
      for (size_t i = 0; i < D; i++) {
        double m = 0;
        for (size_t p = 0; p < P; p++)
          m += ((const double *) gc_worker_memory(gc_sim_worker(s, p)))[i];
        /* h is updated by increments, the mean here summed afresh: one
         * rounding per step of each, 30 steps, ~1e-14 (1 + |h|) */
        cr_assert(fabs(h[i] - m / P) <= 1e-12 * (1 + fabs(h[i])));
        cr_assert(eq(dbl, x[i], prev[i] + -0.05 * h[i]));
        if (t == 0 && init == GC_EF21_INIT_GRADIENT)
          cr_assert(eq(dbl, ((const double *) gc_worker_memory(
                                 gc_sim_worker(s, 1)))[i], g[1][i]));
      }
    }
    uint64_t first = gc_ledger_step_total(gc_sim_ledger(s), 0, GC_UP);
    if (init == GC_EF21_INIT_GRADIENT)
      cr_assert(eq(u64, first, (uint64_t) P * D * 8));
    else
      cr_assert(first < (uint64_t) P * D * 8);
    gc_sim_free(s);
  }
}

/* EF21-BC: workers evaluate at w, w^{t+1} = w^t + C_s(x^{t+1} - w^t); with
 * the identity downlink it is EF21. */
Test(algo, ef21_bc, .init = gc_test_quiet)
{
  gc_algo_config a, b;
  config(&a, GC_ALGO_EF21, tc_topk(), tc_topk(), 4, 4);
  config(&b, GC_ALGO_EF21_BC, tc_topk(), tc_identity(), 4, D);
  /* the identity downlink: w = x up to the rounding of w + (x - w), one
   * u = 1.1e-16 a step, contracted: 1e-13 over 30 steps keeps a factor 10 */
  cr_assert(run_pair(&a, &b, 0.05, 30, NULL, NULL) <= 1e-13);
  gc_algo_config c;
  config(&c, GC_ALGO_EF21_BC, tc_topk(), tc_topk(), 4, 4);
  quad q;
  quad_init(&q, P, 51);
  double x0[D], g[P][D], w[D];
  gc_test_fill_normal(x0, D, 4);
  gc_sim *s = gc_sim_alloc(&c, x0);
  const void *gp[P] = { g[0], g[1], g[2] };
  int differ = 0;
  for (uint32_t t = 0; t < 20; t++) {
    memcpy(w, gc_sim_point(s), sizeof w);
    quad_grads(&q, w, g);
    cr_assert(eq(int, gc_sim_step(s, gp, 0.05), GC_SUCCESS));
    const double *sent = gc_server_sent(gc_sim_server(s));
    const double *wn = gc_sim_point(s);
    for (size_t i = 0; i < D; i++)
      cr_assert(eq(dbl, wn[i], w[i] + sent[i]));
    differ |= memcmp(gc_sim_point(s), gc_sim_model(s), sizeof w) != 0;
  }
  cr_assert(differ, "the point lags the model under a top-K broadcast");
  gc_sim_free(s);
}

/* float32 follows the float64 run of the same method to float accuracy
 * (the error model: a few float32 roundings per step, contracted by the
 * quadratic; 1e-4 relative over 100 steps).  Top-K selections must not
 * flip, so the targets are distinct (checked for these seeds). */
Test(algo, float32_follows_float64, .init = gc_test_quiet)
{
  gc_algo_kind ks[] = { GC_ALGO_UNI, GC_ALGO_BI, GC_ALGO_DOUBLESQUEEZE,
                        GC_ALGO_EF21, GC_ALGO_DOWNLINK };
  for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
    gc_algo_config c, c64;
    config(&c, ks[j], tc_topk(), tc_topk(), 20, 20);
    c.dtype = GC_F32;
    config(&c64, ks[j], tc_topk(), tc_topk(), 20, 20);
    float x0[D], g[P][D];
    double y0[D], h[P][D];
    for (size_t i = 0; i < D; i++) {
      x0[i] = (float) (i % 7) - 3.0f;
      y0[i] = x0[i];
    }
    gc_sim *s = gc_sim_alloc(&c, x0), *r = gc_sim_alloc(&c64, y0);
    cr_assert(s && r);
    quad q;   /* distinct targets: no ties for top-K to break differently */
    quad_init(&q, P, 61);
    const void *gp[P] = { g[0], g[1], g[2] }, *hp[P] = { h[0], h[1], h[2] };
    for (uint32_t t = 0; t < 100; t++) {
      const float *x = gc_sim_point(s);
      const double *y = gc_sim_point(r);
      for (size_t p = 0; p < P; p++)
        for (size_t i = 0; i < D; i++) {
          g[p][i] = (float) q.a[p][i] * (x[i] - (float) q.b[p][i]);
          h[p][i] = (double) (float) q.a[p][i] * (y[i] - (double) (float) q.b[p][i]);
        }
      cr_assert(eq(int, gc_sim_step(s, gp, 0.1), GC_SUCCESS));
      cr_assert(eq(int, gc_sim_step(r, hp, 0.1), GC_SUCCESS));
    }
    const float *x = gc_sim_point(s);
    const double *y = gc_sim_point(r);
    for (size_t i = 0; i < D; i++)
      cr_assert(fabs(x[i] - y[i]) < 1e-4 * (1 + fabs(y[i])), "%s: x[%zu] = %g vs %g",
                gc_algo_name(ks[j]), i, x[i], y[i]);
    gc_sim_free(s);
    gc_sim_free(r);
  }
}

Test(algo, nan_gradient_names_worker, .init = gc_test_quiet)
{
  gc_algo_config c;
  config(&c, GC_ALGO_UNI, tc_topk(), tc_topk(), 4, 4);
  double x0[D] = { 0 }, g[P][D] = { { 0 } };
  g[1][5] = NAN;
  gc_sim *s = gc_sim_alloc(&c, x0);
  const void *gp[P] = { g[0], g[1], g[2] };
  cr_assert(eq(int, gc_sim_step(s, gp, 0.1), GC_EDOM));
  cr_assert(strstr(gc_last_error(), "worker 1") != NULL, "%s", gc_last_error());
  g[1][5] = INFINITY;
  c.kind = GC_ALGO_SGD;
  gc_sim *t = gc_sim_alloc(&c, x0);
  cr_assert(eq(int, gc_sim_step(t, gp, 0.1), GC_EDOM));
  gc_sim_free(s);
  gc_sim_free(t);
}

Test(algo, names_and_config_errors, .init = gc_test_quiet)
{
  gc_algo_kind k;
  for (int i = 0; i < GC_ALGO_COUNT; i++) {
    cr_assert(eq(int, gc_algo_by_name(gc_algo_name((gc_algo_kind) i), &k),
                 GC_SUCCESS));
    cr_assert(eq(int, (int) k, i));
  }
  cr_assert(eq(int, gc_algo_by_name("nope", &k), GC_EINVAL));
  gc_algo_config c;
  config(&c, GC_ALGO_UNI, tc_topk(), tc_topk(), 4, 4);
  c.workers = 0;
  cr_assert_null(gc_sim_alloc(&c, NULL));
  config(&c, GC_ALGO_BI, tc_topk(), NULL, 4, 4);
  cr_assert(eq(int, gc_algo_config_check(&c), GC_EINVAL));
  config(&c, GC_ALGO_UNI, tc_topk(), tc_topk(), D + 1, 4);
  cr_assert_null(gc_worker_alloc(&c, 0));
  gc_worker_free(NULL);
  gc_server_free(NULL);
  gc_sim_free(NULL);
}

static double norm(const double *x, size_t n) { return sqrt(gc_test_sq_norm(x, n)); }

/* 7.13: ||E_{t+1}|| <= g ||E_t|| + (g + xi_t) lr ||gbar_t||, with xi_t of
 * 4.2 for uni (g = gamma) and xi_bi,t of 4.4 for bi (g = gamma_d), both
 * with top-K by magnitude; 1e-12 slack for rounding. */
Test(algo, memory_recursion, .init = gc_test_quiet)
{
  const size_t K = 4, Kd = 6;
  for (int bi = 0; bi < 2; bi++) {
    gc_algo_config c;
    config(&c, bi ? GC_ALGO_BI : GC_ALGO_UNI, tc_topk(), tc_topk(), K, Kd);
    quad q;
    quad_init(&q, P, 71);
    double x0[D], g[P][D], E[D], En[D], a[D], ma[D], mt[D], t1[D], t2[D];
    gc_test_fill_normal(x0, D, 6);
    gc_sim *s = gc_sim_alloc(&c, x0);
    gc_compressor *Cd = gc_compressor_alloc(tc_topk(), D, bi ? &c.down_params
                                                             : &c.up_params);
    const void *gp[P] = { g[0], g[1], g[2] };
    const double lr = 0.05;
    double gam = sqrt(1.0 - (double) (bi ? Kd : K) / D);
    memset(E, 0, sizeof E);
    for (uint32_t t = 0; t < 80; t++) {
      quad_grads(&q, gc_sim_point(s), g);
      double delta[D] = { 0 };
      if (bi)
        memcpy(delta, gc_server_memory(gc_sim_server(s)), sizeof delta);
      cr_assert(eq(int, gc_sim_step(s, gp, lr), GC_SUCCESS));
      double gbar[D];
      for (size_t i = 0; i < D; i++) {
        gbar[i] = (g[0][i] + g[1][i] + g[2][i]) / P;
        ma[i] = mt[i] = 0;
        for (size_t p = 0; p < P; p++) {
          ma[i] += ((const double *) gc_worker_accumulator(gc_sim_worker(s, p)))[i] / P;
          mt[i] += ((const double *) gc_worker_sent(gc_sim_worker(s, p)))[i] / P;
        }
        a[i] = delta[i] + ma[i];   /* uni: mean acc; bi: delta + mean acc */
        mt[i] += delta[i];
        En[i] = 0;
        for (size_t p = 0; p < P; p++)
          En[i] += ((const double *) gc_worker_memory(gc_sim_worker(s, p)))[i] / P;
        if (bi) En[i] += ((const double *) gc_server_memory(gc_sim_server(s)))[i];
      }
      gc_test_roundtrip_f64(Cd, a, t, NULL, t1, NULL);
      if (bi) gc_test_roundtrip_f64(Cd, mt, t, NULL, t2, NULL);
      else memcpy(t2, mt, sizeof t2);   /* uni: mean of the local top-Ks */
      double diff[D];
      for (size_t i = 0; i < D; i++) diff[i] = t1[i] - t2[i];
      double step = lr * norm(gbar, D);
      double xi = norm(diff, D) / step;
      double lhs = norm(En, D), rhs = gam * norm(E, D) + (gam + xi) * step;
      cr_assert(lhs <= rhs * (1 + 1e-12) + 1e-15, "%s t=%u: %g > %g (xi %g)",
                bi ? "bi" : "uni", t, lhs, rhs, xi);
      memcpy(E, En, sizeof E);
    }
    gc_compressor_free(Cd);
    gc_sim_free(s);
  }
}

/* 7.18: on IID gradients |S|/K grows with P and lies in [1, P]. */
Test(algo, downlink_saving_grows_with_p, .init = gc_test_quiet)
{
  enum { DD = 2000, KK = 4 };
  static double g[8][DD], x0[DD];
  double prev = 0;
  for (size_t nw = 2; nw <= 8; nw *= 2) {
    gc_algo_config c;
    gc_algo_config_default(&c);
    c.kind = GC_ALGO_UNI;
    c.workers = nw;
    c.n = DD;
    c.up = tc_topk();
    c.up_params.k = KK;
    gc_sim *s = gc_sim_alloc(&c, x0);
    const void *gp[8];
    double mean = 0;
    for (uint32_t t = 0; t < 10; t++) {
      for (size_t p = 0; p < nw; p++) {
        gc_test_fill_normal(g[p], DD, 1000 * t + p);
        gp[p] = g[p];
      }
      cr_assert(eq(int, gc_sim_step(s, gp, 0.1), GC_SUCCESS));
      size_t S = gc_server_support_union(gc_sim_server(s));
      cr_assert(S >= KK && S <= nw * KK);
      mean += (double) S / KK / 10;
    }
    cr_assert(mean > prev, "P=%zu: |S|/K = %g", nw, mean);
    prev = mean;
    gc_sim_free(s);
  }
}

/* DGC momentum correction inside uni: with k = d masking clears u at every
 * step, so it is plain SGD; with k < d the momentum changes the run. */
Test(algo, dgc_momentum_in_uni, .init = gc_test_quiet)
{
  gc_algo_config sgd, m, plain;
  config(&sgd, GC_ALGO_SGD, tc_topk(), tc_topk(), D, D);
  config(&m, GC_ALGO_UNI, tc_topk(), tc_topk(), D, D);
  m.momentum = 0.9;
  /* masking clears u each step: the same sums as SGD but for the
   * momentum's 0.9 * 0 + g, rounding-free, and the memory's adds: ~u a
   * step over 30 steps; 1e-12 keeps a factor 100.  With k < d the runs
   * part by far more than rounding (> 1e-6). */
  cr_assert(run_pair(&sgd, &m, 0.05, 30, NULL, NULL) <= 1e-12);
  config(&m, GC_ALGO_UNI, tc_topk(), tc_topk(), 4, 4);
  m.momentum = 0.9;
  config(&plain, GC_ALGO_UNI, tc_topk(), tc_topk(), 4, 4);
  cr_assert(run_pair(&plain, &m, 0.05, 30, NULL, NULL) > 1e-6);
  m.momentum = 1.0;
  cr_assert(eq(int, gc_algo_config_check(&m), GC_EINVAL));
}

/* Checkpoints (gc_sim_state_*): T steps, save, restore into a fresh
 * simulator, T more steps, must leave exactly the state of 2T uninterrupted
 * steps, for every method and for the stateful extras (DGC momentum, EF21
 * gradient initialisation, PowerSGD's warm start). */
static void run_steps(gc_sim *s, const quad *q, size_t steps)
{
  double g[PMAX][D];
  const void *gp[PMAX];
  for (size_t p = 0; p < P; p++)
    gp[p] = g[p];
  for (size_t t = 0; t < steps; t++) {
    quad_grads(q, gc_sim_point(s), g);
    cr_assert(eq(int, gc_sim_step(s, gp, 0.05), GC_SUCCESS));
  }
}

static void check_resume(const gc_algo_config *c, const char *what)
{
  enum { T = 7 };
  quad q;
  quad_init(&q, P, 31);
  double x0[D] = {0};
  gc_sim *whole = gc_sim_alloc(c, x0), *first = gc_sim_alloc(c, x0);
  cr_assert(whole && first, "%s", what);
  run_steps(whole, &q, 2 * T);
  run_steps(first, &q, T);
  size_t bytes = gc_sim_state_bytes(first);
  uint8_t *saved = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes);
  gc_sim_state_save(first, saved);
  gc_sim_free(first);
  gc_sim *resumed = gc_sim_alloc(c, x0);
  cr_assert(eq(int, gc_sim_state_load(resumed, saved, bytes - 1), GC_EBADLEN));
  cr_assert(eq(int, gc_sim_state_load(resumed, saved, bytes), GC_SUCCESS));
  run_steps(resumed, &q, T);
  gc_sim_state_save(whole, a);
  gc_sim_state_save(resumed, b);
  cr_assert(memcmp(a, b, bytes) == 0, "%s: resumed state differs", what);
  cr_assert(memcmp(gc_sim_point(whole), gc_sim_point(resumed), sizeof x0) == 0,
            "%s", what);
  /* and the state is not trivially empty: x moved */
  cr_assert(memcmp(gc_sim_point(whole), x0, sizeof x0) != 0, "%s", what);
  free(saved); free(a); free(b);
  gc_sim_free(whole);
  gc_sim_free(resumed);
}

Test(algo, resume_is_bit_identical_every_method, .init = gc_test_quiet)
{
  for (int k = 0; k < GC_ALGO_COUNT; k++) {
    gc_algo_config c;
    config(&c, (gc_algo_kind) k, tc_topk(), tc_topk(), 4, 5);
    check_resume(&c, gc_algo_name((gc_algo_kind) k));
  }
  gc_algo_config c;
  config(&c, GC_ALGO_UNI, tc_topk(), tc_topk(), 4, 4);
  c.momentum = 0.9;
  check_resume(&c, "uni + DGC momentum");
  config(&c, GC_ALGO_EF21, tc_topk(), tc_topk(), 4, 4);
  c.ef21_init = GC_EF21_INIT_GRADIENT;
  check_resume(&c, "ef21, gradient initialisation");
  const gc_compressor_type *psgd = gc_compressor_type_by_name("powersgd");
  cr_assert_not_null(psgd);
  static const gc_segment shape[2] = { { 0, 5, 6 }, { 30, 1, 10 } };
  config(&c, GC_ALGO_BI, psgd, psgd, 0, 0);
  c.up_params.rank = c.down_params.rank = 1;
  c.up_params.segments = c.down_params.segments = shape;
  c.up_params.nsegments = c.down_params.nsegments = 2;
  check_resume(&c, "bi + powersgd");
}

/* A compressor setting the compressor rejects reaches the caller with the
 * compressor's code and reason, not as an allocation failure, from every
 * allocator. */
Test(algo, compressor_errors_keep_their_reason, .init = gc_test_quiet)
{
  double x0[D] = { 0 };
  gc_algo_config c;
  for (int down = 0; down < 2; down++) {
    config(&c, GC_ALGO_BI, gc_compressor_topk, gc_compressor_topk,
           down ? 4 : D + 1, down ? D + 1 : 4);
    cr_assert_null(gc_sim_alloc(&c, x0));
    cr_assert(strstr(gc_last_error(), "exceeds the vector length") != NULL, "%s",
              gc_last_error());
    cr_assert(eq(int, gc_last_error_code(), GC_EINVAL));
    cr_assert_null(gc_server_alloc(&c));
    cr_assert(strstr(gc_last_error(), "exceeds the vector length") != NULL, "%s",
              gc_last_error());
    cr_assert(eq(int, gc_last_error_code(), GC_EINVAL));
  }
  /* uni never allocates a downlink compressor: its setting is not checked */
  config(&c, GC_ALGO_UNI, gc_compressor_topk, gc_compressor_topk, 4, D + 1);
  gc_sim *s = gc_sim_alloc(&c, x0);
  cr_assert_not_null(s, "%s", gc_last_error());
  gc_sim_free(s);
}

/* EF21-BC's broadcast memory w starts at x0 and must be finite. */
Test(algo, ef21_bc_start_must_be_finite, .init = gc_test_quiet)
{
  gc_algo_config c;
  config(&c, GC_ALGO_EF21_BC, tc_topk(), tc_topk(), 4, 4);
  double x0[D] = { 0 };
  x0[5] = NAN;
  cr_assert_null(gc_sim_alloc(&c, x0));
  x0[5] = 1.0;
  gc_sim *s = gc_sim_alloc(&c, x0);
  cr_assert_not_null(s, "%s", gc_last_error());
  cr_assert(memcmp(gc_sim_point(s), x0, sizeof x0) == 0);
  cr_assert(memcmp(gc_sim_model(s), x0, sizeof x0) == 0);
  gc_sim_free(s);
}

/* The descriptor table (gc_algo_rules.h): a row for every kind (one left
 * out of the designated initializers would be all zeros, without a name),
 * and columns that agree with each other, since algo.c, cuda/algo/sim.cu, the
 * probes and the bounds each read a different column of the same row. */
Test(algo, table_rows_are_whole_and_consistent)
{
  for (int i = 0; i < GC_ALGO_COUNT; i++) {
    const gc__algo_desc *A = gc__algo((gc_algo_kind) i);
    cr_assert_not_null(A->name, "kind %d has no row", i);
    cr_assert(strcmp(A->name, "unknown") != 0, "kind %d has no row", i);
    gc_algo_kind k;
    cr_assert(eq(int, gc_algo_by_name(A->name, &k), GC_SUCCESS));
    cr_assert(eq(int, (int) k, i), "%s: two rows share the name", A->name);
    /* a compressed uplink runs behind a worker memory, a dense one not */
    cr_assert(eq(int, A->up == GC__UP_COMP, A->worker_ef != GC_EF_NONE), "%s", A->name);
    /* the server rule decides the downlink's coding and memory */
    int down = A->server == GC__SERVER_EXACT ? GC__DOWN_EXACT
               : A->server == GC__SERVER_EF || A->server == GC__SERVER_EF21_BC
                   ? GC__DOWN_COMP : GC__DOWN_DENSE;
    cr_assert(eq(int, (int) A->down, down), "%s: downlink coding", A->name);
    cr_assert(eq(int, A->server == GC__SERVER_EF, A->server_ef != GC_EF_NONE),
              "%s: server memory", A->name);
    /* EF21's server rules go with EF21's worker memory */
    cr_assert(eq(int, A->server == GC__SERVER_EF21 || A->server == GC__SERVER_EF21_BC,
                 A->worker_ef == GC_EF_EF21), "%s: EF21", A->name);
    /* a memory on the step (BEFORE) sends lr*g, so the workers apply
     * x -= D; EF21-BC's downlink moves the model; the rest send gradients */
    gc__apply_rule apply = A->worker_ef == GC_EF_BEFORE ? GC__APPLY_STEP
                           : A->server == GC__SERVER_EF21_BC ? GC__APPLY_MODEL
                           : GC__APPLY_GRAD;
    cr_assert(eq(int, (int) A->apply, (int) apply), "%s: apply", A->name);
    /* DGC replaces a plain residual on lr*g */
    if (A->flags & GC__ALGO_DGC)
      cr_assert(eq(int, (int) A->worker_ef, GC_EF_BEFORE), "%s: DGC", A->name);
    if (A->flags & GC__ALGO_SHARED_DRAWS)
      cr_assert(eq(int, (int) A->collective, GC__COLL_ALLREDUCE), "%s: shared", A->name);
    /* collectives have no downlink of their own to compress */
    if (A->collective != GC__COLL_NONE)
      cr_assert(A->down != GC__DOWN_COMP, "%s: collective", A->name);
    /* the 4.3 memory: none without memories, the server's where it keeps
     * one (model units with BEFORE, gradient units with AFTER) */
    gc__memory m = A->worker_ef == GC_EF_EF21 ? GC__MEM_OTHER
                   : A->server_ef == GC_EF_BEFORE ? GC__MEM_SERVER
                   : A->server_ef == GC_EF_AFTER ? GC__MEM_SERVER_GRAD
                   : A->worker_ef == GC_EF_BEFORE ? GC__MEM_WORKER : GC__MEM_NONE;
    cr_assert(eq(int, (int) A->memory, (int) m), "%s: 4.3 memory", A->name);
    if (A->bounds & GC__BOUND_NONCONVEX)
      cr_assert(A->memory != GC__MEM_OTHER, "%s: nonconvex_4.3", A->name);
    if (A->flags & GC__ALGO_TRAIN_BOUNDS)
      cr_assert(A->memory != GC__MEM_OTHER, "%s: training's bounds", A->name);
  }
  cr_assert(eq(str, (char *) gc__algo(GC_ALGO_COUNT)->name, "unknown"));
  cr_assert(eq(str, (char *) gc_algo_name(GC_ALGO_COUNT), "unknown"));
  /* the lists of the messages: the rows with every bit of the flags, in
   * kind order (built here from the rows, so a new kind needs no edit) */
  static const unsigned flags[] = { 0, GC__ALGO_GPU, GC__ALGO_DGC,
                                    GC__ALGO_GPU | GC__ALGO_TRAIN_BOUNDS };
  for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
    char want[512] = "", buf[512];
    for (int i = 0; i < GC_ALGO_COUNT; i++)
      if ((gc__algo((gc_algo_kind) i)->flags & flags[f]) == flags[f])
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s",
                 *want ? ", " : "", gc_algo_name((gc_algo_kind) i));
    cr_assert(gc__algo_names(flags[f], ", ", buf, sizeof buf) == buf);
    cr_assert(eq(str, buf, want), "flags %u", flags[f]);
  }
  char buf[8];
  gc__algo_names(0, ",", buf, sizeof buf);
  cr_assert(eq(str, buf, "sgd,uni"), "truncated to fit");
}
