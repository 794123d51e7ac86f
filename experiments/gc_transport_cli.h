/* gc_transport_cli.h -- the front end's side of the transports: the
 * --transport flag, and `theory trajectory` over MPI (transport_cli.c).
 *
 * theory trajectory --transport mpi runs under `mpirun -n P+1`: rank 0 is
 * the server and writes everything (CSV, summary); rank p+1 is worker p
 * and evaluates only its own f_p.  The probes of theory/probe.c read every
 * worker's state, so rank 0 also steps a mirror of each worker; the MPI
 * transport checks every step that the bytes each rank sent equal its
 * mirror's, and at the end that every rank holds the same final iterate
 * and that the payload bytes sent, received and in the ledger agree. */
#ifndef GC_TRANSPORT_CLI_H
#define GC_TRANSPORT_CLI_H
#include <stddef.h>
#include "gc_algo.h"
#include "gc_theory.h"

typedef struct gc_transport_opts {
  int mpi;                 /* --transport mpi (default inproc)        */
  const char *save_x;      /* --save-x FILE: the final iterate (.npy) */
  struct gc_traj_mpi *run; /* set by gc_trajectory_transport_begin   */
  size_t n;                /* the run's dimension (begin sets it)     */
  const char *net_bw, *net_lat, *net_csv;   /* --net-bandwidth/-latency/-csv */
  gc_algo_config cfg;      /* the run's configuration (begin sets it) */
} gc_transport_opts;

/* Take --transport, --save-x and the network model's --net-bandwidth B
 * --net-latency L [--net-csv FILE]: 1 when opt is one of them (*err set
 * to 2 on a bad value, after a message), 0 otherwise. */
int gc_transport_option(const char *cmd, const char *opt, const char *val,
                        gc_transport_opts *o, int *err);
/* After gc_theory_run_alloc, on every rank.  inproc: nothing, returns -1.
 * mpi, rank 0: puts r's simulator on the MPI transport, returns -1.
 * mpi, worker rank: runs the worker's `steps` steps of lr and returns the
 * process's exit status (the caller then cleans up and exits with it). */
int gc_trajectory_transport_begin(gc_transport_opts *o, gc_theory_run *r,
                                  const gc_problem *prob,
                                  const gc_algo_config *cfg, double lr,
                                  size_t steps);
/* At the end on rank 0 (or in-process), after the results are closed:
 * rc is the run's exit status so far.  Writes --save-x, prints the
 * network model's time (gc_netmodel.h) and writes its per-step CSV
 * (step,bytes_up,bytes_down,net_s,net_cum_s), checks the ranks'
 * agreement (mpi) and returns the final exit status.  A failed run under
 * MPI aborts the job here, so the worker ranks stop too. */
int gc_trajectory_transport_end(gc_transport_opts *o, gc_theory_run *r,
                                int rc);

#endif /* GC_TRANSPORT_CLI_H */
