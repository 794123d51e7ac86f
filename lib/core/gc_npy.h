/* gc_npy.h -- read and write NumPy .npy files (format 1.0/2.0/3.0), so
 * that vectors, matrices and model snapshots move freely between gradcomp
 * and NumPy.  Little-endian float32 ('<f4') and float64 ('<f8'), C order;
 * Fortran-order 2-D arrays are transposed on read. */
#ifndef GC_NPY_H
#define GC_NPY_H
#include <stddef.h>
#include "gc_dtype.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

#define GC_NPY_MAXDIM 8

typedef struct gc_array {
  int dtype;                      /* GC_F32 or GC_F64 */
  size_t ndim;
  size_t shape[GC_NPY_MAXDIM];
  size_t count;                   /* product of shape (1 for a scalar) */
  void *data;                     /* count elements, owned: gc_array_free */
} gc_array;

/* Read path into *a.  Returns GC_SUCCESS, GC_EIO (cannot open/read),
 * GC_EFORMAT (bad magic, header, dtype, or fewer bytes than the header
 * promises; the message names the file and the problem) or GC_ENOMEM. */
int gc_npy_read(const char *path, gc_array *a);

/* Write data (count = product of shape) atomically: a temporary file in the
 * same folder is renamed over path, so a crash never leaves a torn file.
 * Returns GC_SUCCESS, GC_EINVAL (dtype or ndim) or GC_EIO. */
int gc_npy_write(const char *path, int dtype, size_t ndim,
                 const size_t *shape, const void *data);

/* Convert a's data to dtype in place (no-op if equal). */
int gc_array_convert(gc_array *a, int dtype);

void gc_array_free(gc_array *a);   /* frees data; safe on a zeroed array */

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_NPY_H */
