/* gradcomp.c -- the command-line front end: `gradcomp SUBCOMMAND ...`,
 * git style.  Each subcommand lives in its own cmd_*.c file. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "gc_cli.h"
#include "gc_transport_cli.h"
#include "gc_errno.h"

struct subcommand {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
};

static const struct subcommand subcommands[] = {
  { "compress", gc_cmd_compress, "compress a .npy vector with any compressor; list compressors" },
  { "theory", gc_cmd_theory, "contraction constants, trajectories with xi/xi_bi probes, bounds" },
  { "train", gc_cmd_train, "train a neural net with compressed distributed SGD" },
  { "data", gc_cmd_data, "check or describe the data sets (MNIST, Fashion-MNIST, CIFAR-10)" },
  { "plot", gc_cmd_plot, "training curves of run folders: loss and accuracy vs epochs and bytes" },
  { "bench", gc_cmd_bench, "speed of compressors and training steps, as ratios to baselines" },
};

static void usage(FILE *out)
{
  fprintf(out, "usage: gradcomp SUBCOMMAND [OPTIONS]   (gradcomp SUBCOMMAND --help)\n\n"
               "gradcomp %s -- communication-compressed distributed SGD\n\n"
               "subcommands:\n", PACKAGE_VERSION);
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
    fprintf(out, "  %-9s %s\n", subcommands[i].name, subcommands[i].summary);
}

/* The command runs as one of a launcher's processes: --transport NAME of
 * a launched transport (train, theory trajectory; gc_transport_cli.h) or
 * bench comm's --under-mpirun. */
static int over_mpi(int argc, char **argv)
{
  for (int i = 2; i < argc; i++) {
    const gc_transport_kind *k = !strcmp(argv[i], "--transport") && i + 1 < argc
                                 ? gc_transport_kind_by_name(argv[i + 1]) : NULL;
    if ((k && k->launched) || !strcmp(argv[i], "--under-mpirun"))
      return 1;
  }
  return 0;
}

static int run(int argc, char **argv)
{
  /* Each subcommand reports a library failure itself, with the reason
   * (gc_cli_fail appends gc_last_error()); the default handler would print
   * it a second time. */
  gc_set_error_handler_off();
  gc_cli_short_omp_spin();
  if (gc_cli_start(argc > 1 ? argv[1] : "start"))
    return 1;
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("gradcomp %s\n", PACKAGE_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
    if (!strcmp(argv[1], subcommands[i].name)) {
      /* N copies under mpirun without MPI: refused before anything is
       * written (train decides once its --config file is read) */
      if (strcmp(argv[1], "train") != 0 &&
          gc_cli_refuse_launcher(argv[1], over_mpi(argc, argv)))
        return 2;
      return subcommands[i].run(argc - 1, argv + 1);
    }
  fprintf(stderr, "gradcomp: '%s' is not a subcommand\n", argv[1]);
  usage(stderr);
  return 2;
}

int main(int argc, char **argv)
{
  return gc_cli_exit("gradcomp", run(argc, argv));
}
