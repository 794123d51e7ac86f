/* fuzz_cifar.c -- the CIFAR-10 binary loader on arbitrary bytes (one file,
 * any record count).  Property: a status comes back; on success every
 * label is < 10 and every pixel is finite. */
#include "fuzz_memfile.h"
#include <math.h>
#include <stdint.h>
#include "gc_data.h"
#include "gc_errno.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
  const char *files[1] = { fuzz_memfile(0, d, n) };
  gc_dataset ds;
  if (gc_data_load_cifar10(files, 1, 0, &ds) == GC_SUCCESS) {
    if (ds.n != n / 3073 || ds.dim != 3072)
      abort();
    for (size_t i = 0; i < ds.n; i++)
      if (ds.y[i] >= 10)
        abort();
    for (size_t i = 0; i < ds.n * ds.dim; i++)
      if (!isfinite(ds.x[i]))
        abort();
    gc_dataset_free(&ds);
  }
  return 0;
}
