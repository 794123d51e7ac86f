/* clock.c -- the library's clock (gc_clock.h). */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "gc_clock.h"

double gc__now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}
