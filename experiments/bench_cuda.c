/* bench_cuda.c -- placeholder until the CUDA module lands. */
#include <stdio.h>
#include "gc_cli.h"

int gc_bench_compress_cuda(int argc, char **argv)
{
  (void) argc; (void) argv;
  fprintf(stderr, "gradcomp bench compress --device cuda: not available in this build yet\n");
  return 1;
}
