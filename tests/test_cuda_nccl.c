/* test_cuda_nccl.c -- the NCCL pieces (gc_nccl.h) on one GPU: a compressed
 * message through allgather and broadcast comes out byte for byte and
 * decodes to the CPU's vector; reduce over one rank is the identity.
 * GPU tests skip without a device; argument errors run everywhere. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_compressor.h"
#include "gc_cuda.h"
#include "gc_errno.h"
#include "gc_nccl.h"
#include "gc_test.h"
#include "gc_test_cuda.h"

TestSuite(cuda_nccl, .init = gc_test_quiet);

/* Argument errors come back before NCCL is called (no communicator). */
Test(cuda_nccl, argument_errors)
{
  cr_assert(eq(int, gc_nccl_allgather_msgs(NULL, NULL, NULL, 0, NULL, NULL, 0), GC_EINVAL));
  cr_assert(eq(int, gc_nccl_broadcast_msg(NULL, 0, NULL, NULL, 0, 0), GC_EINVAL));
  cr_assert(eq(int, gc_nccl_reduce_f32(NULL, 0, NULL, NULL, 0, 0), GC_EINVAL));
}

Test(cuda_nccl, one_rank_round_trip)
{
  gc_test_require_gpu();
  enum { N = 10007 };
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.density = 0.01;
  gc_compressor *c = gc_compressor_alloc(gc_compressor_topk, N, &p);
  cr_assert(c != NULL);
  size_t cap = gc_compressor_max_bytes(c), len = 0, tmp = 0;
  float *x = malloc(N * sizeof *x), *y = calloc(N, sizeof *y), *got = malloc(N * sizeof *got);
  uint8_t *msg = malloc(cap), *gmsg = malloc(cap);
  cr_assert(x != NULL && y != NULL && got != NULL && msg != NULL && gmsg != NULL);
  gc_test_fill_normal_f32(x, N, 3);
  cr_assert(eq(int, gc_compress_f32(c, x, 0, msg, cap, &len, NULL), GC_SUCCESS));
  cr_assert(eq(int, gc_decompress_add_f32(c, msg, len, 0, 1.0f, y), GC_SUCCESS));

  ncclComm_t comm;
  cr_assert(eq(int, (int) ncclCommInitAll(&comm, 1, NULL), (int) ncclSuccess));
  float *d_x, *d_y, *d_sum;
  uint8_t *d_msg, *d_all;
  uint64_t *d_lens, h_len = 0;
  gc_cuda_info *d_info, h_info;
  void *d_tmp;
  GC_TEST_CUDA(cudaMalloc((void **) &d_x, N * sizeof *d_x));
  GC_TEST_CUDA(cudaMalloc((void **) &d_y, N * sizeof *d_y));
  GC_TEST_CUDA(cudaMalloc((void **) &d_sum, N * sizeof *d_sum));
  GC_TEST_CUDA(cudaMalloc((void **) &d_msg, cap));
  GC_TEST_CUDA(cudaMalloc((void **) &d_all, cap));
  GC_TEST_CUDA(cudaMalloc((void **) &d_lens, sizeof *d_lens));
  GC_TEST_CUDA(cudaMalloc((void **) &d_info, sizeof *d_info));
  GC_TEST_CUDA(cudaMemcpy(d_x, x, N * sizeof *x, cudaMemcpyHostToDevice));
  GC_TEST_CUDA(cudaMemset(d_y, 0, N * sizeof *d_y));
  cr_assert(eq(int, gc_cuda_compress_f32(c, NULL, &tmp, d_x, 0, d_msg, cap, d_info, 0),
               GC_SUCCESS));
  GC_TEST_CUDA(cudaMalloc(&d_tmp, tmp));
  cr_assert(eq(int, gc_cuda_compress_f32(c, d_tmp, &tmp, d_x, 0, d_msg, cap, d_info, 0),
               GC_SUCCESS));
  cr_assert(eq(int, gc_nccl_allgather_msgs(comm, d_msg, &d_info->len, cap, d_all, d_lens, 0),
               GC_SUCCESS));
  cr_assert(eq(int, gc_nccl_broadcast_msg(comm, 0, d_msg, &d_info->len, cap, 0), GC_SUCCESS));
  cr_assert(eq(int, gc_nccl_reduce_f32(comm, 0, d_x, d_sum, N, 0), GC_SUCCESS));
  cr_assert(eq(int, gc_cuda_info_sync(d_info, &h_info, 0), GC_SUCCESS));
  GC_TEST_CUDA(cudaMemcpy(&h_len, d_lens, sizeof h_len, cudaMemcpyDeviceToHost));
  cr_assert(eq(u64, h_len, (uint64_t) len));
  GC_TEST_CUDA(cudaMemcpy(gmsg, d_all, len, cudaMemcpyDeviceToHost));
  cr_assert(memcmp(gmsg, msg, len) == 0, "allgathered bytes");
  GC_TEST_CUDA(cudaMemcpy(gmsg, d_msg, len, cudaMemcpyDeviceToHost));
  cr_assert(memcmp(gmsg, msg, len) == 0, "broadcast bytes");
  GC_TEST_CUDA(cudaMemcpy(got, d_sum, N * sizeof *got, cudaMemcpyDeviceToHost));
  cr_assert(memcmp(got, x, N * sizeof *x) == 0, "reduce over one rank");
  /* the gathered slot decodes on the device to the CPU's vector */
  size_t dtmp_bytes = 0;
  void *d_dtmp;
  cr_assert(eq(int, gc_cuda_decompress_add_f32(c, NULL, &dtmp_bytes, d_all, len, 0, 1.0f, d_y,
                                               d_info, 0), GC_SUCCESS));
  GC_TEST_CUDA(cudaMalloc(&d_dtmp, dtmp_bytes));
  cr_assert(eq(int, gc_cuda_decompress_add_f32(c, d_dtmp, &dtmp_bytes, d_all, len, 0, 1.0f, d_y,
                                               d_info, 0), GC_SUCCESS));
  cr_assert(eq(int, gc_cuda_info_sync(d_info, &h_info, 0), GC_SUCCESS));
  GC_TEST_CUDA(cudaMemcpy(got, d_y, N * sizeof *got, cudaMemcpyDeviceToHost));
  cr_assert(memcmp(got, y, N * sizeof *y) == 0, "decoded slot");
  ncclCommDestroy(comm);
  cudaFree(d_dtmp);
  cudaFree(d_tmp);
  cudaFree(d_info);
  cudaFree(d_lens);
  cudaFree(d_all);
  cudaFree(d_msg);
  cudaFree(d_sum);
  cudaFree(d_y);
  cudaFree(d_x);
  free(x);
  free(y);
  free(got);
  free(msg);
  free(gmsg);
  gc_compressor_free(c);
}
