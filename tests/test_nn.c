/* test_nn.c -- every layer's backward against central finite differences,
 * the parameter counts of the reference models, and loss sanity.  The FD
 * probe is f = sum(out * r) with a fixed random r, evaluated in double over
 * float32 forwards: with h = 1e-2 and O(1) values the FD error is about
 * (float rounding of f)/h + h^2 |f'''|, hence atol 5e-3, rtol 3e-2. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_data.h"
#include "gc_errno.h"
#include "gc_winograd.h"
#include "gc_nn.h"
#include "gc_rng.h"

/* Values c*(k - n/2) + c/2 over a random permutation k: distinct and away
 * from 0 by c/2 > h, so ReLU and max-pool kinks are never crossed. */
static void fill_spread(float *x, size_t n, double c, uint64_t seed)
{
  for (size_t i = 0; i < n; i++)
    x[i] = (float) (c * ((double) i - (double) n / 2) + c / 2);
  for (size_t i = n; i > 1; i--) {
    uint32_t j = gc_rng_below(gc_rng_u32(seed, 1, 0, i), (uint32_t) i);
    float t = x[i - 1]; x[i - 1] = x[j]; x[j] = t;
  }
}

static void fill_uniform(float *x, size_t n, double a, uint64_t seed)
{
  for (size_t i = 0; i < n; i++)
    x[i] = (float) (a * (2 * gc_rng_uniform(seed, 2, 0, i) - 1));
}

static double probe(gc_nn *nn, const float *w, float *stats, const float *x,
                    size_t B, const float *r, int train)
{
  const float *out = gc_nn_forward(nn, w, stats, x, B, train, 5, 1, 3);
  cr_assert(out != NULL);
  double f = 0;
  for (size_t i = 0; i < B * gc_nn_out_dim(nn); i++)
    f += (double) out[i] * r[i];
  return f;
}

/* Compare grad[i] with the central difference of probe() in v[i] (v is w
 * or x) at about 40 of the n coordinates. */
static void fd_compare(gc_nn *nn, float *w, float *st, float *x, size_t B,
                       const float *r, float *v, size_t n, const float *grad,
                       const char *what, const char *var)
{
  const double h = 1e-2;
  size_t step = n > 40 ? n / 40 : 1;
  for (size_t i = 0; i < n; i += step) {
    float keep = v[i];
    v[i] = keep + (float) h;
    double fp = probe(nn, w, st, x, B, r, 1);
    v[i] = keep - (float) h;
    double fm = probe(nn, w, st, x, B, r, 1);
    v[i] = keep;
    double fd = (fp - fm) / (2 * h);
    cr_assert(fabs(fd - grad[i]) <= 5e-3 + 3e-2 * fabs(fd),
              "%s: d/d%s[%zu]: backward %.6g, finite difference %.6g", what,
              var, i, (double) grad[i], fd);
  }
}

/* Check d/dw and d/dx of probe() at about 40 coordinates each. */
static void fd_check(const gc_nn_layer *spec, size_t L, size_t B, double xscale,
                     int spread, const char *what)
{
  gc_nn *nn = gc_nn_alloc(spec, L, GC_LOSS_NLL, B);
  cr_assert(nn != NULL, "%s", what);
  size_t d = gc_nn_nparams(nn), nin = B * gc_nn_in_dim(nn), nout = B * gc_nn_out_dim(nn);
  size_t ns = gc_nn_nstats(nn);
  float *w = malloc((d + 1) * sizeof *w), *g = malloc((d + 1) * sizeof *g);
  float *x = malloc(nin * sizeof *x), *dx = malloc(nin * sizeof *dx);
  float *r = malloc(nout * sizeof *r), *st = calloc(ns + 1, sizeof *st);
  gc_nn_init(nn, w, st, 11);
  /* BN: non-trivial gamma and beta */
  for (size_t l = 0; l < L; l++) {
    const gc_nn_layer *y = gc_nn_layer_at(nn, l);
    if (y->kind == GC_NN_BATCHNORM)
      for (size_t c = 0; c < y->nw; c++) {
        w[y->woff + c] = 0.5f + 0.25f * (float) c;
        w[y->boff + c] = 0.1f * (float) c;
      }
  }
  if (spread)
    fill_spread(x, nin, xscale, 7);
  else
    fill_uniform(x, nin, xscale, 7);
  fill_uniform(r, nout, 1.0, 8);
  probe(nn, w, st, x, B, r, 1);
  cr_assert_eq(gc_nn_backward(nn, w, r, g, dx), GC_SUCCESS);
  fd_compare(nn, w, st, x, B, r, w, d, g, what, "w");
  fd_compare(nn, w, st, x, B, r, x, nin, dx, what, "x");
  free(w); free(g); free(x); free(dx); free(r); free(st);
  gc_nn_free(nn);
}

Test(nn, linear_grad)
{
  gc_nn_layer s[] = { { .kind = GC_NN_LINEAR, .in_c = 7, .in_h = 1, .in_w = 1, .out_c = 5 } };
  fd_check(s, 1, 3, 1.0, 0, "linear");
}

Test(nn, conv_grad)
{
  gc_nn_layer a[] = { { .kind = GC_NN_CONV, .in_c = 2, .in_h = 5, .in_w = 6,
                        .out_c = 3, .ksize = 3, .pad = 1 } };
  fd_check(a, 1, 2, 1.0, 0, "conv3x3 pad 1");
  gc_nn_layer b[] = { { .kind = GC_NN_CONV, .in_c = 1, .in_h = 6, .in_w = 6,
                        .out_c = 2, .ksize = 5, .pad = 2 } };
  fd_check(b, 1, 2, 1.0, 0, "conv5x5 pad 2");
  gc_nn_layer c[] = { { .kind = GC_NN_CONV, .in_c = 3, .in_h = 5, .in_w = 4,
                        .out_c = 2, .ksize = 3, .pad = 0 } };
  fd_check(c, 1, 2, 1.0, 0, "conv3x3 no pad");
}

/* 3x3 convolutions with 32 or more channels on each side take Winograd's
 * F(2x2, 3x3) for the output and the input gradient, F(3x3, 2x2) for the
 * weight gradient (lib/nn/winograd.c).  All three are compared with the direct sums in
 * double, within a few float roundings of the sum of |terms|, for odd and
 * even output sizes and every padding it takes; then the usual finite
 * differences.  Tolerance 8 FLT_EPSILON = 16 u of sum |t| (u = 2^-24),
 * from the probabilistic rounding model (Higham and Mary, SIAM J. Sci.
 * Comput. 41(5), 2019: the roundings of a sum behave as independent,
 * whatever the order a kernel adds in): a float32 sum of m products of
 * random sign has partial sums ~ sqrt(k) sigma, so its error has a
 * standard deviation ~ u sigma m / sqrt 2, about u sum |t| here (sigma /
 * E|t| = 4/3 for products of uniforms); the largest over the ~1e4 outputs
 * is ~4 standard deviations, and Winograd's transforms (sums of at most 16
 * terms on each side of the channel sum) at most double that: 16 u keeps
 * a factor 2 over both.  The worst case (m - 1) u sum |t| would not test
 * the transforms at all for m = 9 C = 576.  Winograd is taken only where the batch has enough tiles
 * (gc__wino3_pays): each check uses the smallest such batch, plus extra. */
static size_t wino_batch_k(size_t k, size_t H, size_t W, size_t pad,
                           size_t extra)
{
  size_t B = 1, Ho = H + 2 * pad - (k - 1), Wo = W + 2 * pad - (k - 1);
  while (!gc__wino3_pays(B, Ho, Wo))
    cr_assert(++B < 1000, "Winograd never pays for %zux%zu", Ho, Wo);
  return B + extra;
}

static size_t wino_batch(size_t H, size_t W, size_t pad, size_t extra)
{
  return wino_batch_k(3, H, W, pad, extra);
}

static void direct_conv_check_k(size_t k, size_t C, size_t O, size_t H,
                                size_t W, size_t pad, size_t extra)
{
  size_t B = wino_batch_k(k, H, W, pad, extra);
  gc_nn_layer s[] = { { .kind = GC_NN_CONV, .in_c = C, .in_h = H, .in_w = W,
                        .out_c = O, .ksize = k, .pad = pad } };
  gc_nn *nn = gc_nn_alloc(s, 1, GC_LOSS_NLL, B);
  cr_assert(nn != NULL);
  size_t Ho = H + 2 * pad - (k - 1), Wo = W + 2 * pad - (k - 1);
  size_t d = gc_nn_nparams(nn);
  size_t nin = B * C * H * W, nout = B * O * Ho * Wo;
  float *w = malloc(d * sizeof *w), *g = malloc(d * sizeof *g);
  float *x = malloc(nin * sizeof *x), *dx = malloc(nin * sizeof *dx);
  float *r = malloc(nout * sizeof *r);
  gc_nn_init(nn, w, NULL, 21);
  fill_uniform(x, nin, 1.0, 22);
  fill_uniform(r, nout, 1.0, 23);
  const float *out = gc_nn_forward(nn, w, NULL, x, B, 1, 5, 1, 3);
  cr_assert(out != NULL);
  const float *K = w + gc_nn_layer_at(nn, 0)->woff;
  const float *bias = w + gc_nn_layer_at(nn, 0)->boff;
  for (size_t n = 0; n < B; n++)
    for (size_t o = 0; o < O; o++)
      for (size_t i = 0; i < Ho; i++)
        for (size_t j = 0; j < Wo; j++) {
          double sum = bias[o], mag = fabs(bias[o]);
          for (size_t c = 0; c < C; c++)
            for (size_t a = 0; a < k; a++)
              for (size_t b = 0; b < k; b++) {
                long ii = (long) (i + a) - (long) pad, jj = (long) (j + b) - (long) pad;
                if (ii < 0 || jj < 0 || ii >= (long) H || jj >= (long) W)
                  continue;
                double t = (double) K[((o * C + c) * k + a) * k + b] *
                           x[((n * C + c) * H + (size_t) ii) * W + (size_t) jj];
                sum += t;
                mag += fabs(t);
              }
          float got = out[((n * O + o) * Ho + i) * Wo + j];
          cr_assert(fabs(got - sum) <= 8 * FLT_EPSILON * mag,
                    "C %zu O %zu %zux%zu pad %zu: out[%zu][%zu][%zu][%zu] = %.9g, "
                    "direct %.9g", C, O, H, W, pad, n, o, i, j, (double) got, sum);
        }
  cr_assert_eq(gc_nn_backward(nn, w, r, g, dx), GC_SUCCESS);
  for (size_t n = 0; n < B; n++)
    for (size_t c = 0; c < C; c++)
      for (size_t i = 0; i < H; i++)
        for (size_t j = 0; j < W; j++) {
          double sum = 0, mag = 0;
          for (size_t o = 0; o < O; o++)
            for (size_t a = 0; a < k; a++)
              for (size_t b = 0; b < k; b++) {
                long oi = (long) (i + pad) - (long) a, oj = (long) (j + pad) - (long) b;
                if (oi < 0 || oj < 0 || oi >= (long) Ho || oj >= (long) Wo)
                  continue;
                double t = (double) K[((o * C + c) * k + a) * k + b] *
                           r[((n * O + o) * Ho + (size_t) oi) * Wo + (size_t) oj];
                sum += t;
                mag += fabs(t);
              }
          float got = dx[((n * C + c) * H + i) * W + j];
          cr_assert(fabs(got - sum) <= 8 * FLT_EPSILON * mag,
                    "C %zu O %zu %zux%zu pad %zu: dx[%zu][%zu][%zu][%zu] = %.9g, "
                    "direct %.9g", C, O, H, W, pad, n, c, i, j, (double) got, sum);
        }
  const float *dK = g + gc_nn_layer_at(nn, 0)->woff;
  for (size_t o = 0; o < O; o++)
    for (size_t c = 0; c < C; c++)
      for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
          double sum = 0, mag = 0;
          for (size_t n = 0; n < B; n++)
            for (size_t i = 0; i < Ho; i++)
              for (size_t j = 0; j < Wo; j++) {
                long ii = (long) (i + a) - (long) pad, jj = (long) (j + b) - (long) pad;
                if (ii < 0 || jj < 0 || ii >= (long) H || jj >= (long) W)
                  continue;
                double t = (double) r[((n * O + o) * Ho + i) * Wo + j] *
                           x[((n * C + c) * H + (size_t) ii) * W + (size_t) jj];
                sum += t;
                mag += fabs(t);
              }
          float got = dK[((o * C + c) * k + a) * k + b];
          cr_assert(fabs(got - sum) <= 8 * FLT_EPSILON * mag,
                    "C %zu O %zu %zux%zu pad %zu: dW[%zu][%zu][%zu][%zu] = %.9g, "
                    "direct %.9g", C, O, H, W, pad, o, c, a, b, (double) got, sum);
        }
  free(w); free(g); free(x); free(dx); free(r);
  gc_nn_free(nn);
}

static void direct_conv_check(size_t C, size_t O, size_t H, size_t W,
                              size_t pad, size_t extra)
{
  direct_conv_check_k(3, C, O, H, W, pad, extra);
}

Test(nn, winograd_conv_matches_direct_sums)
{
  for (size_t pad = 0; pad <= 2; pad++) {
    direct_conv_check(64, 65, 7, 6, pad, 1);   /* odd and even outputs */
    direct_conv_check(66, 64, 2, 3, pad == 0 ? 1 : pad, 0);   /* tiny planes */
  }
  direct_conv_check(64, 64, 8, 8, 1, 70);   /* several passes of tiles */
}

/* Layers with fewer than 64 channels on a side (MNIST-CNN's 32 -> 64) run
 * their Winograd passes over few tiles (wino3_chunk: 128, 11 images of
 * 7x6 at pad 1), and so does their input gradient (64 -> 32); 46 images
 * make five passes, whose weight gradients add up. */
Test(nn, winograd_narrow_layers_match_direct_sums)
{
  cr_assert(gc__wino3_applies(3, 0, 32, 64), "MNIST-CNN's 32 -> 64 layer");
  cr_assert(!gc__wino3_applies(3, 0, 16, 64));
  for (size_t pad = 0; pad <= 2; pad++)
    direct_conv_check(32, 64, 7, 6, pad, 2);
  direct_conv_check(33, 32, 6, 7, 0, 0);
  direct_conv_check(32, 64, 7, 6, 1, 40);   /* several narrow passes */
}

/* 5x5 convolutions (FMNIST-CNN's 16 -> 32) take F(2x2, 3x3) on four 3x3
 * sub-kernels, channel counts a multiple of 4; the input gradient (32 ->
 * 16) turns the kernel itself.  Every padding it takes, odd and even
 * outputs, one and several passes of images, and the weight gradient
 * reassembled from the sub-kernels' (the error model of the 3x3 checks:
 * each sub-kernel's sum is one F(2x2, 3x3) sum). */
Test(nn, winograd_5x5_matches_direct_sums)
{
  cr_assert(gc__wino3_applies(5, 2, 16, 32), "FMNIST-CNN's 16 -> 32 layer");
  cr_assert(!gc__wino3_applies(5, 2, 1, 16), "FMNIST-CNN's first layer");
  cr_assert(!gc__wino3_applies(5, 2, 18, 32), "channels not a multiple of 4");
  for (size_t pad = 0; pad <= 4; pad++)
    direct_conv_check_k(5, 16, 20, 7, 6, pad, 0);
  direct_conv_check_k(5, 20, 16, 8, 9, 2, 8);   /* several passes */
  direct_conv_check_k(5, 16, 32, 14, 14, 2, 0);   /* FMNIST-CNN's shape */
}

Test(nn, winograd_conv_grad)
{
  gc_nn_layer a[] = { { .kind = GC_NN_CONV, .in_c = 64, .in_h = 5, .in_w = 4,
                        .out_c = 64, .ksize = 3, .pad = 1 } };
  fd_check(a, 1, wino_batch(5, 4, 1, 0), 1.0, 0, "winograd conv3x3 pad 1");
  gc_nn_layer b[] = { { .kind = GC_NN_CONV, .in_c = 64, .in_h = 6, .in_w = 5,
                        .out_c = 66, .ksize = 3, .pad = 0 } };
  fd_check(b, 1, wino_batch(6, 5, 0, 0), 1.0, 0, "winograd conv3x3 no pad");
  gc_nn_layer c[] = { { .kind = GC_NN_CONV, .in_c = 32, .in_h = 6, .in_w = 5,
                        .out_c = 64, .ksize = 3, .pad = 0 } };
  fd_check(c, 1, wino_batch(6, 5, 0, 1), 1.0, 0, "winograd conv3x3 32 -> 64");
  gc_nn_layer e[] = { { .kind = GC_NN_CONV, .in_c = 16, .in_h = 6, .in_w = 5,
                        .out_c = 16, .ksize = 5, .pad = 2 } };
  fd_check(e, 1, wino_batch_k(5, 6, 5, 2, 0), 1.0, 0, "winograd conv5x5 pad 2");
}

Test(nn, pool_relu_grad)
{
  gc_nn_layer a[] = { { .kind = GC_NN_MAXPOOL, .in_c = 2, .in_h = 5, .in_w = 4 } };
  fd_check(a, 1, 2, 0.05, 1, "max-pool");
  gc_nn_layer b[] = { { .kind = GC_NN_RELU, .in_c = 3, .in_h = 2, .in_w = 2 } };
  fd_check(b, 1, 2, 0.05, 1, "relu");
}

Test(nn, dropout_grad)
{
  /* The mask is a pure function of (seed, worker, step): FD sees it fixed. */
  gc_nn_layer a[] = { { .kind = GC_NN_DROPOUT, .in_c = 20, .in_h = 1, .in_w = 1, .p = 0.25 } };
  fd_check(a, 1, 3, 1.0, 0, "dropout");
}

/* Dropout's mask is the one the GPU twin draws entry by entry: entry i of
 * layer l keeps x_i / (1 - p) when the float of gc_rng_u32(seed, worker,
 * step, (l << 40) + i) is >= p, else 0; over several chunks of the bulk
 * draws and a ragged last Philox block (n = 2 x 1251), in training only. */
Test(nn, dropout_mask_is_the_per_entry_draw)
{
  gc_nn_layer a[] = { { .kind = GC_NN_RELU, .in_c = 1251, .in_h = 1, .in_w = 1 },
                      { .kind = GC_NN_DROPOUT, .in_c = 1251, .in_h = 1, .in_w = 1, .p = 0.3 } };
  size_t B = 2, n = B * 1251;
  gc_nn *nn = gc_nn_alloc(a, 2, GC_LOSS_NLL, B);
  cr_assert(nn != NULL);
  float *x = malloc(n * sizeof *x);
  fill_uniform(x, n, 1.0, 9);
  for (int train = 0; train < 2; train++) {
    const float *out = gc_nn_forward(nn, NULL, NULL, x, B, train, 77, 5, 12);
    cr_assert(out != NULL);
    size_t kept = 0;
    float keep = (float) (1.0 / (1.0 - 0.3)), p = 0.3f;
    for (size_t i = 0; i < n; i++) {
      float relu = x[i] > 0 ? x[i] : 0.0f;
      float m = !train ? 1.0f
                : gc_rng_to_f32(gc_rng_u32(77, 5, 12, ((uint64_t) 1 << 40) + i)) >= p ? keep
                                                                                       : 0.0f;
      kept += m != 0;
      cr_assert(out[i] == relu * m, "train %d, entry %zu: %g, want %g", train, i,
                (double) out[i], (double) (relu * m));
    }
    if (train)   /* p = 0.3: about 1750 of 2502 kept */
      cr_assert(kept > 1600 && kept < 1900, "%zu of %zu kept", kept, n);
  }
  free(x);
  gc_nn_free(nn);
}

Test(nn, batchnorm_grad)
{
  gc_nn_layer a[] = { { .kind = GC_NN_BATCHNORM, .in_c = 3, .in_h = 2, .in_w = 3 } };
  fd_check(a, 1, 4, 1.0, 0, "batch-norm");
}

Test(nn, logsoftmax_grad)
{
  gc_nn_layer a[] = { { .kind = GC_NN_LOGSOFTMAX, .in_c = 6, .in_h = 1, .in_w = 1 } };
  fd_check(a, 1, 3, 2.0, 0, "log-softmax");
}

Test(nn, small_cnn_chain_grad)
{
  gc_nn_layer a[] = {
    { .kind = GC_NN_CONV, .in_c = 1, .in_h = 6, .in_w = 6, .out_c = 2, .ksize = 3, .pad = 1 },
    { .kind = GC_NN_BATCHNORM }, { .kind = GC_NN_RELU }, { .kind = GC_NN_MAXPOOL },
    { .kind = GC_NN_LINEAR, .out_c = 4 }, { .kind = GC_NN_LOGSOFTMAX } };
  fd_check(a, 6, 3, 1.0, 0, "conv-bn-relu-pool-linear-logsoftmax");
  /* ReLU then max-pool backward run as one pass (maxpool_relu_bwd), here
   * over an odd 5x3 map whose last row and column no window covers */
  gc_nn_layer b[] = {
    { .kind = GC_NN_CONV, .in_c = 1, .in_h = 7, .in_w = 5, .out_c = 2, .ksize = 3, .pad = 0 },
    { .kind = GC_NN_BATCHNORM }, { .kind = GC_NN_RELU }, { .kind = GC_NN_MAXPOOL },
    { .kind = GC_NN_LINEAR, .out_c = 4 }, { .kind = GC_NN_LOGSOFTMAX } };
  fd_check(b, 6, 3, 1.0, 0, "conv-bn-relu-pool(odd)-linear-logsoftmax");
}

/* The losses: NLL on log-softmax and cross-entropy on logits agree, and
 * their gradient matches finite differences of the mean loss. */
Test(nn, losses)
{
  gc_nn_layer a[] = { { .kind = GC_NN_LINEAR, .in_c = 5, .in_h = 1, .in_w = 1, .out_c = 4 },
                      { .kind = GC_NN_LOGSOFTMAX } };
  gc_nn *nll = gc_nn_alloc(a, 2, GC_LOSS_NLL, 3), *ce = gc_nn_alloc(a, 1, GC_LOSS_CE, 3);
  float w[24], x[15], g1[24], g2[24];
  uint8_t y[3] = { 0, 3, 1 };
  fill_uniform(w, 24, 1.0, 1);
  fill_uniform(x, 15, 1.0, 2);
  gc_nn_forward(nll, w, NULL, x, 3, 1, 0, 0, 0);
  double l1 = gc_nn_loss(nll, y);
  gc_nn_backward(nll, w, NULL, g1, NULL);
  gc_nn_forward(ce, w, NULL, x, 3, 1, 0, 0, 0);
  double l2 = gc_nn_loss(ce, y);
  gc_nn_backward(ce, w, NULL, g2, NULL);
  /* the same float32 log-softmax two ways: 3 examples of 4 logits |z| < 6
   * (5 inputs and weights in [-1, 1]), a few roundings of values < 10
   * each, so |l1 - l2| and |g1 - g2| are within ~10 u * 10 = 6e-6 */
  cr_assert_float_eq(l1, l2, 1e-5);
  for (int i = 0; i < 24; i++) {
    cr_assert_float_eq(g1[i], g2[i], 1e-5);
    float keep = w[i];
    w[i] = keep + 1e-2f;
    gc_nn_forward(ce, w, NULL, x, 3, 1, 0, 0, 0);
    double fp = gc_nn_loss(ce, y);
    w[i] = keep - 1e-2f;
    gc_nn_forward(ce, w, NULL, x, 3, 1, 0, 0, 0);
    double fm = gc_nn_loss(ce, y);
    w[i] = keep;
    /* central difference, h = 1e-2: truncation h^2 |f'''| / 6 < 2e-5 for
     * |f'''| < 1 (softmax derivatives times |x| <= 1), rounding of the
     * float32 loss (~10 u |l|) / h ~ 1e-4 */
    cr_assert(fabs((fp - fm) / 2e-2 - g2[i]) < 2e-3, "dL/dw[%d]", i);
  }
  gc_nn_free(nll);
  gc_nn_free(ce);
}

/* Every model of the table (lib/nn/models.c) has its reference counts
 * here: a model added there without its line fails this test. */
Test(nn, parameter_counts)
{
  static const struct { const char *name; size_t d, ns; } m[] = {
    { "mnist-mlp", 50890, 0 }, { "fmnist-mlp", 242762, 0 },
    { "mnist-cnn", 1199882, 0 }, { "fmnist-cnn", 29034, 96 },
    { "cifar-vgg19", 20040522, 11008 } };
  enum { NM = sizeof m / sizeof m[0] };
  size_t listed = 0;
  for (const char *const *name = gc_nn_model_names(); *name; name++, listed++) {
    size_t i = 0;
    while (i < NM && strcmp(m[i].name, *name))
      i++;
    cr_assert(i < NM, "model %s has no reference counts here", *name);
  }
  cr_assert_eq(listed, NM);
  for (size_t i = 0; i < NM; i++) {
    gc_nn *nn = gc_nn_alloc_model(m[i].name, 1);
    cr_assert(nn != NULL, "%s", m[i].name);
    cr_assert_eq(gc_nn_nparams(nn), m[i].d, "%s: d = %zu", m[i].name, gc_nn_nparams(nn));
    cr_assert_eq(gc_nn_nstats(nn), m[i].ns, "%s", m[i].name);
    cr_assert_eq(gc_nn_out_dim(nn), 10);
    gc_nn_free(nn);
  }
  gc_set_error_handler_off();
  cr_assert_null(gc_nn_alloc_model("resnet", 1));
}

/* At PyTorch init the loss of a 10-class net is near log 10, and the step
 * runs for every model (VGG on one CIFAR-shaped example). */
Test(nn, models_run_a_step)
{
  const char *const *names = gc_nn_model_names();
  for (size_t i = 0; names[i]; i++) {
    size_t B = 2;
    gc_nn *nn = gc_nn_alloc_model(names[i], B);
    size_t d = gc_nn_nparams(nn), nin = B * gc_nn_in_dim(nn);
    float *w = malloc(d * sizeof *w), *g = malloc(d * sizeof *g);
    float *x = malloc(nin * sizeof *x), *st = calloc(gc_nn_nstats(nn) + 1, sizeof *st);
    gc_nn_init(nn, w, st, 3);
    fill_uniform(x, nin, 1.0, 4);
    uint8_t y[2] = { 1, 7 };
    cr_assert(gc_nn_forward(nn, w, st, x, B, 1, 0, 0, 0) != NULL);
    double l = gc_nn_loss(nn, y);
    cr_assert(l > 1.0 && l < 4.0, "%s: initial loss %g", names[i], l);
    cr_assert_eq(gc_nn_backward(nn, w, NULL, g, NULL), GC_SUCCESS);
    double n2 = 0;
    for (size_t j = 0; j < d; j++)
      n2 += (double) g[j] * g[j];
    cr_assert(isfinite(n2) && n2 > 0, "%s", names[i]);
    free(w); free(g); free(x); free(st);
    gc_nn_free(nn);
  }
}

Test(nn, eval_mode_uses_running_stats)
{
  gc_nn_layer a[] = { { .kind = GC_NN_BATCHNORM, .in_c = 2, .in_h = 1, .in_w = 2 } };
  gc_nn *nn = gc_nn_alloc(a, 1, GC_LOSS_NLL, 2);
  float w[4], st[4], x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
  gc_nn_init(nn, w, st, 0);
  gc_nn_forward(nn, w, st, x, 2, 1, 0, 0, 0);
  /* channel 0 holds 1,2,5,6: mean 3.5; running = 0.1 * 3.5.  Each value
   * below takes a handful of float32 operations on numbers < 10: a few u
   * (u = 6e-8) relative, ~1e-7 absolute; the tolerances keep 10x. */
  cr_assert_float_eq(st[0], 0.35f, 1e-6);
  /* unbiased variance of {1,2,5,6} = 17/3; running = 0.9 + 0.1 * 17/3 */
  cr_assert_float_eq(st[2], 0.9f + 0.1f * 17.0f / 3.0f, 1e-5);
  const float *o = gc_nn_forward(nn, w, st, x, 2, 0, 0, 0, 0);
  cr_assert_float_eq(o[0], (1 - 0.35f) / sqrtf(st[2] + 1e-5f), 1e-5);
  gc_nn_free(nn);
}

/* gc_nn_evaluate on 1 to 4 threads (each on its own net, batches dealt
 * round-robin, losses added in batch order): the same accuracy and loss
 * to the bit, a ragged last batch included, for an MLP and the CNN with
 * BatchNorm statistics. */
Test(nn, evaluate_same_for_any_thread_count)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  static const char *const models[] = {"mnist-mlp", "fmnist-cnn"};
  int saved = omp_get_max_threads();
  for (int mi = 0; mi < 2; mi++) {
    gc_nn *nn = gc_nn_alloc_model(models[mi], 7);
    cr_assert(nn != NULL);
    size_t d = gc_nn_nparams(nn), ns = gc_nn_nstats(nn), dim = gc_nn_in_dim(nn);
    float *w = malloc(d * sizeof *w), *st = calloc(ns + 1, sizeof *st);
    gc_nn_init(nn, w, st, 5);
    gc_dataset ds = {0};
    ds.n = 45;
    ds.dim = dim;
    ds.classes = 10;
    ds.x = malloc(ds.n * dim * sizeof *ds.x);
    ds.y = malloc(ds.n);
    for (size_t i = 0; i < ds.n * dim; i++)
      ds.x[i] = (float) gc_rng_normal(8, 0, 0, i);
    for (size_t i = 0; i < ds.n; i++)
      ds.y[i] = (uint8_t) (i * 7 % 10);
    double acc1, loss1;
    omp_set_num_threads(1);
    cr_assert(gc_nn_evaluate(nn, w, st, &ds, &acc1, &loss1) == GC_SUCCESS);
    for (int T = 2; T <= 4; T++) {
      double acc, loss;
      omp_set_num_threads(T);
      cr_assert(gc_nn_evaluate(nn, w, st, &ds, &acc, &loss) == GC_SUCCESS);
      cr_assert(acc == acc1, "%s: accuracy on %d threads", models[mi], T);
      cr_assert(loss == loss1, "%s: loss on %d threads", models[mi], T);
    }
    free(ds.x);
    free(ds.y);
    free(w);
    free(st);
    gc_nn_free(nn);
  }
  omp_set_num_threads(saved);
#endif
}
