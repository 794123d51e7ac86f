/* gc_errno.h -- status codes and the replaceable error handler.
 *
 * The library never exits or aborts: every failing call reports through
 * gc_error() (one place to set a breakpoint) and returns a non-zero code.
 * The default handler prints the reason on stderr and returns; programs may
 * install their own, and tests that provoke errors switch it off.  The last
 * reason is also kept per thread, so a program can name the problem after
 * the call returned (gc_last_error()). */
#ifndef GC_ERRNO_H
#define GC_ERRNO_H
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

enum {
  GC_SUCCESS = 0,
  GC_EINVAL = 1,    /* invalid argument: k > n, s < 1, density outside (0,1] */
  GC_EDOM = 2,      /* input outside the domain: NaN or Inf values */
  GC_ENOMEM = 3,    /* allocation failed */
  GC_EBADLEN = 4,   /* lengths do not match (vector vs workspace, empty vector) */
  GC_ECORRUPT = 5,  /* a wire message is truncated or malformed */
  GC_ENOSPACE = 6,  /* output buffer too small */
  GC_EIO = 7,       /* a file could not be opened, read or written */
  GC_EFORMAT = 8,   /* a file is malformed (bad magic, header, dtype, size) */
  GC_EDIVERGE = 9,  /* the iteration diverged (NaN/Inf loss or iterate) */
  GC_ECUDA = 10,    /* a CUDA call failed or no device is present */
  GC_EMPI = 11,     /* an MPI call failed or a rank died */
  GC_EUNSUP = 12    /* combination not supported */
};

typedef void gc_error_handler(const char *reason, const char *file, int line,
                              int code);

/* Report an error: records the reason (see gc_last_error) and calls the
 * current handler.  Never exits. */
void gc_error(const char *reason, const char *file, int line, int code);
/* printf-style variant; the message is truncated to 512 bytes. */
void gc_errorf(const char *file, int line, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Install a handler (NULL restores the default); returns the previous one. */
gc_error_handler *gc_set_error_handler(gc_error_handler *h);
/* Silence reporting (reasons are still recorded); returns the previous. */
gc_error_handler *gc_set_error_handler_off(void);

const char *gc_strerror(int code);   /* "invalid argument", ... */
const char *gc_last_error(void);     /* last reason in this thread, or "" */
/* Its code (GC_SUCCESS if none): what an allocator that returned NULL
 * failed with, whether its own malloc or a call it made reported it. */
int gc_last_error_code(void);

#define GC_ERROR(reason, code)                                           \
  do {                                                                   \
    gc_error((reason), __FILE__, __LINE__, (code));                      \
    return (code);                                                       \
  } while (0)

#define GC_ERROR_NULL(reason, code)                                      \
  do {                                                                   \
    gc_error((reason), __FILE__, __LINE__, (code));                      \
    return NULL;                                                         \
  } while (0)

/* GC_ERRORF(code, "k=%zu exceeds n=%zu", k, n): format, report, return. */
#define GC_ERRORF(code, ...)                                             \
  do {                                                                   \
    gc_errorf(__FILE__, __LINE__, (code), __VA_ARGS__);                  \
    return (code);                                                       \
  } while (0)

/* Propagate a non-zero status without reporting it twice. */
#define GC_TRY(expr)                                                     \
  do {                                                                   \
    int gc_try_status_ = (expr);                                         \
    if (gc_try_status_ != GC_SUCCESS)                                    \
      return gc_try_status_;                                             \
  } while (0)

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_ERRNO_H */
