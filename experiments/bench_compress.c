/* bench_compress.c -- placeholder until the module lands (replaced by its owner). */
#include <stdio.h>
#include "gc_cli.h"

int gc_bench_compress(int argc, char **argv)
{
  (void) argc; (void) argv;
  fprintf(stderr, "gradcomp bench compress: not available in this build yet\n");
  return 1;
}
