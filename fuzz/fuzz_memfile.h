/* fuzz_memfile.h -- the loaders take paths: each harness hands them its
 * input as an in-memory file (memfd) named /proc/self/fd/N, so no disk is
 * touched and nothing is left behind.  One file per slot, reused by every
 * input: rewritten from offset 0 and cut to the input's length. */
#ifndef FUZZ_MEMFILE_H
#define FUZZ_MEMFILE_H
#define _GNU_SOURCE 1   /* memfd_create */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Path of slot `slot` (0..3) holding the n bytes of d. */
static const char *fuzz_memfile(int slot, const void *d, size_t n)
{
  static int fd[4] = { -1, -1, -1, -1 };
  static char path[4][64];
  if (fd[slot] < 0) {
    fd[slot] = memfd_create("gc-fuzz", 0);
    if (fd[slot] < 0) {
      perror("memfd_create");
      abort();
    }
    snprintf(path[slot], sizeof path[slot], "/proc/self/fd/%d", fd[slot]);
  }
  if (ftruncate(fd[slot], 0) != 0 ||
      (n && pwrite(fd[slot], d, n, 0) != (ssize_t) n)) {
    perror("memfd write");
    abort();
  }
  return path[slot];
}

#endif /* FUZZ_MEMFILE_H */
