/* test_cuda_train.c -- training on the GPU against the CPU (issue #16,
 * point 4): the same weights and batches give the same losses and
 * gradients to float rounding, and the top-K messages built from them
 * select the same coordinates except where two magnitudes are nearer to
 * each other than that rounding (a near-tie at the K-th largest).  Runs
 * through gc_cuda_nn_device, the type table `train --device cuda` uses.
 * GPU tests skip without a device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_compressor.h"
#include "gc_cuda_nn.h"
#include "gc_errno.h"
#include "gc_nn.h"
#include "gc_rng.h"
#include "gc_test.h"
#include "gc_test_cuda.h"

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
