/* gc_transport_mpi.h -- the MPI transport of gc_transport.h (built where
 * configure found OpenMPI: HAVE_MPI).  A run of P workers uses P+1 ranks
 * of a communicator: rank 0 runs the server, rank p+1 worker p.
 *
 * Every message is a point-to-point MPI_Isend / MPI_Irecv of its bytes.
 * Parameter-server methods (sgd, uni, bi, downlink, doublesqueeze, ef21,
 * ef21-bc): each worker sends its uplink to rank 0 (rank 0 posts one
 * receive per worker and takes each message's length from MPI_Get_count),
 * rank 0 runs the server step and sends the downlink to each worker (its
 * length again the message's).  Dense and random-K allreduce travel the
 * same way: rank 0 sums in worker order 0..P-1, a fixed order
 * (MPI_Allreduce's is unspecified), while the ledger still counts what the
 * method's ring would send (gc_algo_record_step).  Allgather: each worker
 * sends its uplink to every other rank, then every rank runs the same
 * server step on the same bytes.  The payload bytes are the messages
 * themselves.  MPI errors are returned (MPI_ERRORS_RETURN on a duplicate
 * of the communicator) as GC_EMPI naming the call and step.
 *
 * The watchdog: every wait polls its requests (MPI_Testsome; after the
 * first 0.1 s with 1 ms sleeps, so a waiting rank does not spin) and gives
 * up after max(timeout, GC_MPI_TIMEOUT_STEPS x the slowest step this rank
 * has seen, timed from one uplink exchange to the next, the evaluation
 * between two epochs included), twice that when it waits on rank 0 (which
 * may itself be waiting that long on another worker): GC_EMPI naming the
 * silent rank(s), the message and the step; its pending receives are
 * cancelled.  The communicator is then unusable (a receive already under
 * way cannot be cancelled, and sends stay pending): end the job with
 * MPI_Abort (gc_mpi_free keeps its own receive buffer then). */
#ifndef GC_TRANSPORT_MPI_H
#define GC_TRANSPORT_MPI_H
#include <mpi.h>
#include "gc_transport.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

typedef struct gc_mpi gc_mpi;

/* comm must have cfg->workers + 1 ranks (GC_EMPI otherwise); collective
 * over comm.  NULL after reporting. */
gc_mpi *gc_mpi_alloc(MPI_Comm comm, const gc_algo_config *cfg);
void gc_mpi_free(gc_mpi *m);
/* The transport to give gc_sim_alloc_transport; valid while m lives. */
const gc_transport *gc_mpi_transport(const gc_mpi *m);
/* The watchdog's timeout in seconds (GC_MPI_TIMEOUT_DEFAULT until set,
 * gc_transport.h), in [0, GC_MPI_TIMEOUT_MAX]; 0 waits for ever.  GC_EINVAL otherwise (NaN included). */
int gc_mpi_set_timeout(gc_mpi *m, double seconds);
int gc_mpi_rank(const gc_mpi *m);
MPI_Comm gc_mpi_comm(const gc_mpi *m);   /* the duplicate */
/* Payload bytes this rank handed to MPI (its uplinks) and received:
 * uplinks as MPI_Get_count measured them (rank 0) or as Allgatherv
 * delivered them (allgather), and downlinks broadcast to it. */
void gc_mpi_bytes(const gc_mpi *m, uint64_t *up_sent, uint64_t *up_received,
                  uint64_t *down_received);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_TRANSPORT_MPI_H */
