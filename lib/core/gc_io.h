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

/* Remove the temporary file a gc__write_atomic of this process is writing
 * now, if any: async-signal-safe (one unlink of a prepared name), for a
 * signal handler that ends the process (Ctrl-C), which would otherwise
 * leave "NAME.tmp.PID" behind.  One writer at a time: the slot holds the
 * latest temporary. */
void gc__remove_live_tmp(void);

/* Push what was written to f (a CSV row) to the kernel and check the
 * stream: a full disk or a file-size limit gives GC_EIO with a message
 * naming path and the reason, instead of rows that silently vanish; the
 * file is then cut as gc__cut_to_last_line does. */
int gc__flush_checked(FILE *f, const char *path);

/* After a failed write to f, the file `path` (a full disk, a file-size
 * limit): cut the file back to the end of its last complete line, so
 * that a reader never meets a row with fields missing (stdio wrote what
 * fitted, maybe half a row), then point the stream at /dev/null, so that
 * the bytes stdio still holds cannot land after the cut when it is
 * closed.  Nothing is cut on a device or a pipe. */
void gc__cut_to_last_line(FILE *f, const char *path);

/* Remove the temporary files "NAME.tmp.PID" that gc__write_atomic left in
 * dir when process PID died mid-write (PID no longer running); with a
 * prefix, only those whose NAME.tmp. starts with it.  Returns the number
 * removed; a dir that cannot be read counts as none. */
size_t gc__remove_stale_tmp(const char *dir, const char *prefix);

/* s as a JSON string literal, quotes included, in a malloc'd buffer (NULL
 * after reporting GC_ENOMEM): '"', '\\' and the control characters are
 * escaped, and a byte that is not part of valid UTF-8 (a file name may hold
 * any bytes) becomes U+FFFD, so that every JSON parser reads the result.
 * NULL s gives "". */
char *gc__json_quote(const char *s);

#endif /* GC_IO_H */
