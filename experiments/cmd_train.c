/* cmd_train.c -- placeholder until the module lands (replaced by its owner). */
#include <stdio.h>
#include "gc_cli.h"

int gc_cmd_train(int argc, char **argv)
{
  (void) argc; (void) argv;
  fprintf(stderr, "gradcomp train: not available in this build yet\n");
  return 1;
}
