/* gc_test.h -- helpers shared by the Criterion suites. */
#ifndef GC_TEST_H
#define GC_TEST_H
#include <stddef.h>
#include <stdint.h>

#include "gc_compressor.h"

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
/* A temporary path "<tmpdir>/gc-test-<pid>/<name>", the folder removed
 * when the process exits (kept where GC_TEST_KEEP is set); the buffer is
 * reused by the next call: copy it. */
const char *gc_test_tmp(const char *name);
/* Path of a built program, e.g. gc_test_builddir("experiments/gradcomp"). */
const char *gc_test_builddir(const char *rel);
const char *gc_test_srcdir(const char *rel);
/* Run a shell command, capture stdout+stderr (up to cap bytes) and return
 * the exit status (or -1). */
int gc_test_run(const char *cmd, char *out, size_t cap);
/* A file's bytes, NUL-terminated, with their count in *len (malloc'd;
 * NULL if it cannot be read). */
char *gc_test_slurp(const char *path, size_t *len);
/* Suite .init: the library reports nothing on stderr (reasons are still
 * recorded for gc_last_error). */
void gc_test_quiet(void);

/* ||x||^2 and ||x - y||^2, summed in index order. */
double gc_test_sq_norm(const double *x, size_t n);
double gc_test_sq_dist(const double *x, const double *y, size_t n);

/* y = C(x) through the wire: encode x at `step` into buf (at least
 * gc_compressor_max_bytes(c) bytes, or NULL for a scratch buffer),
 * asserting success and a length within that bound, then decode-add into
 * y = 0.  Returns the message length; info may be NULL. */
size_t gc_test_roundtrip_f64(gc_compressor *c, const double *x, uint32_t step,
                             uint8_t *buf, double *y, gc_compress_info *info);
size_t gc_test_roundtrip_f32(gc_compressor *c, const float *x, uint32_t step,
                             uint8_t *buf, float *y, gc_compress_info *info);

/* The data folder: $GRADCOMP_DATA, else <srcdir>/data. */
const char *gc_test_data_dir(void);
/* Whether it holds <set>/train-images-idx3-ubyte, raw or gzip'd. */
int gc_test_have_dataset(const char *set);
/* Skip the running test (naming tools/get-data) unless <set> is there;
 * returns the data folder. */
const char *gc_test_need_dataset(const char *set);

/* Gaussian-k and DGC of float32 x written out plainly from their
 * definitions (theory.md 2.5, 2.6, with the library's summation order and
 * sampling): the selected indices, ascending, into out (n entries), and
 * their count.  Gaussian-k: density rho, k = floor(rho n) >= 1 (the
 * library's max(1, .) differs below); DGC: ns = k entries, p's seed,
 * stream and sample ratio, at `step`. */
size_t gc_test_gaussk_by_definition(const float *x, size_t n, double rho, uint32_t *out);
size_t gc_test_dgc_by_definition(const float *x, size_t n, size_t ns,
                                 const gc_compressor_params *p, uint32_t step, uint32_t *out);

#endif /* GC_TEST_H */
