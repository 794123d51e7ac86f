/* gc_clock.h -- the library's clock (clock.c; gc__ names, not installed). */
#ifndef GC_CLOCK_H
#define GC_CLOCK_H
#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic wall-clock seconds, for the timing columns. */
double gc__now(void);

#ifdef __cplusplus
}
#endif
#endif /* GC_CLOCK_H */
