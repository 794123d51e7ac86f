/* norms.cu -- deterministic norms and the device/info helpers.  The
 * quantizers' messages (sign, fp16, bf16, ...) are written by wire.cu. */
#include <stdio.h>
#include <string.h>

#include <cub/block/block_reduce.cuh>

#include "gc_cuda_internal.cuh"

using namespace gc_cuda;

namespace {

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
