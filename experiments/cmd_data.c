/* cmd_data.c -- `gradcomp data check|info`: load the data sets through the
 * library loaders (which check magic numbers, shapes and counts) and report
 * what is there.  check exits non-zero when a requested set is missing or
 * malformed; info adds label counts and the pixel statistics. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gc_cli.h"
#include "gc_data.h"
#include "gc_errno.h"

static void usage(FILE *out)
{
  fputs("usage: gradcomp data check|info [--dataset mnist|fmnist|cifar10|all]"
        " [--data DIR]\n"
        "  Data live in DIR (default $GRADCOMP_DATA, else the data/ of the\n"
        "  source tree gradcomp was built from): DIR/mnist/,\n"
        "  DIR/fmnist/ (IDX files, raw or .gz), DIR/cifar10/ (binary batches).\n"
        "  tools/get-data fetches MNIST and Fashion-MNIST.\n", out);
}

static int one(const char *dir, const char *name, int info)
{
  int bad = 0;
  for (int train = 1; train >= 0; train--) {
    gc_dataset ds;
    int st = gc_data_load(dir, name, train, &ds);
    if (st) {
      printf("%-8s %-5s  MISSING/BAD  %s\n", name, train ? "train" : "test",
             gc_last_error());
      bad = 1;
      continue;
    }
    printf("%-8s %-5s  ok  %zu x %zux%zux%zu, %zu classes\n", name,
           train ? "train" : "test", ds.n, ds.c, ds.h, ds.w, ds.classes);
    if (info) {
      size_t cnt[10] = {0};
      double s = 0, s2 = 0;
      for (size_t i = 0; i < ds.n; i++)
        cnt[ds.y[i]]++;
      for (size_t i = 0; i < ds.n * ds.dim; i++) {
        s += ds.x[i];
        s2 += (double) ds.x[i] * ds.x[i];
      }
      double m = s / (double) (ds.n * ds.dim);
      printf("    labels:");
      for (int c = 0; c < 10; c++)
        printf(" %zu", cnt[c]);
      printf("\n    normalised pixels: mean %.4f, sd %.4f\n", m,
             sqrt(s2 / (double) (ds.n * ds.dim) - m * m));
    }
    gc_dataset_free(&ds);
  }
  return bad;
}

int gc_cmd_data(int argc, char **argv)
{
  argc--;   /* argv[0] is "data" */
  argv++;
  if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
    usage(argc < 1 ? stderr : stdout);
    return argc < 1 ? 2 : 0;
  }
  int info = !strcmp(argv[0], "info");
  if (!info && strcmp(argv[0], "check") != 0) {
    gc_cli_usage_error("data", "unknown action '%s'", argv[0]);
    usage(stderr);
    return 2;
  }
  const char *set = "all", *dir = NULL, *from;
  gc_cli_args args = GC_CLI_ARGS("data", "", usage, argc, argv);
  const char *o, *v;
  while (gc_cli_next(&args, &o, &v)) {
    if (!strcmp(o, "--dataset"))
      set = v;
    else if (!strcmp(o, "--data"))
      dir = v;
    else
      return gc_cli_unknown(&args, o);
  }
  if (args.exit >= 0)
    return args.exit;
  dir = gc_cli_data_dir(dir, &from);
  int all = !strcmp(set, "all");
  if (!all && strcmp(set, "mnist") && strcmp(set, "fmnist") && strcmp(set, "cifar10"))
    return gc_cli_usage_error("data", "unknown data set '%s' (mnist, fmnist, cifar10, all)",
                              set);
  printf("data folder: %s\n", dir);
  int bad = 0;
  if (all) {
    bad |= one(dir, "mnist", info);
    bad |= one(dir, "fmnist", info);
    /* CIFAR-10 cannot be fetched here: report it, never fail on it. */
    if (one(dir, "cifar10", info))
      printf("(cifar10 is optional: put the binary batches in %s/cifar10/)\n", dir);
  } else {
    bad |= one(dir, set, info);
  }
  if (bad)
    gc_cli_data_hint("data", dir, from);
  return bad;
}
