/* winograd.c -- 3x3 and 5x5 stride-1 convolutions by Winograd's minimal
 * filtering F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional
 * Neural Networks", 2016; 5x5 kernels as four 3x3 ones, see nsub).  Each
 * 2x2 output tile of each (out, in) channel pair costs 16 multiplies
 * instead of the 36 of im2col + GEMM, and those 16 are 16 GEMMs of
 * (tiles x C) by (C x O): BLAS still does the work.
 *
 *   V = B^T d B   (4x4 input tile d, tiles 2 apart, so they overlap)
 *   U = G g G^T   (3x3 filter g)
 *   Y = A^T M A   (M = U .* V summed over channels, by the GEMMs)
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 * Every constant is 0, +-1 or +-1/2, so the transforms round little: the
 * result differs from the direct sum by a few float ulps of its terms
 * (tests/test_nn.c compares both).  The order of every sum is fixed, so
 * results do not depend on the thread count.
 *
 * The transforms work channel-last: a pass copies a chunk of images into
 * a zero-bordered (image, row, column, channel) buffer, so that every
 * transform step is an add or subtract of whole channel vectors, the same
 * for a 32x32 plane as for a 2x2 one. */
#include <string.h>
#include <cblas.h>

#include "gc_winograd.h"
#include "gc_vf4.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")   /* inlines the per-tile transform helpers */
#endif

/* Columns of the 16 GEMMs per pass: wide enough that BLAS runs near its
 * peak, small enough that V and M stay a few MB. */
enum { WINO_COLS = 1024, WINO_NARROW = 128 };

int gc__wino3_applies(size_t ksize, size_t pad, size_t in_c, size_t out_c)
{
  /* Below 32 channels the GEMMs' inner dimension is too short to pay for
   * the transforms.  MNIST-CNN's 32 -> 64 layer at batch 64 ran 10% slower
   * than with im2col when its passes were as wide as VGG-19's, and 18%
   * faster (40.5 -> 33.4 ms forward and backward) with wino3_chunk's
   * narrow passes (one image of that layer). */
  if (ksize == 3)
    return pad <= 2 && in_c >= 32 && out_c >= 32;
  /* 5x5 (nsub): the four sets of V must line up with the filter's
   * channels, so no padding channels (multiples of 4).  FMNIST-CNN's
   * 16 -> 32 layer: its training step at batch 64 went from 16.4 to
   * 13.5 ms, 2.2 to 1.8 ms at batch 10; its first layer (1 -> 16) keeps
   * im2col. */
  return ksize == 5 && pad <= 4 && in_c >= 16 && out_c >= 16 &&
         in_c % 4 == 0 && out_c % 4 == 0;
}

int gc__wino3_pays(size_t B, size_t Ho, size_t Wo)
{
  /* The filter transform is paid per call, the savings per tile.  On
   * VGG-19's 512-channel layers at batch 10, 2x2 planes (10 tiles) ran 2x
   * slower than im2col and 4x4 planes (40 tiles) about even; at batch 64
   * (64 tiles and more) Winograd was faster on every layer. */
  return B * ((Ho + 1) / 2) * ((Wo + 1) / 2) >= 64;
}

/* Images per pass: enough for WINO_COLS tiles, at most the batch; for
 * WINO_NARROW tiles when either side has fewer than 64 channels.  Such
 * GEMMs (inner dimension 32 to 128, a few hundred rows) already run near
 * the kernel's peak, and few tiles keep V and M in L2 (one image, 0.9 MB,
 * for MNIST-CNN's 32 -> 64 layer), where eight images' 7 MB made the
 * transforms run at the speed of L3: that layer's forward took 13.3 ms at
 * batch 64 with 8 images a pass, 9.7 ms with one.  FMNIST-CNN's 5x5
 * layer (7x7 tiles) takes 3 images: 1 was 4% slower, 2 and 3 even.  The
 * wider layers keep their passes (and so their sums). */
static size_t wino3_chunk(size_t C, size_t O, size_t Ho, size_t Wo,
                          size_t max_batch)
{
  size_t tiles = ((Ho + 1) / 2) * ((Wo + 1) / 2);
  size_t cols = C < 64 || O < 64 ? WINO_NARROW : WINO_COLS;
  size_t b = (cols + tiles - 1) / tiles;
  return b > max_batch ? max_batch : b;
}

/* Four floats as one value (gc_vf4.h): the transforms below are adds and
 * subtracts along the channels, 4 at a time.  Channel counts are rounded
 * up to a multiple of 4 in the channel-last buffers (the extra channels
 * never reach the output), so no loop has a tail. */
typedef gc__vf4 vf;
static size_t round4(size_t n) { return (n + 3) & ~(size_t) 3; }

/* Lanes i, j, k, l of the 8 in (a, b). */
#if defined(__clang__) || __GNUC__ >= 12
#define SHUF(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
typedef int vi __attribute__((vector_size(16)));
#define SHUF(a, b, i, j, k, l) __builtin_shuffle(a, b, (vi) { i, j, k, l })
#endif

/* r[i][k] <-> r[k][i].  Both layout changes below are 4x4 transposes of
 * this kind; a float at a time they cost more than the tile transforms
 * (MNIST-CNN's 32 -> 64 layer: 12% of the training step). */
static inline void transpose4(vf r[4])
{
  vf t0 = SHUF(r[0], r[1], 0, 4, 1, 5), t1 = SHUF(r[0], r[1], 2, 6, 3, 7);
  vf t2 = SHUF(r[2], r[3], 0, 4, 1, 5), t3 = SHUF(r[2], r[3], 2, 6, 3, 7);
  r[0] = SHUF(t0, t2, 0, 1, 4, 5);
  r[1] = SHUF(t0, t2, 2, 3, 6, 7);
  r[2] = SHUF(t1, t3, 0, 1, 4, 5);
  r[3] = SHUF(t1, t3, 2, 3, 6, 7);
}

/* V and M hold 16 blocks, one a GEMM operand, and a tile's transform
 * reads or writes all 16.  With blocks a multiple of 4 KB apart (MNIST-CNN:
 * 144 tiles x 64 channels x 4 bytes = 9 x 4 KB) those 16 streams fall in
 * the same L1 sets and evict each other; a cache line between blocks
 * spreads them.  Block xi of n floats starts at xi * blk(n). */
static size_t blk(size_t n) { return n + 16; }

/* 5x5 kernels: zero-extended to 6x6, a kernel is four 3x3 sub-kernels at
 * offsets (0,0), (0,3), (3,0) and (3,3), and the convolution the sum of
 * the four 3x3 ones on inputs shifted by those offsets.  Each takes
 * F(2x2, 3x3) on its own 4x4 patches; their V sit side by side along the
 * channels (4C of them), so that one GEMM per xi sums over all four: 64
 * multiplies instead of 100 per 2x2 tile and channel pair, and the GEMMs
 * are those of a 3x3 layer with 4C inputs.  nsub: sub-kernels of a k x k
 * kernel. */
static size_t nsub(size_t k) { return k == 5 ? 4 : 1; }
static const size_t sub_at[4][2] = { { 0, 0 }, { 0, 3 }, { 3, 0 }, { 3, 3 } };

void gc__wino3_filter(const float *w, size_t O, size_t C, float *U)
{
  size_t OC = O * C;
  for (size_t o = 0; o < O; o++)
    for (size_t c = 0; c < C; c += 4) {
      /* 4 filters side by side: lane k holds filter (o, c + k) */
      size_t n = C - c < 4 ? C - c : 4;
      float tap[9][4] = {{0}};
      for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < 9; i++)
          tap[i][k] = w[(o * C + c + k) * 9 + i];
      vf f[9], t[4][3], u[16];
      for (size_t i = 0; i < 9; i++)
        f[i] = gc__load4(tap[i]);
      for (size_t j = 0; j < 3; j++) {   /* t = G f */
        vf a = f[j], b = f[3 + j], e = f[6 + j];
        t[0][j] = a;
        t[1][j] = 0.5f * (a + b + e);
        t[2][j] = 0.5f * (a - b + e);
        t[3][j] = e;
      }
      for (size_t i = 0; i < 4; i++) {   /* U = t G^T */
        vf a = t[i][0], b = t[i][1], e = t[i][2];
        u[4 * i] = a;
        u[4 * i + 1] = 0.5f * (a + b + e);
        u[4 * i + 2] = 0.5f * (a - b + e);
        u[4 * i + 3] = e;
      }
      float *dst = U + o * C + c;
      for (size_t xi = 0; xi < 16; xi++) {
        if (n == 4)
          gc__store4(dst + xi * OC, u[xi]);
        else
          memcpy(dst + xi * OC, &u[xi], n * sizeof(float));
      }
    }
}

void gc__wino5_filter(const float *w, size_t O, size_t C, int turned,
                      float *tmp, float *U)
{
  /* the layer computed: O2 outputs from C2 inputs; its filter (o2, c2) is
   * w's (o2, c2), or turned, w's (c2, o2) turned 180 degrees */
  size_t O2 = turned ? C : O, C2 = turned ? O : C;
  for (size_t o2 = 0; o2 < O2; o2++)
    for (size_t q = 0; q < 4; q++)
      for (size_t c2 = 0; c2 < C2; c2++) {
        float *t = tmp + ((o2 * 4 + q) * C2 + c2) * 9;
        for (size_t ri = 0; ri < 3; ri++)
          for (size_t rj = 0; rj < 3; rj++) {
            size_t ki = sub_at[q][0] + ri, kj = sub_at[q][1] + rj;
            float v = 0.0f;   /* the extension to 6x6 */
            if (ki < 5 && kj < 5)
              v = turned ? w[((c2 * C + o2) * 5 + 4 - ki) * 5 + 4 - kj]
                         : w[((o2 * C + c2) * 5 + ki) * 5 + kj];
            t[ri * 3 + rj] = v;
          }
      }
  gc__wino3_filter(tmp, O2, 4 * C2, U);
}

/* Input chunk (nb images, C x H x W each) -> xp, nb x Hp x Wp x Cp with a
 * zero border of pad (and the rows and columns that complete the last
 * tiles).  Only the border is cleared: the interior is written once.  The
 * inner loop reads along a row and writes Cp apart: the W lines it writes
 * stay in L1 while 16 channels fill them. */
static void to_padded_channel_last(const float *in, size_t nb, size_t C,
                                   size_t H, size_t W, size_t pad, size_t Hp,
                                   size_t Wp, float *restrict xp)
{
  size_t Cp = round4(C), row = Wp * Cp;
  for (size_t j = 0; j < nb; j++) {
    float *img = xp + j * Hp * row;
    memset(img, 0, pad * row * sizeof *img);
    memset(img + (pad + H) * row, 0, (Hp - pad - H) * row * sizeof *img);
    for (size_t h = 0; h < H; h++) {
      float *r = img + (h + pad) * row, *dst = r + pad * Cp;
      if (Cp != C)   /* the padding channels too */
        memset(r, 0, row * sizeof *r);
      else {
        memset(r, 0, pad * Cp * sizeof *r);
        memset(dst + W * Cp, 0, (Wp - pad - W) * Cp * sizeof *r);
      }
      size_t c = 0;
      for (; c + 4 <= C; c += 4) {   /* 4 channels x 4 columns at a time */
        const float *src = in + ((j * C + c) * H + h) * W;
        size_t w = 0;
        for (; w + 4 <= W; w += 4) {
          vf q[4];
          for (size_t k = 0; k < 4; k++)
            q[k] = gc__load4(src + k * H * W + w);
          transpose4(q);
          for (size_t k = 0; k < 4; k++)
            gc__store4(dst + (w + k) * Cp + c, q[k]);
        }
        for (; w < W; w++)
          for (size_t k = 0; k < 4; k++)
            dst[w * Cp + c + k] = src[k * H * W + w];
      }
      for (; c < C; c++) {
        const float *src = in + ((j * C + c) * H + h) * W;
        for (size_t w = 0; w < W; w++)
          dst[w * Cp + c] = src[w];
      }
    }
  }
}

/* V[xi][t][0..Cp) = (B^T d B)[xi] for the tile whose 4x4 patch starts at
 * x (rows `row` floats apart, columns Cp apart). */
static void input_tile(const float *x, size_t row, size_t Cp, float *V,
                       size_t xi_stride)
{
  for (size_t c = 0; c < Cp; c += 4) {
    vf u[4][4];
    for (size_t q = 0; q < 4; q++) {   /* u = B^T d, column by column */
      const float *p = x + q * Cp + c;
      vf d0 = gc__load4(p), d1 = gc__load4(p + row), d2 = gc__load4(p + 2 * row),
         d3 = gc__load4(p + 3 * row);
      u[0][q] = d0 - d2;
      u[1][q] = d1 + d2;
      u[2][q] = d2 - d1;
      u[3][q] = d1 - d3;
    }
    for (size_t i = 0; i < 4; i++) {   /* V = u B */
      float *v = V + 4 * i * xi_stride + c;
      gc__store4(v, u[i][0] - u[i][2]);
      gc__store4(v + xi_stride, u[i][1] + u[i][2]);
      gc__store4(v + 2 * xi_stride, u[i][2] - u[i][1]);
      gc__store4(v + 3 * xi_stride, u[i][1] - u[i][3]);
    }
  }
}

/* V (16 blocks of T x S Cp, T = nb th tw, S = nsub(k)) for a chunk of nb
 * images, through the padded channel-last copy in s->work; entry
 * [t][q Cp + c] is sub-kernel q's. */
static void input_tiles(const float *in, size_t nb, size_t C, size_t H,
                        size_t W, size_t pad, size_t k, size_t th, size_t tw,
                        const gc__wino3_scratch *s)
{
  size_t S = nsub(k), e = k == 5 ? 3 : 0, Cp = round4(C), T = nb * th * tw;
  size_t Hp = 2 * th + 2 + e, Wp = 2 * tw + 2 + e;
  to_padded_channel_last(in, nb, C, H, W, pad, Hp, Wp, s->work);
  for (size_t j = 0; j < nb; j++)
    for (size_t ti = 0; ti < th; ti++)
      for (size_t tj = 0; tj < tw; tj++)
        for (size_t q = 0; q < S; q++)
          input_tile(s->work + ((j * Hp + 2 * ti + sub_at[q][0]) * Wp + 2 * tj +
                                sub_at[q][1]) * Cp,
                     Wp * Cp, Cp,
                     s->V + ((j * th + ti) * tw + tj) * S * Cp + q * Cp,
                     blk(T * S * Cp));
}

/* The 2x2 outputs (A^T m A)[r][s] + bias of one tile, from M[xi][t][0..Op),
 * into y (rows `row` floats apart, columns Op apart).  bias has Op
 * entries. */
static void output_tile(const float *m, size_t xi_stride, size_t Op,
                        const float *bias, float *y, size_t row)
{
  for (size_t o = 0; o < Op; o += 4) {
    vf s0[4], s1[4];   /* A^T m, column by column */
    for (size_t k = 0; k < 4; k++) {
      const float *p = m + k * xi_stride + o;
      vf a = gc__load4(p), b = gc__load4(p + 4 * xi_stride),
         e = gc__load4(p + 8 * xi_stride), f = gc__load4(p + 12 * xi_stride);
      s0[k] = a + b + e;
      s1[k] = b - e - f;
    }
    vf b0 = gc__load4(bias + o);
    gc__store4(y + o, s0[0] + s0[1] + s0[2] + b0);
    gc__store4(y + Op + o, s0[1] - s0[2] - s0[3] + b0);
    gc__store4(y + row + o, s1[0] + s1[1] + s1[2] + b0);
    gc__store4(y + row + Op + o, s1[1] - s1[2] - s1[3] + b0);
  }
}

/* Channel-last chunk output (nb x Hy x Wy x Op) -> out (nb x O x Ho x
 * Wo), dropping the row and column an odd size adds. */
static void from_channel_last(const float *restrict y, size_t nb, size_t O,
                              size_t Hy, size_t Wy, size_t Ho, size_t Wo,
                              float *restrict out)
{
  size_t Op = round4(O);
  for (size_t j = 0; j < nb; j++)
    for (size_t h = 0; h < Ho; h++) {
      const float *src = y + (j * Hy + h) * Wy * Op;
      size_t o = 0;
      for (; o + 4 <= O; o += 4) {   /* 4 channels x 4 columns at a time */
        float *dst = out + ((j * O + o) * Ho + h) * Wo;
        size_t w = 0;
        for (; w + 4 <= Wo; w += 4) {
          vf q[4];
          for (size_t k = 0; k < 4; k++)
            q[k] = gc__load4(src + (w + k) * Op + o);
          transpose4(q);
          for (size_t k = 0; k < 4; k++)
            gc__store4(dst + k * Ho * Wo + w, q[k]);
        }
        for (; w < Wo; w++)
          for (size_t k = 0; k < 4; k++)
            dst[k * Ho * Wo + w] = src[w * Op + o + k];
      }
      for (; o < O; o++) {
        float *dst = out + ((j * O + o) * Ho + h) * Wo;
        for (size_t w = 0; w < Wo; w++)
          dst[w] = src[w * Op + o];
      }
    }
}

/* The kernel of the input gradient is the forward kernel with channels
 * swapped and turned 180 degrees.  Turning g reverses G's columns, which
 * swaps G's rows 0 and 3, so its transform is U with rows and columns 0
 * and 3 swapped: U[turn[xi]] read transposed, and no transform of its own. */
static const size_t turn[16] = { 15, 13, 14, 12, 7, 5, 6, 4,
                                 11, 9, 10, 8, 3, 1, 2, 0 };

void gc__wino3_conv(const float *in, size_t B, size_t C, size_t H, size_t W,
                    size_t pad, size_t k, const float *U, int turned, size_t O,
                    const float *bias, float *out, const gc__wino3_scratch *s)
{
  size_t Ho = H + 2 * pad - (k - 1), Wo = W + 2 * pad - (k - 1);
  size_t th = (Ho + 1) / 2, tw = (Wo + 1) / 2, tiles = th * tw;
  size_t S = nsub(k), Cp = round4(C), Op = round4(O), K = S * C;
  size_t chunk = wino3_chunk(C, O, Ho, Wo, B);
  memset(s->bias, 0, Op * sizeof *s->bias);
  if (bias)
    memcpy(s->bias, bias, O * sizeof *bias);
  for (size_t n0 = 0; n0 < B; n0 += chunk) {
    size_t nb = B - n0 < chunk ? B - n0 : chunk, T = nb * tiles;
    input_tiles(in + n0 * C * H * W, nb, C, H, W, pad, k, th, tw, s);
    /* M[xi] (T x O) = V[xi] (T x K) times U[xi] transposed (O x K); what
     * the padding columns of M hold lands in padding channels of the
     * output buffer, which are never copied out */
    for (size_t xi = 0; xi < 16; xi++)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, turned ? CblasNoTrans : CblasTrans,
                  (int) T, (int) O, (int) K, 1.0f, s->V + xi * blk(T * S * Cp),
                  (int) (S * Cp), U + (turned ? turn[xi] : xi) * O * K,
                  turned ? (int) O : (int) K, 0.0f, s->M + xi * blk(T * Op),
                  (int) Op);
    for (size_t j = 0; j < nb; j++)
      for (size_t ti = 0; ti < th; ti++)
        for (size_t tj = 0; tj < tw; tj++)
          output_tile(s->M + ((j * th + ti) * tw + tj) * Op, blk(T * Op), Op, s->bias,
                      s->work + ((j * 2 * th + 2 * ti) * 2 * tw + 2 * tj) * Op,
                      2 * tw * Op);
    from_channel_last(s->work, nb, O, 2 * th, 2 * tw, Ho, Wo,
                      out + n0 * O * Ho * Wo);
  }
}

/* The weight gradient by F(3x3, 2x2), the transpose of F(2x2, 3x3):
 *   dW[o][c] = G^T (sum over tiles of (A h A^T) .* (B^T d B)) G
 * with h the 2x2 tile of dout[o] and d the same 4x4 input patch as the
 * forward pass (a tile of outputs sees exactly that patch).  The sum over
 * tiles is 16 GEMMs of (O x tiles) by (tiles x C), accumulated across the
 * chunks in Mw (16 x O x C); A = (A^T)^T, 4 x 2. */
static void grad_tile(const float *h, size_t row, size_t Op, float *H,
                      size_t xi_stride)
{
  for (size_t o = 0; o < Op; o += 4) {
    vf h00 = gc__load4(h + o), h01 = gc__load4(h + Op + o), h10 = gc__load4(h + row + o),
       h11 = gc__load4(h + row + Op + o);
    vf r[4][2] = { { h00, h01 }, { h00 + h10, h01 + h11 },
                   { h00 - h10, h01 - h11 }, { -h10, -h11 } };   /* A h */
    for (size_t i = 0; i < 4; i++) {   /* (A h) A^T */
      float *p = H + 4 * i * xi_stride + o;
      gc__store4(p, r[i][0]);
      gc__store4(p + xi_stride, r[i][0] + r[i][1]);
      gc__store4(p + 2 * xi_stride, r[i][0] - r[i][1]);
      gc__store4(p + 3 * xi_stride, -r[i][1]);
    }
  }
}

/* dW[o][c][3][3] = G^T Mw[.][o][c] G, 4 filters at a time along c. */
static void grad_untransform(const float *Mw, size_t O, size_t C, float *dW)
{
  size_t OC = O * C;
  for (size_t o = 0; o < O; o++)
    for (size_t c = 0; c < C; c += 4) {
      size_t n = C - c < 4 ? C - c : 4;
      vf m[16], t[3][4];
      for (size_t xi = 0; xi < 16; xi++) {
        float lane[4] = {0};
        memcpy(lane, Mw + xi * OC + o * C + c, n * sizeof(float));
        m[xi] = gc__load4(lane);
      }
      for (size_t j = 0; j < 4; j++) {   /* t = G^T m */
        vf a = m[j], b = m[4 + j], e = m[8 + j], f = m[12 + j];
        t[0][j] = a + 0.5f * (b + e);
        t[1][j] = 0.5f * (b - e);
        t[2][j] = 0.5f * (b + e) + f;
      }
      float out[9][4];
      for (size_t i = 0; i < 3; i++) {   /* t G */
        vf a = t[i][0], b = t[i][1], e = t[i][2], f = t[i][3];
        gc__store4(out[3 * i], a + 0.5f * (b + e));
        gc__store4(out[3 * i + 1], 0.5f * (b - e));
        gc__store4(out[3 * i + 2], 0.5f * (b + e) + f);
      }
      for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < 9; i++)
          dW[(o * C + c + k) * 9 + i] = out[i][k];
    }
}

void gc__wino3_wgrad(const float *in, const float *dout, size_t B, size_t C,
                     size_t H, size_t W, size_t pad, size_t k, size_t O,
                     float *dW, float *Mw, const gc__wino3_scratch *s)
{
  size_t Ho = H + 2 * pad - (k - 1), Wo = W + 2 * pad - (k - 1);
  size_t th = (Ho + 1) / 2, tw = (Wo + 1) / 2, tiles = th * tw;
  size_t S = nsub(k), Cp = round4(C), Op = round4(O), K = S * C;
  size_t chunk = wino3_chunk(C, O, Ho, Wo, B);
  for (size_t n0 = 0; n0 < B; n0 += chunk) {
    size_t nb = B - n0 < chunk ? B - n0 : chunk, T = nb * tiles;
    input_tiles(in + n0 * C * H * W, nb, C, H, W, pad, k, th, tw, s);
    /* dout, zero-completed to 2 th x 2 tw, channel-last */
    to_padded_channel_last(dout + n0 * O * Ho * Wo, nb, O, Ho, Wo, 0, 2 * th,
                           2 * tw, s->work);
    for (size_t j = 0; j < nb; j++)
      for (size_t ti = 0; ti < th; ti++)
        for (size_t tj = 0; tj < tw; tj++)
          grad_tile(s->work + ((j * 2 * th + 2 * ti) * 2 * tw + 2 * tj) * Op,
                    2 * tw * Op, Op, s->M + ((j * th + ti) * tw + tj) * Op,
                    blk(T * Op));
    for (size_t xi = 0; xi < 16; xi++)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int) O, (int) K,
                  (int) T, 1.0f, s->M + xi * blk(T * Op), (int) Op,
                  s->V + xi * blk(T * S * Cp), (int) (S * Cp), n0 ? 1.0f : 0.0f,
                  Mw + xi * O * K, (int) K);
  }
  if (k == 3) {
    grad_untransform(Mw, O, C, dW);
    return;
  }
  /* the four 3x3 sub-kernels' gradients, then the 5x5 entries of each */
  grad_untransform(Mw, O, K, s->work);
  for (size_t o = 0; o < O; o++)
    for (size_t c = 0; c < C; c++)
      for (size_t ki = 0; ki < 5; ki++)
        for (size_t kj = 0; kj < 5; kj++) {
          size_t q = (ki / 3) * 2 + kj / 3;
          dW[((o * C + c) * 5 + ki) * 5 + kj] =
              s->work[((o * K + q * C + c) * 3 + ki % 3) * 3 + kj % 3];
        }
}

void gc__wino3_sizes(size_t C, size_t H, size_t W, size_t pad, size_t k,
                     size_t O, size_t max_batch, size_t *nV, size_t *nM,
                     size_t *nwork)
{
  size_t Ho = H + 2 * pad - (k - 1), Wo = W + 2 * pad - (k - 1);
  size_t th = (Ho + 1) / 2, tw = (Wo + 1) / 2, S = nsub(k), e = k == 5 ? 3 : 0;
  size_t nb = wino3_chunk(C, O, Ho, Wo, max_batch), T = nb * th * tw;
  size_t xp = nb * (2 * th + 2 + e) * (2 * tw + 2 + e) * round4(C);
  size_t y = 4 * T * round4(O), f = k == 5 ? 36 * C * O : 0;
  *nV = 16 * blk(S * round4(C) * T);
  *nM = 16 * blk(round4(O) * T);
  /* the padded input, then the outputs; for 5x5 also the sub-kernels */
  *nwork = xp > y ? xp : y;
  *nwork = f > *nwork ? f : *nwork;
}
