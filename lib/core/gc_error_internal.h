/* gc_error_internal.h -- error.c's internal entry (gc__ names; not
 * installed). */
#ifndef GC_ERROR_INTERNAL_H
#define GC_ERROR_INTERNAL_H
#ifdef __cplusplus
extern "C" {
#endif

/* Set this thread's gc_last_error without calling the handler: an error
 * reported on a worker thread, passed on to the calling thread. */
void gc__error_restore(const char *reason, int code);

#ifdef __cplusplus
}
#endif
#endif /* GC_ERROR_INTERNAL_H */
