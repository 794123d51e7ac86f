/* cmd_bench.c -- `gradcomp bench compress|train`: dispatch only. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "gc_cli.h"

static void usage(FILE *out)
{
  fprintf(out, "usage: gradcomp bench compress [--device cpu|cuda] [--csv FILE] [...]\n"
               "       gradcomp bench train [--csv FILE] [...]\n"
               "Speed figures are printed as ratios to baselines measured in the same run.\n"
               "Each target takes --help.\n");
}

int gc_cmd_bench(int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "compress")) {
    for (int i = 2; i + 1 < argc; i++)
      if (!strcmp(argv[i], "--device") && !strcmp(argv[i + 1], "cuda")) {
#ifdef HAVE_CUDA
        return gc_bench_compress_cuda(argc - 1, argv + 1);
#else
        fprintf(stderr, "gradcomp bench: --device cuda: this build has no CUDA (configure --with-cuda)\n");
        return 1;
#endif
      }
    return gc_bench_compress(argc - 1, argv + 1);
  }
  if (!strcmp(argv[1], "train"))
    return gc_bench_train(argc - 1, argv + 1);
  fprintf(stderr, "gradcomp bench: unknown target '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
