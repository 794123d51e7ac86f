/* wire.cu -- the wire messages of lib/compress/wire.c (sparsifiers) and lib/compress/quant.c
 * (quantizers), written on the device byte for byte.
 *
 * Everything that depends on the data (the count c, the index coding, the
 * section sizes, the message length) is decided by one-thread "plan"
 * kernels and read by the writers from device memory, so the host never
 * waits.  Grids are sized for the largest possible count; threads past the
 * actual count return.  Messages are written with byte stores: the value
 * and index sections start at odd offsets (7, 2, 6), so word stores would
 * be misaligned.  The one exception is QSGD's bit stream, written in words
 * from the stream start rounded down to 4 bytes (see qsgd_write). */
#include <string.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "gc_bitio.h"
#include "gc_cuda_internal.cuh"
#include "gc_rng.h"
#include "gc_wire.h"

using namespace gc_cuda;

namespace {

/* The quantizers' tags are in gc_cuda_internal.cuh; the sparse layout's
 * come from lib/compress/gc_wire.h. */

struct Plan {
  uint32_t c;
  int coding;
  uint64_t isec;     /* bytes of the index section */
  uint64_t delta;    /* sum of LEB128 lengths (total of the tile scan) */
  uint32_t bad;      /* NaN/Inf (quantizers) */
  uint32_t nnz;
  uint32_t smax;     /* terngrad: max of the clipped |x| as float bits */
  float clipc;       /* terngrad clip bound */
  uint64_t bits;     /* qsgd: length of the code stream in bits */
};

__device__ __forceinline__ void put_u32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t) v;
  p[1] = (uint8_t) (v >> 8);
  p[2] = (uint8_t) (v >> 16);
  p[3] = (uint8_t) (v >> 24);
}

__device__ __forceinline__ uint32_t leb_len(uint32_t g)
{
  return g < (1u << 7) ? 1 : g < (1u << 14) ? 2 : g < (1u << 21) ? 3 : g < (1u << 28) ? 4 : 5;
}

__device__ __forceinline__ uint32_t gap(const uint32_t *idx, size_t j)
{
  return j ? idx[j] - idx[j - 1] - 1 : idx[j];
}

/* ---- sparse messages ---------------------------------------------------- */

/* LEB128 bytes per tile of TILE indices: the delta coding's size and its
 * offsets (not run for the implicit coding, which sends no indices). */
__global__ void __launch_bounds__(BLOCK)
delta_tiles(const uint32_t *idx, const gc_cuda_info *info, uint64_t *tiles)
{
  typedef cub::BlockReduce<uint64_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  const size_t c = info->status ? 0 : info->selected;
  size_t base = (size_t) blockIdx.x * TILE;
  uint64_t sum = 0;
  for (unsigned j = 0; j < ITEMS; j++) {
    size_t i = base + (size_t) j * BLOCK + threadIdx.x;
    if (i < c)
      sum += leb_len(gap(idx, i));
  }
  uint64_t t = Reduce(tmp).Sum(sum);
  if (threadIdx.x == 0)
    tiles[blockIdx.x] = t;
}

/* gc__wire_choose: raw, then delta (only when c && bitmap >= c, exactly as
 * the CPU skips it), then bitmap; strict < so ties keep the earlier one. */
__global__ void sparse_plan(Plan *pl, gc_cuda_info *info, size_t n, uint8_t type,
                            int implicit, uint8_t *buf)
{
  if (info->status != GC_SUCCESS) {
    pl->c = 0;
    info->len = 0;
    return;
  }
  uint32_t c = info->selected;
  uint64_t raw = 4ull * c, bitmap = (n + 7) / 8, best = raw;
  int coding = GC__IDX_RAW;
  if (implicit) {
    coding = GC__IDX_IMPLICIT;
    best = 0;
  } else {
    if (c && bitmap >= c && pl->delta < best) {
      best = pl->delta;
      coding = GC__IDX_DELTA;
    }
    if (bitmap < best) {
      best = bitmap;
      coding = GC__IDX_BITMAP;
    }
  }
  pl->c = c;
  pl->coding = coding;
  pl->isec = best;
  info->nnz = 0;
  info->len = GC__WIRE_HDR + best + 4ull * c;
  buf[0] = type;
  buf[1] = 4;
  buf[2] = (uint8_t) coding;
  put_u32(buf + 3, c);
}

/* Raw and delta index sections, one tile of indices per block; delta
 * offsets come from the tile scan plus a block scan, so each varint lands
 * where the sequential CPU writer puts it. */
__global__ void __launch_bounds__(BLOCK)
write_index(const uint32_t *idx, const Plan *pl, const uint64_t *tiles, uint8_t *buf)
{
  typedef cub::BlockScan<uint64_t, BLOCK> Scan;
  __shared__ typename Scan::TempStorage tmp;
  const Plan p = *pl;
  if (p.coding != GC__IDX_RAW && p.coding != GC__IDX_DELTA)
    return;
  size_t base = (size_t) blockIdx.x * TILE + (size_t) threadIdx.x * ITEMS;
  if (p.coding == GC__IDX_RAW) {
    for (unsigned j = 0; j < ITEMS; j++)
      if (base + j < p.c)
        put_u32(buf + GC__WIRE_HDR + 4 * (base + j), idx[base + j]);
    return;
  }
  uint64_t mine = 0;
  for (unsigned j = 0; j < ITEMS; j++)
    if (base + j < p.c)
      mine += leb_len(gap(idx, base + j));
  uint64_t off;
  Scan(tmp).ExclusiveSum(mine, off);
  off += tiles[blockIdx.x] + GC__WIRE_HDR;
  for (unsigned j = 0; j < ITEMS; j++) {
    if (base + j >= p.c)
      break;
    uint32_t g = gap(idx, base + j);
    while (g >= 128) {
      buf[off++] = (uint8_t) (g | 0x80);
      g >>= 7;
    }
    buf[off++] = (uint8_t) g;
  }
}

/* Bitmap section: byte b holds indices 8b..8b+7.  First zero the section,
 * then the thread of the first index of each byte assembles it. */
__global__ void __launch_bounds__(BLOCK)
bitmap_zero(const Plan *pl, size_t nbytes, uint8_t *buf)
{
  if (pl->coding != GC__IDX_BITMAP)
    return;
  for (size_t b = (size_t) blockIdx.x * BLOCK + threadIdx.x; b < nbytes;
       b += (size_t) gridDim.x * BLOCK)
    buf[GC__WIRE_HDR + b] = 0;
}

__global__ void __launch_bounds__(BLOCK)
bitmap_fill(const uint32_t *idx, const Plan *pl, size_t cap, uint8_t *buf)
{
  if (pl->coding != GC__IDX_BITMAP)
    return;
  const size_t c = pl->c;
  for (size_t j = (size_t) blockIdx.x * BLOCK + threadIdx.x; j < c && j < cap;
       j += (size_t) gridDim.x * BLOCK) {
    uint32_t byte = idx[j] >> 3;
    if (j && (idx[j - 1] >> 3) == byte)
      continue;
    unsigned bits = 0;
    for (size_t q = j; q < c && (idx[q] >> 3) == byte; q++)
      bits |= 1u << (idx[q] & 7);
    buf[GC__WIRE_HDR + byte] = (uint8_t) bits;
  }
}

/* Values x[idx[j]] * factor (float product, as wire_source.c), counting the
 * nonzero x for info->nnz. */
__global__ void __launch_bounds__(BLOCK)
write_values(const float *val, const Plan *pl, size_t cap, float factor, uint8_t *buf,
             gc_cuda_info *info)
{
  typedef cub::BlockReduce<uint32_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  const size_t c = pl->c;
  uint8_t *out = buf + GC__WIRE_HDR + pl->isec;
  uint32_t nz = 0;
  for (size_t j = (size_t) blockIdx.x * BLOCK + threadIdx.x; j < c && j < cap;
       j += (size_t) gridDim.x * BLOCK) {
    float v = val[j];
    nz += v != 0.0f;
    put_u32(out + 4 * j, __float_as_uint(__fmul_rn(v, factor)));
  }
  uint32_t t = Reduce(tmp).Sum(nz);
  if (threadIdx.x == 0 && t)
    atomicAdd(&info->nnz, t);
}

/* ---- quantizers ----------------------------------------------------------- */

/* nnz: the count when the host knows it (sign: every entry), else 0. */
__global__ void qplan_init(Plan *pl, uint32_t nnz)
{
  pl->bad = 0;
  pl->nnz = nnz;
  pl->smax = 0;
  pl->clipc = __int_as_float(0x7f800000);   /* +inf: no clipping */
  pl->bits = 0;
}

__global__ void qheader(uint8_t *buf, uint8_t tag)
{
  buf[0] = tag;
  buf[1] = PREC32;
}

/* identity, fp16 and bf16: each entry's bytes in one pass, with the NaN/Inf
 * flag and the nonzero count.  bf16 uses quant.c's integer rounding on the
 * bit pattern (identical to round-to-nearest-even, subnormals kept); fp16
 * gc_bitio.h's integer conversion, the CPU's bits for every float (the
 * device's __float2half_rn rounded a tie away from even on an H100). */
enum Plain { P_IDENTITY, P_FP16, P_BF16 };

template <int FMT>
__global__ void __launch_bounds__(BLOCK)
write_plain(const float *__restrict__ x, size_t n, uint8_t *out, Plan *pl)
{
  typedef cub::BlockReduce<uint32_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  uint32_t nz = 0;
  int bad = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    float v = x[i];
    uint32_t u = __float_as_uint(v);
    bad |= nonfinite(v);
    if (FMT == P_IDENTITY) {
      nz += v != 0.0f;
      put_u32(out + 4 * i, u);
      continue;
    }
    uint16_t h;
    if (FMT == P_BF16)
      h = (uint16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    else
      h = gc__half_from_float_bits(u);
    nz += (h & 0x7fffu) != 0;
    out[2 * i] = (uint8_t) h;
    out[2 * i + 1] = (uint8_t) (h >> 8);
  }
  uint32_t t = Reduce(tmp).Sum(nz);
  flag_block_nonfinite(bad, &pl->bad);
  if (threadIdx.x == 0 && t)
    atomicAdd(&pl->nnz, t);
}

/* Sign bits, one thread per output byte: 8 consecutive entries, bit j set
 * iff x_{8b+j} < 0 (quant.c: 1 = negative, LSB first; padding bits zero).
 * sign(0) = sign(-0) = +1 as in GRACE, so the test is a comparison, not
 * the IEEE sign bit.  NaN/Inf sets pl->bad. */
__global__ void __launch_bounds__(BLOCK)
pack_sign(const float *__restrict__ x, size_t n, uint8_t *bits, Plan *pl)
{
  size_t nb = (n + 7) / 8;
  int bad = 0;
  for (size_t b = (size_t) blockIdx.x * BLOCK + threadIdx.x; b < nb;
       b += (size_t) gridDim.x * BLOCK) {
    unsigned byte = 0;
    for (unsigned j = 0; j < 8; j++) {
      size_t i = b * 8 + j;
      if (i < n) {
        float v = x[i];
        bad |= nonfinite(v);
        byte |= (unsigned) (v < 0.0f) << j;
      }
    }
    bits[b] = (uint8_t) byte;
  }
  flag_block_nonfinite(bad, &pl->bad);
}

/* Scaled sign, ||x||_1 as quant_source.c sums it: per 64-entry word four
 * lanes a[t] += |x_{j+t}| (j step 4), word sum (a0+a1)+(a2+a3); then the
 * words, then the tail, added in order into one double.  The word sums are
 * parallel; the final chain is sequential (n/64 dependent adds) because
 * that order is what fixes the rounded bits of the scale. */
__global__ void __launch_bounds__(BLOCK)
l1_words(const float *__restrict__ x, size_t nw, double *wsum)
{
  for (size_t w = (size_t) blockIdx.x * BLOCK + threadIdx.x; w < nw;
       w += (size_t) gridDim.x * BLOCK) {
    const float *xw = x + 64 * w;
    double a[4] = {0, 0, 0, 0};
    for (unsigned j = 0; j < 64; j += 4)
      for (unsigned t = 0; t < 4; t++)
        a[t] = __dadd_rn(a[t], fabs((double) xw[j + t]));
    wsum[w] = __dadd_rn(__dadd_rn(a[0], a[1]), __dadd_rn(a[2], a[3]));
  }
}

/* The chain itself stays one thread's sequence of adds in index order; the
 * block only stages the word sums into shared memory, so that thread 0
 * waits on the add latency rather than on a global load per add (the
 * one-thread loop took 21.5 ms at d = 2.5e7: ~ 94 cycles per add). */
enum { L1_CHUNK = 4096 };
__global__ void __launch_bounds__(BLOCK)
l1_chain(const float *x, size_t n, const double *wsum, uint8_t *buf, Plan *pl)
{
  __shared__ double sh[L1_CHUNK];
  const size_t nw = n / 64;
  double acc = 0;
  for (size_t w0 = 0; w0 < nw; w0 += L1_CHUNK) {
    const unsigned cnt = (unsigned) (nw - w0 < L1_CHUNK ? nw - w0 : L1_CHUNK);
    for (unsigned j = threadIdx.x; j < cnt; j += BLOCK)
      sh[j] = wsum[w0 + j];
    __syncthreads();
    if (threadIdx.x == 0)
      for (unsigned j = 0; j < cnt; j++)
        acc = __dadd_rn(acc, sh[j]);
    __syncthreads();
  }
  if (threadIdx.x != 0)
    return;
  for (size_t i = 64 * nw; i < n; i++)
    acc = __dadd_rn(acc, fabs((double) x[i]));
  float sc = (float) (acc / (double) n);
  put_u32(buf + Q_HDR, __float_as_uint(sc));
  pl->nnz = sc > 0 ? (uint32_t) n : 0;
}

/* TernGrad: s = max of min(|x|, c) (a float maximum: order-free). */
__global__ void __launch_bounds__(BLOCK)
tern_max(const float *__restrict__ x, size_t n, Plan *pl)
{
  typedef cub::BlockReduce<uint32_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  const float c = pl->clipc;
  uint32_t m = 0;
  int bad = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    float a = fabsf(x[i]);
    bad |= nonfinite(a);
    a = a < c ? a : c;
    uint32_t u = __float_as_uint(a);   /* non-negative floats order as ints */
    m = u > m ? u : m;
  }
  uint32_t r = Reduce(tmp).Reduce(m, [](uint32_t a, uint32_t b) { return a > b ? a : b; });
  flag_block_nonfinite(bad, &pl->bad);
  if (threadIdx.x == 0)
    atomicMax(&pl->smax, r);
}

/* TernGrad's clip statistics in quant_source.c's order: per block of
 * SUM_BLOCK entries a sequential double sum from 0.0 in index order (of x_i,
 * or with SQUARES of (x_i - mean)^2, mean = sum[0] / n), block partials
 * combined by the pairwise tree (gc_cuda_internal.cuh).  One thread per
 * block; each warp stages 32 x 32 tiles through shared memory so that the
 * loads stay coalesced while every thread reads its own block in order. */
template <bool SQUARES>
__global__ void __launch_bounds__(BLOCK)
tern_partials(const float *__restrict__ x, size_t n, const double *sum, size_t nblk,
              double *part)
{
  __shared__ float tile[BLOCK / 32][32][33];   /* 33: no bank conflicts */
  const unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const size_t first = (size_t) blockIdx.x * BLOCK + 32 * w, mine = first + lane;
  if (first >= nblk)   /* the whole warp: only warp barriers follow */
    return;
  const double mean = SQUARES ? __ddiv_rn(sum[0], (double) n) : 0.0;
  double acc = 0.0;
  for (unsigned off = 0; off < SUM_BLOCK; off += 32) {
    for (unsigned r = 0; r < 32; r++) {
      size_t i = (first + r) * SUM_BLOCK + off + lane;
      tile[w][r][lane] = i < n ? x[i] : 0.0f;
    }
    __syncwarp();
    size_t lo = mine * SUM_BLOCK + off;
    for (unsigned j = 0; j < 32 && lo + j < n; j++) {
      double v = (double) tile[w][lane][j];
      if (SQUARES) {
        double d = __dsub_rn(v, mean);
        acc = __dadd_rn(acc, __dmul_rn(d, d));
      } else {
        acc = __dadd_rn(acc, v);
      }
    }
    __syncwarp();
  }
  if (mine < nblk)
    part[mine] = acc;
}

/* c = (float)(clip * sd), sd = sqrt(sum (x - mean)^2 / (n - 1)) as the CPU
 * rounds it (torch.std's unbiased estimator). */
__global__ void tern_clip(Plan *pl, const double *sq, size_t n, double clip)
{
  double sd = n > 1 ? sqrt(__ddiv_rn(*sq, (double) (n - 1))) : 0.0;
  pl->clipc = __double2float_rn(__dmul_rn(clip, sd));
}

/* One thread per output byte = entries 4b..4b+3 = half of Philox block
 * b/2 (gc_rng_u16: 16-bit uniforms, eight entries per block). */
__global__ void __launch_bounds__(BLOCK)
tern_codes(const float *__restrict__ x, size_t n, uint64_t seed, uint32_t rs, uint32_t step,
           uint8_t *buf, Plan *pl)
{
  typedef cub::BlockReduce<uint32_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  const float s = __uint_as_float(pl->smax), c = pl->clipc;
  const double inv = s > 0 ? __ddiv_rn(65536.0, (double) s) : 0.0;
  const size_t nb = (2 * n + 7) / 8;
  uint8_t *out = buf + Q_HDR + 4;
  uint32_t nz = 0;
  for (size_t b = (size_t) blockIdx.x * BLOCK + threadIdx.x; b < nb;
       b += (size_t) gridDim.x * BLOCK) {
    unsigned byte = 0;
    if (s > 0) {
      gc_rng4 blk = gc_rng_block(seed, rs, step, b >> 1);
      for (unsigned q = 0; q < 4; q++) {
        size_t i = 4 * b + q;
        if (i >= n)
          break;
        uint32_t u = (blk.v[(i >> 1) & 3] >> (16 * (unsigned) (i & 1))) & 0xffffu;
        float a = fabsf(x[i]);
        a = a < c ? a : c;
        if ((double) u < __dmul_rn((double) a, inv)) {
          byte |= (x[i] < 0 ? 3u : 1u) << (2 * q);
          nz++;
        }
      }
    }
    out[b] = (uint8_t) byte;
  }
  uint32_t t = Reduce(tmp).Sum(nz);
  if (threadIdx.x == 0 && t)
    atomicAdd(&pl->nnz, t);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    put_u32(buf + Q_HDR, pl->smax);
}

/* ---- QSGD ------------------------------------------------------------------
 * quant_source.c FN(qsgd_encode): per bucket the norm sqrt(sum x_i^2) in
 * quant.c's sumsq order (16 lane sums per 1024-entry block, folded by
 * halves, blocks combined pairwise), rounded to float and sent; per entry
 * the level xi (stochastic rounding with the entry's 16-bit uniform,
 * gc_rng_u16) coded as gamma(xi + 1), then a sign bit when xi > 0, in one
 * LSB-first bit stream after the norms.
 * One warp per bucket; its lanes 0-15 hold the lane sums, lane 0 the
 * pairwise tree: a bucket of n entries is a chain of n/16 dependent adds.
 * Code lengths are summed per tile and scanned, so every code lands at the
 * CPU's bit offset.  A block assembles its tile's bits in shared memory and
 * stores whole words, with atomicOr only on the two words it may share with
 * the neighbouring tiles (the stream is zeroed first). */
/* lib/core/gc_pairwise.h gc__pairwise on the device: the same additions in
 * the same order. */
struct Pairwise {
  double v[64];
  uint64_t count;
  unsigned top;
};
__device__ __forceinline__ void pw_init(Pairwise *t) { t->count = 0; t->top = 0; }
__device__ __forceinline__ void pw_push(Pairwise *t, double p)
{
  t->v[t->top++] = p;
  for (uint64_t c = ++t->count; !(c & 1); c >>= 1) {
    t->top--;
    t->v[t->top - 1] = __dadd_rn(t->v[t->top - 1], t->v[t->top]);
  }
}
__device__ __forceinline__ double pw_total(const Pairwise *t)
{
  if (t->top == 0)
    return 0;
  double s = t->v[t->top - 1];
  for (unsigned i = t->top - 1; i-- > 0;)
    s = __dadd_rn(t->v[i], s);
  return s;
}

enum { QSGD_SUM_BLOCK = 1024,  /* lib/compress/quant.c SUM_BLOCK */
       QSGD_MAX_CODE = 66,   /* gamma(2^32) + sign: levels s < 2^32 */
       QSGD_TILE_WORDS = TILE * QSGD_MAX_CODE / 32 + 2 };

__global__ void __launch_bounds__(BLOCK)
qsgd_norms(const float *__restrict__ x, size_t n, size_t bucket, size_t nb, float *norms,
           uint8_t *buf, Plan *pl)
{
  const unsigned lane = threadIdx.x & 31;
  const size_t warps = (size_t) gridDim.x * (BLOCK / 32);
  int bad = 0;
  for (size_t b = ((size_t) blockIdx.x * BLOCK + threadIdx.x) / 32; b < nb; b += warps) {
    size_t lo = b * bucket, hi = n - lo < bucket ? n : lo + bucket;
    int bucket_bad = 0;
    for (size_t i = lo + lane; i < hi; i += 32)
      bucket_bad |= nonfinite(x[i]);
    bucket_bad = __any_sync(0xffffffffu, bucket_bad);
    float norm = 0.0f;
    if (!bucket_bad) {
      /* lib/compress/quant.c sumsq: per block of QSGD_SUM_BLOCK entries, lane j <
       * 16 adds x_j^2, x_{j+16}^2, ... in order, the lanes fold by halves,
       * and lane 0 combines the blocks with the pairwise tree. */
      Pairwise pw;
      pw_init(&pw);
      for (size_t b0 = lo; b0 < hi; b0 += QSGD_SUM_BLOCK) {
        size_t b1 = hi - b0 < QSGD_SUM_BLOCK ? hi : b0 + QSGD_SUM_BLOCK;
        double acc = 0.0;
        if (lane < 16)
          for (size_t i = b0 + lane; i < b1; i += 16) {
            double v = (double) x[i];
            acc = __dadd_rn(acc, __dmul_rn(v, v));
          }
        for (int h = 8; h; h >>= 1) {
          double o = __shfl_down_sync(0xffffffffu, acc, h);
          if (lane < (unsigned) h)
            acc = __dadd_rn(acc, o);
        }
        if (lane == 0)
          pw_push(&pw, acc);
      }
      if (lane == 0)
        norm = __double2float_rn(sqrt(pw_total(&pw)));
    }
    /* a norm that overflows float is GC_EDOM on the CPU too */
    bucket_bad |= nonfinite(norm);
    if (lane == 0) {
      norms[b] = norm;
      put_u32(buf + Q_HDR + 4 * b, __float_as_uint(norm));
    }
    bad |= bucket_bad;
  }
  flag_block_nonfinite(bad, &pl->bad);
}

/* xi for one entry: r = |x| s / norm (norm as sent), xi = floor(r) + [u <
 * (r - floor r) 2^16] with u the entry's 16-bit uniform, at most s; 0 for
 * a zero bucket. */
__device__ __forceinline__ uint32_t qsgd_level(float v, float norm, unsigned s, uint32_t u)
{
  if (norm == 0.0f)
    return 0;
  double k = __ddiv_rn((double) s, (double) norm);
  double r = __dmul_rn(fabs((double) v), k), l = floor(r);
  uint64_t xi = (uint64_t) l + ((double) u < __dmul_rn(__dsub_rn(r, l), 65536.0));
  return xi > s ? s : (uint32_t) xi;
}

/* Bits of gamma(xi + 1) and the sign bit. */
__device__ __forceinline__ unsigned qsgd_code_bits(uint32_t xi)
{
  unsigned N = 63u - (unsigned) __clzll((long long) xi + 1);
  return 2 * N + 1 + (xi != 0);
}

/* Per tile: code bits (low 32) and nonzero levels (high 32), the bits to
 * tiles[] for the scan, the nonzeros to pl->nnz. */
__global__ void __launch_bounds__(BLOCK)
qsgd_lengths(const float *__restrict__ x, size_t n, size_t bucket, const float *norms,
             unsigned s, uint64_t seed, uint32_t rs, uint32_t step, Plan *pl, uint64_t *tiles)
{
  typedef cub::BlockReduce<uint64_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  const bool bad = pl->bad;
  size_t base = (size_t) blockIdx.x * TILE;
  uint64_t c = 0;
  for (unsigned j = 0; j < ITEMS; j++) {
    size_t i = base + (size_t) j * BLOCK + threadIdx.x;   /* coalesced */
    if (!bad && i < n) {
      uint32_t xi = qsgd_level(x[i], norms[i / bucket], s, gc_rng_u16(seed, rs, step, i));
      c += qsgd_code_bits(xi) + ((uint64_t) (xi != 0) << 32);
    }
  }
  uint64_t t = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0) {
    tiles[blockIdx.x] = t & 0xffffffffu;
    if (t >> 32)
      atomicAdd(&pl->nnz, (uint32_t) (t >> 32));
  }
}

__global__ void __launch_bounds__(BLOCK)
qsgd_zero(uint8_t *stream, const Plan *pl, size_t cap)
{
  if (pl->bad)
    return;
  const size_t nbytes = (pl->bits + 7) / 8;
  for (size_t b = (size_t) blockIdx.x * BLOCK + threadIdx.x; b < nbytes && b < cap;
       b += (size_t) gridDim.x * BLOCK)
    stream[b] = 0;
}

/* v < 2^nbits (nbits <= 32) into the bit array w at bit pos. */
__device__ __forceinline__ void or_bits(uint32_t *w, uint64_t pos, uint32_t v, unsigned nbits)
{
  if (!v)
    return;
  unsigned sh = (unsigned) (pos & 31);
  atomicOr(&w[pos >> 5], v << sh);
  if (sh && sh + nbits > 32)
    atomicOr(&w[(pos >> 5) + 1], v >> (32 - sh));
}

/* The codes of one tile: thread t owns the ITEMS consecutive entries from
 * base, so a block scan of its bit counts gives each code's offset.  words
 * is d_buf's stream start rounded down to 4 bytes; the stream begins at
 * bit bit0 of it. */
__global__ void __launch_bounds__(BLOCK)
qsgd_write(const float *__restrict__ x, size_t n, size_t bucket, const float *norms,
           unsigned s, uint64_t seed, uint32_t rs, uint32_t step, const Plan *pl,
           const uint64_t *tiles, uint32_t *words, unsigned bit0)
{
  typedef cub::BlockScan<uint32_t, BLOCK> Scan;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ uint32_t sh[QSGD_TILE_WORDS];
  if (pl->bad)
    return;
  const size_t base = (size_t) blockIdx.x * TILE + (size_t) threadIdx.x * ITEMS;
  uint32_t xi[ITEMS], neg = 0, mine = 0;
  for (unsigned q = 0; q < ITEMS; q += 8) {   /* one Philox block per 8 entries */
    gc_rng4 r = gc_rng_block(seed, rs, step, (base + q) >> 3);
    for (unsigned t = 0; t < 8; t++) {
      size_t i = base + q + t;
      xi[q + t] = 0;
      if (i < n) {
        float v = x[i];
        uint32_t u = (r.v[t >> 1] >> (16 * (t & 1))) & 0xffffu;
        xi[q + t] = qsgd_level(v, norms[i / bucket], s, u);
        neg |= (uint32_t) (v < 0) << (q + t);
        mine += qsgd_code_bits(xi[q + t]);
      }
    }
  }
  uint32_t off, total;
  Scan(tmp).ExclusiveSum(mine, off, total);
  const uint64_t start = bit0 + tiles[blockIdx.x];   /* tiles: exclusive bit offsets */
  const uint64_t w0 = start >> 5, w1 = (start + total - 1) >> 5;
  const unsigned nw = (unsigned) (w1 - w0 + 1);
  for (unsigned i = threadIdx.x; i < nw; i += BLOCK)
    sh[i] = 0;
  __syncthreads();
  uint64_t pos = (start & 31) + off;
  for (unsigned j = 0; j < ITEMS && base + j < n; j++) {
    uint64_t v = (uint64_t) xi[j] + 1;
    unsigned N = 63u - (unsigned) __clzll((long long) v);
    or_bits(sh, pos + N, 1, 1);   /* N zeros, then the 1 */
    if (N)
      or_bits(sh, pos + N + 1, (uint32_t) (v & ((1ull << N) - 1)), N);
    if (xi[j])
      or_bits(sh, pos + 2 * N + 1, (neg >> j) & 1u, 1);
    pos += 2 * N + 1 + (xi[j] != 0);
  }
  __syncthreads();
  for (unsigned i = threadIdx.x; i < nw; i += BLOCK) {
    if (i > 0 && i < nw - 1)
      words[w0 + i] = sh[i];
    else if (sh[i])
      atomicOr(&words[w0 + i], sh[i]);
  }
}

/* Close a quantizer message: status, counts and the length (the fixed part
 * plus qsgd's code stream). */
__global__ void qfinish(const Plan *pl, size_t n, uint64_t len, gc_cuda_info *info)
{
  info->status = pl->bad ? GC_EDOM : GC_SUCCESS;
  info->selected = pl->bad ? 0 : (uint32_t) n;
  info->nnz = pl->bad ? 0 : pl->nnz;
  info->loops = 0;
  info->len = pl->bad ? 0 : len + (pl->bits + 7) / 8;
}

/* The device slot of every type with a GPU twin, keyed by the type
 * pointer (a name is not an identity: a type registered under a reused
 * name must not pick up another type's kernels).  Every kind listed here
 * has an encoder (gc_cuda_compress_f32) and a decoder
 * (gc_cuda_decompress_add_f32); test_cuda_compress walks the registry and
 * fails for any type without GC_COMP_NEEDS_SHAPE that is missing here. */
const struct { const gc_compressor_type *const *type; Kind kind; } device_slots[] = {
  {&gc_compressor_topk, K_TOPK}, {&gc_compressor_randk, K_RANDK},
  {&gc_compressor_randk_unbiased, K_RANDKU}, {&gc_compressor_threshold, K_THRESHOLD},
  {&gc_compressor_gaussk, K_GAUSSK}, {&gc_compressor_dgc, K_DGC},
  {&gc_compressor_identity, K_IDENTITY}, {&gc_compressor_sign, K_SIGN},
  {&gc_compressor_scaled_sign, K_SCALED_SIGN}, {&gc_compressor_qsgd, K_QSGD},
  {&gc_compressor_terngrad, K_TERNGRAD}, {&gc_compressor_fp16, K_FP16},
  {&gc_compressor_bf16, K_BF16}};

/* Run the selector of a sparsifier kind; d_tmp == NULL only sizes it (the
 * selectors then ignore idx, val and d_info). */
int select_into(Kind kind, const gc_compressor_params *p, void *d_tmp, size_t *tmp_bytes,
                const float *d_x, size_t n, size_t k, uint32_t step, uint32_t *idx, float *val,
                gc_cuda_info *d_info, cudaStream_t stream)
{
  switch (kind) {
  case K_TOPK:
    return gc_cuda_topk_f32(d_tmp, tmp_bytes, d_x, n, k, p->ties, idx, val, d_info, stream);
  case K_RANDK:
  case K_RANDKU:
    return gc_cuda_randk_f32(d_tmp, tmp_bytes, d_x, n, k, p->seed, p->stream, step,
                             kind == K_RANDK, idx, val, d_info, stream);
  case K_THRESHOLD:
    return gc_cuda_threshold_f32(d_tmp, tmp_bytes, d_x, n, p->threshold, idx, val, d_info,
                                 stream);
  case K_DGC:
    return gc_cuda_dgc_f32(d_tmp, tmp_bytes, d_x, n, k, p->sample_ratio, p->ties, p->seed,
                           p->stream, step, idx, val, d_info, stream);
  default:   /* z from the density asked for, as sparse_gaussk.c draws it */
    return gc_cuda_gaussk_f32(d_tmp, tmp_bytes, d_x, n, k,
                              p->k ? (double) k / (double) n : p->density, p->gauss_loops,
                              idx, val, d_info, stream);
  }
}

/* The sparse message after a selection into (idx, val); cap = most entries. */
int encode_sparse(Carver &cv, bool sizing, const gc_compressor *c, uint8_t type, int implicit,
                  float factor, const uint32_t *d_idx, const float *d_val, size_t cap,
                  uint8_t *d_buf, gc_cuda_info *d_info, cudaStream_t stream)
{
  size_t n = gc_compressor_n(c), nt = tiles_of(cap);
  Plan *pl = cv.take<Plan>(1);
  uint64_t *tiles = implicit ? nullptr : cv.take<uint64_t>(nt);   /* delta offsets */
  if (sizing)
    return GC_SUCCESS;
  if (!implicit) {
    delta_tiles<<<(unsigned) nt, BLOCK, 0, stream>>>(d_idx, d_info, tiles);
    GC_CUDA_LAUNCHED();
    scan_tiles<<<1, 1024, 0, stream>>>(tiles, nt, &pl->delta);
    GC_CUDA_LAUNCHED();
  }
  sparse_plan<<<1, 1, 0, stream>>>(pl, d_info, n, type, implicit, d_buf);
  GC_CUDA_LAUNCHED();
  if (!implicit) {
    write_index<<<(unsigned) nt, BLOCK, 0, stream>>>(d_idx, pl, tiles, d_buf);
    GC_CUDA_LAUNCHED();
    bitmap_zero<<<grid_for((n + 7) / 8, BLOCK, 4096), BLOCK, 0, stream>>>(pl, (n + 7) / 8, d_buf);
    GC_CUDA_LAUNCHED();
    bitmap_fill<<<grid_for(cap, BLOCK, 4096), BLOCK, 0, stream>>>(d_idx, pl, cap, d_buf);
    GC_CUDA_LAUNCHED();
  }
  write_values<<<grid_for(cap, BLOCK, 4096), BLOCK, 0, stream>>>(d_val, pl, cap, factor, d_buf,
                                                                  d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

} /* namespace */

Kind gc_cuda::kind_of(const gc_compressor_type *T)
{
  for (size_t i = 0; i < sizeof device_slots / sizeof device_slots[0]; i++)
    if (*device_slots[i].type == T)
      return device_slots[i].kind;
  return K_NONE;
}

extern "C" int gc_cuda_supports(const gc_compressor_type *T)
{
  return kind_of(T) != K_NONE;
}

extern "C" int gc_cuda_compress_f32(const gc_compressor *c, void *d_tmp, size_t *tmp_bytes,
                                    const float *d_x, uint32_t step, uint8_t *d_buf, size_t cap,
                                    gc_cuda_info *d_info, cudaStream_t stream)
{
  const gc_compressor_type *T = gc_compressor_type_of(c);
  const gc_compressor_params *p = gc_compressor_get_params(c);
  const size_t n = gc_compressor_n(c), k = gc_compressor_k(c);
  const Kind kind = kind_of(T);
  if (kind == K_NONE)
    GC_ERRORF(GC_EUNSUP, "no GPU encoder for compressor '%s' yet", T->name);
  const bool sizing = d_tmp == nullptr;
  if (!sizing && cap < gc_compressor_max_bytes(c))
    GC_ERRORF(GC_ENOSPACE, "%s: device buffer of %zu bytes, gc_compressor_max_bytes "
              "gives %zu", T->name, cap, gc_compressor_max_bytes(c));
  if (!sizing) {   /* check the scratch before anything is enqueued */
    size_t need = 0;
    GC_TRY(gc_cuda_compress_f32(c, NULL, &need, d_x, step, d_buf, cap, d_info, stream));
    if (*tmp_bytes < need)
      GC_ERRORF(GC_EINVAL, "%s: scratch of %zu bytes, %zu needed", T->name, *tmp_bytes, need);
  }
  Carver cv(d_tmp);
  switch (kind) {
  case K_TOPK:
  case K_RANDK:
  case K_RANDKU:
  case K_THRESHOLD:
  case K_GAUSSK:
  case K_DGC: {
    size_t cap_sel = (kind == K_THRESHOLD || kind == K_GAUSSK) ? n : k;
    uint32_t *idx = cv.take<uint32_t>(cap_sel);
    float *val = cv.take<float>(cap_sel);
    size_t sel_bytes = 0;
    GC_TRY(select_into(kind, p, NULL, &sel_bytes, d_x, n, k, step, idx, val, d_info, stream));
    void *sel_tmp = cv.take<char>(sel_bytes);
    if (!sizing)
      GC_TRY(select_into(kind, p, sel_tmp, &sel_bytes, d_x, n, k, step, idx, val, d_info,
                         stream));
    static const uint8_t types[] = {0, GC__WIRE_TOPK, GC__WIRE_RANDK, GC__WIRE_RANDKU,
                                    GC__WIRE_THRESHOLD, GC__WIRE_GAUSSK, GC__WIRE_DGC};
    /* randk-unbiased: factor (REAL)(n/k) as sparse_randk.c rounds it */
    float factor = kind == K_RANDKU ? (float) ((double) n / (double) k) : 1.0f;
    GC_TRY(encode_sparse(cv, sizing, c, types[kind], kind == K_RANDKU, factor, idx, val,
                         cap_sel, d_buf, d_info, stream));
    break;
  }
  default: {   /* quantizers */
    Plan *pl = cv.take<Plan>(1);
    size_t nb_sign = (n + 7) / 8;
    double *wsum = kind == K_SCALED_SIGN ? cv.take<double>(n / 64 + 1) : nullptr;
    /* terngrad's clip statistics: block partials and their tree */
    const size_t nblk = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    double *sums = nullptr, *part = nullptr, *spare = nullptr;
    if (kind == K_TERNGRAD && p->clip > 0) {
      sums = cv.take<double>(2);
      part = cv.take<double>(nblk);
      spare = cv.take<double>(tree_spare(nblk));
    }
    /* qsgd: bucket norms and per-tile code lengths */
    const size_t bucket = p->bucket && p->bucket < n ? p->bucket : n;
    const size_t nbuckets = (n + bucket - 1) / bucket;
    float *norms = kind == K_QSGD ? cv.take<float>(nbuckets) : nullptr;
    uint64_t *qtiles = kind == K_QSGD ? cv.take<uint64_t>(tiles_of(n)) : nullptr;
    if (sizing)
      break;
    unsigned grid = grid_for(n, BLOCK * 4, 8192);
    qplan_init<<<1, 1, 0, stream>>>(pl, kind == K_SIGN ? (uint32_t) n : 0u);
    GC_CUDA_LAUNCHED();
    uint64_t len = 0;
    switch (kind) {
    case K_IDENTITY:
      qheader<<<1, 1, 0, stream>>>(d_buf, T_IDENTITY);
      GC_CUDA_LAUNCHED();
      write_plain<P_IDENTITY><<<grid, BLOCK, 0, stream>>>(d_x, n, d_buf + Q_HDR, pl);
      GC_CUDA_LAUNCHED();
      len = Q_HDR + 4 * (uint64_t) n;
      break;
    case K_SIGN:
    case K_SCALED_SIGN: {
      size_t off = Q_HDR + (kind == K_SCALED_SIGN ? 4 : 0);
      qheader<<<1, 1, 0, stream>>>(d_buf, kind == K_SIGN ? T_SIGN : T_SCALED_SIGN);
      GC_CUDA_LAUNCHED();
      pack_sign<<<grid_for(nb_sign, BLOCK, 4096), BLOCK, 0, stream>>>(d_x, n, d_buf + off, pl);
      GC_CUDA_LAUNCHED();
      if (kind == K_SCALED_SIGN) {   /* l1_chain sets nnz from the scale */
        l1_words<<<grid_for(n / 64 + 1, BLOCK, 4096), BLOCK, 0, stream>>>(d_x, n / 64, wsum);
        GC_CUDA_LAUNCHED();
        l1_chain<<<1, BLOCK, 0, stream>>>(d_x, n, wsum, d_buf, pl);
        GC_CUDA_LAUNCHED();
      }
      len = off + nb_sign;
      break;
    }
    case K_FP16:
    case K_BF16:
      qheader<<<1, 1, 0, stream>>>(d_buf, kind == K_FP16 ? T_FP16 : T_BF16);
      GC_CUDA_LAUNCHED();
      if (kind == K_FP16)
        write_plain<P_FP16><<<grid, BLOCK, 0, stream>>>(d_x, n, d_buf + Q_HDR, pl);
      else
        write_plain<P_BF16><<<grid, BLOCK, 0, stream>>>(d_x, n, d_buf + Q_HDR, pl);
      GC_CUDA_LAUNCHED();
      len = Q_HDR + 2 * (uint64_t) n;
      break;
    case K_TERNGRAD:
      qheader<<<1, 1, 0, stream>>>(d_buf, T_TERNGRAD);
      GC_CUDA_LAUNCHED();
      if (sums) {   /* sums[0] = sum x_i, sums[1] = sum (x_i - mean)^2 */
        unsigned pgrid = (unsigned) ((nblk + BLOCK - 1) / BLOCK);
        tern_partials<false><<<pgrid, BLOCK, 0, stream>>>(d_x, n, nullptr, nblk, part);
        GC_CUDA_LAUNCHED();
        GC_TRY(pairwise_total<1>(part, spare, nblk, sums, stream));
        tern_partials<true><<<pgrid, BLOCK, 0, stream>>>(d_x, n, sums, nblk, part);
        GC_CUDA_LAUNCHED();
        GC_TRY(pairwise_total<1>(part, spare, nblk, sums + 1, stream));
        tern_clip<<<1, 1, 0, stream>>>(pl, sums + 1, n, p->clip);
        GC_CUDA_LAUNCHED();
      }
      tern_max<<<grid, BLOCK, 0, stream>>>(d_x, n, pl);
      GC_CUDA_LAUNCHED();
      tern_codes<<<grid_for((2 * n + 7) / 8, BLOCK, 8192), BLOCK, 0, stream>>>(
          d_x, n, p->seed, p->stream, step, d_buf, pl);
      GC_CUDA_LAUNCHED();
      len = Q_HDR + 4 + (2 * (uint64_t) n + 7) / 8;
      break;
    case K_QSGD: {
      const size_t off = Q_HDR + 4 * nbuckets, nt = tiles_of(n);
      /* at most |gamma(s + 1)| + 1 bits per entry (quant.c's bound) */
      unsigned N = 0;
      while (N < 32 && ((uint64_t) p->levels + 1) >> (N + 1))
        N++;
      const size_t stream_cap = ((2 * (uint64_t) N + 2) * n + 7) / 8;
      const uintptr_t at = (uintptr_t) (d_buf + off);
      uint32_t *words = reinterpret_cast<uint32_t *>(at & ~(uintptr_t) 3);
      qheader<<<1, 1, 0, stream>>>(d_buf, T_QSGD);
      GC_CUDA_LAUNCHED();
      qsgd_norms<<<grid_for(nbuckets, BLOCK / 32, 4096), BLOCK, 0, stream>>>(
          d_x, n, bucket, nbuckets, norms, d_buf, pl);
      GC_CUDA_LAUNCHED();
      qsgd_lengths<<<(unsigned) nt, BLOCK, 0, stream>>>(d_x, n, bucket, norms, p->levels,
                                                        p->seed, p->stream, step, pl, qtiles);
      GC_CUDA_LAUNCHED();
      scan_tiles<<<1, 1024, 0, stream>>>(qtiles, nt, &pl->bits);
      GC_CUDA_LAUNCHED();
      qsgd_zero<<<grid_for(stream_cap, BLOCK, 4096), BLOCK, 0, stream>>>(d_buf + off, pl,
                                                                         stream_cap);
      GC_CUDA_LAUNCHED();
      qsgd_write<<<(unsigned) nt, BLOCK, 0, stream>>>(d_x, n, bucket, norms, p->levels, p->seed,
                                                      p->stream, step, pl, qtiles, words,
                                                      8 * (unsigned) (at & 3));
      GC_CUDA_LAUNCHED();
      len = off;   /* qfinish adds the code stream */
      break;
    }
    default:
      break;
    }
    qfinish<<<1, 1, 0, stream>>>(pl, n, len, d_info);
    GC_CUDA_LAUNCHED();
    break;
  }
  }
  if (sizing)
    *tmp_bytes = cv.bytes();
  return GC_SUCCESS;
}
