/* gc_test.c -- helpers shared by the Criterion suites. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "gc_rng.h"
#include "gc_test.h"

static void fill_distinct(double *x, size_t n, uint64_t seed)
{
  /* magnitudes 1.0 + i/n (distinct), shuffled by Fisher-Yates on the
   * counter RNG, with random signs. */
  for (size_t i = 0; i < n; i++)
    x[i] = 1.0 + (double) i / (double) n;
  for (size_t i = n; i > 1; i--) {
    size_t j = gc_rng_below(gc_rng_u32(seed, 1, 0, i), (uint32_t) i);
    double t = x[i - 1];
    x[i - 1] = x[j];
    x[j] = t;
  }
  for (size_t i = 0; i < n; i++)
    if (gc_rng_u32(seed, 2, 0, i) & 1)
      x[i] = -x[i];
}

void gc_test_fill_distinct_f64(double *x, size_t n, uint64_t seed)
{
  fill_distinct(x, n, seed);
}

void gc_test_fill_distinct(float *x, size_t n, uint64_t seed)
{
  double *t = malloc(n * sizeof *t);
  cr_assert(t != NULL);
  fill_distinct(t, n, seed);
  for (size_t i = 0; i < n; i++)
    x[i] = (float) t[i];   /* distinct in float while n < 2^23 */
  free(t);
}

void gc_test_fill_normal(double *x, size_t n, uint64_t seed)
{
  for (size_t i = 0; i < n; i++)
    x[i] = gc_rng_normal(seed, 7, 0, i);
}

void gc_test_fill_normal_f32(float *x, size_t n, uint64_t seed)
{
  for (size_t i = 0; i < n; i++)
    x[i] = (float) gc_rng_normal(seed, 7, 0, i);
}

void gc_test_assert_close(const double *a, const double *b, size_t n,
                          double atol, double rtol, const char *what)
{
  size_t first = n, bad = 0;
  double maxdiff = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs(a[i] - b[i]);
    if (d > maxdiff || isnan(d))
      maxdiff = d;
    if (!(d <= atol + rtol * fabs(b[i]))) {
      if (first == n)
        first = i;
      bad++;
    }
  }
  cr_assert(bad == 0, "%s: %zu of %zu values differ; first at %zu (%.17g vs %.17g), max diff %.3g",
            what, bad, n, first, first < n ? a[first] : 0.0,
            first < n ? b[first] : 0.0, maxdiff);
}

const char *gc_test_tmp(const char *name)
{
  static _Thread_local char path[512];
  const char *dir = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/gc-test-%ld-%s", dir ? dir : "/tmp", (long) getpid(), name);
  return path;
}

static const char *join(const char *env, const char *fallback, const char *rel)
{
  static _Thread_local char path[1024];
  const char *root = getenv(env);
  snprintf(path, sizeof path, "%s/%s", root ? root : fallback, rel);
  return path;
}

const char *gc_test_builddir(const char *rel) { return join("GC_BUILDDIR", "..", rel); }
const char *gc_test_srcdir(const char *rel) { return join("GC_SRCDIR", "..", rel); }

int gc_test_run(const char *cmd, char *out, size_t cap)
{
  char full[4096];
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  if (!p)
    return -1;
  size_t len = 0;
  if (cap)
    out[0] = '\0';
  char chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, p)) > 0) {
    if (cap && len + 1 < cap) {
      size_t take = got < cap - 1 - len ? got : cap - 1 - len;
      memcpy(out + len, chunk, take);
      len += take;
      out[len] = '\0';
    }
  }
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
