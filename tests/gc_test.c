/* gc_test.c -- helpers shared by the Criterion suites. */
#define _XOPEN_SOURCE 700   /* nftw */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gsl/gsl_cdf.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_errno.h"
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

/* The test process's folder of temporary files, made on first use and
 * removed with everything in it when the process exits (unless
 * GC_TEST_KEEP is set): a run of the suites left some seventy training
 * and probe folders in /tmp.  Criterion runs each test in a child
 * process, which gets a folder of its own (the pid changes) and runs the
 * exit handler, registered once, inherited or not. */
static char tmp_root[400];
static long tmp_pid;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st; (void) flag; (void) ftw;
  remove(path);
  return 0;
}

static void remove_tmp_root(void)
{
  if (tmp_pid == (long) getpid() && !getenv("GC_TEST_KEEP"))
    nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *gc_test_tmp(const char *name)
{
  static _Thread_local char path[512];
  if (tmp_pid != (long) getpid()) {
    const char *dir = getenv("TMPDIR");
    if (!tmp_pid)
      atexit(remove_tmp_root);
    tmp_pid = (long) getpid();
    snprintf(tmp_root, sizeof tmp_root, "%s/gc-test-%ld", dir ? dir : "/tmp", tmp_pid);
    mkdir(tmp_root, 0700);
  }
  snprintf(path, sizeof path, "%s/%s", tmp_root, name);
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

double gc_test_sq_norm(const double *x, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += x[i] * x[i];
  return s;
}

double gc_test_sq_dist(const double *x, const double *y, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (x[i] - y[i]) * (x[i] - y[i]);
  return s;
}

#define DEFINE_ROUNDTRIP(SFX, REAL)                                          \
  size_t gc_test_roundtrip_##SFX(gc_compressor *c, const REAL *x,            \
                                 uint32_t step, uint8_t *buf, REAL *y,       \
                                 gc_compress_info *info)                     \
  {                                                                          \
    size_t cap = gc_compressor_max_bytes(c), len = 0;                        \
    uint8_t *scratch = buf ? NULL : malloc(cap);                             \
    uint8_t *b = buf ? buf : scratch;                                        \
    cr_assert(eq(int, gc_compress_##SFX(c, x, step, b, cap, &len, info),     \
                 GC_SUCCESS), "%s", gc_last_error());                        \
    cr_assert(le(sz, len, cap));                                             \
    memset(y, 0, gc_compressor_n(c) * sizeof *y);                            \
    cr_assert(eq(int, gc_decompress_add_##SFX(c, b, len, step, (REAL) 1, y), \
                 GC_SUCCESS), "%s", gc_last_error());                        \
    free(scratch);                                                           \
    return len;                                                              \
  }
DEFINE_ROUNDTRIP(f64, double)
DEFINE_ROUNDTRIP(f32, float)
#undef DEFINE_ROUNDTRIP

const char *gc_test_data_dir(void)
{
  static _Thread_local char dir[1024];
  const char *env = getenv("GRADCOMP_DATA");
  snprintf(dir, sizeof dir, "%s", env && *env ? env : gc_test_srcdir("data"));
  return dir;
}

int gc_test_have_dataset(const char *set)
{
  char p[1200];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s/train-images-idx3-ubyte", gc_test_data_dir(), set);
  if (stat(p, &sb) == 0)
    return 1;
  snprintf(p, sizeof p, "%s/%s/train-images-idx3-ubyte.gz", gc_test_data_dir(), set);
  return stat(p, &sb) == 0;
}

const char *gc_test_need_dataset(const char *set)
{
  if (!gc_test_have_dataset(set))
    cr_skip_test("%s not found in %s (run tools/get-data)", set, gc_test_data_dir());
  return gc_test_data_dir();
}

char *gc_test_slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = n >= 0 ? malloc((size_t) n + 1) : NULL;
  if (b) {
    *len = fread(b, 1, (size_t) n, f);
    b[*len] = '\0';
  }
  fclose(f);
  return b;
}

void gc_test_quiet(void) { gc_set_error_handler_off(); }

/* ---- the selections by their definitions ---------------------------------- */

/* The definition of Gaussian-k's statistics (lib/compress/sparse_gaussk.c, and the
 * GPU twin): 16 float lanes per block of 1024, folded into double in lane
 * order, block sums added by an in-place pairwise tree.  Written out
 * plainly here, with a full scan per threshold evaluation. */
static double tree_sum(double *p, size_t m)
{
  for (; m > 1; m = (m + 1) / 2) {
    for (size_t i = 0; i < m / 2; i++)
      p[i] = p[2 * i] + p[2 * i + 1];
    if (m % 2)
      p[m / 2] = p[m - 1];
  }
  return p[0];
}

size_t gc_test_gaussk_by_definition(const float *x, size_t n, double rho, uint32_t *out)
{
  size_t nb = (n + 1023) / 1024, k = (size_t) floor(rho * (double) n);
  double *p1 = malloc(nb * sizeof *p1), *p2 = malloc(nb * sizeof *p2);
  float c0 = x[0];
  for (size_t b = 0; b < nb; b++) {
    size_t lo = 1024 * b, hi = n - lo < 1024 ? n : lo + 1024, i = lo;
    float a1[16] = {0}, a2[16] = {0};
    for (; i + 16 <= hi; i += 16)
      for (int j = 0; j < 16; j++) {
        float d = x[i + j] - c0;
        a1[j] += d;
        a2[j] += d * d;
      }
    for (; i < hi; i++) {
      float d = x[i] - c0;
      a1[0] += d;
      a2[0] += d * d;
    }
    p1[b] = p2[b] = 0;
    for (int j = 0; j < 16; j++) {
      p1[b] += (double) a1[j];
      p2[b] += (double) a2[j];
    }
  }
  double S1 = tree_sum(p1, nb), S2 = tree_sum(p2, nb);
  double mu = (double) c0 + S1 / (double) n;
  double var = (S2 - S1 * S1 / (double) n) / (double) (n - 1);
  double thr = mu + fabs(gsl_cdf_ugaussian_Pinv(rho / 2)) * sqrt(var > 0 ? var : 0);
  size_t c = 0;
  for (int loops = 0; loops < 3;) {
    c = 0;
    for (size_t i = 0; i < n; i++)
      if ((double) fabsf(x[i]) > thr)
        out[c++] = (uint32_t) i;
    if ((double) c < 2.0 * (double) k / 3.0)
      thr *= 0.5;
    else if ((double) c > 4.0 * (double) k / 3.0)
      thr *= 1.5;
    else
      break;
    loops++;
  }
  free(p1);
  free(p2);
  return c;
}

/* DGC written out from theory.md 2.6 with the library's choices (num_selects
 * = k, strided sample from a counter-RNG start, the sample's exact order
 * statistic by sorting, p->ties among equal magnitudes), for float32. */
static const float *dgc_x;
static int dgc_ties_high;   /* equal magnitudes: the higher index first */

static int by_magnitude_desc(const void *a, const void *b)
{
  uint32_t i = *(const uint32_t *) a, j = *(const uint32_t *) b;
  float u = fabsf(dgc_x[i]), v = fabsf(dgc_x[j]);
  return u > v ? -1 : u < v ? 1 : dgc_ties_high ? (i < j) - (i > j) : (i > j) - (i < j);
}

static int by_index(const void *a, const void *b)
{
  uint32_t i = *(const uint32_t *) a, j = *(const uint32_t *) b;
  return (i > j) - (i < j);
}

static int float_desc(const void *a, const void *b)
{
  float u = *(const float *) a, v = *(const float *) b;
  return u > v ? -1 : u < v;
}

size_t gc_test_dgc_by_definition(const float *x, size_t n, size_t ns,
                                 const gc_compressor_params *p, uint32_t step, uint32_t *out)
{
  double rho = (double) ns / (double) n;
  double m0 = fmax(ceil(p->sample_ratio * (double) n), ceil(2.0 / rho));
  size_t stride = 1, start = 0, m = n;
  if (m0 < (double) n) {
    stride = n / (size_t) m0;
    if (stride > 1) {
      start = gc_rng_below(gc_rng_u32(p->seed, p->stream, step, 0), (uint32_t) stride);
      m = (n - start + stride - 1) / stride;
    }
  }
  float *smp = malloc(m * sizeof *smp);
  for (size_t j = 0; j < m; j++)
    smp[j] = fabsf(x[start + j * stride]);
  qsort(smp, m, sizeof *smp, float_desc);
  size_t top = (size_t) ceil(rho * (double) m);
  float thr = smp[(top < 1 ? 1 : top > m ? m : top) - 1];
  free(smp);
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    if (fabsf(x[i]) >= thr)
      out[c++] = (uint32_t) i;
  for (int it = 0; n > m && it < 10; it++) {
    if ((double) c > 1.3 * (double) ns) {
      dgc_x = x;
      dgc_ties_high = p->ties == GC_TIES_HIGH;
      qsort(out, c, sizeof *out, by_magnitude_desc);
      qsort(out, ns, sizeof *out, by_index);
      c = ns;
      break;
    }
    if (c > ns || (double) c >= 0.8 * (double) ns)
      break;
    thr = (float) (0.8 * thr);
    c = 0;
    for (size_t i = 0; i < n; i++)
      if (fabsf(x[i]) >= thr)
        out[c++] = (uint32_t) i;
  }
  return c < ns ? c : ns;
}
