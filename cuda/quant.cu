/* quant.cu -- elementwise quantizers (sign, fp16, bf16), deterministic
 * norms, and the device/info helpers. */
#include <stdio.h>
#include <string.h>

#include <cub/block/block_reduce.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gc_cuda_internal.cuh"

using namespace gc_cuda;

namespace {

/* One thread per output byte: 8 consecutive entries, bit j set iff
 * x_{8b+j} < 0 (quant.c: 1 = negative).  sign(0) = sign(-0) = +1 as in
 * GRACE, so the test is a comparison, not the IEEE sign bit. */
__global__ void __launch_bounds__(BLOCK)
pack_sign(const float *__restrict__ x, size_t n, uint8_t *bits, uint32_t *bad)
{
  size_t nb = (n + 7) / 8;
  int b_any = 0;
  for (size_t b = (size_t) blockIdx.x * BLOCK + threadIdx.x; b < nb;
       b += (size_t) gridDim.x * BLOCK) {
    unsigned byte = 0;
    for (unsigned j = 0; j < 8; j++) {
      size_t i = b * 8 + j;
      if (i < n) {
        float v = x[i];
        b_any |= mag_key(v) >= KEY_INF;
        byte |= (unsigned) (v < 0.0f) << j;
      }
    }
    bits[b] = (uint8_t) byte;
  }
  if (__syncthreads_or(b_any) && threadIdx.x == 0)
    atomicOr(bad, 1u);
}

__global__ void sign_finish(uint32_t *bad, size_t n, gc_cuda_info *info)
{
  info->status = *bad ? GC_EDOM : GC_SUCCESS;
  info->selected = *bad ? 0 : (uint32_t) n;
  info->nnz = *bad ? 0 : (uint32_t) n;
  info->loops = 0;
  info->len = (n + 7) / 8;
  *bad = 0;
}

/* binary16 (BF false) or bfloat16 (BF true) bit patterns. */
template <bool BF>
__global__ void __launch_bounds__(BLOCK)
to_16(const float *__restrict__ x, size_t n, uint16_t *h)
{
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK)
    h[i] = BF ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i]))
              : __half_as_ushort(__float2half_rn(x[i]));
}

template <bool BF>
int convert_16(const float *d_x, size_t n, uint16_t *d_h, cudaStream_t stream)
{
  if (n == 0)
    GC_ERRORF(GC_EBADLEN, "%s: empty vector (n = 0)", BF ? "bf16" : "fp16");
  to_16<BF><<<grid_for(n, BLOCK * 4, 8192), BLOCK, 0, stream>>>(d_x, n, d_h);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

enum { NORM_BLOCKS = 1024 };

/* Partial sums per block in double; the grid is fixed, so each block's
 * share of x and the reduction tree are fixed: deterministic. */
__global__ void __launch_bounds__(BLOCK)
norm_partials(const float *__restrict__ x, size_t n, double *part)
{
  typedef cub::BlockReduce<double, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  double l1 = 0, l2 = 0, s = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    double v = x[i];
    l1 += fabs(v);
    l2 += v * v;
    s += v;
  }
  double r;
  r = Reduce(tmp).Sum(l1);
  if (threadIdx.x == 0) part[blockIdx.x] = r;
  __syncthreads();
  r = Reduce(tmp).Sum(l2);
  if (threadIdx.x == 0) part[gridDim.x + blockIdx.x] = r;
  __syncthreads();
  r = Reduce(tmp).Sum(s);
  if (threadIdx.x == 0) part[2 * gridDim.x + blockIdx.x] = r;
}

} /* namespace */

extern "C" int gc_cuda_available(char *why, size_t cap)
{
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  const char *reason = NULL;
  if (e != cudaSuccess)
    reason = cudaGetErrorString(e);
  else if (count == 0)
    reason = "no CUDA-capable device is detected";
  if (!reason) {
    if (why && cap)
      why[0] = 0;
    return GC_SUCCESS;
  }
  if (why && cap)
    snprintf(why, cap, "%s", reason);
  (void) cudaGetLastError();   /* clear the sticky-free error state */
  return GC_ECUDA;
}

extern "C" int gc_cuda_info_sync(const gc_cuda_info *d_info, gc_cuda_info *h_info,
                                 cudaStream_t stream)
{
  GC_CUDA_TRY(cudaMemcpyAsync(h_info, d_info, sizeof *h_info, cudaMemcpyDeviceToHost, stream));
  GC_CUDA_TRY(cudaStreamSynchronize(stream));
  return h_info->status;
}

extern "C" int gc_cuda_sign_f32(const float *d_x, size_t n, uint8_t *d_bits,
                                gc_cuda_info *d_info, cudaStream_t stream)
{
  if (n == 0)
    GC_ERROR("sign: empty vector (n = 0)", GC_EBADLEN);
  /* the NaN flag lives in the info's `loops` word until sign_finish */
  uint32_t *bad = &d_info->loops;
  GC_CUDA_TRY(cudaMemsetAsync(bad, 0, sizeof *bad, stream));
  pack_sign<<<grid_for((n + 7) / 8, BLOCK, 4096), BLOCK, 0, stream>>>(d_x, n, d_bits, bad);
  GC_CUDA_LAUNCHED();
  sign_finish<<<1, 1, 0, stream>>>(bad, n, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

extern "C" int gc_cuda_fp16_f32(const float *d_x, size_t n, uint16_t *d_h, cudaStream_t stream)
{
  return convert_16<false>(d_x, n, d_h, stream);
}

extern "C" int gc_cuda_bf16_f32(const float *d_x, size_t n, uint16_t *d_h, cudaStream_t stream)
{
  return convert_16<true>(d_x, n, d_h, stream);
}

extern "C" int gc_cuda_norms_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                                 size_t n, double *d_l1, double *d_l2sq, double *d_sum,
                                 cudaStream_t stream)
{
  unsigned grid = grid_for(n, BLOCK * 16, NORM_BLOCKS);
  Carver cv(d_tmp);
  double *part = cv.take<double>(3 * (size_t) grid);
  if (!d_tmp) {
    *tmp_bytes = cv.bytes();
    return GC_SUCCESS;
  }
  if (n == 0)
    GC_ERROR("norms: empty vector (n = 0)", GC_EBADLEN);
  norm_partials<<<grid, BLOCK, 0, stream>>>(d_x, n, part);
  GC_CUDA_LAUNCHED();
  sum_partials<3><<<1, BLOCK, 0, stream>>>(part, grid, d_l1, d_l2sq, d_sum);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}
