/* gc_transports.h -- the transports a command can run its steps over, by
 * --transport name (transports.c): the front end's commands and `bench
 * comm` look them up here. */
#ifndef GC_TRANSPORTS_H
#define GC_TRANSPORTS_H
#include <stdio.h>
#include "gc_algo.h"

/* One row per transport a command can run its steps over: its --transport
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

/* --mpi-timeout S: a number of seconds in [0, GC_MPI_TIMEOUT_MAX] at
 * *out, 0; else 2 after a message naming opt. */
int gc_mpi_timeout_option(const char *cmd, const char *opt, const char *val,
                          double *out);
#endif /* GC_TRANSPORTS_H */
