/* test_cuda_train.c -- training on the GPU against the CPU (issue #16,
 * point 4): the same weights and batches give the same losses and
 * gradients to float rounding, and the top-K messages built from them
 * select the same coordinates except where two magnitudes are nearer to
 * each other than that rounding (a near-tie at the K-th largest); and
 * `train --bounds` writes the CPU's ladder to that rounding (issue #27,
 * point 5).  Runs through gc_cuda_nn_device, the type table `train
 * --device cuda` uses.  GPU tests skip without a device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_compressor.h"
#include "gc_cuda_nn.h"
#include "gc_errno.h"
#include "gc_train.h"
#include "gc_rng.h"
#include "gc_test.h"
#include "gc_test_cuda.h"
#include "gc_train_run.h"

TestSuite(cuda_train, .init = gc_test_quiet);

/* The decoded top-K message of g: nonzero exactly on its K coordinates. */
static void topk_support(gc_compressor *c, const float *g, size_t d,
                         uint8_t *buf, float *y, uint8_t *in)
{
  memset(y, 0, d * sizeof *y);
  gc_test_roundtrip_f32(c, g, 0, buf, y, NULL);
  for (size_t i = 0; i < d; i++)
    in[i] = y[i] != 0.0f;
}

static int cmp_desc(const void *a, const void *b)
{
  float x = *(const float *) a, y = *(const float *) b;
  return (x < y) - (x > y);
}

/* Error model.  float32 forward and backward passes in other summation
 * orders: the loss agrees to about 1e-6 relative, and a gradient entry to a
 * few units of 2^-24 times the sums of |terms| behind it (up to ~1e4 terms
 * in the CNNs' first linear layer), bounded here by eps = 1e-4 of the
 * largest entry.  Except where a ReLU input or a max-pool pair sits within
 * rounding of its switching point: there the two sides take different
 * branches and the entries fed by it differ by O(1) of their size.  Such
 * kinks are rare in the plain nets (a fraction `kinks` of the entries may
 * exceed eps) and common below a BatchNorm, whose statistics couple every
 * example of a batch (test_cuda_nn checks those layers block by block).
 * rel_l2 bounds ||g_gpu - g_cpu|| / ||g_cpu|| over the whole vector: its
 * rounding part is ~1e-6 (u sqrt(m) per entry); the rest is what the
 * kink-moved entries may add, so the plain nets allow 1e-3 (1% of entries
 * past eps, each small next to ||g||) and the BatchNorm nets the robust
 * bounds of test_cuda_nn (3e-2 relative L2, 20% of entries past eps). */
typedef struct tol {
  double kinks, rel_l2;
} tol;

static void same_messages(const char *model, size_t G, size_t B, double density,
                          tol t)
{
  const gc_nn_device_type *D = &gc_cuda_nn_device;
  void *dev = D->alloc(model, G, B);
  cr_assert(dev != NULL, "%s: %s", model, gc_last_error());
  gc_nn *cpu = gc_nn_alloc_model(model, B);
  cr_assert(cpu != NULL);
  size_t d = gc_nn_nparams(cpu), ns = gc_nn_nstats(cpu), dim = gc_nn_in_dim(cpu);
  float *w = malloc(d * sizeof *w), *x = malloc(G * B * dim * sizeof *x);
  float *st = calloc(G * ns + 1, sizeof *st), *st_cpu = calloc(G * ns + 1, sizeof *st);
  float *g = malloc(G * d * sizeof *g), *gc = malloc(d * sizeof *gc);
  float *y = malloc(d * sizeof *y), *mag = malloc(d * sizeof *mag);
  double *loss = malloc(G * sizeof *loss);
  uint8_t *lab = malloc(G * B), *in_gpu = malloc(d), *in_cpu = malloc(d);
  cr_assert(w && x && st && st_cpu && g && gc && y && mag && loss && lab && in_gpu && in_cpu);
  gc_nn_init(cpu, w, st, 3);
  for (size_t j = 1; j < G; j++)
    memcpy(st + j * ns, st, ns * sizeof *st);
  memcpy(st_cpu, st, (G * ns + 1) * sizeof *st);
  for (size_t i = 0; i < G * B * dim; i++)
    x[i] = (float) gc_rng_normal(7, 1, 0, i);
  for (size_t i = 0; i < G * B; i++)
    lab[i] = (uint8_t) ((i * 7 + 3) % 10);
  cr_assert(eq(int, D->grads(dev, w, st, x, lab, G, B, 1, 11, 0, 5, loss, g),
               GC_SUCCESS), "%s: %s", model, gc_last_error());

  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.density = density;
  gc_compressor *c = gc_compressor_alloc(gc_compressor_topk, d, &p);
  cr_assert(c != NULL);
  uint8_t *buf = malloc(gc_compressor_max_bytes(c));
  cr_assert(buf != NULL);
  size_t K = (size_t) (density * (double) d);
  for (size_t j = 0; j < G; j++) {
    cr_assert(gc_nn_forward(cpu, w, st_cpu + j * ns, x + j * B * dim, B, 1, 11,
                            (uint32_t) j, 5) != NULL);
    double lc = gc_nn_loss(cpu, lab + j * B);
    gc_nn_backward(cpu, w, NULL, gc, NULL);
    cr_assert(fabs(loss[j] - lc) <= 1e-5 * (1 + fabs(lc)), "%s group %zu: loss gpu %.9g"
              " cpu %.9g", model, j, loss[j], lc);
    const float *gg = g + j * d;
    double gmax = 0, e2 = 0, c2 = 0;
    for (size_t i = 0; i < d; i++) {
      gmax = fmax(gmax, fabs(gc[i]));
      e2 += ((double) gg[i] - gc[i]) * ((double) gg[i] - gc[i]);
      c2 += (double) gc[i] * gc[i];
    }
    double eps = 1e-4 * gmax;
    size_t beyond = 0;
    for (size_t i = 0; i < d; i++)
      beyond += fabs(gg[i] - gc[i]) > eps;
    cr_assert(sqrt(e2) <= t.rel_l2 * sqrt(c2), "%s group %zu: ||g_gpu - g_cpu|| / ||g_cpu||"
              " = %.3g > %.3g", model, j, sqrt(e2 / c2), t.rel_l2);
    double allowed = t.kinks * (double) d;
    cr_assert(beyond <= allowed, "%s group %zu: %zu of %zu entries"
              " differ by more than %.3g", model, j, beyond, d, eps);
    /* the messages: the same K coordinates but for near-ties at the K-th
     * largest magnitude: a coordinate on one side only lies within both
     * sides' errors of it (2 eps, or its own error where a kink moved it) */
    topk_support(c, gg, d, buf, y, in_gpu);
    topk_support(c, gc, d, buf, y, in_cpu);
    for (size_t i = 0; i < d; i++)
      mag[i] = fabsf(gc[i]);
    qsort(mag, d, sizeof *mag, cmp_desc);
    double tau = mag[K - 1];
    size_t differ = 0;
    for (size_t i = 0; i < d; i++) {
      if (in_gpu[i] == in_cpu[i])
        continue;
      differ++;
      double band = 2 * fmax(eps, fabs(gg[i] - gc[i]));
      cr_assert(fabs(fabs(gc[i]) - tau) <= band, "%s group %zu: coordinate %zu (|g| %.9g)"
                " selected on one side only, %.3g from the K-th largest %.9g (band %.3g)",
                model, j, i, fabs(gc[i]), fabs(fabs(gc[i]) - tau), tau, band);
    }
    double allowed_differ = fmax(0.1, t.kinks) * (double) K + 2;
    cr_assert(differ <= allowed_differ, "%s group %zu: %zu of"
              " K = %zu coordinates differ", model, j, differ, K);
  }
  /* the running statistics each worker updated (BatchNorm models): means
   * and variances of float32 activations, summed in double on both sides,
   * so they differ only by the activations' own forward-pass difference:
   * ~1e-6 relative per layer, more below a kink; 1e-3 relative plus
   * absolute, as test_cuda_nn allows VGG-19's statistics, covers the
   * deepest net and still separates the biased from the unbiased variance
   * (a factor m/(m-1), 1e-3 or more for these batches) */
  for (size_t i = 0; i < G * ns; i++)
    cr_assert(fabs(st[i] - st_cpu[i]) <= 1e-3 * (1 + fabs(st_cpu[i])),
              "%s: running statistic %zu gpu %.9g cpu %.9g", model, i, st[i], st_cpu[i]);
  gc_compressor_free(c);
  free(buf); free(w); free(x); free(st); free(st_cpu); free(g); free(gc); free(y);
  free(mag); free(loss); free(lab); free(in_gpu); free(in_cpu);
  gc_nn_free(cpu);
  D->free(dev);
}

Test(cuda_train, mlp_messages_match_the_cpu)
{
  gc_test_require_gpu();
  same_messages("mnist-mlp", 4, 16, 0.01, (tol) { 0.01, 1e-3 });
  same_messages("fmnist-mlp", 3, 10, 0.001, (tol) { 0.01, 1e-3 });
}

Test(cuda_train, cnn_messages_match_the_cpu)
{
  gc_test_require_gpu();
  same_messages("mnist-cnn", 3, 8, 0.001, (tol) { 0.01, 1e-3 });   /* dropout per worker */
  same_messages("fmnist-cnn", 3, 8, 0.01, (tol) { 0.2, 3e-2 });    /* BatchNorm per worker */
}

Test(cuda_train, vgg_messages_match_the_cpu)
{
  gc_test_require_gpu();
  same_messages("cifar-vgg19", 2, 4, 0.001, (tol) { 0.2, 3e-2 });
}

/* ---- --bounds on the GPU (issue 27, item 5) ------------------------------ */

/* Column `col` of bounds.csv's row `row` (1: the first after the header),
 * as text in `out` (xi_kind is a word). */
static void bounds_text(const char *dir, int row, const char *col, char *out, size_t n)
{
  char p[700];
  size_t len;
  snprintf(p, sizeof p, "%s/bounds.csv", dir);
  char *csv = gc_test_slurp(p, &len);
  cr_assert_not_null(csv, "%s", p);
  const char *h = csv, *end = strchr(h, '\n');
  cr_assert_not_null(end, "%s: no header", p);
  size_t cl = strlen(col);
  int k = 0;
  while (!(strncmp(h, col, cl) == 0 && (h[cl] == ',' || h[cl] == '\n'))) {
    h = strchr(h, ',');
    cr_assert(h && h < end, "no column %s in %s", col, p);
    h++;
    k++;
  }
  const char *line = end + 1;
  for (int r = 1; r < row; r++) {
    line = strchr(line, '\n');
    cr_assert(line && line[1], "%s: no row %d", p, row);
    line++;
  }
  for (; k > 0; k--)
    line = strchr(line, ',') + 1;
  size_t m = strcspn(line, ",\n");
  cr_assert(m < n);
  memcpy(out, line, m);
  out[m] = '\0';
  free(csv);
}

static double bounds_num(const char *dir, int row, const char *col)
{
  char t[64];
  bounds_text(dir, row, col, t, sizeof t);
  return strtod(t, NULL);
}

/* The same short MNIST-MLP `train --bounds 1` on the CPU and through
 * gc_cuda_nn_device (what `train --device cuda` runs: the nets on the GPU,
 * the steps and the probes on the CPU): P = 2, T = 2 steps of 10 examples
 * per worker, full-gradient samples at both steps, L over 100 examples.
 * Every column of bounds.csv agrees within the tolerance derived here
 * (docs/theory.md 4.9 states it; tools/gpu-check applies the same).
 *
 * Error model.  Both runs start from the same weights (initialised on the
 * CPU) and draw the same batches.  A gradient is a chain of float32 sums
 * (784, 64 and 10 terms, <= 100 examples): in any summation order each is
 * within gamma_m ~ m u of the exact value relative to the sum of
 * magnitudes (u = 2^-24; Higham, Accuracy and Stability of Numerical
 * Algorithms, 3.1; cuBLAS runs plain float32 here, no TF32, and an FMA only
 * removes a rounding), so as in test_train's
 * device_seam_bounds_agree_with_the_cpu each path's gradient is within
 * eps Gw of the exact one, eps = 1000 u, and the two paths' within
 * 2 eps Gw at the same point.  Gw = P sqrt(M2_max) bounds every gradient
 * norm of the run: the workers' gradients share grad f, so <g_p, g_q> >= 0
 * and ||g_p||^2 <= P^2 ||gbar||^2; the full and L-batch gradients average
 * more examples.  (A ReLU input or a top-K near-tie within rounding of its
 * switching point, rare in the plain MLP as test_cuda_train's messages
 * show, would send the paths apart and show as one large miss.)
 * The trajectories part by D_t = ||dx_t|| + max_p ||dE^p_t|| (E^p the
 * workers' memories): with the same top-K supports, x and E^p are
 * projections of a^p = E^p + lr g_p, so
 *   D_{t+1} <= A D_t + sqrt(2) lr 2 eps Gw,  A = sqrt(2) (1 + lr L),
 * D_0 = 0, D = D_T = sqrt(2) lr 2 eps Gw (1 + A) for T = 2, and any
 * gradient of the run differs by at most
 *   dg = 2 eps Gw + L D = 2 eps Gw k,  k = 1 + sqrt(2) lr L (1 + A).
 * Then, column by column (v the CPU's value):
 *   squared gradient norms (M2_*, grad2_*): 2 sqrt(v) dg + dg^2 (for the
 *     means by Cauchy-Schwarz, for the max as the max of the differences);
 *   squared memory norms (mem_norm2, worker_mem2, mem2_mean): 2 sqrt(v) D
 *     + D^2;
 *   gamma_hat = max_t ||a_t - TopK(a_t)|| / ||a_t||, a_t = E_t + lr gbar_t:
 *     ||da_t|| <= D + lr dg, and ||a_t|| >= lr ||gbar_t|| >= lr g_min (E_t
 *     and gbar_t do not cancel: E_t is what was left of earlier gradients
 *     sharing grad f), g_min^2 = 2 M2_mean - M2_max the smaller of the two
 *     ||gbar_t||^2; so within dgh = 2 da, da = (D + lr dg) / (lr g_min);
 *   xi = ||TopK(mean a^p) - mean m^p|| / (lr ||gbar||) (u = 1 for uni): the
 *     numerator within 2 (D + lr dg), the denominator dg / g_min relative:
 *     dxi = 2 da + xi dg / g_min;
 *   rec2_mean, the mean of e_t^2 with e_2 = g1 (g0 + x0) lr M0 + (g1 + x1)
 *     lr M1 (gamma_hat's running maxima g, xi_t x, ||gbar||'s running
 *     maxima M): e relative within re = dgh / gamma_hat + (dgh + dxi) /
 *     (gamma_hat + xi) + dg / g_min, squared: 2 re + re^2;
 *   L, L_epoch: the power iteration's finite difference ||g(x + h v) -
 *     g(x - h v)|| / 2h, h = 1e-3 (bound_fd_step): the gradients'
 *     differences do not cancel in it, dL = 2 dg / 2h = dg / h, which
 *     amplifies the float32 rounding of a gradient by Gw / (h L) (about
 *     350-fold here: dL ~ 7% of L);
 *   gdiff2 = ||g(x - E) - g(x)||^2, another finite difference: its vector
 *     within dv = 2 dg, so 2 sqrt(v) dv + dv^2; inner = <that vector, g(x)>
 *     within dv Gw + sqrt(gdiff2) dg;
 *   f0, term_f0: the loss at x_0, the same weights: 2 eps relative.
 * The terms, the bound and the rungs are sums of these times L or L^2 (a
 * relative error (1 + dL/L)^2 - 1), and r0, r1 carry c^2 with c = (gamma'
 * + xi) / (1 - gamma'), gamma' = gamma (exact) or gamma_hat: to first order
 * |dc| / c <= (dgamma' + dxi) / (gamma' + xi) + dgamma' / (1 - gamma').
 * Each ratio column adds grad2_mean's relative error to its rung's. */
static double sq_tol(double v, double d) { return 2 * sqrt(v) * d + d * d; }

Test(cuda_train, bounds_ladder_matches_the_cpu)
{
  gc_test_require_gpu();
  gc_test_need_dataset("mnist");
  char a[600], b[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("bounds-cpu"));
  snprintf(b, sizeof b, "%s", gc_test_tmp("bounds-cuda"));
  gc_train_config c;
  gc_train_config_default(&c);
  c.dataset = "mnist";
  c.model = "mnist-mlp";
  c.data_dir = gc_test_data_dir();
  c.quiet = 1;
  c.out = a;
  c.algorithm = "uni";
  c.compressor = "topk";
  c.workers = 2;
  c.batch = 10;
  c.density = 0.01;
  c.lr = 0.01;                        /* lr L ~ 0.15: k below ~ 1.6 */
  c.train_subset = 40;                /* two steps of 2 x 10 */
  c.test_subset = 100;
  c.epochs = 1;
  c.bounds_every = 1;
  c.bounds_samples = 2;               /* a full gradient at both steps */
  c.bounds_hvps = 3;
  c.bounds_batch = 100;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "cpu: %s", gc_last_error());
  c.out = b;
  c.device = &gc_cuda_nn_device;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "cuda: %s", gc_last_error());

  /* the columns that no float enters: the same text */
  static const char *const same[] = { "epoch", "steps", "lr", "gamma", "xi_kind",
                                      "grad2_samples", "server_mem2", "r7_curvature",
                                      "ratio_r7" };
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    char x[64], y[64];
    bounds_text(a, 1, same[i], x, sizeof x);
    bounds_text(b, 1, same[i], y, sizeof y);
    cr_assert_str_eq(x, y, "%s: cpu %s, cuda %s", same[i], x, y);
  }
  cr_assert_eq(bounds_num(a, 1, "steps"), 2);

#define V(col) bounds_num(a, 1, col)
  const double eps = 1000 * 0x1p-24, h = 1e-3, lr = c.lr, P = (double) c.workers;
  double L = V("L"), m2max = V("M2_max"), m2mean = V("M2_mean"), g2 = V("grad2_mean");
  double Gw = P * sqrt(m2max), gmin = sqrt(2 * m2mean - m2max);
  double A = sqrt(2) * (1 + lr * L), k = 1 + sqrt(2) * lr * L * (1 + A);
  double D = sqrt(2) * lr * 2 * eps * Gw * (1 + A), dg = 2 * eps * Gw * k;
  double gh = V("gamma_hat"), xi = V("xi_max"), gamma = V("gamma");
  double da = (D + lr * dg) / (lr * gmin), dgh = 2 * da, dxi = 2 * da + xi * dg / gmin;
  double dL = dg / h, rL = dL / L, rL2 = 2 * rL + rL * rL;
  /* the tolerance must leave the test something to test: a wrong step or
   * normalisation moves L by factors */
  cr_assert(dL <= 0.1 * L, "the float32 error bound on L, %g, is no test of L = %g", dL, L);
  double re = dgh / gh + (dgh + dxi) / (gh + xi) + dg / gmin, rrec = 2 * re + re * re;
  double gd2 = V("gdiff2_mean"), dv = 2 * dg, d_inner = dv * Gw + sqrt(gd2) * dg;
  double mem2 = V("mem2_mean"), d_mem2 = sq_tol(mem2, D), rec2 = V("rec2_mean");
  double t0 = V("term_f0"), ts = V("term_sgd"), tc = V("term_compression");
  double rM = sq_tol(m2max, dg) / m2max, rMm = sq_tol(m2mean, dg) / m2mean;
  double sgdm = L * lr * m2mean;      /* r4..r6's SGD term */
  double rc0 = 2 * dxi / (gamma + xi);
  double rc1 = 2 * ((dgh + dxi) / (gh + xi) + dgh / (1 - gh));
  double d_t0 = 2 * eps * t0, d_ts = ts * (rL + rM), d_tc = tc * (rL2 + rM + rc0);
  double d_sgdm = sgdm * (rL + rMm);
  double r1c = V("r1_delta") - t0 - ts;   /* r1's compression term */
  struct { const char *col; double tol; } cols[] = {
    { "f0", 2 * eps * V("f0") },
    { "L", dL },
    { "L_epoch", dL },
    { "M2_max", sq_tol(m2max, dg) },
    { "M2_mean", sq_tol(m2mean, dg) },
    { "grad2_mean", sq_tol(g2, dg) },
    { "grad2_epoch", sq_tol(V("grad2_epoch"), dg) },
    { "gamma_hat", dgh },
    { "xi_max", dxi },
    { "xi_mean", dxi },
    { "mem_norm2", sq_tol(V("mem_norm2"), D) },
    { "worker_mem2", sq_tol(V("worker_mem2"), D) },
    { "mem2_mean", d_mem2 },
    { "rec2_mean", rrec * rec2 },
    { "gdiff2_mean", sq_tol(gd2, dv) },
    { "inner_mean", d_inner },
    { "term_f0", d_t0 },
    { "term_sgd", d_ts },
    { "term_compression", d_tc },
    /* the rungs, r0..r6 in order, then the bound (= r0) */
    { "r0_theorem", d_t0 + d_ts + d_tc },
    { "r1_delta", d_t0 + d_ts + fabs(r1c) * (rL2 + rM + rc1) },
    { "r2_xi", d_t0 + d_ts + L * L * rec2 * (rL2 + rrec) },
    { "r3_memory", d_t0 + d_ts + L * L * (mem2 * rL2 + d_mem2) },
    { "r4_m2", d_t0 + d_sgdm + L * L * (mem2 * rL2 + d_mem2) },
    { "r5_gradient", d_t0 + d_sgdm + sq_tol(gd2, dv) },
    { "r6_inner", 0.5 * (d_t0 + d_sgdm) + d_inner },
    { "bound", d_t0 + d_ts + d_tc },
  };
  static const char *const ratio[] = { "ratio_r0", "ratio_r1", "ratio_r2", "ratio_r3",
                                       "ratio_r4", "ratio_r5", "ratio_r6", "ratio" };
  const size_t nc = sizeof cols / sizeof cols[0], first_rung = nc - 8;
  double rg2 = sq_tol(g2, dg) / g2;
  for (size_t i = 0; i < nc; i++) {
    double x = V(cols[i].col), y = bounds_num(b, 1, cols[i].col);
    if (isnan(x)) {   /* a rung whose memory check failed: on both sides */
      cr_assert(isnan(y), "%s: cpu nan, cuda %.9g", cols[i].col, y);
    } else {
      cr_assert(fabs(x - y) <= cols[i].tol, "%s: cpu %.9g, cuda %.9g (tolerance %.3g)",
                cols[i].col, x, y, cols[i].tol);
    }
    if (i < first_rung)
      continue;
    /* its ratio to grad2_mean: the two relative errors, first order */
    const char *q = ratio[i - first_rung];
    double qx = V(q), qy = bounds_num(b, 1, q);
    if (isnan(qx)) {
      cr_assert(isnan(qy), "%s: cpu nan, cuda %.9g", q, qy);
      continue;
    }
    double qtol = (cols[i].tol / fabs(x) + rg2) * fabs(qx);
    cr_assert(fabs(qx - qy) <= qtol, "%s: cpu %.9g, cuda %.9g (tolerance %.3g)", q, qx, qy,
              qtol);
  }
#undef V
}
