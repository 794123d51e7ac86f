/* gc_nccl.h -- NCCL collectives for compressed messages on several GPUs of
 * one node (issue #16 point 5; not wired into `gradcomp train` yet).
 *
 * Messages are the byte strings of gc_cuda_compress_f32 and have
 * data-dependent lengths, which live in device memory (gc_cuda_info.len):
 * every rank sends a fixed slot of cap bytes (cap >= the longest message,
 * e.g. gc_compressor_max_bytes) together with its length, so nothing
 * waits for the host.  Every call only enqueues on `stream`; NCCL errors
 * map to GC_ECUDA with ncclGetErrorString as the reason. */
#ifndef GC_NCCL_H
#define GC_NCCL_H
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
/* nccl.h declares some functions with () in C: not ours to fix */
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <nccl.h>
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Sparse allgather: rank r's message (d_len[0] bytes at d_msg, a slot of
 * cap bytes) lands at d_all + r * cap on every rank and its length at
 * d_lens[r]; d_all holds nranks * cap bytes, d_lens nranks.  Receivers
 * decode each slot with gc_cuda_decompress_add_f32 in rank order, so the
 * sum is the same on every rank.  GC_EINVAL for cap == 0. */
int gc_nccl_allgather_msgs(ncclComm_t comm, const uint8_t *d_msg, const uint64_t *d_len,
                           size_t cap, uint8_t *d_all, uint64_t *d_lens, cudaStream_t stream);

/* Parameter-server downlink: the root's message (slot of cap bytes and its
 * length) is copied to every rank, in place. */
int gc_nccl_broadcast_msg(ncclComm_t comm, int root, uint8_t *d_msg, uint64_t *d_len,
                          size_t cap, cudaStream_t stream);

/* Parameter-server uplink for dense vectors: d_sum on the root receives
 * the sum over ranks of d_x (n floats).  NCCL's reduction order is its
 * own: the sum is deterministic for a fixed ring but can differ from the
 * CPU simulator's in the last bits; the compressed path (allgather +
 * decode in rank order) is the bit-exact one. */
int gc_nccl_reduce_f32(ncclComm_t comm, int root, const float *d_x, float *d_sum, size_t n,
                       cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* GC_NCCL_H */
