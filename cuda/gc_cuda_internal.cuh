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

static inline unsigned grid_for(size_t n, unsigned per_block, unsigned cap)
{
  size_t g = (n + per_block - 1) / per_block;
  if (g < 1)
    g = 1;
  return (unsigned) (g < cap ? g : cap);
}

static inline size_t tiles_of(size_t n) { return (n + TILE - 1) / TILE; }

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

/* Second step of the fixed-grid double sums (gc_cuda_norms_f32, Gaussian-k):
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
} /* namespace */

#endif /* GC_CUDA_INTERNAL_CUH */
