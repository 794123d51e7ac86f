/* cmd_bench.c -- `gradcomp bench compress|train|comm`: dispatch only. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "gc_bench.h"
#include "gc_cli.h"

static void usage(FILE *out)
{
  fprintf(out, "usage: gradcomp bench compress [--device cpu|cuda] [--csv FILE] [...]\n"
               "       gradcomp bench train [--device cpu|cuda] [--csv FILE] [...]\n"
               "       gradcomp bench comm [--csv FILE] [...]\n"
               "Speed figures are printed as ratios to baselines measured in the same run.\n"
               "Each target takes --help.\n");
}

/* The GPU targets' options, printed by every build's `--help` of both
 * targets (the CUDA sources are compiled only where CUDA is), so that a
 * user reads what --device cuda takes before building with it. */
void gc_bench_usage_device(FILE *out, int train)
{
#if defined(HAVE_CUBLAS)
  const char *built = "this build has it";
#elif defined(HAVE_CUDA)
  const char *built = train ? "this build has CUDA but not cuBLAS: configure finds "
                              "cuBLAS beside CUDA" : "this build has it";
#else
  const char *built = "this build has no CUDA: configure --with-cuda";
#endif
  if (train)
    fprintf(out,
      "\n--device cuda (%s): images per second of P workers x B examples per step\n"
      "for sgd, uni and bi (top-K at density R both ways), each step a\n"
      "`train --device cuda` step; ms_compute is the forward and backward passes\n"
      "alone, ratio_to_dense images/s over the same side's sgd; PyTorch rows (a\n"
      "plain top-K step on the same GPU) follow when torch with CUDA is found.\n"
      "  --models a,b       models (mnist-cnn,cifar-vgg19)\n"
      "  --workers P        workers per step (20)\n"
      "  --batch B          examples per worker (100)\n"
      "  --steps N          timed steps after 2 warm-up steps (10)\n"
      "  --seconds S        instead of --steps: about S seconds of our steps per row\n"
      "                     (3 to 1000 steps; the torch rows keep --steps)\n"
      "  --density R        top-K density, both directions (0.001)\n"
      "  --step cuda|cpu    the algorithm's step on the GPU or on the CPU (cuda)\n"
      "  --csv FILE, --no-peer  as on the CPU\n"
      "CSV columns: model,algorithm,step,workers,batch,ms_per_step,ms_compute,\n"
      "images_per_s,ratio_to_dense\n", built);
  else
    fprintf(out,
      "\n--device cuda (%s): every compressor with a GPU encoder, timed on the\n"
      "device; ratios are to a device-to-device copy and a streaming read of the\n"
      "same vector in the same run, and torch.topk's time is a row when torch with\n"
      "CUDA is found.  It takes the options above but --threads, with other\n"
      "defaults: d = 25000000, density = 0.001, 20 repeats; --no-torch skips the\n"
      "torch.topk row.\n", built);
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
