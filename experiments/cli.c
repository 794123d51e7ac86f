/* cli.c -- shared helpers of the front end. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gc_cli.h"
#include "gc_compressor.h"
#include "gc_errno.h"

int gc_cli_fail(const char *cmd, int status, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "gradcomp %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (status != 0 && gc_last_error()[0])
    fprintf(stderr, ": %s", gc_last_error());
  fputc('\n', stderr);
  return 1;
}

int gc_cli_next(gc_cli_args *a, const char **opt, const char **val)
{
  if (a->i >= a->argc)
    return 0;
  const char *o = a->argv[a->i];
  if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
    a->usage(stdout);
    a->exit = 0;
    return 0;
  }
  if (a->i + 1 >= a->argc) {
    gc_cli_fail(a->cmd, 0, "%sunknown option or missing value: %s", a->sub, o);
    a->usage(stderr);
    a->exit = 2;
    return 0;
  }
  *opt = o;
  *val = a->argv[a->i + 1];
  a->i += 2;
  return 1;
}

int gc_cli_unknown(const gc_cli_args *a, const char *opt)
{
  gc_cli_fail(a->cmd, 0, "%sunknown option %s", a->sub, opt);
  a->usage(stderr);
  return 2;
}

int gc_cli_size(const char *cmd, const char *opt, const char *text, size_t *out)
{
  double v;
  if (gc_cli_double(cmd, opt, text, &v))
    return 1;
  if (v < 0 || v != floor(v) || v > 1e18) {
    fprintf(stderr, "gradcomp %s: %s: '%s' is not a non-negative integer\n", cmd, opt, text);
    return 1;
  }
  *out = (size_t) v;
  return 0;
}

int gc_cli_u64(const char *cmd, const char *opt, const char *text, uint64_t *out)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 0);
  if (errno || end == text || *end || text[0] == '-') {
    fprintf(stderr, "gradcomp %s: %s: '%s' is not a non-negative integer\n", cmd, opt, text);
    return 1;
  }
  *out = v;
  return 0;
}

int gc_cli_double(const char *cmd, const char *opt, const char *text, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end || !isfinite(v)) {
    fprintf(stderr, "gradcomp %s: %s: '%s' is not a finite number\n", cmd, opt, text);
    return 1;
  }
  *out = v;
  return 0;
}

int gc_cli_ties(const char *cmd, const char *text, int *ties)
{
  if (!strcmp(text, "low"))
    *ties = GC_TIES_LOW;
  else if (!strcmp(text, "high"))
    *ties = GC_TIES_HIGH;
  else
    return gc_cli_fail(cmd, 0, "--ties must be low or high, not '%s'", text);
  return 0;
}

void gc_cli_progress(const char *label, size_t i, size_t n, int quiet)
{
  if (quiet || n == 0 || !isatty(STDERR_FILENO))
    return;
  enum { WIDTH = 30 };
  size_t filled = i * WIDTH / n;
  char bar[WIDTH + 1];
  for (size_t j = 0; j < WIDTH; j++)
    bar[j] = j < filled ? '=' : (j == filled ? '>' : ' ');
  bar[WIDTH] = '\0';
  fprintf(stderr, "\r%s [%s] %zu/%zu", label, bar, i, n);
  if (i >= n)
    fputc('\n', stderr);
  fflush(stderr);
}

double gc_cli_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

const char *gc_cli_python_with(const char *code)
{
  const char *env = getenv("GRADCOMP_PYTHON");
  const char *cand[3] = { env, "python3", "/usr/bin/python3" };
  for (int i = 0; i < 3; i++) {
    char cmd[1024];
    if (!cand[i] || !*cand[i] || strchr(cand[i], '\''))
      continue;
    snprintf(cmd, sizeof cmd, "'%s' -c \"%s\" >/dev/null 2>&1", cand[i], code);
    if (system(cmd) == 0)
      return cand[i];
  }
  return NULL;
}
