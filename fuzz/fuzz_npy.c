/* fuzz_npy.c -- gc_npy_read on arbitrary bytes.  Property: it returns a
 * status, and on success the array is what the header promised (count =
 * product of shape, data present) and converts both ways. */
#include "fuzz_memfile.h"
#include <stdint.h>
#include "gc_errno.h"
#include "gc_npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
  gc_array a;
  if (gc_npy_read(fuzz_memfile(0, d, n), &a) == GC_SUCCESS) {
    size_t count = 1;
    for (size_t i = 0; i < a.ndim; i++)
      count *= a.shape[i];
    if (count != a.count || (a.dtype != GC_F32 && a.dtype != GC_F64) ||
        (count && !a.data))
      abort();
    /* touch every element: a short buffer shows up under ASan */
    int other = a.dtype == GC_F32 ? GC_F64 : GC_F32;
    if (gc_array_convert(&a, other) == GC_SUCCESS)
      gc_array_convert(&a, a.dtype == GC_F32 ? GC_F64 : GC_F32);
  }
  gc_array_free(&a);
  return 0;
}
