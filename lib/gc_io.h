/* gc_io.h -- file helpers shared by library files (gc__ names; not
 * installed). */
#ifndef GC_IO_H
#define GC_IO_H
#include <stddef.h>
#include <stdio.h>

/* Write the concatenation of parts[0..nparts) to path atomically: a
 * temporary file in the same folder is renamed over path, so a crash never
 * leaves a torn file.  Returns GC_SUCCESS, GC_ENOMEM or GC_EIO (the
 * message names the file). */
int gc__write_atomic(const char *path, const void *const *parts,
                     const size_t *lens, size_t nparts);

/* mkdir -p: create dir and any missing parents (mode 0777 & ~umask).
 * Returns GC_SUCCESS (also when it exists as a directory) or GC_EIO with
 * a message naming the folder that could not be made. */
int gc__mkdir_p(const char *dir);

/* Push what was written to f (a CSV row) to the kernel and check the
 * stream: a full disk or a file-size limit gives GC_EIO with a message
 * naming path and the reason, instead of rows that silently vanish. */
int gc__flush_checked(FILE *f, const char *path);

/* Remove the temporary files "NAME.tmp.PID" that gc__write_atomic left in
 * dir when process PID died mid-write (PID no longer running); with a
 * prefix, only those whose NAME.tmp. starts with it.  Returns the number
 * removed; a dir that cannot be read counts as none. */
size_t gc__remove_stale_tmp(const char *dir, const char *prefix);

#endif /* GC_IO_H */
