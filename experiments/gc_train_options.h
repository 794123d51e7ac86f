/* gc_train_options.h -- the options of `gradcomp train` (train_options.c),
 * apart from the command (cmd_train.c) so that the config fuzz harness
 * links them.  Options may also come from a config file (--config FILE:
 * one "option value" per line, '#' comments, option names without the
 * dashes, a boolean option alone or with 1/0, true/false;
 * gc_train_opts_read_config); the command line wins.  Without --lr the
 * tuned learning rate of the reference runs is used when the (model, P,
 * algorithm) triple is in the table, else 0.05 (gc_train_opts_tuned_lr).
 * Built twice: gradcomp-cuda's copy (GC_CUDA_NETS) takes --device cuda
 * itself, gradcomp's hands it to gradcomp-cuda. */
#ifndef GC_TRAIN_OPTIONS_H
#define GC_TRAIN_OPTIONS_H
#include <stdio.h>
#include "gc_cli.h"
#include "gc_netmodel.h"
#include "gc_train.h"
#include "gc_transports.h"

/* What the command line (and a --config file) says. */
typedef struct gc_train_opts {
  gc_train_config c;
  int lr_set;
  char *config;
  const gc_transport_kind *transport;  /* --transport (inproc)        */
  double mpi_timeout;               /* --mpi-timeout                   */
  int mpi_timeout_set;
  const char *net_bw, *net_lat;     /* --net-bandwidth, --net-latency  */
  gc_net_model net;
  const char *data_from;            /* where c.data_dir came from      */
  gc_cli_comp comp;                 /* the compressor options          */
} gc_train_opts;

/* `gradcomp train --help`. */
void gc_train_opts_usage(FILE *out);

/* The defaults. */
void gc_train_opts_init(gc_train_opts *o);

/* Parse argv-style options into o (argv[0] is an option; from_file: those
 * of the --config file FILE, named in the messages); returns 0, -1 after
 * --help, or the exit status. */
int gc_train_opts_parse(gc_train_opts *o, int argc, char **argv,
                        const char *from_file);

/* The table's learning rate for (model, P, algo), else 0.05 (also for an
 * unknown algorithm, which gc_train_run then names). */
double gc_train_opts_tuned_lr(const char *model, size_t P, const char *algo);

/* Read the "key value" lines of the config file at path into an argv
 * ("--key value"), as many as its 64 KiB text holds: *argv_out [out]
 * (NULL-terminated), *argc_out [out].  Returns 0, or the exit status
 * after its message.  Every string of the array is its own allocation, so
 * gc_train_opts_free_config frees them all without guessing from their
 * text which ones it owns. */
int gc_train_opts_read_config(const char *path, char ***argv_out,
                              int *argc_out);
void gc_train_opts_free_config(char **av, int n);

#endif /* GC_TRAIN_OPTIONS_H */
