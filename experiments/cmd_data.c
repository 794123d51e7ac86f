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

static const char usage[] =
  "usage: gradcomp data check|info [--dataset mnist|fmnist|cifar10|all]"
  " [--data DIR]\n"
  "  Data live in DIR (default $GRADCOMP_DATA or ./data): DIR/mnist/,\n"
  "  DIR/fmnist/ (IDX files, raw or .gz), DIR/cifar10/ (binary batches).\n"
  "  tools/get-data fetches MNIST and Fashion-MNIST.\n";

static int one(const char *dir, const char *name, int info)
{
  int bad = 0;
  for (int train = 1; train >= 0; train--) {
    gc_dataset ds;
    gc_error_handler *h = gc_set_error_handler_off();
    int st = gc_data_load(dir, name, train, &ds);
    gc_set_error_handler(h);
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
    fputs(usage, argc < 1 ? stderr : stdout);
    return argc < 1 ? 2 : 0;
  }
  int info = !strcmp(argv[0], "info");
  if (!info && strcmp(argv[0], "check") != 0) {
    fprintf(stderr, "gradcomp data: unknown action '%s'\n%s", argv[0], usage);
    return 2;
  }
  const char *set = "all", *dir = gc_data_dir("data");
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dataset") && i + 1 < argc)
      set = argv[++i];
    else if (!strcmp(argv[i], "--data") && i + 1 < argc)
      dir = argv[++i];
    else {
      fprintf(stderr, "gradcomp data: unknown option '%s'\n%s", argv[i], usage);
      return 2;
    }
  }
  printf("data folder: %s\n", dir);
  int bad = 0;
  if (!strcmp(set, "all")) {
    bad |= one(dir, "mnist", info);
    bad |= one(dir, "fmnist", info);
    /* CIFAR-10 cannot be fetched here: report it, never fail on it. */
    if (one(dir, "cifar10", info))
      printf("(cifar10 is optional: put the binary batches in %s/cifar10/)\n", dir);
  } else if (!strcmp(set, "mnist") || !strcmp(set, "fmnist") ||
             !strcmp(set, "cifar10")) {
    bad |= one(dir, set, info);
  } else {
    fprintf(stderr, "gradcomp data: unknown data set '%s'\n", set);
    return 2;
  }
  return bad;
}
