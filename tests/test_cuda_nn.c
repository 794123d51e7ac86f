/* test_cuda_nn.c -- the GPU nets (gc_cuda_nn.h) against lib/nn/nn.c, group by
 * group: loss, parameter gradient and updated BatchNorm statistics of every
 * group equal G separate CPU forward/loss/backward calls (each with its own
 * statistics copy and dropout worker), to within float rounding.
 *
 * Error model.  Both sides compute in float32 and differ only in the order
 * of their sums (cuBLAS vs OpenBLAS/Winograd, tree vs lanes): a sum of m
 * terms differs by about gamma_m = m 2^-24 times the sum of |terms| in the
 * worst case, u sqrt(m) relative in practice.  So a gradient entry is
 * compared with a scale of its block (the max |entry| of that layer's
 * weight or bias, per group): |gpu - cpu| <= 1e-3 (max|block| + |cpu|),
 * some 100x above the expected difference for m up to 10^4, and far below
 * what a transposed GEMM, a wrong index or a missing term gives (O(1) of
 * the block scale).  Losses: 1e-5 (1e-4 with BatchNorm) absolute plus
 * relative; statistics: 1e-5 of the block max plus relative (1e-3 for
 * VGG-19, whose 16 layers add up more rounding), which still separates the
 * biased from the unbiased variance (a factor m/(m-1), 1e-3 relative for
 * fmnist-cnn's m = B HW, 10% for VGG's 2x2 maps).
 *
 * Kinks.  Gradients jump where a ReLU input or a max-pool near-tie sits
 * within rounding of the kink, so a rounding difference can move one term.
 * Weights, biases and inputs are rounded to coarse dyadic grids, so the
 * first two GEMM layers' sums are exact in any order and their ReLU and
 * max-pool decisions are the same bits on both sides.  Where many kink
 * inputs are inexact anyway (after a BatchNorm: fmnist-cnn, VGG-19),
 * blocks below the last such kink get a robust check instead (relative L2 error <= 3e-2 and 80% of the entries
 * within the tight bound: one moved term changes one output channel's row,
 * a bug changes them all).
 *
 * GPU tests skip without a device; the argument errors, the no-device
 * answer and the checkers themselves run everywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "gc_cuda.h"
#include "gc_cuda_nn.h"
#include "gc_errno.h"
#include "gc_nn.h"
#include "gc_rng.h"
#include "gc_test.h"
#include "gc_test_cuda.h"

/* ---- inputs on dyadic grids ------------------------------------------ */

static double grid(double v, double q) { return q * nearbyint(v / q); }

/* gc_nn_init, then each weight/bias rounded to 2^(floor(log2 bound) - 3)
 * (about 8 levels per bound); BN gamma in {0.5 .. 1.375}, beta in
 * {-0.25 .. 0.1875}, so both enter the gradients. */
static void make_weights(const gc_nn *ref, float *w, uint64_t seed)
{
  gc_nn_init(ref, w, NULL, seed);
  for (size_t l = 0; l < gc_nn_nlayers(ref); l++) {
    const gc_nn_layer *y = gc_nn_layer_at(ref, l);
    if (y->kind == GC_NN_BATCHNORM) {
      for (size_t c = 0; c < y->nw; c++) {
        uint32_t u = gc_rng_u32(seed, 77, (uint32_t) l, c);
        w[y->woff + c] = 0.5f + 0.125f * (float) (u % 8);
        w[y->boff + c] = -0.25f + 0.0625f * (float) ((u >> 8) % 8);
      }
      continue;
    }
    if (!y->nw)
      continue;
    double bound = 1.0 / sqrt((double) (y->nw / y->out_c));
    double q = ldexp(1.0, (int) floor(log2(bound)) - 3);
    for (size_t i = 0; i < y->nw + y->nb; i++)
      w[y->woff + i] = (float) grid(w[y->woff + i], q);
  }
}

/* Multiples of 1/8 in [-2, 2]. */
static void make_inputs(float *x, size_t n, uint8_t *y, size_t m, size_t classes,
                        uint64_t seed)
{
  for (size_t i = 0; i < n; i++)
    x[i] = (float) grid(4 * gc_rng_uniform(seed, 5, 0, i) - 2, 0.125);
  for (size_t i = 0; i < m; i++)
    y[i] = (uint8_t) gc_rng_below(gc_rng_u32(seed, 6, 0, i), (uint32_t) classes);
}

/* Running statistics: train mode, small variances so that the batch term
 * dominates the update (the biased/unbiased distinction shows); eval mode,
 * variances near 1 so that the deep net stays in range. */
static void make_stats(const gc_nn *ref, float *st, size_t copies, int train, uint64_t seed)
{
  size_t ns = gc_nn_nstats(ref);
  for (size_t k = 0; k < copies; k++)
    for (size_t l = 0; l < gc_nn_nlayers(ref); l++) {
      const gc_nn_layer *y = gc_nn_layer_at(ref, l);
      if (y->kind != GC_NN_BATCHNORM)
        continue;
      float *rm = st + k * ns + y->soff, *rv = rm + y->in_c;
      for (size_t c = 0; c < y->in_c; c++) {
        double u = gc_rng_uniform(seed, 9, (uint32_t) k, y->soff + c);
        double v = gc_rng_uniform(seed, 10, (uint32_t) k, y->soff + c);
        rm[c] = (float) ((train ? 0.5 : 0.2) * (u - 0.5));
        rv[c] = (float) (train ? 0.02 + 0.08 * v : 0.75 + 0.5 * v);
      }
    }
}

/* ---- the CPU oracle, group by group ---------------------------------- */

/* train: stats_io [G][ns] updated in place; eval: stats_io [ns] read. */
static void cpu_groups(const char *model, size_t G, size_t B, const float *w,
                       float *stats_io, const float *x, const uint8_t *y, int train,
                       uint64_t seed, uint32_t worker0, uint32_t step, double *loss,
                       float *grads)
{
  gc_nn *nn = gc_nn_alloc_model(model, B);
  cr_assert(nn != NULL, "%s", model);
  size_t d = gc_nn_nparams(nn), ns = gc_nn_nstats(nn), in = gc_nn_in_dim(nn);
  for (size_t g = 0; g < G; g++) {
    float *st = stats_io ? stats_io + (train ? g * ns : 0) : NULL;
    cr_assert(gc_nn_forward(nn, w, st, x + g * B * in, B, train, seed,
                            worker0 + (uint32_t) g, step) != NULL);
    loss[g] = gc_nn_loss(nn, y + g * B);
    cr_assert(gc_nn_backward(nn, w, NULL, grads + g * d, NULL) == GC_SUCCESS);
  }
  gc_nn_free(nn);
}

/* ---- checkers (host only; their own test below) ----------------------- */

static const double TIGHT = 1e-3, ROBUST_L2 = 3e-2, ROBUST_FRAC = 0.8;

/* Layers below this index get the robust check.  Kink inputs stay exact
 * through the first two GEMM layers on the grids; a BatchNorm (its
 * statistics are no dyadic numbers), a dropout (x 4/3) or a third GEMM
 * layer ends that.  When the inexact ReLU and max-pool inputs number more
 * than 10^4 over the N examples (at a rounding difference of ~1e-7 of the
 * spread, ~1e-3 expected moved terms), the layers below the last of them
 * are checked robustly; else 0. */
static size_t robust_below(const gc_nn *ref, size_t N)
{
  size_t last = 0, risk = 0, gemms = 0;
  int exact = 1;
  for (size_t l = 0; l < gc_nn_nlayers(ref); l++) {
    const gc_nn_layer *y = gc_nn_layer_at(ref, l);
    if (y->kind == GC_NN_LINEAR || y->kind == GC_NN_CONV)
      exact &= ++gemms <= 2;
    if (y->kind == GC_NN_BATCHNORM || y->kind == GC_NN_DROPOUT)
      exact = 0;
    if (!exact && (y->kind == GC_NN_RELU || y->kind == GC_NN_MAXPOOL)) {
      risk += N * y->in_c * y->in_h * y->in_w;
      last = l + 1;
    }
  }
  return risk > 10000 ? last : 0;
}

/* One block of n entries: 0 if it passes, else 1 with a description. */
static int check_block(const float *gpu, const float *cpu, size_t n, int robust,
                       char *msg, size_t cap)
{
  double mx = 0, e2 = 0, c2 = 0, worst = 0;
  size_t bad = 0, at = 0;
  for (size_t i = 0; i < n; i++)
    mx = fmax(mx, fabs(cpu[i]));
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double) gpu[i] - cpu[i]);
    e2 += e * e;
    c2 += (double) cpu[i] * cpu[i];
    if (!(e <= TIGHT * (mx + fabs(cpu[i])))) {   /* NaN fails */
      if (!bad)
        at = i;
      bad++;
    }
    if (!(e <= worst))
      worst = e;
  }
  int fail = robust ? !(sqrt(e2) <= ROBUST_L2 * sqrt(c2)) ||
                          (double) (n - bad) < ROBUST_FRAC * (double) n
                    : bad > 0;
  if (fail)
    snprintf(msg, cap, "%zu of %zu entries off (first [%zu]: gpu %.9g cpu %.9g), "
             "max |diff| %.3g, max |cpu| %.3g, rel L2 %.3g%s", bad, n, at,
             (double) gpu[at], (double) cpu[at], worst, mx, c2 > 0 ? sqrt(e2 / c2) : 0.0,
             robust ? " (robust check)" : "");
  return fail;
}

/* The bias of a layer whose output goes straight into a BatchNorm in
 * training mode: BN is then invariant to a per-channel shift of its input,
 * so the exact gradient is 0 and both sides hold rounding noise of a sum over the batch (seen on the
 * H100: 16 of 16 entries at 3e-8 against 5e-8, relative L2 0.77).  Such a
 * block passes when both sides are within 1e-3 of the largest entry of the
 * layer's weight gradient (whose terms are those sums' terms times inputs
 * of order 1); a real bias gradient that leaked through would be of that
 * weight gradient's size. */
static int check_zero_bias(const float *gpu, const float *cpu, size_t n,
                           const float *wgrad, size_t nw, char *msg, size_t cap)
{
  double scale = 0;
  for (size_t i = 0; i < nw; i++)
    scale = fmax(scale, fabs(wgrad[i]));
  for (size_t i = 0; i < n; i++)
    if (!(fmax(fabs(gpu[i]), fabs(cpu[i])) <= 1e-3 * scale)) {
      snprintf(msg, cap, "bias before BatchNorm (exactly 0): entry %zu gpu %.9g cpu %.9g,"
               " above 1e-3 of the weight gradient's largest %.3g", i, (double) gpu[i],
               (double) cpu[i], scale);
      return 1;
    }
  return 0;
}

/* Every weight and bias block of every group; returns the failures and
 * describes the first. */
static size_t check_grads(const gc_nn *ref, size_t G, size_t B, int train,
                          const float *gpu, const float *cpu, char *msg, size_t cap)
{
  size_t d = gc_nn_nparams(ref), rb = robust_below(ref, G * B), fails = 0;
  char one[512];
  for (size_t g = 0; g < G; g++)
    for (size_t l = 0; l < gc_nn_nlayers(ref); l++) {
      const gc_nn_layer *y = gc_nn_layer_at(ref, l);
      if (!y->nw)
        continue;
      size_t off[2] = {y->woff, y->boff}, len[2] = {y->nw, y->nb};
      /* in evaluation mode BN is affine (running statistics): a real gradient */
      int before_bn = train && y->kind != GC_NN_BATCHNORM && l + 1 < gc_nn_nlayers(ref) &&
                      gc_nn_layer_at(ref, l + 1)->kind == GC_NN_BATCHNORM;
      for (int b = 0; b < 2; b++)
        if ((b && before_bn
                 ? check_zero_bias(gpu + g * d + off[b], cpu + g * d + off[b], len[b],
                                   cpu + g * d + off[0], len[0], one, sizeof one)
                 : check_block(gpu + g * d + off[b], cpu + g * d + off[b], len[b],
                               l < rb, one, sizeof one)) && fails++ == 0)
          snprintf(msg, cap, "group %zu layer %zu %s: %s", g, l, b ? "bias" : "weight", one);
    }
  return fails;
}

/* Statistics: |gpu - cpu| <= tol (max|block| + |cpu|) per mean and var
 * block of each BN layer and group. */
static size_t check_stats(const gc_nn *ref, size_t copies, const float *gpu,
                          const float *cpu, double tol, char *msg, size_t cap)
{
  size_t ns = gc_nn_nstats(ref), fails = 0;
  for (size_t k = 0; k < copies; k++)
    for (size_t l = 0; l < gc_nn_nlayers(ref); l++) {
      const gc_nn_layer *y = gc_nn_layer_at(ref, l);
      if (y->kind != GC_NN_BATCHNORM)
        continue;
      for (size_t part = 0; part < 2; part++) {
        const float *a = gpu + k * ns + y->soff + part * y->in_c;
        const float *b = cpu + k * ns + y->soff + part * y->in_c;
        double mx = 0;
        for (size_t c = 0; c < y->in_c; c++)
          mx = fmax(mx, fabs(b[c]));
        for (size_t c = 0; c < y->in_c; c++)
          if (!(fabs((double) a[c] - b[c]) <= tol * (mx + fabs(b[c]))) && fails++ == 0)
            snprintf(msg, cap, "copy %zu layer %zu running %s[%zu]: gpu %.9g cpu %.9g", k,
                     l, part ? "var" : "mean", c, (double) a[c], (double) b[c]);
      }
    }
  return fails;
}

static double loss_tol(const gc_nn *ref) { return gc_nn_nstats(ref) ? 1e-4 : 1e-5; }
static double stats_tol(const char *model) { return strcmp(model, "cifar-vgg19") ? 1e-5 : 1e-3; }

/* ---- one GPU-vs-CPU comparison --------------------------------------- */

static void *dcopy(const void *h, size_t bytes)
{
  void *d = NULL;
  GC_TEST_CUDA(cudaMalloc(&d, bytes ? bytes : 1));
  if (bytes && h)
    GC_TEST_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}

static void fetch(void *h, const void *d, size_t bytes)
{
  if (bytes)
    GC_TEST_CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

static void compare_model(const char *model, size_t G, size_t B, int train)
{
  gc_nn *ref = gc_nn_alloc_model(model, 1);
  cr_assert(ref != NULL);
  size_t d = gc_nn_nparams(ref), ns = gc_nn_nstats(ref), in = gc_nn_in_dim(ref);
  size_t N = G * B, nst = (train ? G : 1) * ns;
  const uint64_t seed = 0x5eed1234u;
  const uint32_t worker0 = 3, step = 17;
  float *w = malloc(d * sizeof *w), *x = malloc(N * in * sizeof *x);
  float *st0 = malloc((nst + 1) * sizeof *st0), *st_cpu = malloc((nst + 1) * sizeof *st_cpu);
  float *st_gpu = malloc((nst + 1) * sizeof *st_gpu);
  float *g_cpu = malloc(G * d * sizeof *g_cpu), *g_gpu = malloc(G * d * sizeof *g_gpu);
  float *g_gpu2 = malloc(G * d * sizeof *g_gpu2), *g_type = malloc(G * d * sizeof *g_type);
  double l_cpu[8], l_gpu[8], l_gpu2[8], l_type[8];
  uint8_t *y = malloc(N);
  cr_assert(G <= 8 && w && x && st0 && st_cpu && st_gpu && g_cpu && g_gpu && g_gpu2 && g_type && y);
  make_weights(ref, w, 11);
  make_inputs(x, N * in, y, N, gc_nn_out_dim(ref), 12);
  make_stats(ref, st0, train ? G : 1, train, 13);
  memcpy(st_cpu, st0, nst * sizeof *st0);
  cpu_groups(model, G, B, w, ns ? st_cpu : NULL, x, y, train, seed, worker0, step, l_cpu, g_cpu);

  gc_cuda_nn *nn = gc_cuda_nn_alloc(model, G, B);
  cr_assert(nn != NULL, "%s: %s", model, gc_last_error());
  cr_assert_eq(gc_cuda_nn_nparams(nn), d);
  cr_assert_eq(gc_cuda_nn_nstats(nn), ns);
  cr_assert_eq(gc_cuda_nn_in_dim(nn), in);
  cr_assert_eq(gc_cuda_nn_out_dim(nn), gc_nn_out_dim(ref));
  float *d_w = dcopy(w, d * sizeof *w), *d_x = dcopy(x, N * in * sizeof *x);
  float *d_st = dcopy(st0, nst * sizeof *st0), *d_g = dcopy(NULL, G * d * sizeof *d_g);
  uint8_t *d_y = dcopy(y, N);
  double *d_l = dcopy(NULL, G * sizeof *d_l);
  /* twice from the same statistics: the second run must give the same bits */
  for (int run = 0; run < 2; run++) {
    if (run)
      GC_TEST_CUDA(cudaMemcpy(d_st, st0, nst * sizeof *st0, cudaMemcpyHostToDevice));
    cr_assert_eq(gc_cuda_nn_grads(nn, d_w, ns ? d_st : NULL, d_x, d_y, G, B, train, seed,
                                  worker0, step, d_l, d_g, 0), GC_SUCCESS,
                 "%s: %s", model, gc_last_error());
    GC_TEST_CUDA(cudaDeviceSynchronize());
    fetch(run ? l_gpu2 : l_gpu, d_l, G * sizeof *d_l);
    fetch(run ? g_gpu2 : g_gpu, d_g, G * d * sizeof *d_g);
  }
  fetch(st_gpu, d_st, nst * sizeof *st_gpu);
  cr_assert(!memcmp(g_gpu, g_gpu2, G * d * sizeof *g_gpu) &&
            !memcmp(l_gpu, l_gpu2, G * sizeof *l_gpu), "%s: two runs differ", model);

  char msg[1024] = "";
  for (size_t g = 0; g < G; g++)
    cr_expect(fabs(l_gpu[g] - l_cpu[g]) <= loss_tol(ref) * (1 + fabs(l_cpu[g])),
              "%s train=%d group %zu: loss gpu %.12g cpu %.12g", model, train, g,
              l_gpu[g], l_cpu[g]);
  size_t bad = check_grads(ref, G, B, train, g_gpu, g_cpu, msg, sizeof msg);
  cr_expect(bad == 0, "%s train=%d: %zu gradient blocks fail; %s", model, train, bad, msg);
  if (ns) {
    bad = check_stats(ref, train ? G : 1, st_gpu, st_cpu, stats_tol(model), msg, sizeof msg);
    cr_expect(bad == 0, "%s train=%d: %zu statistics off; %s", model, train, bad, msg);
    if (!train)
      cr_expect(!memcmp(st_gpu, st0, nst * sizeof *st0), "%s: eval mode wrote the statistics",
                model);
  }

  /* the type table on host pointers: the same bits as the device call */
  void *dev = gc_cuda_nn_device.alloc(model, G, B);
  cr_assert(dev != NULL, "%s: %s", model, gc_last_error());
  memcpy(st_cpu, st0, nst * sizeof *st0);
  cr_assert_eq(gc_cuda_nn_device.grads(dev, w, ns ? st_cpu : NULL, x, y, G, B, train, seed,
                                       worker0, step, l_type, g_type), GC_SUCCESS);
  cr_expect(!memcmp(g_type, g_gpu, G * d * sizeof *g_gpu) &&
            !memcmp(l_type, l_gpu, G * sizeof *l_gpu) &&
            !memcmp(st_cpu, st_gpu, nst * sizeof *st_gpu),
            "%s: gc_cuda_nn_device.grads differs from gc_cuda_nn_grads", model);
  gc_cuda_nn_device.free(dev);

  cudaFree(d_w); cudaFree(d_x); cudaFree(d_st); cudaFree(d_g); cudaFree(d_y); cudaFree(d_l);
  gc_cuda_nn_free(nn);
  gc_nn_free(ref);
  free(w); free(x); free(st0); free(st_cpu); free(st_gpu); free(g_cpu); free(g_gpu);
  free(g_gpu2); free(g_type); free(y);
}

/* ---- GPU vs CPU ---------------------------------------------------------- */

Test(cuda_nn, mnist_mlp_train) { gc_test_require_gpu(); compare_model("mnist-mlp", 3, 5, 1); }
Test(cuda_nn, fmnist_mlp_train) { gc_test_require_gpu(); compare_model("fmnist-mlp", 3, 5, 1); }
/* dropout: the masks are keyed as the CPU's, so the tight check holds */
Test(cuda_nn, mnist_cnn_train_dropout) { gc_test_require_gpu(); compare_model("mnist-cnn", 3, 5, 1); }
Test(cuda_nn, fmnist_cnn_train) { gc_test_require_gpu(); compare_model("fmnist-cnn", 3, 5, 1); }
Test(cuda_nn, cifar_vgg19_train, .timeout = 300) { gc_test_require_gpu(); compare_model("cifar-vgg19", 2, 3, 1); }

Test(cuda_nn, mnist_mlp_eval) { gc_test_require_gpu(); compare_model("mnist-mlp", 3, 5, 0); }
Test(cuda_nn, mnist_cnn_eval) { gc_test_require_gpu(); compare_model("mnist-cnn", 3, 5, 0); }
Test(cuda_nn, fmnist_cnn_eval) { gc_test_require_gpu(); compare_model("fmnist-cnn", 3, 5, 0); }
Test(cuda_nn, cifar_vgg19_eval, .timeout = 300) { gc_test_require_gpu(); compare_model("cifar-vgg19", 2, 3, 0); }

/* B = 1 (BatchNorm over one image's map) and one group. */
Test(cuda_nn, fmnist_cnn_single_example) { gc_test_require_gpu(); compare_model("fmnist-cnn", 1, 1, 1); }

/* ---- evaluation ---------------------------------------------------------- */

/* Examples whose two largest CPU outputs are within `gap`: their argmax
 * may differ by rounding.  The logits differ by about u sqrt(m) relative
 * per inexact layer (header; u = 2^-24, m <= 1568 here: 2.4e-6): none of
 * mnist-mlp's two on the grids, fmnist-cnn's last two after its first
 * BatchNorm, <= 5e-6; a top-two gap changes by at most twice that, so a
 * gap of 1e-5 (1 + |a|): a flip outside it is a bug, not rounding. */
static size_t near_ties(gc_nn *nn, const float *w, float *st, const gc_dataset *ds, double gap)
{
  size_t ties = 0, C = gc_nn_out_dim(nn);
  for (size_t i = 0; i < ds->n; i++) {
    const float *o = gc_nn_forward(nn, w, st, ds->x + i * ds->dim, 1, 0, 0, 0, 0);
    float a = -INFINITY, b = -INFINITY;
    for (size_t c = 0; c < C; c++) {
      if (o[c] > a) { b = a; a = o[c]; }
      else if (o[c] > b) b = o[c];
    }
    ties += (double) a - b <= gap * (1 + fabs(a));
  }
  return ties;
}

static void compare_eval(const char *model)
{
  gc_nn *cpu = gc_nn_alloc_model(model, 7);
  size_t d = gc_nn_nparams(cpu), ns = gc_nn_nstats(cpu), in = gc_nn_in_dim(cpu);
  gc_dataset ds = {0};
  ds.n = 37;   /* not a multiple of the GPU's 2 x 8 nor the CPU's 7 */
  ds.dim = in;
  ds.classes = 10;
  ds.x = malloc(ds.n * in * sizeof *ds.x);
  ds.y = malloc(ds.n);
  float *w = malloc(d * sizeof *w), *st = malloc((ns + 1) * sizeof *st);
  cr_assert(ds.x && ds.y && w && st);
  make_weights(cpu, w, 21);
  make_inputs(ds.x, ds.n * in, ds.y, ds.n, 10, 22);
  make_stats(cpu, st, 1, 0, 23);
  double acc_cpu, loss_cpu, acc_gpu, loss_gpu;
  cr_assert_eq(gc_nn_evaluate(cpu, w, st, &ds, &acc_cpu, &loss_cpu), GC_SUCCESS);
  size_t ties = near_ties(cpu, w, st, &ds, 1e-5);

  /* the type table */
  void *dev = gc_cuda_nn_device.alloc(model, 2, 8);
  cr_assert(dev != NULL, "%s", gc_last_error());
  cr_assert_eq(gc_cuda_nn_device.evaluate(dev, w, ns ? st : NULL, &ds, &acc_gpu, &loss_gpu),
               GC_SUCCESS, "%s", gc_last_error());
  gc_cuda_nn_device.free(dev);
  /* accuracy: counts equal but for near-ties (acc = count/n rounds once,
   * so n acc is within 2 n u ~ 1e-14 of the count; 1e-9 absolute); loss:
   * per-example terms as in the gradient check, summed in another
   * grouping */
  double dc = fabs(acc_gpu - acc_cpu) * (double) ds.n;
  cr_expect(dc <= (double) ties + 1e-9, "%s: accuracy gpu %g cpu %g (%zu near-ties)", model,
            acc_gpu, acc_cpu, ties);
  cr_expect(fabs(loss_gpu - loss_cpu) <= loss_tol(cpu) * (1 + fabs(loss_cpu)),
            "%s: mean loss gpu %.12g cpu %.12g", model, loss_gpu, loss_cpu);

  /* gc_cuda_nn_eval_batch adds to what is there */
  gc_cuda_nn *nn = gc_cuda_nn_alloc(model, 2, 8);
  cr_assert(nn != NULL);
  float *d_w = dcopy(w, d * sizeof *w), *d_st = dcopy(st, ns * sizeof *st);
  float *d_x = dcopy(ds.x, 16 * in * sizeof *ds.x);
  uint8_t *d_y = dcopy(ds.y, 16);
  uint32_t c0 = 5, c1;
  double s0 = 1.5, s1;
  uint32_t *d_c = dcopy(&c0, sizeof c0);
  double *d_s = dcopy(&s0, sizeof s0);
  cr_assert_eq(gc_cuda_nn_eval_batch(nn, d_w, ns ? d_st : NULL, d_x, d_y, 16, d_c, d_s, 0),
               GC_SUCCESS);
  cr_assert_eq(gc_cuda_nn_eval_batch(nn, d_w, ns ? d_st : NULL, d_x, d_y, 0, d_c, d_s, 0),
               GC_SUCCESS);
  GC_TEST_CUDA(cudaDeviceSynchronize());
  fetch(&c1, d_c, sizeof c1);
  fetch(&s1, d_s, sizeof s1);
  gc_dataset head = ds;
  head.n = 16;
  cr_assert_eq(gc_nn_evaluate(cpu, w, st, &head, &acc_cpu, &loss_cpu), GC_SUCCESS);
  ties = near_ties(cpu, w, st, &head, 1e-5);
  cr_expect(fabs((double) (c1 - c0) - acc_cpu * 16) <= (double) ties + 1e-9,
            "%s: eval_batch counted %u, cpu %g", model, c1 - c0, acc_cpu * 16);
  cr_expect(fabs((s1 - s0) / 16 - loss_cpu) <= loss_tol(cpu) * (1 + fabs(loss_cpu)),
            "%s: eval_batch loss sum %.12g, cpu mean %.12g", model, s1 - s0, loss_cpu);
  cudaFree(d_w); cudaFree(d_st); cudaFree(d_x); cudaFree(d_y); cudaFree(d_c); cudaFree(d_s);
  gc_cuda_nn_free(nn);
  gc_nn_free(cpu);
  free(ds.x); free(ds.y); free(w); free(st);
}

Test(cuda_nn, evaluate_mnist_mlp) { gc_test_require_gpu(); compare_eval("mnist-mlp"); }
Test(cuda_nn, evaluate_fmnist_cnn) { gc_test_require_gpu(); compare_eval("fmnist-cnn"); }

/* ---- argument errors ---------------------------------------------------- */

Test(cuda_nn, unknown_model_before_cuda)
{
  gc_set_error_handler_off();
  cr_assert_null(gc_cuda_nn_alloc("resnet", 2, 4));
  cr_assert_eq(gc_last_error_code(), GC_EINVAL);
  cr_assert_null(gc_cuda_nn_device.alloc("resnet", 2, 4));
  cr_assert_eq(gc_last_error_code(), GC_EINVAL);
  cr_assert_null(gc_cuda_nn_alloc("mnist-mlp", 0, 4));
  cr_assert_eq(gc_last_error_code(), GC_EINVAL);
  cr_assert_null(gc_cuda_nn_alloc("mnist-mlp", 2, 0));
  cr_assert_eq(gc_last_error_code(), GC_EINVAL);
  gc_cuda_nn_free(NULL);
  gc_cuda_nn_device.free(NULL);
  cr_assert_str_eq(gc_cuda_nn_device.name, "cuda");
}

Test(cuda_nn, no_device_is_reported)
{
  char why[256];
  if (gc_cuda_available(why, sizeof why) == GC_SUCCESS)
    cr_skip_test("a device is visible; this checks the answer without one");
  gc_set_error_handler_off();
  cr_assert_null(gc_cuda_nn_alloc("mnist-mlp", 2, 4));
  cr_assert_eq(gc_last_error_code(), GC_ECUDA, "%s", gc_last_error());
}

Test(cuda_nn, shapes_beyond_the_workspace)
{
  gc_test_require_gpu();
  gc_set_error_handler_off();
  gc_cuda_nn *nn = gc_cuda_nn_alloc("fmnist-cnn", 2, 4);
  cr_assert(nn != NULL);
  size_t d = gc_cuda_nn_nparams(nn), ns = gc_cuda_nn_nstats(nn);
  float *d_w = dcopy(NULL, d * sizeof(float)), *d_st = dcopy(NULL, 3 * ns * sizeof(float));
  float *d_x = dcopy(NULL, 12 * gc_cuda_nn_in_dim(nn) * sizeof(float));
  float *d_g = dcopy(NULL, 3 * d * sizeof(float));
  uint8_t *d_y = dcopy(NULL, 12);
  double *d_l = dcopy(NULL, 3 * sizeof(double));
  cr_assert_eq(gc_cuda_nn_grads(nn, d_w, d_st, d_x, d_y, 3, 4, 1, 0, 0, 0, d_l, d_g, 0), GC_EINVAL);
  cr_assert_eq(gc_cuda_nn_grads(nn, d_w, d_st, d_x, d_y, 2, 5, 1, 0, 0, 0, d_l, d_g, 0), GC_EINVAL);
  cr_assert_eq(gc_cuda_nn_grads(nn, d_w, d_st, d_x, d_y, 0, 4, 1, 0, 0, 0, d_l, d_g, 0), GC_EINVAL);
  cr_assert_eq(gc_cuda_nn_grads(nn, d_w, NULL, d_x, d_y, 2, 4, 1, 0, 0, 0, d_l, d_g, 0), GC_EINVAL);
  cr_assert_eq(gc_cuda_nn_eval_batch(nn, d_w, d_st, d_x, d_y, 9, NULL, NULL, 0), GC_EINVAL);
  void *dev = gc_cuda_nn_device.alloc("mnist-mlp", 2, 4);
  cr_assert(dev != NULL);
  float w1 = 0, g1 = 0;
  double l1 = 0;
  cr_assert_eq(gc_cuda_nn_device.grads(dev, &w1, NULL, &w1, NULL, 3, 4, 1, 0, 0, 0, &l1, &g1),
               GC_EINVAL);
  gc_cuda_nn_device.free(dev);
  cudaFree(d_w); cudaFree(d_st); cudaFree(d_x); cudaFree(d_g); cudaFree(d_y); cudaFree(d_l);
  gc_cuda_nn_free(nn);
}

/* ---- the checkers themselves (host only) ---------------------------------
 * On CPU-only data: the oracle against itself passes, and the errors the
 * GPU tests exist to catch fail: a transposed weight gradient, a missing
 * BatchNorm term, a biased running variance, one group's gradient in
 * another's slot. */
Test(cuda_nn, checkers_catch_planted_bugs)
{
  const char *model = "fmnist-cnn";
  size_t G = 3, B = 5;
  gc_nn *ref = gc_nn_alloc_model(model, 1);
  size_t d = gc_nn_nparams(ref), ns = gc_nn_nstats(ref), in = gc_nn_in_dim(ref);
  float *w = malloc(d * sizeof *w), *x = malloc(G * B * in * sizeof *x);
  float *st = malloc(G * ns * sizeof *st), *st0 = malloc(G * ns * sizeof *st0);
  float *g = malloc(G * d * sizeof *g), *bad = malloc(G * d * sizeof *bad);
  float *sbad = malloc(G * ns * sizeof *sbad);
  uint8_t *y = malloc(G * B);
  double loss[3];
  char msg[1024];
  make_weights(ref, w, 31);
  make_inputs(x, G * B * in, y, G * B, 10, 32);
  make_stats(ref, st0, G, 1, 33);
  memcpy(st, st0, G * ns * sizeof *st);
  cpu_groups(model, G, B, w, st, x, y, 1, 1, 0, 0, loss, g);
  cr_assert_eq(check_grads(ref, G, B, 1, g, g, msg, sizeof msg), 0);
  cr_assert_eq(check_stats(ref, G, st, st, 1e-5, msg, sizeof msg), 0);
  cr_assert_eq(robust_below(ref, G * B), 8);   /* CONV BN RELU POOL CONV BN RELU POOL | LIN LSM */
  gc_nn *mlp = gc_nn_alloc_model("mnist-mlp", 1), *cnn = gc_nn_alloc_model("mnist-cnn", 1);
  cr_assert_eq(robust_below(mlp, 15), 0);   /* every kink input exact */
  cr_assert_eq(robust_below(cnn, 15), 0);   /* only 128 x 15 after the dropout */
  gc_nn_free(mlp);
  gc_nn_free(cnn);

  /* the last linear layer's dW transposed in place as [in][out] */
  const gc_nn_layer *lin = gc_nn_layer_at(ref, 8);
  memcpy(bad, g, G * d * sizeof *g);
  for (size_t o = 0; o < lin->out_c; o++)
    for (size_t i = 0; i < lin->in_c; i++)
      bad[lin->woff + i * lin->out_c + o] = g[lin->woff + o * lin->in_c + i];
  cr_assert_gt(check_grads(ref, G, B, 1, bad, g, msg, sizeof msg), 0);
  /* the first conv's dW transposed (out <-> in-kernel), a robust block */
  const gc_nn_layer *cv = gc_nn_layer_at(ref, 0);
  size_t K = cv->nw / cv->out_c;
  memcpy(bad, g, G * d * sizeof *g);
  for (size_t o = 0; o < cv->out_c; o++)
    for (size_t k = 0; k < K; k++)
      bad[cv->woff + k * cv->out_c + o] = g[cv->woff + o * K + k];
  cr_assert_gt(check_grads(ref, G, B, 1, bad, g, msg, sizeof msg), 0);
  /* BN backward without the mean term: every gamma gradient 2% off */
  const gc_nn_layer *bn = gc_nn_layer_at(ref, 5);
  memcpy(bad, g, G * d * sizeof *g);
  for (size_t c = 0; c < bn->nw; c++)
    bad[bn->woff + c] *= 1.02f;
  cr_assert_gt(check_grads(ref, G, B, 1, bad, g, msg, sizeof msg), 0);
  /* group 1's gradient in group 0's slot */
  memcpy(bad, g, G * d * sizeof *g);
  memcpy(bad, g + d, d * sizeof *g);
  cr_assert_gt(check_grads(ref, G, B, 1, bad, g, msg, sizeof msg), 0);
  /* one moved term (a kink decided the other way) in a robust block: one
   * output channel's row of the first conv off by 5% passes */
  memcpy(bad, g, G * d * sizeof *g);
  for (size_t k = 0; k < K; k++)
    bad[cv->woff + 3 * K + k] *= 1.05f;
  cr_assert_eq(check_grads(ref, G, B, 1, bad, g, msg, sizeof msg), 0, "%s", msg);

  /* the biased variance in the running update: rv = 0.9 rv0 + 0.1 s2/m
   * instead of s2/(m-1) */
  memcpy(sbad, st, G * ns * sizeof *st);
  for (size_t k = 0; k < G; k++)
    for (size_t l = 0; l < gc_nn_nlayers(ref); l++) {
      const gc_nn_layer *b = gc_nn_layer_at(ref, l);
      if (b->kind != GC_NN_BATCHNORM)
        continue;
      double m = (double) (B * b->in_h * b->in_w);
      for (size_t c = 0; c < b->in_c; c++) {
        size_t i = k * ns + b->soff + b->in_c + c;
        double batch = (double) st[i] - 0.9 * st0[i];
        sbad[i] = (float) (0.9 * st0[i] + batch * (m - 1) / m);
      }
    }
  cr_assert_gt(check_stats(ref, G, sbad, st, 1e-5, msg, sizeof msg), 0);

  gc_nn_free(ref);
  free(w); free(x); free(st); free(st0); free(g); free(bad); free(sbad); free(y);
}
