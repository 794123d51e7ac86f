/* gc_test_cuda.c -- helpers for the CUDA suites. */
#include <criterion/criterion.h>

#include "gc_cuda.h"
#include "gc_test_cuda.h"

void gc_test_require_gpu(void)
{
  char why[256];
  if (gc_cuda_available(why, sizeof why) != GC_SUCCESS)
    cr_skip_test("no CUDA device visible: %s", why);
}
