/* cmd_theory.c -- placeholder until the module lands (replaced by its owner). */
#include <stdio.h>
#include "gc_cli.h"

int gc_cmd_theory(int argc, char **argv)
{
  (void) argc; (void) argv;
  fprintf(stderr, "gradcomp theory: not available in this build yet\n");
  return 1;
}
