/* gc_transport_cli.h -- the front end's side of the transports: the
 * options every command shares (--transport by the registry of
 * gc_transports.h, --mpi-timeout, --save-x, the network model's), and
 * `theory trajectory` over MPI (transport_cli.c).
 *
 * theory trajectory --transport mpi runs under `mpirun -n P+1`: rank 0 is
 * the server and writes everything (CSV, summary); rank p+1 is worker p,
 * steps only that worker and sends its probe values to rank 0 as a record
 * (gc_theory_run_alloc_transport), so no rank holds another's worker.  At
 * the end every rank checks that it holds rank 0's final iterate, and rank
 * 0 that the payload bytes sent, received and in the ledger agree. */
#ifndef GC_TRANSPORT_CLI_H
#define GC_TRANSPORT_CLI_H
#include <stddef.h>
#include "gc_algo.h"
#include "gc_theory.h"
#include "gc_transports.h"

typedef struct gc_transport_opts {
  const gc_transport_kind *kind;   /* --transport (NULL: inproc)      */
  const char *save_x;      /* --save-x FILE: the final iterate (.npy) */
  struct gc_traj_mpi *run; /* set by gc_trajectory_transport_begin   */
  const char *net_bw, *net_lat, *net_csv;   /* --net-bandwidth/-latency/-csv */
  gc_algo_config cfg;      /* the run's configuration (begin sets it) */
  double mpi_timeout;      /* --mpi-timeout (gc_mpi_set_timeout)      */
  int mpi_timeout_set;
} gc_transport_opts;

/* Take --transport, --mpi-timeout, --save-x and the network model's --net-bandwidth B
 * --net-latency L [--net-csv FILE]: 1 when opt is one of them (*err set
 * to 2 on a bad value, after a message), 0 otherwise. */
int gc_transport_option(const char *cmd, const char *opt, const char *val,
                        gc_transport_opts *o, int *err);
/* Before gc_theory_run_alloc_transport, on every rank: *tr is the
 * transport to run on (NULL: in-process) and *leader 1 where the rows are
 * written (in-process, or rank 0).  Returns -1 to go on, else the exit
 * status of a failed start (after a message). */
int gc_trajectory_transport_begin(gc_transport_opts *o, const gc_problem *prob,
                                  const gc_algo_config *cfg,
                                  const struct gc_transport **tr,
                                  int *leader);
/* At the end on every rank, after the results are closed: rc is the
 * run's exit status so far.  The leader writes --save-x, prints the
 * network model's time (gc_netmodel.h) and writes its per-step CSV
 * (step,bytes_up,bytes_down,net_s,net_cum_s); under MPI every rank takes
 * part in the final check.  Returns the final exit status; a failed run
 * under MPI aborts the job here, so the other ranks stop too. */
int gc_trajectory_transport_end(gc_transport_opts *o, gc_theory_run *r,
                                int rc);

#endif /* GC_TRANSPORT_CLI_H */
