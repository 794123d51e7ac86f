/* cmd_data.c -- placeholder until the module lands (replaced by its owner). */
#include <stdio.h>
#include "gc_cli.h"

int gc_cmd_data(int argc, char **argv)
{
  (void) argc; (void) argv;
  fprintf(stderr, "gradcomp data: not available in this build yet\n");
  return 1;
}
