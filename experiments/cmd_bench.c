/* cmd_bench.c -- `gradcomp bench compress|train|comm`: dispatch only. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "gc_cli.h"

static void usage(FILE *out)
{
  fprintf(out, "usage: gradcomp bench compress [--device cpu|cuda] [--csv FILE] [...]\n"
               "       gradcomp bench train [--device cpu|cuda] [--csv FILE] [...]\n"
               "       gradcomp bench comm [--csv FILE] [...]\n"
               "Speed figures are printed as ratios to baselines measured in the same run.\n"
               "Each target takes --help.\n");
}

int gc_cmd_bench(int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "compress") || !strcmp(argv[1], "train")) {
    /* Take "--device X" out here, in one place, so neither target has to
     * know about it; both then parse the same options (gc_bench_parse). */
    int train = !strcmp(argv[1], "train");
#if defined(HAVE_CUBLAS) && !defined(GC_CUDA_NETS)
    /* before the arguments are rewritten below: gradcomp-cuda gets them all */
    for (int i = 2; train && i + 1 < argc; i++)
      if (!strcmp(argv[i], "--device") && !strcmp(argv[i + 1], "cuda"))
        return gc_cli_exec_sibling("bench", "gradcomp-cuda");
#endif
    const char *device = "cpu";
    int n = 0;
    for (int i = 0; i < argc; i++) {
      if (i >= 2 && !strcmp(argv[i], "--device")) {
        if (i + 1 >= argc)
          return gc_cli_usage_error("bench", "--device needs a value: cpu or cuda");
        device = argv[++i];
        continue;
      }
      argv[n++] = argv[i];
    }
    argc = n;
    argv[argc] = NULL;
    if (!strcmp(device, "cuda")) {
#if defined(GC_CUDA_NETS)
      if (train)
        return gc_bench_train_cuda(argc - 1, argv + 1);
#endif
#ifdef HAVE_CUDA
      if (!train)
        return gc_bench_compress_cuda(argc - 1, argv + 1);
#endif
      return gc_cli_fail("bench", 0, "--device cuda: this build has no CUDA%s "
                         "(configure --with-cuda)", train ? " nets (cuBLAS)" : "");
    }
    if (strcmp(device, "cpu") != 0)
      return gc_cli_usage_error("bench", "--device must be cpu or cuda, not '%s'", device);
    return train ? gc_bench_train(argc - 1, argv + 1)
                 : gc_bench_compress(argc - 1, argv + 1);
  }
  if (!strcmp(argv[1], "comm"))
    return gc_bench_comm(argc - 1, argv + 1);
  fprintf(stderr, "gradcomp bench: unknown target '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
