/* gc_test.h -- helpers shared by the Criterion suites. */
#ifndef GC_TEST_H
#define GC_TEST_H
#include <stddef.h>
#include <stdint.h>

/* x[i] = distinct magnitudes with random signs in random order (seeded),
 * so that selection results are unique. */
void gc_test_fill_distinct(float *x, size_t n, uint64_t seed);
void gc_test_fill_distinct_f64(double *x, size_t n, uint64_t seed);
/* i.i.d. N(0,1) from the library's counter RNG. */
void gc_test_fill_normal(double *x, size_t n, uint64_t seed);
void gc_test_fill_normal_f32(float *x, size_t n, uint64_t seed);
/* Assert |a_i - b_i| <= atol + rtol |b_i| for all i; on failure report the
 * first failing index and the max difference (llm.c check_tensor style). */
void gc_test_assert_close(const double *a, const double *b, size_t n,
                          double atol, double rtol, const char *what);
/* A temporary path "<tmpdir>/gc-test-<pid>-<name>"; static buffer per call
 * site is not kept: copy it. */
const char *gc_test_tmp(const char *name);
/* Path of a built program, e.g. gc_test_builddir("experiments/gradcomp"). */
const char *gc_test_builddir(const char *rel);
const char *gc_test_srcdir(const char *rel);
/* Run a shell command, capture stdout+stderr (up to cap bytes) and return
 * the exit status (or -1). */
int gc_test_run(const char *cmd, char *out, size_t cap);

#endif /* GC_TEST_H */
