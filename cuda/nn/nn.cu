/* nn.cu -- gc_cuda_nn.h: the CPU nets of lib/nn/nn.c on the GPU.
 *
 * All G*B examples of a call go through each layer together; only what is
 * defined per group is split by group: BatchNorm's batch statistics, the
 * parameter gradients (one strided-batched GEMM over the groups, or one
 * block per (group, channel) for the reductions), dropout's worker key and
 * the mean loss.  lib/nn/nn.c's float operations are repeated with _rn
 * intrinsics where the CPU rounds each step (element-wise layers), so that
 * nvcc cannot fuse them into FMAs the CPU does not do; the GEMMs and sums
 * differ from the CPU only in their order.
 *
 * cuBLAS is column-major, our arrays row-major.  A row-major matrix
 * M [r][c] is, to cuBLAS, the column-major c x r matrix M^T with leading
 * dimension c.  Every call below is written in that view and names the
 * product it forms. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cublas_v2.h>

#include "gc_cuda_internal.cuh"
#include "gc_cuda_nn.h"
#include "gc_cuda_sim.h"
#include "gc_rng.h"

using namespace gc_cuda;

/* Map a failing cuBLAS call to GC_ECUDA, naming the call. */
#define GC_CUBLAS_TRY(call)                                               \
  do {                                                                    \
    cublasStatus_t gc_cublas_s_ = (call);                                 \
    if (gc_cublas_s_ != CUBLAS_STATUS_SUCCESS) {                          \
      gc_errorf(__FILE__, __LINE__, GC_ECUDA, "%s: %s", #call,            \
                cublasGetStatusString(gc_cublas_s_));                     \
      return GC_ECUDA;                                                    \
    }                                                                     \
  } while (0)

struct gc_cuda_nn {
  size_t L, groups, batch, nmax;   /* nmax = groups * batch              */
  size_t d, ns, in_dim, out_dim, maxc;
  int loss;
  gc_nn_layer *ly;
  size_t *asz;          /* per-example size of act[l]                    */
  cublasHandle_t blas;
  int have_blas;
  int cuda;             /* setup() ran: device memory may be held       */
  float **act;          /* act[l+1] = layer l's output; act[0] the input */
  float **aux;          /* dropout mask / BN xhat                        */
  uint32_t **amax;      /* max-pool argmax within the example input      */
  float **bnmean, **bninv;  /* BN per (group, channel); eval: group 0    */
  float *bnk;           /* BN backward constants, 3 per (group, channel) */
  float *g0, *g1;       /* ping-pong gradients, nmax * max act size      */
  float *col;           /* im2row of a chunk of images, then its dcol    */
  size_t col_cap;
  float *tr;            /* conv outputs or gradients, pixel-major        */
  double *exloss;       /* per-example loss                              */
  uint32_t *exok;       /* per-example argmax == label                   */
  /* staging of the device type (gc_cuda_nn_device) */
  int staged;
  cudaStream_t stream;
  float *d_w, *d_stats, *d_x, *d_grads;
  uint8_t *d_y;
  double *d_loss, *d_lsum;
  uint32_t *d_correct;
  float *h_w, *h_stats, *h_x, *h_grads;
  uint8_t *h_y;
  double *h_loss, *h_lsum;
  uint32_t *h_correct;
};

namespace {

const double bn_eps = 1e-5, bn_momentum = 0.1;

/* Floats of the im2row buffer: at least one group's images of the widest
 * conv layer, else about 256 MB, so that VGG-19 at large batches runs its
 * convolutions in chunks of groups instead of holding every image. */
const size_t COL_BUDGET = (size_t) 1 << 26;

/* Fixed-shape tree sum over a block of BLOCK threads: the same order on
 * every run. */
__device__ double block_sum(double v, double *sh)
{
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double t = sh[0];
  __syncthreads();
  return t;
}

#define GRID_LOOP(i, n)                                                    \
  for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (size_t) gridDim.x * blockDim.x)

__global__ void add_bias_rows(float *y, const float *b, size_t n, size_t no)
{
  GRID_LOOP(i, n) y[i] = __fadd_rn(y[i], b[i % no]);
}

/* out [N][oc][HW] = t [N*HW][oc] + b */
__global__ void conv_out(const float *t, const float *b, float *out, size_t n,
                         size_t oc, size_t HW)
{
  GRID_LOOP(i, n) {
    size_t p = i % HW, o = (i / HW) % oc, img = i / (HW * oc);
    out[i] = __fadd_rn(t[(img * HW + p) * oc + o], b[o]);
  }
}

/* t [N*HW][oc] = dy [N][oc][HW] */
__global__ void to_pixel_major(const float *dy, float *t, size_t n, size_t oc,
                               size_t HW)
{
  GRID_LOOP(i, n) {
    size_t o = i % oc, r = i / oc, p = r % HW, img = r / HW;
    t[i] = dy[(img * oc + o) * HW + p];
  }
}

/* col [N*HW][K], K = (c, ki, kj) as W [oc][ic][k][k]; zero padding. */
__global__ void im2row(const float *in, float *col, size_t n, size_t C,
                       size_t H, size_t W, size_t k, size_t pad, size_t Ho,
                       size_t Wo)
{
  size_t K = C * k * k, HW = Ho * Wo;
  GRID_LOOP(i, n) {
    size_t kk = i % K, r = i / K, p = r % HW, img = r / HW;
    size_t c = kk / (k * k), ki = (kk / k) % k, kj = kk % k;
    long ih = (long) (p / Wo + ki) - (long) pad, iw = (long) (p % Wo + kj) - (long) pad;
    col[i] = ih >= 0 && ih < (long) H && iw >= 0 && iw < (long) W
                 ? in[((img * C + c) * H + (size_t) ih) * W + (size_t) iw]
                 : 0.0f;
  }
}

/* din [N][C][H][W] from dcol [N*HW][K]: each input element gathers its
 * (ki, kj) terms in the CPU's col2im order; no atomics. */
__global__ void row2im(const float *dcol, float *din, size_t n, size_t C,
                       size_t H, size_t W, size_t k, size_t pad, size_t Ho,
                       size_t Wo)
{
  size_t K = C * k * k;
  GRID_LOOP(i, n) {
    size_t iw = i % W, ih = (i / W) % H, c = (i / (W * H)) % C, img = i / (W * H * C);
    float s = 0.0f;
    for (size_t ki = 0; ki < k; ki++) {
      long oh = (long) (ih + pad) - (long) ki;
      if (oh < 0 || oh >= (long) Ho)
        continue;
      for (size_t kj = 0; kj < k; kj++) {
        long ow = (long) (iw + pad) - (long) kj;
        if (ow < 0 || ow >= (long) Wo)
          continue;
        size_t r = img * Ho * Wo + (size_t) oh * Wo + (size_t) ow;
        s = __fadd_rn(s, dcol[r * K + (c * k + ki) * k + kj]);
      }
    }
    din[i] = s;
  }
}

/* 2x2 stride 2: the first maximum in row-major order wins and NaN
 * propagates, nn.c's selects in its order. */
__global__ void maxpool_fwd(const float *in, float *out, uint32_t *amax,
                            size_t n, size_t C, size_t H, size_t W, size_t Ho,
                            size_t Wo)
{
  GRID_LOOP(i, n) {
    size_t ow = i % Wo, oh = (i / Wo) % Ho, c = (i / (Wo * Ho)) % C, img = i / (Wo * Ho * C);
    const float *r0 = in + (img * C + c) * H * W + 2 * oh * W, *r1 = r0 + W;
    uint32_t base = (uint32_t) (c * H * W + 2 * oh * W);
    float m = r0[2 * ow], v;
    uint32_t at = base + (uint32_t) (2 * ow);
    bool t;
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
    out[i] = m;
    amax[i] = at;
  }
}

/* Windows do not overlap, so each input element has at most one output:
 * a gather, and the floor's dropped row/column gets 0. */
__global__ void maxpool_bwd(const float *dout, const uint32_t *amax, float *din,
                            size_t n, size_t C, size_t H, size_t W, size_t Ho,
                            size_t Wo)
{
  GRID_LOOP(i, n) {
    size_t iw = i % W, ih = (i / W) % H, c = (i / (W * H)) % C, img = i / (W * H * C);
    size_t oh = ih / 2, ow = iw / 2;
    float v = 0.0f;
    if (oh < Ho && ow < Wo) {
      size_t o = ((img * C + c) * Ho + oh) * Wo + ow;
      if (amax[o] == (uint32_t) ((c * H + ih) * W + iw))
        v = dout[o];
    }
    din[i] = v;
  }
}

__global__ void relu_fwd(const float *in, float *out, size_t n)
{
  GRID_LOOP(i, n) out[i] = in[i] > 0 ? in[i] : 0.0f;
}

__global__ void relu_bwd(const float *out, const float *g, float *din, size_t n)
{
  GRID_LOOP(i, n) din[i] = out[i] > 0 ? g[i] : 0.0f;
}

/* nn.c's mask: element e of group g's B*asz activations, keyed by
 * (seed, worker0 + g, step, (l << 40) + e). */
__global__ void dropout_fwd(const float *in, float *out, float *mask, size_t n,
                            size_t per_group, int train, float p, float keep,
                            uint64_t seed, uint32_t worker0, uint32_t step,
                            uint64_t salt)
{
  GRID_LOOP(i, n) {
    float m = 1.0f;
    if (train) {
      size_t g = i / per_group, e = i % per_group;
      m = gc_rng_to_f32(gc_rng_u32(seed, worker0 + (uint32_t) g, step, salt + e)) >= p
              ? keep : 0.0f;
    }
    mask[i] = m;
    out[i] = __fmul_rn(in[i], m);
  }
}

__global__ void mul(const float *a, const float *b, float *out, size_t n)
{
  GRID_LOOP(i, n) out[i] = __fmul_rn(a[i], b[i]);
}

/* Training BatchNorm statistics: one block per (group, channel) over the
 * group's B examples.  Mean, then the sum of squared float deviations from
 * the float mean, in double, as bn_fwd; the running statistics take the
 * unbiased variance s2 / (m - 1), normalisation the biased s2 / m. */
__global__ void __launch_bounds__(BLOCK)
bn_stats(const float *in, size_t C, size_t HW, size_t B, float *stats,
         size_t ns, size_t soff, float *mean_out, float *inv_out)
{
  __shared__ double sh[BLOCK];
  size_t g = blockIdx.x / C, c = blockIdx.x % C, m = B * HW;
  const float *base = in + g * B * C * HW;
  double a = 0;
  for (size_t t = threadIdx.x; t < m; t += BLOCK)
    a += (double) base[((t / HW) * C + c) * HW + t % HW];
  double mean = block_sum(a, sh) / (double) m;
  float mf = (float) mean;
  a = 0;
  for (size_t t = threadIdx.x; t < m; t += BLOCK) {
    float dv = __fsub_rn(base[((t / HW) * C + c) * HW + t % HW], mf);
    a += (double) __fmul_rn(dv, dv);
  }
  double s2 = block_sum(a, sh), var = s2 / (double) m;
  if (threadIdx.x == 0) {
    float *rm = stats + g * ns + soff, *rv = rm + C;
    double unbiased = m > 1 ? s2 / (double) (m - 1) : var;
    rm[c] = (float) ((1 - bn_momentum) * rm[c] + bn_momentum * mean);
    rv[c] = (float) ((1 - bn_momentum) * rv[c] + bn_momentum * unbiased);
    mean_out[g * C + c] = mf;
    inv_out[g * C + c] = (float) (1.0 / sqrt(var + bn_eps));
  }
}

/* Evaluation mode: the running statistics, one set for every example. */
__global__ void bn_eval_consts(const float *stats, size_t soff, size_t C,
                               float *mean_out, float *inv_out)
{
  GRID_LOOP(c, C) {
    double var = stats[soff + C + c];
    mean_out[c] = stats[soff + c];
    inv_out[c] = (float) (1.0 / sqrt(var + bn_eps));
  }
}

/* xhat = (x - mean) inv, out = gamma xhat + beta; per_group = 0 in
 * evaluation mode (group 0's constants for all). */
__global__ void bn_apply(const float *in, float *xhat, float *out, size_t n,
                         size_t C, size_t HW, size_t per_group,
                         const float *mean, const float *inv,
                         const float *gamma, const float *beta)
{
  GRID_LOOP(i, n) {
    size_t c = (i / HW) % C, g = per_group ? i / per_group : 0;
    float xh = __fmul_rn(__fsub_rn(in[i], mean[g * C + c]), inv[g * C + c]);
    xhat[i] = xh;
    out[i] = __fadd_rn(__fmul_rn(gamma[c], xh), beta[c]);
  }
}

/* BN backward sums per (group, channel): dgamma = sum g xhat, dbeta =
 * sum g, into the group's gradient; and bn_bwd's folded constants km, kdb,
 * kdg for the input gradient (train) from the group's inv std. */
__global__ void __launch_bounds__(BLOCK)
bn_bwd_sums(const float *dout, const float *xhat, size_t C, size_t HW,
            size_t B, int train, const float *gamma, const float *inv,
            float *grads, size_t d, size_t woff, size_t boff, float *k3)
{
  __shared__ double sh[BLOCK];
  size_t g = blockIdx.x / C, c = blockIdx.x % C, m = B * HW;
  size_t base = g * B * C * HW;
  double ag = 0, ab = 0;
  for (size_t t = threadIdx.x; t < m; t += BLOCK) {
    size_t i = base + ((t / HW) * C + c) * HW + t % HW;
    ag += (double) __fmul_rn(dout[i], xhat[i]);
    ab += (double) dout[i];
  }
  double dg = block_sum(ag, sh), db = block_sum(ab, sh);
  if (threadIdx.x == 0) {
    grads[g * d + woff + c] = (float) dg;
    grads[g * d + boff + c] = (float) db;
    float s = __fmul_rn(gamma[c], inv[(train ? g : 0) * C + c]);
    double k = (double) s / (double) m;
    k3[3 * (g * C + c)] = train ? (float) (k * (double) m) : s;
    k3[3 * (g * C + c) + 1] = (float) (k * db);
    k3[3 * (g * C + c) + 2] = (float) (k * dg);
  }
}

/* d = km g - kdb - kdg xhat (train); gamma inv g with running statistics. */
__global__ void bn_bwd_din(const float *dout, const float *xhat, float *din,
                           size_t n, size_t C, size_t HW, size_t per_group,
                           int train, const float *k3)
{
  GRID_LOOP(i, n) {
    size_t c = (i / HW) % C, g = i / per_group;
    const float *k = k3 + 3 * (g * C + c);
    din[i] = train ? __fsub_rn(__fsub_rn(__fmul_rn(k[0], dout[i]), k[1]),
                               __fmul_rn(k[2], xhat[i]))
                   : __fmul_rn(k[0], dout[i]);
  }
}

/* nn.c's logsumexp: float maximum, double sum of exp(x - max). */
__device__ double logsumexp(const float *x, size_t n)
{
  float mx = -INFINITY;
  for (size_t i = 0; i < n; i++)
    if (x[i] > mx)
      mx = x[i];
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += exp((double) x[i] - (double) mx);
  return (double) mx + log(s);
}

__global__ void logsoftmax_fwd(const float *in, float *out, size_t rows,
                               size_t n)
{
  GRID_LOOP(b, rows) {
    float lse = (float) logsumexp(in + b * n, n);
    for (size_t i = 0; i < n; i++)
      out[b * n + i] = __fsub_rn(in[b * n + i], lse);
  }
}

__global__ void logsoftmax_bwd(const float *out, const float *g, float *din,
                               size_t rows, size_t n)
{
  GRID_LOOP(b, rows) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
      s += (double) g[b * n + i];
    for (size_t i = 0; i < n; i++)
      din[b * n + i] = (float) ((double) g[b * n + i] - exp((double) out[b * n + i]) * s);
  }
}

/* Per example: its loss (gc_nn_loss's terms), whether the first maximal
 * output is the label (gc_nn_correct), and d loss / d out scaled by 1/B
 * (dl may be NULL).  A label >= n gives a NaN loss instead of reading
 * past the row. */
__global__ void loss_rows(const float *out, const uint8_t *y, size_t rows,
                          size_t n, int kind, size_t B, double *loss,
                          uint32_t *ok, float *dl)
{
  GRID_LOOP(b, rows) {
    const float *o = out + b * n;
    size_t lab = y[b], best = 0;
    for (size_t i = 1; i < n; i++)
      if (o[i] > o[best])
        best = i;
    ok[b] = best == lab;
    if (lab >= n) {
      loss[b] = NAN;
      if (dl)
        for (size_t i = 0; i < n; i++)
          dl[b * n + i] = NAN;
      continue;
    }
    if (kind == GC_LOSS_NLL) {
      loss[b] = -(double) o[lab];
      if (dl)
        for (size_t i = 0; i < n; i++)
          dl[b * n + i] = i == lab ? (float) (-1.0 / (double) B) : 0.0f;
    } else {
      double lse = logsumexp(o, n);
      loss[b] = -((double) o[lab] - lse);
      if (dl)
        for (size_t i = 0; i < n; i++)
          dl[b * n + i] = (float) ((exp((double) o[i] - lse) - (double) (i == lab)) / (double) B);
    }
  }
}

/* loss[g] = the group's example losses added in order, over B. */
__global__ void group_loss(const double *ex, size_t G, size_t B, double *loss)
{
  GRID_LOOP(g, G) {
    double s = 0;
    for (size_t b = 0; b < B; b++)
      s += ex[g * B + b];
    loss[g] = s / (double) B;
  }
}

/* One thread, in example order: the sum does not depend on timing. */
__global__ void eval_add(const double *ex, const uint32_t *ok, size_t n,
                         uint32_t *correct, double *lsum)
{
  if (blockIdx.x || threadIdx.x)
    return;
  double s = 0;
  uint32_t c = 0;
  for (size_t b = 0; b < n; b++) {
    s += ex[b];
    c += ok[b];
  }
  *lsum += s;
  *correct += c;
}

/* Linear bias gradient: thread per (group, output), examples in order. */
__global__ void linear_db(const float *dy, size_t G, size_t B, size_t no,
                          float *grads, size_t d, size_t boff)
{
  GRID_LOOP(i, G * no) {
    size_t g = i / no, o = i % no;
    double s = 0;
    for (size_t b = 0; b < B; b++)
      s += (double) dy[(g * B + b) * no + o];
    grads[g * d + boff + o] = (float) s;
  }
}

/* Conv bias gradient: block per (group, channel). */
__global__ void __launch_bounds__(BLOCK)
conv_db(const float *dy, size_t oc, size_t HW, size_t B, float *grads,
        size_t d, size_t boff)
{
  __shared__ double sh[BLOCK];
  size_t g = blockIdx.x / oc, c = blockIdx.x % oc, m = B * HW;
  const float *base = dy + g * B * oc * HW;
  double a = 0;
  for (size_t t = threadIdx.x; t < m; t += BLOCK)
    a += (double) base[((t / HW) * oc + c) * HW + t % HW];
  double s = block_sum(a, sh);
  if (threadIdx.x == 0)
    grads[g * d + boff + c] = (float) s;
}

unsigned blocks(size_t n) { return grid_for(n, BLOCK, 65535u * 8u); }

#define LAUNCH(kernel, n, stream, ...)                                     \
  do {                                                                     \
    kernel<<<blocks(n), BLOCK, 0, (stream)>>>(__VA_ARGS__);                \
    GC_CUDA_LAUNCHED();                                                    \
  } while (0)

const float one = 1.0f, zero = 0.0f;

/* C = op(A) op(B), column-major (see the file comment). */
int gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, size_t m,
         size_t n, size_t k, const float *A, size_t lda, const float *B,
         size_t ldb, float *C, size_t ldc)
{
  GC_CUBLAS_TRY(cublasSgemm(h, ta, tb, (int) m, (int) n, (int) k, &one, A, (int) lda,
                            B, (int) ldb, &zero, C, (int) ldc));
  return GC_SUCCESS;
}

int gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                 size_t m, size_t n, size_t k, const float *A, size_t lda,
                 size_t sa, const float *B, size_t ldb, size_t sb, float *C,
                 size_t ldc, size_t sc, size_t count)
{
  GC_CUBLAS_TRY(cublasSgemmStridedBatched(h, ta, tb, (int) m, (int) n, (int) k, &one,
                                          A, (int) lda, (long long) sa, B, (int) ldb,
                                          (long long) sb, &zero, C, (int) ldc,
                                          (long long) sc, (int) count));
  return GC_SUCCESS;
}

/* Forward of G groups of B examples (train) or of one "group" of all N
 * examples (evaluation: G = 1). */
int forward(gc_cuda_nn *nn, const float *w, float *stats, const float *x,
            size_t G, size_t B, int train, uint64_t seed, uint32_t worker0,
            uint32_t step, cudaStream_t st)
{
  size_t N = G * B;
  nn->act[0] = (float *) x;   /* read only */
  for (size_t l = 0; l < nn->L; l++) {
    const gc_nn_layer *y = nn->ly + l;
    const float *in = nn->act[l];
    float *out = nn->act[l + 1];
    size_t n = N * nn->asz[l], on = N * nn->asz[l + 1];
    switch (y->kind) {
    case GC_NN_LINEAR:
      /* out^T [no x N] = (W viewed ni x no)^T in^T [ni x N] */
      GC_TRY(gemm(nn->blas, CUBLAS_OP_T, CUBLAS_OP_N, y->out_c, N, y->in_c, w + y->woff,
                  y->in_c, in, y->in_c, out, y->out_c));
      LAUNCH(add_bias_rows, on, st, out, w + y->boff, on, y->out_c);
      break;
    case GC_NN_CONV: {
      size_t HW = y->out_h * y->out_w, K = y->in_c * y->ksize * y->ksize;
      size_t isz = nn->asz[l], osz = nn->asz[l + 1];
      size_t chunk = nn->col_cap / (HW * K);
      chunk = chunk < 1 ? 1 : chunk > N ? N : chunk;
      for (size_t n0 = 0; n0 < N; n0 += chunk) {
        size_t nb = N - n0 < chunk ? N - n0 : chunk;
        LAUNCH(im2row, nb * HW * K, st, in + n0 * isz, nn->col, nb * HW * K, y->in_c,
               y->in_h, y->in_w, y->ksize, y->pad, y->out_h, y->out_w);
        /* t^T [oc x nb HW] = (W viewed K x oc)^T col^T [K x nb HW] */
        GC_TRY(gemm(nn->blas, CUBLAS_OP_T, CUBLAS_OP_N, y->out_c, nb * HW, K, w + y->woff,
                    K, nn->col, K, nn->tr, y->out_c));
        LAUNCH(conv_out, nb * osz, st, nn->tr, w + y->boff, out + n0 * osz, nb * osz,
               y->out_c, HW);
      }
      break;
    }
    case GC_NN_MAXPOOL:
      LAUNCH(maxpool_fwd, on, st, in, out, nn->amax[l], on, y->in_c, y->in_h, y->in_w,
             y->out_h, y->out_w);
      break;
    case GC_NN_RELU:
      LAUNCH(relu_fwd, n, st, in, out, n);
      break;
    case GC_NN_DROPOUT:
      LAUNCH(dropout_fwd, n, st, in, out, nn->aux[l], n, B * nn->asz[l], train,
             (float) y->p, (float) (1.0 / (1.0 - y->p)), seed, worker0, step,
             (uint64_t) l << 40);
      break;
    case GC_NN_BATCHNORM: {
      size_t C = y->in_c, HW = y->in_h * y->in_w;
      if (train) {
        bn_stats<<<(unsigned) (G * C), BLOCK, 0, st>>>(in, C, HW, B, stats, nn->ns,
                                                      y->soff, nn->bnmean[l], nn->bninv[l]);
        GC_CUDA_LAUNCHED();
      } else {
        LAUNCH(bn_eval_consts, C, st, stats, y->soff, C, nn->bnmean[l], nn->bninv[l]);
      }
      LAUNCH(bn_apply, n, st, in, nn->aux[l], out, n, C, HW, train ? B * nn->asz[l] : 0,
             nn->bnmean[l], nn->bninv[l], w + y->woff, w + y->boff);
      break;
    }
    case GC_NN_LOGSOFTMAX:
      LAUNCH(logsoftmax_fwd, N, st, in, out, N, nn->asz[l]);
      break;
    }
  }
  return GC_SUCCESS;
}

/* Backward from the gradient at the output in g0; each group's parameter
 * gradient into grads + g d. */
int backward(gc_cuda_nn *nn, const float *w, size_t G, size_t B, int train,
             float *grads, cudaStream_t st)
{
  size_t N = G * B, d = nn->d;
  const float *g = nn->g0;
  for (size_t l = nn->L; l-- > 0;) {
    const gc_nn_layer *y = nn->ly + l;
    float *din = l == 0 ? NULL : (g == nn->g0 ? nn->g1 : nn->g0);
    const float *in = nn->act[l], *out = nn->act[l + 1];
    size_t n = N * nn->asz[l];
    switch (y->kind) {
    case GC_NN_LINEAR: {
      size_t ni = y->in_c, no = y->out_c;
      /* per group: dW^T [ni x no] = in_g^T [ni x B] (dy_g^T [no x B])^T */
      GC_TRY(gemm_batched(nn->blas, CUBLAS_OP_N, CUBLAS_OP_T, ni, no, B, in, ni, B * ni,
                          g, no, B * no, grads + y->woff, ni, d, G));
      LAUNCH(linear_db, G * no, st, g, G, B, no, grads, d, y->boff);
      /* din^T [ni x N] = (W viewed ni x no) dy^T [no x N] */
      if (din)
        GC_TRY(gemm(nn->blas, CUBLAS_OP_N, CUBLAS_OP_N, ni, N, no, w + y->woff, ni, g, no,
                    din, ni));
      break;
    }
    case GC_NN_CONV: {
      size_t HW = y->out_h * y->out_w, K = y->in_c * y->ksize * y->ksize;
      size_t oc = y->out_c, isz = nn->asz[l], osz = nn->asz[l + 1];
      conv_db<<<(unsigned) (G * oc), BLOCK, 0, st>>>(g, oc, HW, B, grads, d, y->boff);
      GC_CUDA_LAUNCHED();
      size_t chunk = nn->col_cap / (B * HW * K);   /* groups; >= 1 by alloc */
      chunk = chunk < 1 ? 1 : chunk > G ? G : chunk;
      for (size_t g0 = 0; g0 < G; g0 += chunk) {
        size_t ng = G - g0 < chunk ? G - g0 : chunk, img = g0 * B, nimg = ng * B;
        LAUNCH(im2row, nimg * HW * K, st, in + img * isz, nn->col, nimg * HW * K, y->in_c,
               y->in_h, y->in_w, y->ksize, y->pad, y->out_h, y->out_w);
        LAUNCH(to_pixel_major, nimg * osz, st, g + img * osz, nn->tr, nimg * osz, oc, HW);
        /* per group: dW^T [K x oc] = col_g^T [K x B HW] t_g [B HW x oc]
         * (t_g viewed oc x B HW, transposed) */
        GC_TRY(gemm_batched(nn->blas, CUBLAS_OP_N, CUBLAS_OP_T, K, oc, B * HW, nn->col, K,
                            B * HW * K, nn->tr, oc, B * HW * oc, grads + g0 * d + y->woff,
                            K, d, ng));
        if (!din)
          continue;
        /* dcol^T [K x nimg HW] = (W viewed K x oc) t^T [oc x nimg HW];
         * it overwrites col, which the GEMM above has consumed */
        GC_TRY(gemm(nn->blas, CUBLAS_OP_N, CUBLAS_OP_N, K, nimg * HW, oc, w + y->woff, K,
                    nn->tr, oc, nn->col, K));
        LAUNCH(row2im, nimg * isz, st, nn->col, din + img * isz, nimg * isz, y->in_c,
               y->in_h, y->in_w, y->ksize, y->pad, y->out_h, y->out_w);
      }
      break;
    }
    case GC_NN_MAXPOOL:
      if (din)
        LAUNCH(maxpool_bwd, n, st, g, nn->amax[l], din, n, y->in_c, y->in_h, y->in_w,
               y->out_h, y->out_w);
      break;
    case GC_NN_RELU:
      if (din)
        LAUNCH(relu_bwd, n, st, out, g, din, n);
      break;
    case GC_NN_DROPOUT:
      if (din)
        LAUNCH(mul, n, st, g, nn->aux[l], din, n);
      break;
    case GC_NN_BATCHNORM: {
      size_t C = y->in_c, HW = y->in_h * y->in_w;
      bn_bwd_sums<<<(unsigned) (G * C), BLOCK, 0, st>>>(g, nn->aux[l], C, HW, B, train,
                                                       w + y->woff, nn->bninv[l], grads, d,
                                                       y->woff, y->boff, nn->bnk);
      GC_CUDA_LAUNCHED();
      if (din)
        LAUNCH(bn_bwd_din, n, st, g, nn->aux[l], din, n, C, HW, B * nn->asz[l], train,
               nn->bnk);
      break;
    }
    case GC_NN_LOGSOFTMAX:
      if (din)
        LAUNCH(logsoftmax_bwd, N, st, out, g, din, N, nn->asz[l]);
      break;
    }
    if (!din)
      break;
    g = din;
  }
  return GC_SUCCESS;
}

template <class T> int dev_alloc(T **p, size_t count)
{
  GC_CUDA_TRY(cudaMalloc((void **) p, (count ? count : 1) * sizeof(T)));
  return GC_SUCCESS;
}

template <class T> int host_alloc(T **p, size_t count)
{
  GC_CUDA_TRY(cudaMallocHost((void **) p, (count ? count : 1) * sizeof(T)));
  return GC_SUCCESS;
}

/* Device side of gc_cuda_nn_alloc; every pointer starts NULL, so a
 * failure half way is undone by gc_cuda_nn_free. */
int setup(gc_cuda_nn *nn, int staged)
{
  size_t N = nn->nmax, maxa = nn->asz[0], maxhwk = 0, maxconv = 0;
  nn->cuda = 1;
  GC_CUBLAS_TRY(cublasCreate(&nn->blas));
  nn->have_blas = 1;
  /* plain float32 GEMMs: no TF32, whatever the library's default */
  GC_CUBLAS_TRY(cublasSetMathMode(nn->blas, CUBLAS_DEFAULT_MATH));
  for (size_t l = 0; l < nn->L; l++) {
    const gc_nn_layer *y = nn->ly + l;
    size_t in = nn->asz[l], out = nn->asz[l + 1];
    maxa = out > maxa ? out : maxa;
    GC_TRY(dev_alloc(&nn->act[l + 1], N * out));
    if (y->kind == GC_NN_DROPOUT || y->kind == GC_NN_BATCHNORM)
      GC_TRY(dev_alloc(&nn->aux[l], N * in));
    if (y->kind == GC_NN_BATCHNORM) {
      GC_TRY(dev_alloc(&nn->bnmean[l], nn->groups * y->in_c));
      GC_TRY(dev_alloc(&nn->bninv[l], nn->groups * y->in_c));
    }
    if (y->kind == GC_NN_MAXPOOL)
      GC_TRY(dev_alloc(&nn->amax[l], N * out));
    if (y->kind == GC_NN_CONV) {
      size_t hwk = y->out_h * y->out_w * y->in_c * y->ksize * y->ksize;
      maxhwk = hwk > maxhwk ? hwk : maxhwk;
      maxconv = out > maxconv ? out : maxconv;
    }
  }
  GC_TRY(dev_alloc(&nn->g0, N * maxa));
  GC_TRY(dev_alloc(&nn->g1, N * maxa));
  GC_TRY(dev_alloc(&nn->bnk, 3 * nn->groups * nn->maxc));
  GC_TRY(dev_alloc(&nn->exloss, N));
  GC_TRY(dev_alloc(&nn->exok, N));
  if (maxhwk) {
    size_t cap = COL_BUDGET, group = nn->batch * maxhwk, all = N * maxhwk;
    cap = cap < group ? group : cap > all ? all : cap;
    nn->col_cap = cap;
    GC_TRY(dev_alloc(&nn->col, cap));
    GC_TRY(dev_alloc(&nn->tr, N * maxconv));
  }
  if (!staged)
    return GC_SUCCESS;
  nn->staged = 1;
  GC_CUDA_TRY(cudaStreamCreateWithFlags(&nn->stream, cudaStreamNonBlocking));
  size_t G = nn->groups;
  GC_TRY(dev_alloc(&nn->d_w, nn->d));
  GC_TRY(dev_alloc(&nn->d_stats, G * nn->ns));
  GC_TRY(dev_alloc(&nn->d_x, N * nn->in_dim));
  GC_TRY(dev_alloc(&nn->d_grads, G * nn->d));
  GC_TRY(dev_alloc(&nn->d_y, N));
  GC_TRY(dev_alloc(&nn->d_loss, G));
  GC_TRY(dev_alloc(&nn->d_lsum, 1));
  GC_TRY(dev_alloc(&nn->d_correct, 1));
  GC_TRY(host_alloc(&nn->h_w, nn->d));
  GC_TRY(host_alloc(&nn->h_stats, G * nn->ns));
  GC_TRY(host_alloc(&nn->h_x, N * nn->in_dim));
  GC_TRY(host_alloc(&nn->h_grads, G * nn->d));
  GC_TRY(host_alloc(&nn->h_y, N));
  GC_TRY(host_alloc(&nn->h_loss, G));
  GC_TRY(host_alloc(&nn->h_lsum, 1));
  GC_TRY(host_alloc(&nn->h_correct, 1));
  return GC_SUCCESS;
}

gc_cuda_nn *alloc_impl(const char *model, size_t groups, size_t batch, int staged)
{
  /* the model first: an unknown name is reported before CUDA is touched */
  gc_nn *ref = gc_nn_alloc_model(model, 1);
  if (!ref)
    return NULL;
  if (groups == 0 || batch == 0) {
    gc_nn_free(ref);
    GC_ERROR_NULL("groups and batch must be positive", GC_EINVAL);
  }
  size_t L = gc_nn_nlayers(ref);
  gc_cuda_nn *nn = (gc_cuda_nn *) calloc(1, sizeof *nn);
  if (nn) {
    nn->ly = (gc_nn_layer *) malloc(L * sizeof *nn->ly);
    nn->asz = (size_t *) calloc(L + 1, sizeof *nn->asz);
    nn->act = (float **) calloc(L + 1, sizeof *nn->act);
    nn->aux = (float **) calloc(L, sizeof *nn->aux);
    nn->amax = (uint32_t **) calloc(L, sizeof *nn->amax);
    nn->bnmean = (float **) calloc(L, sizeof *nn->bnmean);
    nn->bninv = (float **) calloc(L, sizeof *nn->bninv);
  }
  if (!nn || !nn->ly || !nn->asz || !nn->act || !nn->aux || !nn->amax || !nn->bnmean ||
      !nn->bninv) {
    gc_cuda_nn_free(nn);
    gc_nn_free(ref);
    GC_ERROR_NULL("cannot allocate the GPU net", GC_ENOMEM);
  }
  nn->L = L;
  nn->groups = groups;
  nn->batch = batch;
  nn->d = gc_nn_nparams(ref);
  nn->ns = gc_nn_nstats(ref);
  nn->in_dim = gc_nn_in_dim(ref);
  nn->out_dim = gc_nn_out_dim(ref);
  /* gc_nn.h has no getter for the loss; models.c ends every NLL model
   * with a log-softmax and feeds cross-entropy raw logits */
  size_t maxhw = 1;
  nn->asz[0] = nn->in_dim;
  for (size_t l = 0; l < L; l++) {
    nn->ly[l] = *gc_nn_layer_at(ref, l);
    const gc_nn_layer *y = nn->ly + l;
    nn->asz[l + 1] = y->out_c * y->out_h * y->out_w;
    if (y->kind == GC_NN_BATCHNORM && y->in_c > nn->maxc)
      nn->maxc = y->in_c;
    if (y->kind == GC_NN_CONV && y->out_h * y->out_w > maxhw)
      maxhw = y->out_h * y->out_w;
  }
  nn->loss = nn->ly[L - 1].kind == GC_NN_LOGSOFTMAX ? GC_LOSS_NLL : GC_LOSS_CE;
  gc_nn_free(ref);
  /* cuBLAS takes int dimensions: N HW columns must fit */
  if (groups > INT_MAX / batch || groups * batch > (size_t) INT_MAX / maxhw) {
    gc_cuda_nn_free(nn);
    GC_ERROR_NULL("groups * batch too large for the GPU net", GC_EINVAL);
  }
  nn->nmax = groups * batch;
  if (setup(nn, staged) != GC_SUCCESS) {
    gc_cuda_nn_free(nn);
    return NULL;
  }
  return nn;
}

int check_shape(const gc_cuda_nn *nn, size_t G, size_t B)
{
  if (G == 0 || B == 0 || G > nn->groups || B > nn->batch)
    GC_ERRORF(GC_EINVAL, "G=%zu groups of B=%zu examples: the workspace holds %zu of %zu",
              G, B, nn->groups, nn->batch);
  return GC_SUCCESS;
}

} /* namespace */

extern "C" gc_cuda_nn *gc_cuda_nn_alloc(const char *model, size_t groups, size_t batch)
{
  return alloc_impl(model, groups, batch, 0);
}

extern "C" void gc_cuda_nn_free(gc_cuda_nn *nn)
{
  if (!nn)
    return;
  /* argument errors free before CUDA was touched, and must not touch it */
  for (size_t l = 0; nn->cuda && l < nn->L; l++) {
    cudaFree(nn->act[l + 1]);
    cudaFree(nn->aux[l]);
    cudaFree(nn->amax[l]);
    cudaFree(nn->bnmean[l]);
    cudaFree(nn->bninv[l]);
  }
  if (nn->cuda) {
    cudaFree(nn->bnk); cudaFree(nn->g0); cudaFree(nn->g1); cudaFree(nn->col);
    cudaFree(nn->tr); cudaFree(nn->exloss); cudaFree(nn->exok);
    cudaFree(nn->d_w); cudaFree(nn->d_stats); cudaFree(nn->d_x); cudaFree(nn->d_grads);
    cudaFree(nn->d_y); cudaFree(nn->d_loss); cudaFree(nn->d_lsum); cudaFree(nn->d_correct);
    cudaFreeHost(nn->h_w); cudaFreeHost(nn->h_stats); cudaFreeHost(nn->h_x);
    cudaFreeHost(nn->h_grads); cudaFreeHost(nn->h_y); cudaFreeHost(nn->h_loss);
    cudaFreeHost(nn->h_lsum); cudaFreeHost(nn->h_correct);
    if (nn->staged && nn->stream)
      cudaStreamDestroy(nn->stream);
    if (nn->have_blas)
      cublasDestroy(nn->blas);
  }
  free(nn->ly); free(nn->asz); free(nn->act); free(nn->aux); free(nn->amax);
  free(nn->bnmean); free(nn->bninv);
  free(nn);
}

extern "C" size_t gc_cuda_nn_nparams(const gc_cuda_nn *nn) { return nn->d; }
extern "C" size_t gc_cuda_nn_nstats(const gc_cuda_nn *nn) { return nn->ns; }
extern "C" size_t gc_cuda_nn_in_dim(const gc_cuda_nn *nn) { return nn->in_dim; }
extern "C" size_t gc_cuda_nn_out_dim(const gc_cuda_nn *nn) { return nn->out_dim; }

extern "C" int gc_cuda_nn_grads(gc_cuda_nn *nn, const float *d_w, float *d_stats,
                                const float *d_x, const uint8_t *d_y, size_t G, size_t B,
                                int train, uint64_t seed, uint32_t worker0, uint32_t step,
                                double *d_loss, float *d_grads, cudaStream_t stream)
{
  GC_TRY(check_shape(nn, G, B));
  if (nn->ns && !d_stats)
    GC_ERROR("the model has BatchNorm statistics but none were given", GC_EINVAL);
  GC_CUBLAS_TRY(cublasSetStream(nn->blas, stream));
  size_t N = G * B;
  GC_TRY(forward(nn, d_w, d_stats, d_x, G, B, train, seed, worker0, step, stream));
  LAUNCH(loss_rows, N, stream, nn->act[nn->L], d_y, N, nn->out_dim, nn->loss, B,
         nn->exloss, nn->exok, nn->g0);
  LAUNCH(group_loss, G, stream, nn->exloss, G, B, d_loss);
  return backward(nn, d_w, G, B, train, d_grads, stream);
}

extern "C" int gc_cuda_nn_eval_batch(gc_cuda_nn *nn, const float *d_w, const float *d_stats,
                                     const float *d_x, const uint8_t *d_y, size_t n,
                                     uint32_t *d_correct, double *d_loss_sum,
                                     cudaStream_t stream)
{
  if (n == 0)
    return GC_SUCCESS;
  if (n > nn->nmax)
    GC_ERRORF(GC_EINVAL, "%zu examples: the workspace holds %zu", n, nn->nmax);
  if (nn->ns && !d_stats)
    GC_ERROR("the model has BatchNorm statistics but none were given", GC_EINVAL);
  GC_CUBLAS_TRY(cublasSetStream(nn->blas, stream));
  /* evaluation mode only reads the statistics */
  GC_TRY(forward(nn, d_w, (float *) d_stats, d_x, 1, n, 0, 0, 0, 0, stream));
  LAUNCH(loss_rows, n, stream, nn->act[nn->L], d_y, n, nn->out_dim, nn->loss, n,
         nn->exloss, nn->exok, (float *) NULL);
  eval_add<<<1, 1, 0, stream>>>(nn->exloss, nn->exok, n, d_correct, d_loss_sum);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

/* ---- the device type: host pointers through pinned staging ------------ */

namespace {

void *type_alloc(const char *model, size_t groups, size_t batch)
{
  /* training asks for the device: say plainly when there is none */
  char why[256];
  if (gc_nn_model_dataset(model) && gc_cuda_available(why, sizeof why) != GC_SUCCESS) {
    gc_errorf(__FILE__, __LINE__, GC_ECUDA, "no CUDA device visible (%s)", why);
    return NULL;
  }
  return alloc_impl(model, groups, batch, 1);
}

void type_free(void *dev) { gc_cuda_nn_free((gc_cuda_nn *) dev); }

int to_device(void *d, void *h, const void *src, size_t bytes, cudaStream_t st)
{
  if (!bytes)
    return GC_SUCCESS;
  memcpy(h, src, bytes);
  GC_CUDA_TRY(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, st));
  return GC_SUCCESS;
}

/* The nets' losses and gradients at d_w (device) from host batches: the
 * statistics, batches and labels staged in, the losses (and in training
 * the statistics) back; the gradients back into grads, or left in d_grads
 * when grads is NULL (the type's own step reads them there). */
int staged_grads(gc_cuda_nn *nn, const float *d_w, float *stats, const float *x,
                 const uint8_t *y, size_t G, size_t B, int train, uint64_t seed,
                 uint32_t worker0, uint32_t step, double *loss, float *grads)
{
  GC_TRY(check_shape(nn, G, B));
  if (nn->ns && !stats)
    GC_ERROR("the model has BatchNorm statistics but none were given", GC_EINVAL);
  cudaStream_t st = nn->stream;
  size_t nst = (train ? G : 1) * nn->ns;
  /* the pinned buffers are reused only after the stream has drained them:
   * every call ends with a synchronisation */
  GC_TRY(to_device(nn->d_stats, nn->h_stats, stats, nst * sizeof *stats, st));
  GC_TRY(to_device(nn->d_x, nn->h_x, x, G * B * nn->in_dim * sizeof *x, st));
  GC_TRY(to_device(nn->d_y, nn->h_y, y, G * B, st));
  GC_TRY(gc_cuda_nn_grads(nn, d_w, nn->d_stats, nn->d_x, nn->d_y, G, B, train, seed,
                          worker0, step, nn->d_loss, nn->d_grads, st));
  GC_CUDA_TRY(cudaMemcpyAsync(nn->h_loss, nn->d_loss, G * sizeof *loss,
                              cudaMemcpyDeviceToHost, st));
  if (grads)
    GC_CUDA_TRY(cudaMemcpyAsync(nn->h_grads, nn->d_grads, G * nn->d * sizeof *grads,
                                cudaMemcpyDeviceToHost, st));
  if (train && nst)
    GC_CUDA_TRY(cudaMemcpyAsync(nn->h_stats, nn->d_stats, nst * sizeof *stats,
                                cudaMemcpyDeviceToHost, st));
  GC_CUDA_TRY(cudaStreamSynchronize(st));
  memcpy(loss, nn->h_loss, G * sizeof *loss);
  if (grads)
    memcpy(grads, nn->h_grads, G * nn->d * sizeof *grads);
  if (train && nst)
    memcpy(stats, nn->h_stats, nst * sizeof *stats);
  return GC_SUCCESS;
}

int type_grads(void *dev, const float *w, float *stats, const float *x, const uint8_t *y,
               size_t G, size_t B, int train, uint64_t seed, uint32_t worker0,
               uint32_t step, double *loss, float *grads)
{
  gc_cuda_nn *nn = (gc_cuda_nn *) dev;
  GC_TRY(check_shape(nn, G, B));   /* before anything is queued */
  GC_TRY(to_device(nn->d_w, nn->h_w, w, nn->d * sizeof *w, nn->stream));
  return staged_grads(nn, nn->d_w, stats, x, y, G, B, train, seed, worker0, step, loss,
                      grads);
}

int type_evaluate(void *dev, const float *w, const float *stats, const gc_dataset *ds,
                  double *acc, double *loss)
{
  gc_cuda_nn *nn = (gc_cuda_nn *) dev;
  cudaStream_t st = nn->stream;
  if (nn->ns && !stats)
    GC_ERROR("the model has BatchNorm statistics but none were given", GC_EINVAL);
  if (ds->n && ds->dim != nn->in_dim)
    GC_ERRORF(GC_EINVAL, "data set of %zu features for a net of %zu inputs", ds->dim,
              nn->in_dim);
  GC_TRY(to_device(nn->d_w, nn->h_w, w, nn->d * sizeof *w, st));
  GC_TRY(to_device(nn->d_stats, nn->h_stats, stats, nn->ns * sizeof *stats, st));
  GC_CUDA_TRY(cudaMemsetAsync(nn->d_correct, 0, sizeof *nn->d_correct, st));
  GC_CUDA_TRY(cudaMemsetAsync(nn->d_lsum, 0, sizeof *nn->d_lsum, st));
  for (size_t at = 0; at < ds->n; at += nn->nmax) {
    size_t n = ds->n - at < nn->nmax ? ds->n - at : nn->nmax;
    GC_TRY(to_device(nn->d_x, nn->h_x, ds->x + at * ds->dim, n * ds->dim * sizeof *ds->x,
                     st));
    GC_TRY(to_device(nn->d_y, nn->h_y, ds->y + at, n, st));
    GC_TRY(gc_cuda_nn_eval_batch(nn, nn->d_w, nn->d_stats, nn->d_x, nn->d_y, n,
                                 nn->d_correct, nn->d_lsum, st));
    /* h_x is refilled next round: wait until the copy has read it */
    GC_CUDA_TRY(cudaStreamSynchronize(st));
  }
  GC_CUDA_TRY(cudaMemcpyAsync(nn->h_correct, nn->d_correct, sizeof *nn->h_correct,
                              cudaMemcpyDeviceToHost, st));
  GC_CUDA_TRY(cudaMemcpyAsync(nn->h_lsum, nn->d_lsum, sizeof *nn->h_lsum,
                              cudaMemcpyDeviceToHost, st));
  GC_CUDA_TRY(cudaStreamSynchronize(st));
  if (acc)
    *acc = ds->n ? (double) *nn->h_correct / (double) ds->n : 0;
  if (loss)
    *loss = ds->n ? *nn->h_lsum / (double) ds->n : 0;
  return GC_SUCCESS;
}

/* ---- the type's own step: gc_cuda_sim on the nets' gradients ----------
 * The P workers' gradients stay in the workspace's d_grads, where
 * gc_cuda_sim_step reads them: only the batches, the BatchNorm statistics
 * and the losses cross to and from the host. */
struct cuda_step {
  gc_cuda_nn *nn;
  gc_cuda_sim *sim;
  size_t P;
};

void *step_alloc(void *dev, const gc_algo_config *cfg, const float *x0)
{
  gc_cuda_nn *nn = (gc_cuda_nn *) dev;
  if (cfg->workers > nn->groups) {
    gc_errorf(__FILE__, __LINE__, GC_EINVAL, "%zu workers: the workspace holds %zu",
              cfg->workers, nn->groups);
    return NULL;
  }
  gc_cuda_sim *sim = gc_cuda_sim_alloc(cfg, x0);
  if (!sim)
    return NULL;
  cuda_step *s = (cuda_step *) calloc(1, sizeof *s);
  if (!s) {
    gc_cuda_sim_free(sim);
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  }
  s->nn = nn;
  s->sim = sim;
  s->P = cfg->workers;
  return s;
}

void step_free(void *p)
{
  cuda_step *s = (cuda_step *) p;
  if (!s)
    return;
  gc_cuda_sim_free(s->sim);
  free(s);
}

/* gc_cuda_sim_step returns with the point final, and staged_grads ends
 * with a synchronisation, so the step's own stream may read d_grads next. */
int step_grads(void *p, float *stats, const float *x, const uint8_t *y, size_t B,
               uint64_t seed, uint32_t t, double *loss)
{
  cuda_step *s = (cuda_step *) p;
  return staged_grads(s->nn, gc_cuda_sim_point(s->sim), stats, x, y, s->P, B, 1, seed, 0, t,
                      loss, NULL);
}

int step_run(void *p, double lr, size_t *support)
{
  cuda_step *s = (cuda_step *) p;
  int rc = gc_cuda_sim_step(s->sim, s->nn->d_grads, lr);
  *support = gc_cuda_sim_support_union(s->sim);
  return rc;
}

const gc_ledger *step_ledger(const void *p)
{
  return gc_cuda_sim_ledger(((const cuda_step *) p)->sim);
}

size_t step_state_bytes(const void *p)
{
  return gc_cuda_sim_state_bytes(((const cuda_step *) p)->sim);
}

int step_state_save(const void *p, void *buf)
{
  return gc_cuda_sim_state_save(((const cuda_step *) p)->sim, buf);
}

int step_state_load(void *p, const void *buf, size_t len)
{
  return gc_cuda_sim_state_load(((cuda_step *) p)->sim, buf, len);
}

} /* namespace */

extern "C" const gc_nn_device_type gc_cuda_nn_device = {
  "cuda", type_alloc, type_free, type_grads, type_evaluate,
  step_alloc, step_free, step_grads, step_run, step_ledger, step_state_bytes,
  step_state_save, step_state_load
};
