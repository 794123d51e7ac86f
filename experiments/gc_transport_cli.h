/* gc_transport_cli.h -- the front end's side of the transports: the
 * registry of --transport names (transports.c), and `theory trajectory`
 * over MPI (transport_cli.c).
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

/* ---- the transports by name (transports.c) ---------------------------------
 * One row per transport a command can run its steps over: its --transport
 * name, help line, what a build lacks for it, and its constructor.  open
 * is collective over the job's processes: for the run's configuration
 * cfg (workers, n, compressors) it sets the link: tr the transport to give
 * gc_sim_alloc_transport (NULL: every worker and the server in this
 * process, gc_sim_alloc) and proc this process's index (0 runs the
 * server and writes the output); timeout, where >= 0, the watchdog's
 * seconds.  It returns GC_SUCCESS, or a status with the reason in
 * gc_last_error() (it prints nothing: each command reports in its way,
 * e.g. train from rank 0 only).  close frees what open made (the
 * launcher's job, MPI_Finalize or MPI_Abort, stays the command's). */
typedef struct gc_transport_link {
  const struct gc_transport *tr;
  int proc;
  void *impl;              /* the transport's own handle (gc_mpi *)    */
} gc_transport_link;
typedef struct gc_transport_kind {
  const char *name;        /* --transport NAME                          */
  const char *help;        /* its --help line                           */
  const char *missing;     /* NULL, or why this build has no such transport */
  int launched;            /* one process per rank, started by a launcher
                              (mpirun -n P+1)                           */
  int watchdog;            /* takes --mpi-timeout                       */
  int (*open)(const gc_algo_config *cfg, double timeout, gc_transport_link *l);
  void (*close)(gc_transport_link *l);
} gc_transport_kind;
/* The row named name, or NULL; the default (inproc); the names joined by
 * sep ("inproc, mpi"; a static buffer). */
const gc_transport_kind *gc_transport_kind_by_name(const char *name);
const gc_transport_kind *gc_transport_kind_default(void);
const char *gc_transport_kind_names(const char *sep);
/* --transport VAL: the row at *out and 0; else 2 after "gradcomp CMD:
 * --transport: unknown transport 'VAL' (inproc, mpi)" or, for one this
 * build lacks, "--transport VAL: <why>". */
int gc_transport_choose(const char *cmd, const char *val, const gc_transport_kind **out);
/* One line per transport, each after indent: "--transport NAME  help". */
void gc_transport_usage(FILE *out, const char *indent);

typedef struct gc_transport_opts {
  const gc_transport_kind *kind;   /* --transport (NULL: inproc)      */
  const char *save_x;      /* --save-x FILE: the final iterate (.npy) */
  struct gc_traj_mpi *run; /* set by gc_trajectory_transport_begin   */
  const char *net_bw, *net_lat, *net_csv;   /* --net-bandwidth/-latency/-csv */
  gc_algo_config cfg;      /* the run's configuration (begin sets it) */
  double mpi_timeout;      /* --mpi-timeout (gc_mpi_set_timeout)      */
  int mpi_timeout_set;
} gc_transport_opts;

/* --mpi-timeout S: a number of seconds in [0, GC_MPI_TIMEOUT_MAX] at
 * *out, 0; else 2 after a message naming opt. */
int gc_mpi_timeout_option(const char *cmd, const char *opt, const char *val,
                          double *out);
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
