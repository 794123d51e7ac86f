/* gc_io.h -- file helpers shared by library files (gc__ names; not
 * installed). */
#ifndef GC_IO_H
#define GC_IO_H
#include <stddef.h>

/* Write the concatenation of parts[0..nparts) to path atomically: a
 * temporary file in the same folder is renamed over path, so a crash never
 * leaves a torn file.  Returns GC_SUCCESS, GC_ENOMEM or GC_EIO (the
 * message names the file). */
int gc__write_atomic(const char *path, const void *const *parts,
                     const size_t *lens, size_t nparts);

#endif /* GC_IO_H */
