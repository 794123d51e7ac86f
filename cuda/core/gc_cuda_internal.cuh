/* gc_cuda_internal.cuh -- helpers shared by the .cu files of cuda/ (not
 * installed): scratch carving, launch checks, magnitude keys. */
#ifndef GC_CUDA_INTERNAL_CUH
#define GC_CUDA_INTERNAL_CUH
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

#include "gc_cuda.h"

/* Every launch is followed by this (UCC's rule): a bad configuration is
 * reported at once instead of at the next synchronising call. */
#define GC_CUDA_LAUNCHED() GC_CUDA_TRY(cudaGetLastError())

namespace gc_cuda {

enum { BLOCK = 256, ITEMS = 16, TILE = BLOCK * ITEMS };

/* Scratch is carved in 256-byte aligned pieces.  The same sequence of take()
 * calls runs twice: once with base == NULL to size it, once to place it. */
struct Carver {
  char *base;
  size_t off;
  explicit Carver(void *b) : base(static_cast<char *>(b)), off(0) {}
  template <class T> T *take(size_t count)
  {
    size_t o = (off + 255) & ~(size_t) 255;
    off = o + count * sizeof(T);
    return base ? reinterpret_cast<T *>(base + o) : nullptr;
  }
  size_t bytes() const { return (off + 255) & ~(size_t) 255; }
};

/* |x| as an integer key: for finite floats the order of the key is the
 * order of |x|, and -0/+0 share key 0, so they tie as the CPU's fabsf
 * comparison does.  Keys >= 0x7f800000 are Inf or NaN. */
__device__ __forceinline__ uint32_t mag_key(float x)
{
  return __float_as_uint(x) & 0x7fffffffu;
}
enum : uint32_t { KEY_INF = 0x7f800000u };

/* NaN or Inf (the CPU's !(|x| <= REAL_MAX)), as an integer test. */
__device__ __forceinline__ bool nonfinite(float x) { return mag_key(x) >= KEY_INF; }

/* OR a block's NaN/Inf finding into *flag: one atomic per block that saw
 * one.  A barrier: every thread of the block must call it, with its own
 * `bad`, and the flag may be read only by a later kernel. */
__device__ __forceinline__ void flag_block_nonfinite(int bad, uint32_t *flag)
{
  if (__syncthreads_or(bad) && threadIdx.x == 0)
    atomicOr(flag, 1u);
}

static inline unsigned grid_for(size_t n, unsigned per_block, unsigned cap)
{
  size_t g = (n + per_block - 1) / per_block;
  if (g < 1)
    g = 1;
  return (unsigned) (g < cap ? g : cap);
}

static inline size_t tiles_of(size_t n) { return (n + TILE - 1) / TILE; }

/* The device twin of a compressor type (wire.cu's slot table); K_NONE when
 * it has none. */
enum Kind { K_NONE, K_TOPK, K_RANDK, K_RANDKU, K_THRESHOLD, K_GAUSSK, K_DGC, K_IDENTITY,
            K_SIGN, K_SCALED_SIGN, K_QSGD, K_TERNGRAD, K_FP16, K_BF16 };
Kind kind_of(const gc_compressor_type *T);

/* lib/compress/quant.c's header and tags (private to quant.c, so repeated here; the
 * tests compare whole messages, which pins them). */
enum { Q_HDR = 2, T_IDENTITY = 0xD0, T_SIGN = 0xD1, T_SCALED_SIGN = 0xD2, T_QSGD = 0xD3,
       T_TERNGRAD = 0xD4, T_FP16 = 0xD5, T_BF16 = 0xD6, PREC32 = 32 };

} /* namespace gc_cuda */

/* Shared between select.cu (compaction) and the encoders. */
namespace gc_cuda {
/* Radix-select / threshold progress, in device scratch. */
struct SelState {
  uint32_t prefix, mask, krem; /* radix select: fixed high bits, k left   */
  uint32_t T;                  /* key of the k-th largest |x|             */
  uint32_t eq_total, rem;      /* entries with key T, and how many win    */
  uint32_t bad;                /* NaN or Inf seen                         */
  uint32_t count;              /* last threshold count (gaussk, dgc)      */
  uint32_t done, loops;        /* threshold adaptation                    */
  uint32_t rescan;             /* dgc: the next count pass is wanted      */
  uint32_t radix_off;          /* radix passes return at once (dgc keeps
                                  them off unless it needs an exact top-k) */
  uint32_t rescale;            /* gaussk: the sums left their range       */
  uint32_t amax;               /* gaussk: max |x| as a mag_key            */
  double thr;                  /* current threshold (gaussk, dgc)         */
  double thr_sel;              /* threshold of the last evaluation        */
  uint64_t total;              /* packed totals of the tile scan          */
};
} /* namespace gc_cuda */

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
namespace {
/* Exclusive scan of per-tile counts in place (one block, fixed order, so
 * deterministic); the grand total goes to *total. */
__global__ void __launch_bounds__(1024)
scan_tiles(uint64_t *tiles, size_t ntiles, uint64_t *total)
{
  typedef cub::BlockScan<uint64_t, 1024> Scan;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ uint64_t carry;
  if (threadIdx.x == 0)
    carry = 0;
  __syncthreads();
  for (size_t base = 0; base < ntiles; base += 1024) {
    size_t i = base + threadIdx.x;
    uint64_t v = i < ntiles ? tiles[i] : 0, ex, agg;
    Scan(tmp).ExclusiveSum(v, ex, agg);
    if (i < ntiles)
      tiles[i] = carry + ex;
    __syncthreads();
    if (threadIdx.x == 0)
      carry += agg;
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *total = carry;
}

/* Second step of the fixed-grid double sums (gc_cuda_norms_f32):
 * *out[q] = the sum of the np per-block partials part[q * np ...], q < Q, in
 * one block and a fixed order; a null out[q] is skipped. */
template <int Q>
__global__ void __launch_bounds__(gc_cuda::BLOCK)
sum_partials(const double *part, unsigned np, double *o0, double *o1, double *o2)
{
  typedef cub::BlockReduce<double, gc_cuda::BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  double *out[3] = {o0, o1, o2};
  for (int q = 0; q < Q; q++) {
    double v = 0;
    for (unsigned i = threadIdx.x; i < np; i += gc_cuda::BLOCK)
      v += part[q * np + i];
    double r = Reduce(tmp).Sum(v);
    if (threadIdx.x == 0 && out[q])
      *out[q] = r;
    __syncthreads();
  }
}
/* ---- the pairwise tree of block partials --------------------------------
 * Gaussian-k's mean/std and TernGrad's clip bound are sums over blocks of
 * SUM_BLOCK entries whose partials p[0..m) are combined, exactly as the CPU
 * combines them, by the level-by-level tree
 *     while m > 1: p[i] = p[2i] + p[2i+1] (i < m/2), odd m carries p[m-1]
 *     to p[m/2], m = (m+1)/2.
 * An aligned group of 2^L partials is reduced by the first L levels as if
 * it stood alone (an incomplete last group too: its pairs and carries fall
 * at the same places), so the tree is evaluated in groups of TREE_GROUP per
 * block and again over the group results: the same additions in the same
 * order, whatever the grid. */
enum { SUM_BLOCK = 1024, TREE_GROUP = 1024 };

/* out[q * mo + g] = tree of in[q * m + g * TREE_GROUP ...] (at most
 * TREE_GROUP of them), q < Q.  Level w adds s[a + w] into s[a] for a a
 * multiple of 2w: the compacted tree above, with entries left in place. */
template <int Q>
__global__ void __launch_bounds__(TREE_GROUP / 2)
tree_groups(const double *in, size_t m, double *out, size_t mo)
{
  __shared__ double s[Q][TREE_GROUP];
  const size_t g0 = (size_t) blockIdx.x * TREE_GROUP;
  const unsigned cnt = (unsigned) (m - g0 < TREE_GROUP ? m - g0 : TREE_GROUP);
  for (int q = 0; q < Q; q++)
    for (unsigned i = threadIdx.x; i < cnt; i += blockDim.x)
      s[q][i] = in[q * m + g0 + i];
  __syncthreads();
  for (unsigned w = 1; w < cnt; w <<= 1) {
    for (unsigned a = 2 * w * threadIdx.x; a + w < cnt; a += 2 * w * blockDim.x)
      for (int q = 0; q < Q; q++)
        s[q][a] = __dadd_rn(s[q][a], s[q][a + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int q = 0; q < Q; q++)
      out[q * mo + blockIdx.x] = s[q][0];
}

/* out[q] = the tree total of part[q * m .. q * m + m), q < Q.  part is
 * overwritten; spare holds Q * ceil(m / TREE_GROUP) doubles. */
template <int Q>
int pairwise_total(double *part, double *spare, size_t m, double *out, cudaStream_t stream)
{
  double *src = part, *dst = spare;
  while (m > TREE_GROUP) {
    size_t mo = (m + TREE_GROUP - 1) / TREE_GROUP;
    tree_groups<Q><<<(unsigned) mo, TREE_GROUP / 2, 0, stream>>>(src, m, dst, mo);
    GC_CUDA_LAUNCHED();
    double *t = src;
    src = dst;
    dst = t;
    m = mo;
  }
  tree_groups<Q><<<1, TREE_GROUP / 2, 0, stream>>>(src, m, out, 1);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

/* Doubles of spare storage pairwise_total needs for m partials (per q). */
static inline size_t tree_spare(size_t m) { return (m + TREE_GROUP - 1) / TREE_GROUP; }

} /* namespace */

#endif /* GC_CUDA_INTERNAL_CUH */
