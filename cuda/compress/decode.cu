/* decode.cu -- the decoders of lib/compress/wire.c (sparsifiers) and lib/compress/quant.c
 * (quantizers) on the device: y += scale * C(x) from a message in device
 * memory, with the CPU's checks and its float rounding (one product, one
 * sum, no FMA), so that the decoded vector is the CPU's bit for bit.
 *
 * The checks run first, with the CPU's rules (headers, index sections,
 * QSGD's bit stream); the additions run after, and only when the checks
 * passed, so y is untouched on error.  The sparse index sections are
 * checked by one block in parallel (sparse_check); QSGD's Elias stream and
 * the quantizers' headers are still walked by one thread. */
#include <cuda_fp16.h>

#include <cub/block/block_scan.cuh>

#include "gc_cuda_internal.cuh"
#include "gc_wire.h"

using namespace gc_cuda;

namespace {

struct Dec {
  int32_t status;    /* GC_SUCCESS or GC_ECORRUPT (the checks)          */
  uint32_t c;        /* sparse: entries; quantizers: n                  */
  uint64_t voff;     /* sparse: offset of the values                    */
  uint32_t bad;      /* quantizers: an invalid entry (quant_scan)       */
};

__device__ __forceinline__ uint32_t get_u32(const uint8_t *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

__device__ __forceinline__ float get_f32(const uint8_t *p) { return __uint_as_float(get_u32(p)); }

__device__ __forceinline__ float add_scaled(float y, float scale, float v)
{
  return __fadd_rn(y, __fmul_rn(scale, v));
}

/* check_header + check_explicit of wire.c, by one block: the indices go to
 * idx.  The walks of the index section are data-parallel (the one-thread
 * walk cost ~1 ms per 20k-entry message on an H100, and a GPU training step
 * decodes 2P + 2 messages): RAW compares neighbours; BITMAP numbers the
 * marks by a scan of popcounts; DELTA finds the LEB128 boundaries (bytes
 * without the 0x80 bit end a gap), each end reads its gap back to the
 * previous end, and a scan of (gap + 1) gives the indices, i_j =
 * sum_{i<=j} (g_i + 1) - 1.  Every rule of the sequential walk is kept:
 * at most 5 bytes a gap, no gap running past the section, exactly c gaps
 * filling it, every index < n; bitmap padding bits zero and exactly c
 * marks.  A failure anywhere leaves status GC_ECORRUPT. */
enum { CHECK_BLOCK = 512, CHECK_ITEMS = 8, CHECK_TILE = CHECK_BLOCK * CHECK_ITEMS };

struct EndSum {            /* gaps ended so far and the sum of (gap + 1) */
  uint64_t ends, sum;
};

struct EndSumAdd {
  __device__ EndSum operator()(const EndSum &a, const EndSum &b) const
  {
    return EndSum{a.ends + b.ends, a.sum + b.sum};
  }
};

struct MaxLL {
  __device__ long long operator()(long long a, long long b) const { return a > b ? a : b; }
};

__global__ void __launch_bounds__(CHECK_BLOCK)
sparse_check(const uint8_t *buf, uint64_t len, size_t n, uint8_t type, int implicit,
             size_t k, uint32_t *idx, Dec *d)
{
  typedef cub::BlockScan<long long, CHECK_BLOCK> ScanLL;
  typedef cub::BlockScan<EndSum, CHECK_BLOCK> ScanES;
  typedef cub::BlockScan<uint64_t, CHECK_BLOCK> ScanU;
  __shared__ union {
    typename ScanLL::TempStorage ll;
    typename ScanES::TempStorage es;
    typename ScanU::TempStorage u;
  } tmp;
  __shared__ int bad;
  __shared__ long long carry_end;   /* position of the last gap's end */
  __shared__ EndSum carry;
  const unsigned t = threadIdx.x;
  if (t == 0) {
    d->status = GC_ECORRUPT;
    d->c = 0;
    d->bad = 0;
    bad = 0;
    carry_end = -1;
    carry = EndSum{0, 0};
  }
  __syncthreads();
  if (len < GC__WIRE_HDR || buf[0] != type || buf[1] != 4)
    return;
  const uint64_t c = get_u32(buf + 3), body = len - GC__WIRE_HDR;
  const uint8_t *p = buf + GC__WIRE_HDR;
  uint64_t voff = GC__WIRE_HDR;
  if (implicit) {   /* gc__wire_check_implicit */
    if (buf[2] != GC__IDX_IMPLICIT || c != k || len != GC__WIRE_HDR + 4 * c)
      return;
  } else {
    if (c > n || body / 4 < c)
      return;
    const uint64_t isec = body - 4 * c;
    voff = GC__WIRE_HDR + isec;
    switch (buf[2]) {
    case GC__IDX_RAW:
      if (isec != 4 * c)
        return;
      for (uint64_t j = t; j < c; j += CHECK_BLOCK) {
        uint32_t i = get_u32(p + 4 * j);
        if (i >= n || (j && i <= get_u32(p + 4 * (j - 1))))
          bad = 1;
        idx[j] = i;
      }
      break;
    case GC__IDX_DELTA:
      for (uint64_t base = 0; base < isec; base += CHECK_TILE) {
        long long endpos[CHECK_ITEMS];
        EndSum es[CHECK_ITEMS];
        uint64_t g[CHECK_ITEMS];
        for (int it = 0; it < CHECK_ITEMS; it++) {
          uint64_t q = base + (uint64_t) t * CHECK_ITEMS + it;
          int end = q < isec && !(p[q] & 0x80);
          endpos[it] = end ? (long long) q : -1;
          g[it] = 0;
        }
        long long prev[CHECK_ITEMS];
        long long c0 = carry_end;
        ScanLL(tmp.ll).ExclusiveScan(endpos, prev, c0, MaxLL());
        __syncthreads();
        for (int it = 0; it < CHECK_ITEMS; it++) {
          es[it] = EndSum{0, 0};
          if (endpos[it] < 0)
            continue;
          long long q = endpos[it], start = prev[it] + 1;
          if (q - start >= 5) {        /* a sixth byte: shift 35 > 28 */
            bad = 1;
            continue;
          }
          uint64_t v = 0;
          for (long long b = q; b >= start; b--)
            v = v << 7 | (uint64_t) (p[b] & 0x7f);
          g[it] = v;
          es[it] = EndSum{1, v + 1};
        }
        EndSum before[CHECK_ITEMS], total;
        EndSum e0 = carry;
        ScanES(tmp.es).ExclusiveScan(es, before, e0, EndSumAdd(), total);
        for (int it = 0; it < CHECK_ITEMS; it++) {
          if (endpos[it] < 0)
            continue;
          uint64_t j = before[it].ends, i = before[it].sum + g[it];
          if (j >= c || i >= n)
            bad = 1;
          else
            idx[j] = (uint32_t) i;
        }
        __syncthreads();
        /* the last thread holds the tile's last items: carry them on */
        if (t == CHECK_BLOCK - 1) {
          long long last = prev[CHECK_ITEMS - 1];
          if (endpos[CHECK_ITEMS - 1] > last)
            last = endpos[CHECK_ITEMS - 1];
          carry_end = last;
          carry = EndSum{total.ends + e0.ends, total.sum + e0.sum};
        }
        __syncthreads();
      }
      /* exactly c gaps, the last one ending on the section's last byte */
      if (t == 0 && (carry.ends != c || carry_end != (long long) isec - 1))
        bad = 1;
      break;
    case GC__IDX_BITMAP: {
      const uint64_t nb = (n + 7) / 8;
      if (isec != nb || (n % 8 && (p[nb - 1] >> (n % 8))))
        return;
      __shared__ uint64_t marks;
      if (t == 0)
        marks = 0;
      __syncthreads();
      for (uint64_t base = 0; base < nb; base += CHECK_BLOCK) {
        uint64_t b = base + t;
        unsigned w = b < nb ? p[b] : 0;
        uint64_t before, total, m0 = marks;
        ScanU(tmp.u).ExclusiveSum((uint64_t) __popc(w), before, total);
        uint64_t j = m0 + before;
        for (; w; w &= w - 1, j++)
          if (j < c)
            idx[j] = (uint32_t) (8 * b + (unsigned) __ffs((int) w) - 1);
        __syncthreads();
        if (t == 0)
          marks = m0 + total;
        __syncthreads();
      }
      if (t == 0 && marks != c)
        bad = 1;
      break;
    }
    default:
      return;
    }
  }
  __syncthreads();
  if (t == 0 && !bad) {
    d->voff = voff;
    d->c = (uint32_t) c;
    d->status = GC_SUCCESS;
  }
}

__global__ void __launch_bounds__(BLOCK)
sparse_add(const uint8_t *buf, const uint32_t *idx, size_t cap, float scale, float *y,
           const Dec *d)
{
  if (d->status != GC_SUCCESS)
    return;
  const size_t c = d->c;
  const uint8_t *v = buf + d->voff;
  for (size_t j = (size_t) blockIdx.x * BLOCK + threadIdx.x; j < c && j < cap;
       j += (size_t) gridDim.x * BLOCK)
    y[idx[j]] = add_scaled(y[idx[j]], scale, get_f32(v + 4 * j));
}

/* Tag, precision and exact length of a quantizer message, the padding bits
 * of its last byte (nbits used) and a finite scale >= 0 at scale_at (0:
 * none); the rest of the checks are per kind. */
__device__ bool quant_header(const uint8_t *buf, uint64_t len, uint8_t tag, uint64_t want,
                             uint64_t nbits, uint64_t scale_at)
{
  if (len < Q_HDR || buf[0] != tag || buf[1] != PREC32 || len != want)
    return false;
  unsigned used = (unsigned) (nbits % 8);
  if (used && (buf[len - 1] >> used))
    return false;
  if (scale_at) {
    float s = get_f32(buf + scale_at);
    if (!(s >= 0.0f) || nonfinite(s))
      return false;
  }
  return true;
}

/* QSGD's Elias-gamma stream, LSB first as gc_bitio.h reads it. */
struct BitReader {
  const uint8_t *p;
  uint64_t pos, end;
  __device__ int bit() { int b = (p[pos >> 3] >> (pos & 7)) & 1; pos++; return b; }
  __device__ bool gamma(uint64_t *v)
  {
    unsigned N = 0;
    for (;;) {
      if (pos >= end)
        return false;
      if (bit())
        break;
      if (++N > 32)
        return false;
    }
    if (end - pos < N)
      return false;
    uint64_t low = 0;
    for (unsigned t = 0; t < N; t++)
      low |= (uint64_t) bit() << t;
    *v = ((uint64_t) 1 << N) | low;
    return true;
  }
};

/* quant.c's qsgd_parse, twice: first the checks, then (when they pass) the
 * additions, so that y is untouched by an invalid message. */
__global__ void qsgd_decode(const uint8_t *buf, uint64_t len, size_t n, size_t bucket,
                            unsigned s, float scale, float *y, Dec *d)
{
  const size_t nb = (n + bucket - 1) / bucket;
  const uint64_t off = Q_HDR + 4 * (uint64_t) nb;
  d->status = GC_ECORRUPT;
  d->c = (uint32_t) n;
  d->bad = 0;
  if (len < off || buf[0] != T_QSGD || buf[1] != PREC32)
    return;
  for (int apply = 0; apply < 2; apply++) {
    BitReader r = {buf + off, 0, 8 * (len - off)};
    for (size_t b = 0; b < nb; b++) {
      float normf = get_f32(buf + Q_HDR + 4 * b);
      if (!(normf >= 0.0f) || nonfinite(normf))
        return;
      const double norm = (double) normf;
      size_t lo = b * bucket, hi = lo + bucket < n ? lo + bucket : n;
      for (size_t i = lo; i < hi; i++) {
        uint64_t v;
        if (!r.gamma(&v) || v - 1 > s)
          return;
        uint64_t xi = v - 1;
        int sg = 0;
        if (xi) {
          if (r.pos >= r.end)
            return;
          sg = r.bit();
        }
        if (apply && xi) {
          float c = __double2float_rn(__ddiv_rn(__dmul_rn(norm, (double) xi), (double) s));
          y[i] = add_scaled(y[i], scale, sg ? -c : c);
        }
      }
    }
    /* gc__br_at_end: the stream ends in the last byte, padding zero */
    if (!apply) {
      if ((r.pos + 7) / 8 != len - off)
        return;
      for (uint64_t q = r.pos; q < r.end; q++)
        if (r.bit())
          return;
    }
  }
  d->status = GC_SUCCESS;
}

__global__ void quant_check(const uint8_t *buf, uint64_t len, size_t n, int kind, Dec *d)
{
  bool ok = false;
  switch (kind) {
  case K_IDENTITY:
    ok = quant_header(buf, len, T_IDENTITY, Q_HDR + 4 * (uint64_t) n, 0, 0);
    break;
  case K_SIGN:
    ok = quant_header(buf, len, T_SIGN, Q_HDR + (n + 7) / 8, n, 0);
    break;
  case K_SCALED_SIGN:
    ok = quant_header(buf, len, T_SCALED_SIGN, Q_HDR + 4 + (n + 7) / 8, n, Q_HDR);
    break;
  case K_TERNGRAD:
    ok = quant_header(buf, len, T_TERNGRAD, Q_HDR + 4 + (2 * (uint64_t) n + 7) / 8, 2 * n,
                      Q_HDR);
    break;
  case K_FP16:
  case K_BF16:
    ok = quant_header(buf, len, kind == K_FP16 ? T_FP16 : T_BF16, Q_HDR + 2 * (uint64_t) n,
                      0, 0);
    break;
  default:
    break;
  }
  d->c = (uint32_t) n;
  d->bad = 0;
  d->status = ok ? GC_SUCCESS : GC_ECORRUPT;
}

/* Per-entry checks of the dense quantizers: terngrad's invalid code 2 and
 * fp16/bf16 NaN patterns (the CPU rejects both). */
__global__ void __launch_bounds__(BLOCK)
quant_scan(const uint8_t *buf, size_t n, int kind, Dec *d)
{
  if (d->status != GC_SUCCESS)   /* the length may not cover n entries */
    return;
  int bad = 0;
  if (kind == K_TERNGRAD) {
    const uint8_t *p = buf + Q_HDR + 4;
    for (size_t b = (size_t) blockIdx.x * BLOCK + threadIdx.x; b < (2 * n + 7) / 8;
         b += (size_t) gridDim.x * BLOCK)
      bad |= ((p[b] & 0xAA) & ~((p[b] & 0x55) << 1)) != 0;
  } else if (kind == K_FP16 || kind == K_BF16) {
    const unsigned mb = kind == K_FP16 ? 10 : 7;
    const uint16_t e = (uint16_t) ((kind == K_FP16 ? 0x1fu : 0xffu) << mb);
    const uint8_t *p = buf + Q_HDR;
    for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (size_t) gridDim.x * BLOCK) {
      uint16_t h = (uint16_t) (p[2 * i] | (p[2 * i + 1] << 8));
      bad |= (h & e) == e && (h & ((1u << mb) - 1)) != 0;
    }
  }
  flag_block_nonfinite(bad, &d->bad);
}

__global__ void __launch_bounds__(BLOCK)
quant_add(const uint8_t *buf, size_t n, int kind, float scale, float *y, const Dec *d)
{
  if (d->status != GC_SUCCESS || d->bad)
    return;
  float a = scale;
  if (kind == K_SCALED_SIGN || kind == K_TERNGRAD)
    a = __fmul_rn(scale, get_f32(buf + Q_HDR));
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    float v;
    switch (kind) {
    case K_IDENTITY:
      v = __fmul_rn(scale, get_f32(buf + Q_HDR + 4 * i));
      break;
    case K_SIGN:
    case K_SCALED_SIGN: {
      const uint8_t *p = buf + Q_HDR + (kind == K_SCALED_SIGN ? 4 : 0);
      v = (p[i >> 3] >> (i & 7)) & 1 ? -a : a;
      break;
    }
    case K_TERNGRAD: {
      unsigned code = (buf[Q_HDR + 4 + (i >> 2)] >> (2 * (i & 3))) & 3u;
      v = code == 1 ? a : code == 3 ? -a : 0.0f;
      break;
    }
    default: {   /* fp16, bf16: the half widened exactly, then scaled */
      uint16_t h = (uint16_t) (buf[Q_HDR + 2 * i] | (buf[Q_HDR + 2 * i + 1] << 8));
      float w = kind == K_FP16 ? __half2float(__ushort_as_half(h))
                               : __uint_as_float((uint32_t) h << 16);
      v = __fmul_rn(scale, w);
      break;
    }
    }
    y[i] = __fadd_rn(y[i], v);
  }
}

__global__ void dec_finish(const Dec *d, gc_cuda_info *info)
{
  const int32_t st = d->status != GC_SUCCESS ? d->status : d->bad ? GC_ECORRUPT : GC_SUCCESS;
  info->status = st;
  info->selected = st == GC_SUCCESS ? d->c : 0;
  info->nnz = 0;
  info->loops = 0;
  info->len = 0;
}

} /* namespace */

extern "C" int gc_cuda_decompress_add_f32(const gc_compressor *c, void *d_tmp,
                                          size_t *tmp_bytes, const uint8_t *d_buf, size_t len,
                                          uint32_t step, float scale, float *d_y,
                                          gc_cuda_info *d_info, cudaStream_t stream)
{
  const gc_compressor_type *T = gc_compressor_type_of(c);
  const gc_compressor_params *p = gc_compressor_get_params(c);
  const size_t n = gc_compressor_n(c), k = gc_compressor_k(c);
  const Kind kind = kind_of(T);
  if (kind == K_NONE)
    GC_ERRORF(GC_EUNSUP, "no GPU decoder for compressor '%s'", T->name);
  const bool sparse = kind <= K_DGC;
  /* a valid message may carry any count up to n (the CPU checks no more) */
  const size_t cap = kind == K_RANDKU ? k : n;
  Carver cv(d_tmp);
  Dec *d = cv.take<Dec>(1);
  uint32_t *idx = sparse ? cv.take<uint32_t>(cap) : nullptr;
  /* randk-unbiased: the indices are redrawn as the encoder drew them */
  float *rval = kind == K_RANDKU ? cv.take<float>(k) : nullptr;
  gc_cuda_info *rinfo = kind == K_RANDKU ? cv.take<gc_cuda_info>(1) : nullptr;
  size_t rbytes = 0;
  if (kind == K_RANDKU)
    GC_TRY(gc_cuda_randk_f32(NULL, &rbytes, d_y, n, k, p->seed, p->stream, step, 0, idx, rval,
                             rinfo, stream));
  void *rtmp = cv.take<char>(rbytes);
  if (!d_tmp) {
    *tmp_bytes = cv.bytes();
    return GC_SUCCESS;
  }
  if (*tmp_bytes < cv.bytes())
    GC_ERRORF(GC_EINVAL, "%s: scratch of %zu bytes, %zu needed", T->name, *tmp_bytes,
              cv.bytes());
  static const uint8_t types[] = {0, GC__WIRE_TOPK, GC__WIRE_RANDK, GC__WIRE_RANDKU,
                                  GC__WIRE_THRESHOLD, GC__WIRE_GAUSSK, GC__WIRE_DGC};
  if (sparse) {
    if (kind == K_RANDKU)   /* it gathers y at the picks; rval and rinfo are unused */
      GC_TRY(gc_cuda_randk_f32(rtmp, &rbytes, d_y, n, k, p->seed, p->stream, step, 0, idx,
                               rval, rinfo, stream));
    sparse_check<<<1, CHECK_BLOCK, 0, stream>>>(d_buf, len, n, types[kind], kind == K_RANDKU,
                                                k, idx, d);
    GC_CUDA_LAUNCHED();
    sparse_add<<<grid_for(cap, BLOCK, 4096), BLOCK, 0, stream>>>(d_buf, idx, cap, scale, d_y,
                                                                 d);
    GC_CUDA_LAUNCHED();
  } else if (kind == K_QSGD) {
    const size_t bucket = p->bucket && p->bucket < n ? p->bucket : n;
    qsgd_decode<<<1, 1, 0, stream>>>(d_buf, len, n, bucket, p->levels, scale, d_y, d);
    GC_CUDA_LAUNCHED();
  } else {
    const unsigned grid = grid_for(n, BLOCK * 4, 8192);
    quant_check<<<1, 1, 0, stream>>>(d_buf, len, n, (int) kind, d);
    GC_CUDA_LAUNCHED();
    quant_scan<<<grid, BLOCK, 0, stream>>>(d_buf, n, (int) kind, d);
    GC_CUDA_LAUNCHED();
    quant_add<<<grid, BLOCK, 0, stream>>>(d_buf, n, (int) kind, scale, d_y, d);
    GC_CUDA_LAUNCHED();
  }
  dec_finish<<<1, 1, 0, stream>>>(d, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}
