/* fuzz_idx.c -- the IDX loader (raw or gzip) on arbitrary bytes.  Input:
 * u16 little-endian length L, then L bytes of the images file, then the
 * labels file.  Property: a status comes back; on success the counts and
 * labels obey the contract of gc_data_load_idx. */
#include "fuzz_memfile.h"
#include <stdint.h>
#include "gc_data.h"
#include "gc_errno.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
  if (n < 2)
    return 0;
  size_t split = (size_t) d[0] | (size_t) d[1] << 8;
  d += 2;
  n -= 2;
  if (split > n)
    split = n;
  const char *images = fuzz_memfile(0, d, split);
  const char *labels = fuzz_memfile(1, d + split, n - split);
  gc_dataset ds;
  if (gc_data_load_idx(images, labels, 0, &ds) == GC_SUCCESS) {
    if (ds.dim != 28 * 28 || ds.n == 0)
      abort();
    for (size_t i = 0; i < ds.n; i++)
      if (ds.y[i] >= ds.classes)
        abort();
    gc_dataset_free(&ds);
  }
  /* the generic reader alone, rank from the first byte */
  size_t dims[4];
  uint8_t *data;
  if (gc_idx_read(images, 1 + (split ? d[0] % 4 : 0), dims, &data) == GC_SUCCESS)
    free(data);
  return 0;
}
