/* gc_transport.h -- the seam under gc_sim_step (gc_algo.h).  One step is
 * composed once: the step counter, the workers' steps, the server step,
 * applying the downlink, the divergence check, the ledger and the timing.
 * A transport only moves the step's byte messages between the processes of
 * a run, so every transport runs the same worker and server functions on
 * the same bytes.  The in-process transport (gc_sim_alloc, no transport)
 * holds every node in one process and moves nothing; the MPI transport
 * (gc_transport_mpi.h) runs one node per rank.
 *
 * Every process holds the workers' model copy x and applies the downlink
 * to it, so each can evaluate gradients at x or report the model. */
#ifndef GC_TRANSPORT_H
#define GC_TRANSPORT_H
#include <stddef.h>
#include <stdint.h>
#include "gc_algo.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

/* The MPI transport's watchdog (gc_transport_mpi.h), here so that a
 * front end built without MPI states the same numbers: its timeout in
 * seconds unless set, the multiple of the slowest step a wait stretches
 * to, and the largest timeout taken (about 116 days; 0 turns it off). */
#define GC_MPI_TIMEOUT_DEFAULT 300.0
#define GC_MPI_TIMEOUT_STEPS 50
#define GC_MPI_TIMEOUT_MAX 1e7

/* Either call may be NULL where there is nothing to move (an allgather
 * transport, whose every process runs the server step, has no downlink). */
typedef struct gc_transport_type {
  const char *name;
  /* After this process's workers wrote their uplinks: up[p], up_len[p] are
   * set for the local workers p.  On return they are set for all P workers
   * in every process that runs the server step (up[p] may be repointed to
   * the transport's own buffers, valid until the next call). */
  int (*gather_up)(void *state, uint32_t step, const uint8_t **up,
                   size_t *up_len);
  /* After the server step (where it runs): down[0, *len) holds the
   * downlink there; on return it holds it in every process (down has
   * gc_algo_max_down_bytes capacity). */
  int (*bcast_down)(void *state, uint32_t step, uint8_t *down, size_t *len);
  /* Optional (NULL: the transport moves the step's messages only): a
   * driver's own fixed-size messages beside the step's, e.g. training's
   * BatchNorm statistics and losses.  gather_aux: buf + (p - worker_lo)
   * len holds local worker p's len bytes; on return the process that runs
   * the server step (an allgather transport: rank 0's process) holds all
   * P, worker p's at buf + p len (buf has P len bytes there).  bcast_aux:
   * that process's len bytes at buf to every process.  `step` only names
   * the step in errors. */
  int (*gather_aux)(void *state, uint32_t step, uint8_t *buf, size_t len);
  int (*bcast_aux)(void *state, uint32_t step, uint8_t *buf, size_t len);
} gc_transport_type;

typedef struct gc_transport {
  const gc_transport_type *type;
  void *state;            /* the transport's own, passed to its calls     */
  size_t worker_lo;       /* this process steps workers [lo, hi)          */
  size_t worker_hi;
  int server;             /* this process runs the server step            */
} gc_transport;

/* A driver over transport tr (copied): allocates only the local workers
 * and, where tr->server, the server; x0 as for gc_sim_alloc.  gc_sim_step
 * then reads grads[p] only for the local workers p; gc_sim_worker is NULL
 * for the others and gc_sim_server NULL where the server runs elsewhere.
 * The ledger is kept where the server runs (the other processes do not
 * see every uplink).  GC_EINVAL for a worker range outside [0, P). */
gc_sim *gc_sim_alloc_transport(const gc_algo_config *cfg, const void *x0,
                               const gc_transport *tr);
/* Wall seconds spent so far inside the transport's two calls. */
double gc_sim_comm_time(const gc_sim *s);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_TRANSPORT_H */
