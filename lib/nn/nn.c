/* nn.c -- float32 layers over one flat parameter vector (gc_nn.h). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>

#include "gc_errno.h"
#include "gc_rng_bulk.h"
#include "gc_threads.h"
#include "gc_winograd.h"
#include "gc_nn.h"
#include "gc_rng.h"
#include "gc_vf4.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
/* The element-wise layers (ReLU, bias, pooling, BatchNorm) are plain loops
 * that GCC vectorises at -O3 only; results do not change (no reassociation
 * without -ffast-math). */
#pragma GCC optimize("O3")
#endif

enum { NN_EVAL_PEERS = 15 };
#define NN_EVAL_MEM ((size_t) 256 << 20)

struct gc_nn {
  size_t L, maxB, d, nstats;
  int loss;
  gc_nn_layer *ly;
  size_t *asz;          /* per-example size of act[l], l = 0..L          */
  float **act;          /* act[0] = caller's input; act[l+1] = layer l out */
  float **aux;          /* dropout mask / BN xhat, per layer (or NULL)   */
  float **bninv;        /* BN: per-channel inverse std (C)               */
  uint32_t **amax;      /* max-pool: argmax within the example input     */
  float *g0, *g1;       /* ping-pong gradient buffers                    */
  float *col, *dcol;    /* conv scratch: im2col of a chunk of images     */
  float *ochunk;        /* conv scratch: a chunk's outputs or gradients  */
  float *padded;        /* conv scratch: one image with its zero border  */
  float *wino_U;        /* Winograd layers: the transformed filter       */
  gc__wino3_scratch wino;
  float *dloss;         /* d loss / d output from gc_nn_loss             */
  size_t B;             /* examples of the last forward                  */
  int train;
  /* gc_nn_evaluate on T threads: nets of the same shape for threads
   * 1 .. T-1, made at the first such call */
  struct gc_nn *peer[NN_EVAL_PEERS];
};

static const double bn_eps = 1e-5, bn_momentum = 0.1;

size_t gc_nn_nparams(const gc_nn *nn) { return nn->d; }
size_t gc_nn_nstats(const gc_nn *nn) { return nn->nstats; }
size_t gc_nn_nlayers(const gc_nn *nn) { return nn->L; }
const gc_nn_layer *gc_nn_layer_at(const gc_nn *nn, size_t i) { return nn->ly + i; }
size_t gc_nn_in_dim(const gc_nn *nn) { return nn->asz[0]; }
size_t gc_nn_out_dim(const gc_nn *nn) { return nn->asz[nn->L]; }
size_t gc_nn_max_batch(const gc_nn *nn) { return nn->maxB; }

void gc_nn_free(gc_nn *nn)
{
  if (!nn)
    return;
  for (size_t l = 0; l < nn->L; l++) {
    free(nn->act[l + 1]);
    free(nn->aux[l]);
    free(nn->bninv[l]);
    free(nn->amax[l]);
  }
  free(nn->act); free(nn->aux); free(nn->bninv); free(nn->amax);
  free(nn->asz); free(nn->ly);
  free(nn->g0); free(nn->g1); free(nn->col); free(nn->dcol); free(nn->ochunk); free(nn->dloss);
  free(nn->padded);
  free(nn->wino_U); free(nn->wino.V); free(nn->wino.M); free(nn->wino.work);
  free(nn->wino.bias);
  for (int t = 0; t < NN_EVAL_PEERS; t++)
    gc_nn_free(nn->peer[t]);
  free(nn);
}

/* Fill shapes and offsets; the next layer's input is this one's output. */
static int plan(gc_nn *nn)
{
  size_t off = 0, soff = 0;
  for (size_t l = 0; l < nn->L; l++) {
    gc_nn_layer *y = nn->ly + l;
    if (l > 0) {
      const gc_nn_layer *x = y - 1;
      y->in_c = x->out_c; y->in_h = x->out_h; y->in_w = x->out_w;
    }
    if (y->in_c == 0 || y->in_h == 0 || y->in_w == 0)
      GC_ERRORF(GC_EINVAL, "layer %zu: empty input shape", l);
    y->woff = y->boff = y->nw = y->nb = y->soff = 0;
    switch (y->kind) {
    case GC_NN_LINEAR: {
      size_t in = y->in_c * y->in_h * y->in_w;   /* flattens CHW */
      if (y->out_c == 0)
        GC_ERRORF(GC_EINVAL, "layer %zu: linear with no outputs", l);
      y->in_c = in; y->in_h = y->in_w = 1;
      y->out_h = y->out_w = 1;
      y->nw = y->out_c * in;
      y->nb = y->out_c;
      break;
    }
    case GC_NN_CONV:
      if (y->out_c == 0 || y->ksize == 0 || y->in_h + 2 * y->pad < y->ksize ||
          y->in_w + 2 * y->pad < y->ksize)
        GC_ERRORF(GC_EINVAL, "layer %zu: bad convolution shape", l);
      y->out_h = y->in_h + 2 * y->pad - y->ksize + 1;
      y->out_w = y->in_w + 2 * y->pad - y->ksize + 1;
      y->nw = y->out_c * y->in_c * y->ksize * y->ksize;
      y->nb = y->out_c;
      break;
    case GC_NN_MAXPOOL:
      if (y->in_h < 2 || y->in_w < 2)
        GC_ERRORF(GC_EINVAL, "layer %zu: max-pool of a map smaller than 2x2", l);
      y->out_c = y->in_c; y->out_h = y->in_h / 2; y->out_w = y->in_w / 2;
      break;
    case GC_NN_DROPOUT:
      if (!(y->p >= 0 && y->p < 1))
        GC_ERRORF(GC_EINVAL, "layer %zu: dropout p=%g outside [0,1)", l, y->p);
      /* fall through */
    case GC_NN_RELU:
    case GC_NN_LOGSOFTMAX:
      y->out_c = y->in_c; y->out_h = y->in_h; y->out_w = y->in_w;
      break;
    case GC_NN_BATCHNORM:
      y->out_c = y->in_c; y->out_h = y->in_h; y->out_w = y->in_w;
      y->nw = y->nb = y->in_c;
      y->soff = soff;
      soff += 2 * y->in_c;
      break;
    default:
      GC_ERRORF(GC_EINVAL, "layer %zu: unknown kind %d", l, (int) y->kind);
    }
    if (y->nw) {
      y->woff = off;
      off += y->nw;
      y->boff = off;
      off += y->nb;
    }
  }
  nn->d = off;
  nn->nstats = soff;
  return GC_SUCCESS;
}

/* Images per convolution GEMM: as many as keep the im2col matrix and the
 * chunk's outputs under COL_BUDGET floats (256 KB, cache resident), but
 * at least enough for CHUNK_COLS output columns: one GEMM over a chunk
 * replaces small per-image GEMMs, whose call and packing overhead
 * dominates the small and the deep (2x2, 4x4) convolutions.  Measured on
 * `gradcomp bench train`: VGG-19 at batch 64 went from 2.6 s to 2.2 s. */
enum { COL_BUDGET = 1 << 16, CHUNK_COLS = 2048 };

/* 3x3 and 5x5 convolutions with enough channels go through Winograd
 * (winograd.c): F(2x2, 3x3) for the output and the input gradient,
 * F(3x3, 2x2) for the weight gradient, 2.25x fewer multiplies each (5x5:
 * 1.56x).  VGG-19 at batch 64 on `gradcomp bench train`: 1.97 -> 1.30 s
 * per step. */
static int wino_applies(const gc_nn_layer *y)
{
  return gc__wino3_applies(y->ksize, y->pad, y->in_c, y->out_c);
}

static int wino_pays(const gc_nn_layer *y, size_t B)
{
  return wino_applies(y) && gc__wino3_pays(B, y->out_h, y->out_w);
}

static size_t conv_chunk(const gc_nn_layer *y, size_t max_batch)
{
  size_t HW = y->out_h * y->out_w, K = y->in_c * y->ksize * y->ksize;
  size_t per = (K > y->out_c ? K : y->out_c) * HW;
  size_t b = COL_BUDGET / per, wide = (CHUNK_COLS + HW - 1) / HW;
  b = b > wide ? b : wide;
  return b < 1 ? 1 : b > max_batch ? max_batch : b;
}

gc_nn *gc_nn_alloc(const gc_nn_layer *spec, size_t L, int loss,
                   size_t max_batch)
{
  if (L == 0 || max_batch == 0)
    GC_ERROR_NULL("a net needs layers and a positive batch", GC_EINVAL);
  gc_nn *nn = calloc(1, sizeof *nn);
  if (!nn)
    GC_ERROR_NULL("cannot allocate the net", GC_ENOMEM);
  nn->L = L;
  nn->maxB = max_batch;
  nn->loss = loss;
  nn->ly = malloc(L * sizeof *nn->ly);
  nn->asz = calloc(L + 1, sizeof *nn->asz);
  nn->act = calloc(L + 1, sizeof *nn->act);
  nn->aux = calloc(L, sizeof *nn->aux);
  nn->bninv = calloc(L, sizeof *nn->bninv);
  nn->amax = calloc(L, sizeof *nn->amax);
  if (!nn->ly || !nn->asz || !nn->act || !nn->aux || !nn->bninv || !nn->amax) {
    gc_nn_free(nn);
    GC_ERROR_NULL("cannot allocate the net", GC_ENOMEM);
  }
  memcpy(nn->ly, spec, L * sizeof *nn->ly);
  if (plan(nn) != GC_SUCCESS) {
    gc_nn_free(nn);
    return NULL;
  }
  size_t maxa, maxcol = 0, maxo = 0, maxpad = 0;
  size_t maxU = 0, maxV = 0, maxM = 0, maxwork = 0, maxchan = 0;
  nn->asz[0] = nn->ly[0].in_c * nn->ly[0].in_h * nn->ly[0].in_w;
  maxa = nn->asz[0];
  int ok = 1;
  for (size_t l = 0; l < L; l++) {
    const gc_nn_layer *y = nn->ly + l;
    size_t in = nn->asz[l], out = y->out_c * y->out_h * y->out_w;
    nn->asz[l + 1] = out;
    if (out > maxa)
      maxa = out;
    nn->act[l + 1] = malloc(max_batch * out * sizeof(float));
    ok &= nn->act[l + 1] != NULL;
    if (y->kind == GC_NN_DROPOUT || y->kind == GC_NN_BATCHNORM) {
      nn->aux[l] = malloc(max_batch * in * sizeof(float));
      ok &= nn->aux[l] != NULL;
    }
    if (y->kind == GC_NN_BATCHNORM) {
      nn->bninv[l] = malloc(y->in_c * sizeof(float));
      ok &= nn->bninv[l] != NULL;
    }
    if (y->kind == GC_NN_MAXPOOL) {
      nn->amax[l] = malloc(max_batch * out * sizeof(uint32_t));
      ok &= nn->amax[l] != NULL;
    }
    if (y->kind == GC_NN_CONV) {
      size_t b = conv_chunk(y, max_batch), HW = y->out_h * y->out_w;
      size_t c = y->in_c * y->ksize * y->ksize * HW * b, o = y->out_c * HW * b;
      maxcol = c > maxcol ? c : maxcol;
      size_t pd = y->in_c * (y->in_h + 2 * y->pad) * (y->in_w + 2 * y->pad);
      maxpad = y->pad && pd > maxpad ? pd : maxpad;
      maxo = o > maxo ? o : maxo;
      if (!wino_applies(y))
        continue;
      /* forward, and the input gradient: a convolution of dout */
      size_t ks = y->ksize, sub = ks == 5 ? 4 : 1;
      size_t U = 16 * sub * y->in_c * y->out_c, v[2], m[2], k[2];
      gc__wino3_sizes(y->in_c, y->in_h, y->in_w, y->pad, ks, y->out_c,
                      max_batch, v, m, k);
      gc__wino3_sizes(y->out_c, y->out_h, y->out_w, ks - 1 - y->pad, ks,
                      y->in_c, max_batch, v + 1, m + 1, k + 1);
      for (size_t i = 0; i < 2; i++) {
        maxV = v[i] > maxV ? v[i] : maxV;
        maxM = m[i] > maxM ? m[i] : maxM;
        maxwork = k[i] > maxwork ? k[i] : maxwork;
      }
      maxU = U > maxU ? U : maxU;
      maxchan = y->in_c > maxchan ? y->in_c : maxchan;
      maxchan = y->out_c > maxchan ? y->out_c : maxchan;
    }
  }
  nn->g0 = malloc(max_batch * maxa * sizeof(float));
  nn->g1 = malloc(max_batch * maxa * sizeof(float));
  nn->dloss = malloc(max_batch * nn->asz[L] * sizeof(float));
  if (maxcol) {
    nn->col = malloc(maxcol * sizeof(float));
    nn->dcol = malloc(maxcol * sizeof(float));
    nn->ochunk = malloc(maxo * sizeof(float));
    nn->padded = malloc((maxpad ? maxpad : 1) * sizeof(float));
    ok &= nn->col && nn->dcol && nn->ochunk && nn->padded;
  }
  if (maxU) {
    nn->wino_U = malloc(maxU * sizeof(float));
    nn->wino.V = malloc(maxV * sizeof(float));
    nn->wino.M = calloc(maxM, sizeof(float));
    nn->wino.work = malloc(maxwork * sizeof(float));
    nn->wino.bias = malloc((maxchan + 3) * sizeof(float));
    ok &= nn->wino_U && nn->wino.V && nn->wino.M && nn->wino.work &&
          nn->wino.bias;
  }
  if (!ok || !nn->g0 || !nn->g1 || !nn->dloss) {
    gc_nn_free(nn);
    GC_ERROR_NULL("cannot allocate the activations", GC_ENOMEM);
  }
  return nn;
}

void gc_nn_init(const gc_nn *nn, float *w, float *stats, uint64_t seed)
{
  for (size_t l = 0; l < nn->L; l++) {
    const gc_nn_layer *y = nn->ly + l;
    if (y->kind == GC_NN_BATCHNORM) {
      for (size_t c = 0; c < y->in_c; c++) {
        w[y->woff + c] = 1.0f;
        w[y->boff + c] = 0.0f;
        if (stats) {
          stats[y->soff + c] = 0.0f;
          stats[y->soff + y->in_c + c] = 1.0f;
        }
      }
      continue;
    }
    if (!y->nw)
      continue;
    size_t fan_in = y->nw / y->out_c;
    double bound = 1.0 / sqrt((double) fan_in);
    for (size_t i = 0; i < y->nw + y->nb; i++)
      w[y->woff + i] = (float) ((2.0 * gc_rng_uniform(seed, (uint32_t) l, 0, i)
                                 - 1.0) * bound);
  }
}

/* ---- layers --------------------------------------------------------------- */

/* Reductions in a fixed order: within one call, 16 float lanes (entry i
 * to lane i mod 16), folded into the caller's 16 double lanes at its end;
 * the double lanes are summed in order by lanes_total.  A sequential
 * double sum would be latency bound; this vectorises, keeps each float
 * partial short (one image's channel), and is the same for any thread
 * count. */
enum { LANES = 16 };

static void fold(double acc[LANES], const float part[LANES])
{
  for (int j = 0; j < LANES; j++)
    acc[j] += (double) part[j];
}

static void lanes_sum(double acc[LANES], const float *p, size_t n)
{
  float part[LANES] = {0};
  size_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++)
      part[j] += p[i + j];
  for (; i < n; i++)
    part[i % LANES] += p[i];
  fold(acc, part);
}

static void lanes_sq(double acc[LANES], const float *p, size_t n, float mean)
{
  float part[LANES] = {0};
  size_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++) {
      float d = p[i + j] - mean;
      part[j] += d * d;
    }
  for (; i < n; i++) {
    float d = p[i] - mean;
    part[i % LANES] += d * d;
  }
  fold(acc, part);
}

static void lanes_dot(double acc[LANES], const float *a, const float *b,
                      size_t n)
{
  float part[LANES] = {0};
  size_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++)
      part[j] += a[i + j] * b[i + j];
  for (; i < n; i++)
    part[i % LANES] += a[i] * b[i];
  fold(acc, part);
}

static double lanes_total(const double acc[LANES])
{
  double t = 0;
  for (int j = 0; j < LANES; j++)
    t += acc[j];
  return t;
}

/* im2col and col2im go through a copy of the image with its zero border
 * (pad > 0), so that each run of an im2col row is a plain copy of Wo
 * floats, Wp apart in the source, and each col2im row a plain sum: no
 * bounds, no padding runs of 0 to 2 floats.  Row runs are 14 to 32
 * floats in the reference models; the tests and calls per run took 13% of
 * FMNIST-CNN's step. */
#if defined(__GNUC__) && !defined(__clang__)
/* and keeps GCC from turning the copy loops back into memcpy calls */
#pragma GCC push_options
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

/* d[0..n) = s[0..n); from n = 4 on the last 4 floats are stored again
 * (the same values) rather than in a tail loop. */
static inline void copy_run(float *restrict d, const float *restrict s,
                            size_t n)
{
  if (n < 4) {
    for (size_t j = 0; j < n; j++)
      d[j] = s[j];
    return;
  }
  for (size_t j = 0; j + 4 < n; j += 4)
    gc__store4(d + j, gc__load4(s + j));
  gc__store4(d + n - 4, gc__load4(s + n - 4));
}

/* Image in (C x H x W) -> out (C x Hp x Wp) with a zero border of p. */
static void pad_image(const float *in, size_t C, size_t H, size_t W, size_t p,
                      float *out)
{
  size_t Hp = H + 2 * p, Wp = W + 2 * p;
  for (size_t c = 0; c < C; c++) {
    float *o = out + c * Hp * Wp;
    memset(o, 0, p * Wp * sizeof *o);
    for (size_t h = 0; h < H; h++) {
      float *r = o + (h + p) * Wp;
      memset(r, 0, p * sizeof *r);
      copy_run(r + p, in + (c * H + h) * W, W);
      memset(r + p + W, 0, p * sizeof *r);
    }
    memset(o + (H + p) * Wp, 0, p * Wp * sizeof *o);
  }
}

/* Rows of the im2col matrix are ld floats apart (ld >= Ho Wo), so that
 * the images of a chunk sit side by side.  padded: scratch for one
 * padded image. */
static void im2col(const float *in, const gc_nn_layer *y, float *col,
                   size_t ld, float *padded)
{
  size_t k = y->ksize, p = y->pad, Ho = y->out_h, Wo = y->out_w;
  size_t Hp = y->in_h + 2 * p, Wp = y->in_w + 2 * p;
  if (p) {
    pad_image(in, y->in_c, y->in_h, y->in_w, p, padded);
    in = padded;
  }
  for (size_t c = 0; c < y->in_c; c++)
    for (size_t ki = 0; ki < k; ki++)
      for (size_t kj = 0; kj < k; kj++) {
        float *row = col + ((c * k + ki) * k + kj) * ld;
        const float *src = in + (c * Hp + ki) * Wp + kj;
        for (size_t oh = 0; oh < Ho; oh++)
          copy_run(row + oh * Wo, src + oh * Wp, Wo);
      }
}

/* The transpose of im2col: in += the columns' entries, summed into the
 * padded image in the order (c, ki, kj, oh) of the unpadded sums (the
 * border's sums are dropped), so the bits are those of adding in place. */
static void col2im(const float *col, const gc_nn_layer *y, float *in,
                   size_t ld, float *padded)
{
  size_t k = y->ksize, p = y->pad, H = y->in_h, W = y->in_w;
  size_t Ho = y->out_h, Wo = y->out_w, Hp = H + 2 * p, Wp = W + 2 * p;
  float *acc = p ? padded : in;
  memset(acc, 0, y->in_c * Hp * Wp * sizeof *acc);
  for (size_t c = 0; c < y->in_c; c++)
    for (size_t ki = 0; ki < k; ki++)
      for (size_t kj = 0; kj < k; kj++) {
        const float *row = col + ((c * k + ki) * k + kj) * ld;
        float *dst = acc + (c * Hp + ki) * Wp + kj;
        for (size_t oh = 0; oh < Ho; oh++) {
          float *restrict d = dst + oh * Wp;
          const float *restrict r = row + oh * Wo;
          for (size_t j = 0; j < Wo; j++)
            d[j] += r[j];
        }
      }
  if (p)
    for (size_t c = 0; c < y->in_c; c++)
      for (size_t h = 0; h < H; h++)
        copy_run(in + (c * H + h) * W, acc + (c * Hp + h + p) * Wp + p, W);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static void conv_fwd(gc_nn *nn, const gc_nn_layer *y, const float *w,
                     const float *in, float *out, size_t B)
{
  size_t K = y->in_c * y->ksize * y->ksize, HW = y->out_h * y->out_w;
  size_t isz = y->in_c * y->in_h * y->in_w, osz = y->out_c * HW;
  size_t chunk = conv_chunk(y, nn->maxB);
  const float *W = w + y->woff, *b = w + y->boff;
  if (wino_pays(y, B)) {
    if (y->ksize == 5)
      gc__wino5_filter(W, y->out_c, y->in_c, 0, nn->wino.work, nn->wino_U);
    else
      gc__wino3_filter(W, y->out_c, y->in_c, nn->wino_U);
    gc__wino3_conv(in, B, y->in_c, y->in_h, y->in_w, y->pad, y->ksize,
                   nn->wino_U, 0, y->out_c, b, out, &nn->wino);
    return;
  }
  for (size_t n0 = 0; n0 < B; n0 += chunk) {
    size_t nb = B - n0 < chunk ? B - n0 : chunk, ld = nb * HW;
    for (size_t j = 0; j < nb; j++)
      im2col(in + (n0 + j) * isz, y, nn->col + j * HW, ld, nn->padded);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) y->out_c,
                (int) ld, (int) K, 1.0f, W, (int) K, nn->col, (int) ld, 0.0f,
                nn->ochunk, (int) ld);
    for (size_t j = 0; j < nb; j++)
      for (size_t c = 0; c < y->out_c; c++) {
        const float *r = nn->ochunk + c * ld + j * HW;
        float *o = out + (n0 + j) * osz + c * HW;
        for (size_t i = 0; i < HW; i++)
          o[i] = r[i] + b[c];
      }
  }
}

/* The bias gradient of a conv layer: per image and channel, summed in
 * image order (the same order whichever path computes the rest). */
static void conv_bias_grad(const gc_nn_layer *y, const float *dout, size_t n0,
                           size_t nb, float *db)
{
  size_t HW = y->out_h * y->out_w, osz = y->out_c * HW;
  for (size_t j = 0; j < nb; j++)
    for (size_t c = 0; c < y->out_c; c++) {
      double acc[LANES] = {0};
      lanes_sum(acc, dout + (n0 + j) * osz + c * HW, HW);
      db[c] += (float) lanes_total(acc);
    }
}

static void conv_bwd(gc_nn *nn, const gc_nn_layer *y, const float *w,
                     const float *in, const float *dout, float *din,
                     float *grad, size_t B)
{
  size_t K = y->in_c * y->ksize * y->ksize, HW = y->out_h * y->out_w;
  size_t isz = y->in_c * y->in_h * y->in_w, osz = y->out_c * HW;
  size_t chunk = conv_chunk(y, nn->maxB);
  float *dW = grad + y->woff, *db = grad + y->boff;
  memset(db, 0, y->nb * sizeof *db);
  if (wino_pays(y, B)) {
    conv_bias_grad(y, dout, 0, B, db);
    gc__wino3_wgrad(in, dout, B, y->in_c, y->in_h, y->in_w, y->pad,
                    y->ksize, y->out_c, dW, nn->wino_U, &nn->wino);
    if (din) {   /* din = dout correlated with the turned kernel */
      size_t ks = y->ksize;
      if (ks == 5)
        gc__wino5_filter(w + y->woff, y->out_c, y->in_c, 1, nn->wino.work,
                         nn->wino_U);
      else
        gc__wino3_filter(w + y->woff, y->out_c, y->in_c, nn->wino_U);
      gc__wino3_conv(dout, B, y->out_c, y->out_h, y->out_w, ks - 1 - y->pad,
                     ks, nn->wino_U, ks == 3, y->in_c, NULL, din, &nn->wino);
    }
    return;
  }
  memset(dW, 0, y->nw * sizeof *dW);
  for (size_t n0 = 0; n0 < B; n0 += chunk) {
    size_t nb = B - n0 < chunk ? B - n0 : chunk, ld = nb * HW;
    conv_bias_grad(y, dout, n0, nb, db);
    /* the chunk's output gradients side by side: out_c x (nb HW) */
    for (size_t j = 0; j < nb; j++)
      for (size_t c = 0; c < y->out_c; c++)
        memcpy(nn->ochunk + c * ld + j * HW, dout + (n0 + j) * osz + c * HW,
               HW * sizeof *dout);
    for (size_t j = 0; j < nb; j++)
      im2col(in + (n0 + j) * isz, y, nn->col + j * HW, ld, nn->padded);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int) y->out_c,
                (int) K, (int) ld, 1.0f, nn->ochunk, (int) ld, nn->col,
                (int) ld, 1.0f, dW, (int) K);
    if (din) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int) K, (int) ld,
                  (int) y->out_c, 1.0f, w + y->woff, (int) K, nn->ochunk,
                  (int) ld, 0.0f, nn->dcol, (int) ld);
      for (size_t j = 0; j < nb; j++)
        col2im(nn->dcol + j * HW, y, din + (n0 + j) * isz, ld, nn->padded);
    }
  }
}

static void linear_fwd(const gc_nn_layer *y, const float *w, const float *in,
                       float *out, size_t B)
{
  size_t ni = y->in_c, no = y->out_c;
  const float *b = w + y->boff;
  for (size_t n = 0; n < B; n++)
    memcpy(out + n * no, b, no * sizeof *out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int) B, (int) no,
              (int) ni, 1.0f, in, (int) ni, w + y->woff, (int) ni, 1.0f, out,
              (int) no);
}

static void linear_bwd(const gc_nn_layer *y, const float *w, const float *in,
                       const float *dout, float *din, float *grad, size_t B)
{
  size_t ni = y->in_c, no = y->out_c;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int) no, (int) ni,
              (int) B, 1.0f, dout, (int) no, in, (int) ni, 0.0f,
              grad + y->woff, (int) ni);
  float *db = grad + y->boff;
  for (size_t o = 0; o < no; o++)
    db[o] = 0;
  for (size_t n = 0; n < B; n++)
    for (size_t o = 0; o < no; o++)
      db[o] += dout[n * no + o];
  if (din)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) B, (int) ni,
                (int) no, 1.0f, dout, (int) no, w + y->woff, (int) ni, 0.0f, din,
                (int) ni);
}

static void maxpool_fwd(const gc_nn_layer *y, const float *in, float *out,
                        uint32_t *amax, size_t B)
{
  size_t H = y->in_h, W = y->in_w, Ho = y->out_h, Wo = y->out_w;
  for (size_t n = 0; n < B; n++)
    for (size_t c = 0; c < y->in_c; c++) {
      const float *src = in + (n * y->in_c + c) * H * W;
      size_t obase = (n * y->in_c + c) * Ho * Wo;
      for (size_t oh = 0; oh < Ho; oh++) {
        const float *r0 = src + 2 * oh * W, *r1 = r0 + W;
        float *o = out + obase + oh * Wo;
        uint32_t *am = amax + obase + oh * Wo;
        uint32_t base = (uint32_t) (c * H * W + 2 * oh * W);
        for (size_t ow = 0; ow < Wo; ow++) {
          /* first maximum in row-major order wins, NaN propagates, as in
           * PyTorch; selects rather than branches */
          float m = r0[2 * ow], v;
          uint32_t at = base + (uint32_t) (2 * ow), t;
          v = r0[2 * ow + 1];
          t = v > m || v != v;
          m = t ? v : m;
          at = t ? base + (uint32_t) (2 * ow + 1) : at;
          v = r1[2 * ow];
          t = v > m || v != v;
          m = t ? v : m;
          at = t ? base + (uint32_t) (W + 2 * ow) : at;
          v = r1[2 * ow + 1];
          t = v > m || v != v;
          m = t ? v : m;
          at = t ? base + (uint32_t) (W + 2 * ow + 1) : at;
          o[ow] = m;
          am[ow] = at;
        }
      }
    }
}

static void maxpool_bwd(const gc_nn_layer *y, const float *dout, float *din,
                        const uint32_t *amax, size_t B)
{
  size_t isz = y->in_c * y->in_h * y->in_w, osz = y->out_c * y->out_h * y->out_w;
  memset(din, 0, B * isz * sizeof *din);
  for (size_t n = 0; n < B; n++)
    for (size_t i = 0; i < osz; i++)
      din[n * isz + amax[n * osz + i]] += dout[n * osz + i];
}

/* Max-pool backward and the ReLU's below it in one pass: the gradient
 * reaches only each window's argmax, and passes there where the ReLU's
 * output is positive.  This saves the ReLU's pass over the whole map;
 * entry for entry it is what the two layers compute apart (0.0f + g
 * where the ReLU passes it, 0.0f elsewhere). */
static void maxpool_relu_bwd(const gc_nn_layer *y, const float *dout,
                             const float *relu_out, float *din,
                             const uint32_t *amax, size_t B)
{
  size_t isz = y->in_c * y->in_h * y->in_w, osz = y->out_c * y->out_h * y->out_w;
  memset(din, 0, B * isz * sizeof *din);
  for (size_t n = 0; n < B; n++) {
    const float *o = relu_out + n * isz;
    float *d = din + n * isz;
    for (size_t i = 0; i < osz; i++) {
      uint32_t a = amax[n * osz + i];
      d[a] += o[a] > 0 ? dout[n * osz + i] : 0.0f;
    }
  }
}

static void bn_fwd(gc_nn *nn, size_t l, const float *w, float *stats,
                   const float *in, float *out, size_t B, int train)
{
  const gc_nn_layer *y = nn->ly + l;
  size_t C = y->in_c, HW = y->in_h * y->in_w;
  const float *gamma = w + y->woff, *beta = w + y->boff;
  float *xhat = nn->aux[l], *inv_std = nn->bninv[l];
  double m = (double) (B * HW);
  for (size_t c = 0; c < C; c++) {
    double mean, var;
    if (train) {
      double a1[LANES] = {0}, a2[LANES] = {0};
      for (size_t n = 0; n < B; n++)
        lanes_sum(a1, in + (n * C + c) * HW, HW);
      mean = lanes_total(a1) / m;
      for (size_t n = 0; n < B; n++)
        lanes_sq(a2, in + (n * C + c) * HW, HW, (float) mean);
      double s2 = lanes_total(a2);
      var = s2 / m;
      if (stats) {
        float *rm = stats + y->soff, *rv = stats + y->soff + C;
        double unbiased = m > 1 ? s2 / (m - 1) : var;
        rm[c] = (float) ((1 - bn_momentum) * rm[c] + bn_momentum * mean);
        rv[c] = (float) ((1 - bn_momentum) * rv[c] + bn_momentum * unbiased);
      }
    } else {
      mean = stats[y->soff + c];
      var = stats[y->soff + C + c];
    }
    double inv = 1.0 / sqrt(var + bn_eps);
    float mf = (float) mean, invf = (float) inv;
    inv_std[c] = invf;
    for (size_t n = 0; n < B; n++) {   /* float, so that it vectorises */
      const float *p = in + (n * C + c) * HW;
      float *xh = xhat + (n * C + c) * HW, *o = out + (n * C + c) * HW;
      for (size_t i = 0; i < HW; i++) {
        xh[i] = (p[i] - mf) * invf;
        o[i] = gamma[c] * xh[i] + beta[c];
      }
    }
  }
}

static void bn_bwd(gc_nn *nn, size_t l, const float *w, const float *dout,
                   float *din, float *grad, size_t B)
{
  const gc_nn_layer *y = nn->ly + l;
  size_t C = y->in_c, HW = y->in_h * y->in_w;
  const float *gamma = w + y->woff, *xhat = nn->aux[l], *inv_std = nn->bninv[l];
  double m = (double) (B * HW);
  for (size_t c = 0; c < C; c++) {
    double adg[LANES] = {0}, adb[LANES] = {0};
    for (size_t n = 0; n < B; n++) {
      const float *g = dout + (n * C + c) * HW, *xh = xhat + (n * C + c) * HW;
      lanes_dot(adg, g, xh, HW);
      lanes_sum(adb, g, HW);
    }
    double dg = lanes_total(adg), db = lanes_total(adb);
    grad[y->woff + c] = (float) dg;
    grad[y->boff + c] = (float) db;
    if (!din)
      continue;
    double k = gamma[c] * inv_std[c] / m;
    /* d = k (m g - db - xhat dg), with the constants folded into floats */
    float km = (float) (k * m), kdb = (float) (k * db), kdg = (float) (k * dg);
    for (size_t n = 0; n < B; n++) {
      const float *g = dout + (n * C + c) * HW, *xh = xhat + (n * C + c) * HW;
      float *d = din + (n * C + c) * HW;
      if (nn->train)
        for (size_t i = 0; i < HW; i++)
          d[i] = km * g[i] - kdb - kdg * xh[i];
      else   /* running statistics are constants */
        for (size_t i = 0; i < HW; i++)
          d[i] = gamma[c] * inv_std[c] * g[i];
    }
  }
}

/* log sum_i exp(x[i]), shifted by the maximum, summed in double: shared
 * by the log-softmax layer and the cross-entropy loss. */
static double logsumexp(const float *x, size_t n)
{
  float mx = -INFINITY;
  for (size_t i = 0; i < n; i++)
    if (x[i] > mx)
      mx = x[i];
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += exp((double) x[i] - mx);
  return mx + log(s);
}

static void logsoftmax_rows(const float *in, float *out, size_t B, size_t n)
{
  for (size_t b = 0; b < B; b++) {
    const float *x = in + b * n;
    float *o = out + b * n;
    float lse = (float) logsumexp(x, n);
    for (size_t i = 0; i < n; i++)
      o[i] = x[i] - lse;
  }
}

/* Dropout: entry i is kept, scaled by 1/(1-p), when the uniform of
 * gc_rng_u32(seed, worker, step, salt + i) is >= p (the GPU twin draws the
 * same words), and mask holds what out was multiplied by.  The words come
 * in bulk (gc__rng_words: four a Philox call, in vector lanes); a call per
 * entry took a tenth of MNIST-CNN's training step. */
static void dropout_fwd(const gc_nn_layer *y, const float *in, float *out, float *mask,
                        size_t n, int train, uint64_t seed, uint32_t worker, uint32_t step,
                        uint64_t salt)
{
  enum { WORDS = 1024 };   /* a chunk of words stays in L1 */
  float keep = (float) (1.0 / (1.0 - y->p)), p = (float) y->p;
  uint32_t u[WORDS];
  for (size_t i0 = 0; i0 < n; i0 += WORDS) {
    size_t m = n - i0 < WORDS ? n - i0 : WORDS;
    if (train)
      gc__rng_words(seed, worker, step, salt + i0, m, u);
    for (size_t i = 0; i < m; i++) {
      mask[i0 + i] = !train ? 1.0f : gc_rng_to_f32(u[i]) >= p ? keep : 0.0f;
      out[i0 + i] = in[i0 + i] * mask[i0 + i];
    }
  }
}

const float *gc_nn_forward(gc_nn *nn, const float *w, float *stats,
                           const float *x, size_t B, int train,
                           uint64_t seed, uint32_t worker, uint32_t step)
{
  if (B == 0 || B > nn->maxB)
    GC_ERROR_NULL("batch larger than the net's workspace", GC_EINVAL);
  nn->B = B;
  nn->train = train;
  nn->act[0] = (float *) x;   /* read only */
  for (size_t l = 0; l < nn->L; l++) {
    const gc_nn_layer *y = nn->ly + l;
    const float *in = nn->act[l];
    float *out = nn->act[l + 1];
    size_t n = B * nn->asz[l];
    switch (y->kind) {
    case GC_NN_LINEAR:
      linear_fwd(y, w, in, out, B);
      break;
    case GC_NN_CONV:
      conv_fwd(nn, y, w, in, out, B);
      break;
    case GC_NN_MAXPOOL:
      maxpool_fwd(y, in, out, nn->amax[l], B);
      break;
    case GC_NN_RELU:
      for (size_t i = 0; i < n; i++)
        out[i] = in[i] > 0 ? in[i] : 0.0f;
      break;
    case GC_NN_DROPOUT:
      dropout_fwd(y, in, out, nn->aux[l], n, train, seed, worker, step, (uint64_t) l << 40);
      break;
    case GC_NN_BATCHNORM:
      bn_fwd(nn, l, w, stats, in, out, B, train);
      break;
    case GC_NN_LOGSOFTMAX:
      logsoftmax_rows(in, out, B, nn->asz[l]);
      break;
    }
  }
  return nn->act[nn->L];
}

double gc_nn_loss(gc_nn *nn, const uint8_t *y)
{
  size_t B = nn->B, n = nn->asz[nn->L];
  const float *out = nn->act[nn->L];
  double loss = 0;
  for (size_t b = 0; b < B; b++) {
    const float *o = out + b * n;
    float *d = nn->dloss + b * n;
    if (nn->loss == GC_LOSS_NLL) {
      loss -= o[y[b]];
      memset(d, 0, n * sizeof *d);
      d[y[b]] = (float) (-1.0 / (double) B);
    } else {
      double lse = logsumexp(o, n);
      loss -= o[y[b]] - lse;
      for (size_t i = 0; i < n; i++)
        d[i] = (float) ((exp(o[i] - lse) - (i == y[b])) / (double) B);
    }
  }
  return loss / (double) B;
}

int gc_nn_backward(gc_nn *nn, const float *w, const float *dout, float *grad,
                   float *dx)
{
  size_t B = nn->B;
  const float *g = dout ? dout : nn->dloss;
  for (size_t l = nn->L; l-- > 0;) {
    const gc_nn_layer *y = nn->ly + l;
    /* din goes to the buffer g does not occupy; layer 0 writes dx */
    float *din = l == 0 ? dx : (g == nn->g0 ? nn->g1 : nn->g0);
    const float *in = nn->act[l], *out = nn->act[l + 1];
    size_t n = B * nn->asz[l];
    switch (y->kind) {
    case GC_NN_LINEAR:
      linear_bwd(y, w, in, g, din, grad, B);
      break;
    case GC_NN_CONV:
      conv_bwd(nn, y, w, in, g, din, grad, B);
      break;
    case GC_NN_MAXPOOL:
      if (din && l > 1 && nn->ly[l - 1].kind == GC_NN_RELU) {
        /* the ReLU below (not the first layer, whose din is dx) too */
        maxpool_relu_bwd(y, g, in, din, nn->amax[l], B);
        l--;
      } else if (din)
        maxpool_bwd(y, g, din, nn->amax[l], B);
      break;
    case GC_NN_RELU:
      if (din)
        for (size_t i = 0; i < n; i++) {
          float gi = g[i];   /* loaded either way: the select vectorises */
          din[i] = out[i] > 0 ? gi : 0.0f;
        }
      break;
    case GC_NN_DROPOUT:
      if (din)
        for (size_t i = 0; i < n; i++)
          din[i] = g[i] * nn->aux[l][i];
      break;
    case GC_NN_BATCHNORM:
      bn_bwd(nn, l, w, g, din, grad, B);
      break;
    case GC_NN_LOGSOFTMAX:
      if (din) {
        size_t m = nn->asz[l];
        for (size_t b = 0; b < B; b++) {
          double s = 0;
          for (size_t i = 0; i < m; i++)
            s += g[b * m + i];
          for (size_t i = 0; i < m; i++)
            din[b * m + i] = (float) (g[b * m + i] - exp(out[b * m + i]) * s);
        }
      }
      break;
    }
    if (!din)
      break;   /* only the first layer may lack din; nothing is below it */
    g = din;
  }
  return GC_SUCCESS;
}

size_t gc_nn_correct(const gc_nn *nn, const uint8_t *y)
{
  size_t n = nn->asz[nn->L], ok = 0;
  const float *out = nn->act[nn->L];
  for (size_t b = 0; b < nn->B; b++) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
      if (out[b * n + i] > out[b * n + best])
        best = i;
    ok += best == y[b];
  }
  return ok;
}

/* Batches of maxB examples; on T threads (the caller's omp_set_num_threads,
 * one inside a parallel region) thread t takes batches t, t + T, ... on its
 * own net.  A batch's forward pass does not depend on the net that runs
 * it, and the losses are added in batch order afterwards: the same
 * accuracy and loss for any T. */
int gc_nn_evaluate(gc_nn *nn, const float *w, float *stats,
                   const gc_dataset *ds, double *acc, double *loss)
{
  size_t nb = (ds->n + nn->maxB - 1) / nn->maxB, ok = 0;
  int T = gc__threads_for(ds->n, 0, NN_EVAL_PEERS + 1);
  /* each extra thread holds a net's activations: at most NN_EVAL_MEM bytes
   * of them in all (VGG-19 takes about 1 MB an example) */
  size_t per = 0;
  for (size_t l = 1; l <= nn->L; l++)
    per += 2 * nn->asz[l] * nn->maxB * sizeof(float);
  if (per && (size_t) T - 1 > NN_EVAL_MEM / per)
    T = (int) (NN_EVAL_MEM / per) + 1;
  T = (size_t) T < nb ? T : (int) (nb ? nb : 1);
  for (int t = 1; t < T; t++)
    if (!nn->peer[t - 1] && !(nn->peer[t - 1] = gc_nn_alloc(nn->ly, nn->L, nn->loss, nn->maxB)))
      T = t;   /* out of memory: fewer threads (reported, same results) */
  double *bl = malloc((nb ? nb : 1) * sizeof *bl);
  if (!bl)
    GC_ERROR("cannot allocate the batch losses", GC_ENOMEM);
  int bad = 0;
  #pragma omp parallel for schedule(static) num_threads(T) reduction(+ : ok) reduction(| : bad)
  for (int t = 0; t < T; t++) {
    gc_nn *net = t ? nn->peer[t - 1] : nn;
    for (size_t j = (size_t) t; j < nb && !bad; j += (size_t) T) {
      size_t at = j * nn->maxB, B = ds->n - at < nn->maxB ? ds->n - at : nn->maxB;
      if (!gc_nn_forward(net, w, stats, ds->x + at * ds->dim, B, 0, 0, 0, 0)) {
        bad = 1;
        break;
      }
      bl[j] = gc_nn_loss(net, ds->y + at) * (double) B;
      ok += gc_nn_correct(net, ds->y + at);
    }
  }
  double tot = 0;
  for (size_t j = 0; j < nb && !bad; j++)
    tot += bl[j];
  free(bl);
  if (bad)
    return GC_EINVAL;
  if (acc)
    *acc = ds->n ? (double) ok / (double) ds->n : 0;
  if (loss)
    *loss = ds->n ? tot / (double) ds->n : 0;
  return GC_SUCCESS;
}

/* Only OpenBLAS can be told; other CBLAS builds are taken as serial. */
void gc_nn_blas_single_thread(void)
{
#ifdef OPENBLAS_VERSION
  openblas_set_num_threads(1);
#endif
}

const char *gc_nn_blas_core(void)
{
#ifdef OPENBLAS_VERSION
  return openblas_get_corename();
#else
  return "unknown (not OpenBLAS)";
#endif
}
