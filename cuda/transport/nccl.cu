/* nccl.cu -- gc_nccl.h: compressed messages over NCCL collectives. */
#include "gc_cuda.h"
#include "gc_nccl.h"

/* Map a failing NCCL call to GC_ECUDA and return it. */
#define GC_NCCL_TRY(call)                                                 \
  do {                                                                    \
    ncclResult_t gc_nccl_r_ = (call);                                     \
    if (gc_nccl_r_ != ncclSuccess) {                                      \
      gc_errorf(__FILE__, __LINE__, GC_ECUDA, "%s: %s", #call,            \
                ncclGetErrorString(gc_nccl_r_));                          \
      return GC_ECUDA;                                                    \
    }                                                                     \
  } while (0)

extern "C" int gc_nccl_allgather_msgs(ncclComm_t comm, const uint8_t *d_msg,
                                      const uint64_t *d_len, size_t cap, uint8_t *d_all,
                                      uint64_t *d_lens, cudaStream_t stream)
{
  if (cap == 0)
    GC_ERROR("message slot of 0 bytes", GC_EINVAL);
  /* one group: the two gathers are issued together, as one collective */
  GC_NCCL_TRY(ncclGroupStart());
  ncclResult_t a = ncclAllGather(d_len, d_lens, 1, ncclUint64, comm, stream);
  ncclResult_t b = ncclAllGather(d_msg, d_all, cap, ncclUint8, comm, stream);
  GC_NCCL_TRY(ncclGroupEnd());
  GC_NCCL_TRY(a);
  GC_NCCL_TRY(b);
  return GC_SUCCESS;
}

extern "C" int gc_nccl_broadcast_msg(ncclComm_t comm, int root, uint8_t *d_msg, uint64_t *d_len,
                                     size_t cap, cudaStream_t stream)
{
  if (cap == 0)
    GC_ERROR("message slot of 0 bytes", GC_EINVAL);
  GC_NCCL_TRY(ncclGroupStart());
  ncclResult_t a = ncclBroadcast(d_len, d_len, 1, ncclUint64, root, comm, stream);
  ncclResult_t b = ncclBroadcast(d_msg, d_msg, cap, ncclUint8, root, comm, stream);
  GC_NCCL_TRY(ncclGroupEnd());
  GC_NCCL_TRY(a);
  GC_NCCL_TRY(b);
  return GC_SUCCESS;
}

extern "C" int gc_nccl_reduce_f32(ncclComm_t comm, int root, const float *d_x, float *d_sum,
                                  size_t n, cudaStream_t stream)
{
  if (n == 0)
    GC_ERROR("vector of length 0", GC_EINVAL);
  GC_NCCL_TRY(ncclReduce(d_x, d_sum, n, ncclFloat32, ncclSum, root, comm, stream));
  return GC_SUCCESS;
}
