/* cmd_train.c -- `gradcomp train`: data-parallel training of the reference
 * models (theory.md section 6) through the algorithm layer.  Its options,
 * help and --config file are train_options.c's (gc_train_options.h); here
 * the command: the run in one process or under mpirun, the signals and
 * stop records of an MPI job, the report. */
#define _POSIX_C_SOURCE 200809L   /* sigaction */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_train_options.h"
#include "gc_train_run.h"
#ifdef HAVE_MPI
#include "gc_transport_mpi.h"
#endif

static void announce(const gc_train_opts *o)
{
  const gc_train_config *c = &o->c;
  if (c->quiet)
    return;
  fprintf(stderr, "gradcomp train: %s on %s (%s), P=%zu, %s/%s %s=%g, lr=%g,"
          " B=%zu, %zu epochs%s -> %s\n", gc_train_config_model(c), c->dataset,
          c->device ? c->device->name : "cpu", c->workers,
          c->algorithm, c->compressor,
          strcmp(c->compressor, "powersgd") ? "rho" : "rank",
          strcmp(c->compressor, "powersgd") ? c->density : (double) c->rank,
          c->lr, c->batch, c->epochs, o->transport->launched ? ", over MPI" : "", c->out);
}

/* The exit status of a finished run, with its message. */
static int report(const gc_train_opts *o, int st, const gc_train_result *res)
{
  /* the library checks the configuration (model/data set, P, B, names):
   * its GC_EINVAL is a bad command line, not a failed run */
  if (st == GC_EINVAL)
    return gc_cli_usage_error("train", "invalid options: %s", gc_last_error());
  if (st == GC_EDIVERGE)
    return gc_cli_fail("train", st, "stopped; rows so far are in %s/log.csv",
                       o->c.out);
  if (st) {
    /* a data file that is missing or bad: say where the folder came from */
    int data = strstr(gc_last_error(), o->c.data_dir) != NULL;
    int rc = gc_cli_fail("train", st, "failed");
    if (data)
      gc_cli_data_hint("train", o->c.data_dir, o->data_from);
    return rc;
  }
  if (!o->c.quiet)
    fprintf(stderr, "gradcomp train: %zu epochs, %zu steps, test accuracy %.4f,"
            " %.1f s per epoch; log in %s/log.csv\n", res->epochs_done,
            res->steps_done, res->test_acc, res->epoch_seconds, o->c.out);
  return 0;
}

#ifdef HAVE_MPI
/* ---- --transport mpi -----------------------------------------------------
 * Every rank parses the same options and runs gc_train_run on its own
 * nodes (gc_train.h, gc_train_config.transport).  A rank that fails, or whose
 * watchdog finds another rank silent (gc_transport_mpi.h), names itself,
 * the epoch, the step and the cause, on stderr and in its stop record,
 * and aborts the job (the others would wait for its messages); a
 * configuration error is every rank's, reported by rank 0.
 *
 * Stop records: rank 0 writes <out>/stopped.txt, worker rank R
 * <out>/stopped-rR.txt, each its own file so that no rank overwrites what
 * another knows: rank 0's may die with SIGKILL, and then the workers'
 * records still say where the run was.  A finished run removes them. */

static volatile sig_atomic_t where[2];   /* epoch, steps (gc_train_config) */
/* 1 once this rank wrote its own failure: the job's end adds nothing */
static volatile sig_atomic_t recorded;
static char stop_head[200];              /* "gradcomp train: rank R (...)" */
static char term_note[1200];
static char stop_file[1100];             /* <out>/stopped.txt, -rR.txt */
static char stop_tmp[1110];              /* written, then renamed to it */

/* Decimal digits of v at out (async-signal-safe); returns the end. */
static char *put_u(char *out, unsigned long v)
{
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char) ('0' + v % 10);
    v /= 10;
  } while (v);
  while (n)
    *out++ = tmp[--n];
  return out;
}

/* This rank's stop record: "... during epoch E at step S" and the note,
 * at msg (1600 bytes); returns its length.  Async-signal-safe. */
static size_t stop_record(char *msg)
{
  static const char a[] = " stopped by the job's end during epoch ";
  static const char b[] = " at step ";
  size_t h = strlen(stop_head);
  char *p = msg;
  memcpy(p, stop_head, h);
  memcpy(p + h, a, sizeof a - 1);
  p = put_u(p + h + sizeof a - 1, (unsigned long) where[0]);
  memcpy(p, b, sizeof b - 1);
  p = put_u(p + sizeof b - 1, (unsigned long) where[1]);
  size_t n = strlen(term_note);
  memcpy(p, term_note, n);
  return (size_t) (p - msg) + n;
}

/* Written aside and renamed over the record, so that a SIGKILL in the
 * middle leaves the earlier record whole. */
static void write_stop_file(const char *msg, size_t len)
{
  int fd = open(stop_tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return;
  int ok = write(fd, msg, len) == (ssize_t) len;
  if (close(fd) == 0 && ok)
    rename(stop_tmp, stop_file);
}

/* mpirun ends a job whose rank died or aborted with SIGCONT, SIGTERM a
 * second later, then SIGKILL, which at times follows SIGTERM within
 * microseconds, before a handler runs.  So every rank writes where the
 * run was to its stop record at SIGCONT already (a job-control SIGCONT
 * only leaves the file, which a finished run removes), and at SIGTERM
 * again, then to stderr beside mpirun's line naming the rank that died,
 * and ends.  A rank that wrote its own failure keeps that record. */
static void on_stop(int sig)
{
  if (!recorded) {
    char msg[1600];
    size_t len = stop_record(msg);
    write_stop_file(msg, len);
    if (sig == SIGTERM) {
      ssize_t w = write(STDERR_FILENO, "\n", 1);
      w = write(STDERR_FILENO, msg, len);
      (void) w;
    }
  }
  if (sig == SIGTERM)
    _exit(128 + sig);
}

/* This rank failed (its watchdog included): the message on stderr and in
 * its stop record, where the signals of the job's end no longer write. */
static int record_failure(const gc_train_opts *o)
{
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGCONT);
  sigprocmask(SIG_BLOCK, &block, &old);
  recorded = 1;
  sigprocmask(SIG_SETMASK, &old, NULL);
  char msg[2400];
  snprintf(msg, sizeof msg, "%s ended the job during epoch %ld at step %ld: "
           "%s; the rows of %s/log.csv and the checkpoint of the last "
           "finished epoch are kept; continue with the same options and "
           "--resume%s\n", stop_head, (long) where[0], (long) where[1],
           gc_last_error(), o->c.out,
           strstr(gc_last_error(), "MPI watchdog") ? " (or a longer "
           "--mpi-timeout, if that rank was only slow)" : "");
  fputs(msg, stderr);
  write_stop_file(msg, strlen(msg));
  return 1;
}

static int mpi_end(int rc)
{
  MPI_Finalize();
  return rc;
}

static int train_mpi(gc_train_opts *o)
{
  gc_train_config *c = &o->c;
  size_t P = c->workers;
  if (gc_cli_launcher_size(NULL) == 0)
    return gc_cli_usage_error("train", "--transport mpi: not started by "
                              "mpirun; run it as mpirun -n %zu (P+1) gradcomp"
                              " train ...", P + 1);
  if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
    return gc_cli_fail("train", 0, "--transport mpi: MPI_Init failed");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* each rank reports its own errors, naming itself */
  gc_set_error_handler_off();
  if (rank == 0)
    announce(o);
  gc_algo_config a;
  gc_segment *segs = NULL;
  if (gc_train_algo_config(c, &a, &segs) != GC_SUCCESS)
    return mpi_end(rank == 0 ? gc_cli_usage_error("train", "invalid options: "
                                                  "%s", gc_last_error()) : 2);
  gc_transport_link link;
  int ost = o->transport->open(&a, o->mpi_timeout_set ? o->mpi_timeout : -1, &link);
  free(segs);
  if (ost != GC_SUCCESS)
    return mpi_end(rank == 0 ? gc_cli_usage_error("train", "--transport %s: "
                                                  "%s; run it as mpirun -n %zu"
                                                  " (P+1)", o->transport->name,
                                                  gc_last_error(), P + 1) : 2);
  c->transport = link.tr;
  c->proc = rank;
  c->where = where;
  if (rank > 0) {
    c->quiet = 1;
    snprintf(stop_head, sizeof stop_head, "gradcomp train: rank %d (worker "
             "%d)", rank, rank - 1);
    snprintf(stop_file, sizeof stop_file, "%s/stopped-r%d.txt", c->out, rank);
  } else {
    snprintf(stop_head, sizeof stop_head, "gradcomp train: rank 0 (the "
             "server)");
    snprintf(stop_file, sizeof stop_file, "%s/stopped.txt", c->out);
  }
  snprintf(stop_tmp, sizeof stop_tmp, "%s.tmp", stop_file);
  snprintf(term_note, sizeof term_note, " (mpirun, or another rank's "
           "message, names the cause); the rows of %s/log.csv and the "
           "checkpoint of the last finished epoch are kept; continue with "
           "the same options and --resume\n", c->out);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);   /* one record at a time */
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaddset(&sa.sa_mask, SIGCONT);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGCONT, &sa, NULL);
  gc_train_result res;
  int st = gc_train_run(c, &res);
  if (st == GC_SUCCESS) {   /* a stop --resume has made good */
    unlink(stop_file);
    unlink(stop_tmp);
  }
  int rc;
  if (st == GC_SUCCESS || st == GC_EINVAL) {
    /* a bad configuration fails on every rank alike, before any message */
    rc = rank == 0 ? report(o, st, &res) : st == GC_SUCCESS ? 0 : 2;
  } else {
    if (rank == 0 && st == GC_EDIVERGE)
      rc = report(o, st, &res);   /* every rank's, with the same loss */
    else
      rc = record_failure(o);
    fflush(NULL);
    MPI_Abort(MPI_COMM_WORLD, rc);   /* the others wait on this rank */
  }
  o->transport->close(&link);
  return mpi_end(rc);
}
#endif


int gc_cmd_train(int argc, char **argv)
{
  gc_train_opts o;
  gc_train_opts_init(&o);
  argc--;   /* argv[0] is "train" */
  argv++;
  int st = gc_train_opts_parse(&o, argc, argv, NULL);
  if (st)
    return st < 0 ? 0 : st;
  char **cav = NULL;
  int cac = 0;
  if (o.config) {
    gc_train_opts f;
    gc_train_opts_init(&f);
    if ((st = gc_train_opts_read_config(o.config, &cav, &cac)))
      return st;
    st = gc_train_opts_parse(&f, cac, cav, o.config);
    if (st == 0) {
      /* command line on top of the file */
      f.config = o.config;
      st = gc_train_opts_parse(&f, argc, argv, NULL);
      f.lr_set |= o.lr_set;
      o = f;
    }
    if (st) {
      gc_train_opts_free_config(cav, cac);
      return st < 0 ? 0 : st;
    }
    o.c.config_file = o.config;
  }
  gc_cli_args cargs = GC_CLI_ARGS("train", "", gc_train_opts_usage, 0, NULL);
  if (gc_cli_compressor_finish(&cargs, &o.comp)) {
    gc_train_opts_free_config(cav, cac);
    return 2;
  }
  o.c.density = o.comp.up.density;
  o.c.density_down = o.comp.given_down & GC_CLI_P_DENSITY ? o.comp.down.density : 0;
  o.c.rank = o.comp.up.rank;
  o.c.up_params = &o.comp.up;      /* the other fields: K, levels, ... */
  o.c.down_params = &o.comp.down;
  const char *bad = o.c.epochs == 0 ? "--epochs must be at least 1"
                    : o.lr_set && !(o.c.lr > 0) ? "--lr must be positive"
                    : !(o.c.momentum >= 0 && o.c.momentum < 1) ? "--momentum must lie in [0, 1)"
                    : NULL;
  if (!bad && o.mpi_timeout_set && !o.transport->watchdog)
    bad = "--mpi-timeout applies only with --transport mpi";
  if (bad) {
    gc_train_opts_free_config(cav, cac);
    return gc_cli_usage_error("train", "%s", bad);
  }
  /* the transport is known only now, a --config file read (gradcomp.c's
   * main checks the other commands) */
  if ((st = gc_cli_refuse_launcher("train", o.transport->launched))) {
    gc_train_opts_free_config(cav, cac);
    return st;
  }
  char note[1000];
  snprintf(note, sizeof note, "the rows of %s/log.csv and the checkpoint of the"
           " last finished epoch are kept; continue with the same options and"
           " --resume", o.c.out);
  gc_cli_set_interrupt_note("train", note);
  const char *model = gc_train_config_model(&o.c);
  if (!o.lr_set)
    o.c.lr = gc_train_opts_tuned_lr(model, o.c.workers, o.c.algorithm);
  if ((o.net_bw != NULL) != (o.net_lat != NULL)) {
    gc_train_opts_free_config(cav, cac);
    return gc_cli_usage_error("train", "the network model needs both "
                              "--net-bandwidth and --net-latency");
  }
  if (o.net_bw)
    o.c.net = &o.net;
  o.c.data_dir = gc_cli_data_dir(o.c.data_dir, &o.data_from);
#ifdef HAVE_MPI
  if (o.transport->launched) {   /* mpi, the one launched transport */
    st = train_mpi(&o);
    gc_train_opts_free_config(cav, cac);
    return st;
  }
#endif
  announce(&o);
  gc_train_result res;
  st = gc_train_run(&o.c, &res);
  gc_train_opts_free_config(cav, cac);
  return report(&o, st, &res);
}
