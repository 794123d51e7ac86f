/* error.c -- the error handler.  The default prints and returns: a long
 * experiment must be able to report a bad input and keep its results. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gc_errno.h"
#include "gc_error_internal.h"

static _Thread_local char last_reason[512];
static _Thread_local int last_code;

static void default_handler(const char *reason, const char *file, int line,
                            int code)
{
  fprintf(stderr, "gradcomp: %s (%s, %s:%d)\n", reason, gc_strerror(code),
          file, line);
}

static void silent_handler(const char *reason, const char *file, int line,
                           int code)
{
  (void) reason; (void) file; (void) line; (void) code;
}

static gc_error_handler *current_handler = default_handler;

void gc_error(const char *reason, const char *file, int line, int code)
{
  snprintf(last_reason, sizeof last_reason, "%s", reason);
  last_code = code;
  current_handler(reason, file, line, code);
}

void gc_errorf(const char *file, int line, int code, const char *fmt, ...)
{
  char msg[sizeof last_reason];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  gc_error(msg, file, line, code);
}

gc_error_handler *gc_set_error_handler(gc_error_handler *h)
{
  gc_error_handler *old = current_handler;
  current_handler = h ? h : default_handler;
  return old;
}

gc_error_handler *gc_set_error_handler_off(void)
{
  return gc_set_error_handler(silent_handler);
}

void gc__error_restore(const char *reason, int code)
{
  snprintf(last_reason, sizeof last_reason, "%s", reason);
  last_code = code;
}

const char *gc_last_error(void) { return last_reason; }
int gc_last_error_code(void) { return last_code; }

const char *gc_strerror(int code)
{
  switch (code) {
  case GC_SUCCESS: return "success";
  case GC_EINVAL: return "invalid argument";
  case GC_EDOM: return "value outside the domain (NaN or Inf)";
  case GC_ENOMEM: return "out of memory";
  case GC_EBADLEN: return "length mismatch";
  case GC_ECORRUPT: return "corrupted or truncated message";
  case GC_ENOSPACE: return "output buffer too small";
  case GC_EIO: return "input/output error";
  case GC_EFORMAT: return "malformed file";
  case GC_EDIVERGE: return "diverged";
  case GC_ECUDA: return "CUDA error";
  case GC_EMPI: return "MPI error";
  case GC_EUNSUP: return "unsupported";
  default: return "unknown error";
  }
}
