/* cmd_compress.c -- `gradcomp compress`: list the compressors, or apply one
 * to a 1-D .npy vector through the real wire format (encode, then decode
 * into zeros) and write C(x) in the input's dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_cli.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_npy.h"

static const char *CMD = "compress";

/* The compressor options (all of gc_cli_comp's fields, no downlink) with
 * compress's defaults: the library's. */
static gc_cli_comp comp_defaults(void)
{
  gc_cli_comp c = { .take = GC_CLI_P_ALL };
  gc_compressor_params_default(&c.up);
  return c;
}

static void usage(FILE *out)
{
  gc_cli_comp d = comp_defaults();
  fprintf(out,
          "usage: gradcomp compress --list\n"
          "       gradcomp compress NAME [COMPRESSOR OPTIONS] [--seed N] [--step T]\n"
          "                [--shape ROWSxCOLS] --in x.npy --out y.npy [--stats]\n"
          "Reads a 1-D float32/float64 .npy, writes the decoded C(x) in the same dtype.\n"
          "Shaped compressors (powersgd) need --shape: the first ROWS*COLS entries are\n"
          "one row-major matrix, any rest is sent raw.\n"
          "--stats prints: bytes=<wire bytes> rel_err=<|x-C(x)|^2/|x|^2> nnz=<count>\n"
          "  and, where the count kept depends on x (gaussk, dgc), selected=<count> k=<k>.\n"
          "A warning on stderr says when that count is outside [2k/3, 4k/3]\n"
          "(Gaussian-k's threshold rule can miss k far on non-Gaussian x).\n"
          "Every compressor refuses NaN or +-Inf anywhere in x (exit 1, naming the\n"
          "first such index), also where the entry would not be sent.\n"
          "--seed N (%llu): the random compressors' seed; --step T (0): the step they\n"
          "are keyed by.  Note --density %g is compress's default; gradcomp train's\n"
          "default is 0.001, the thesis's K/d.\n"
          "Compressor options (each compressor reads the ones it uses; --list):\n",
          (unsigned long long) d.up.seed, d.up.density);
  gc_cli_compressor_usage(out, &d);
}

static void flag_names(unsigned f, char *out, size_t cap)
{
  out[0] = '\0';
  static const struct { unsigned bit; const char *name; } names[] = {
    {GC_COMP_BIASED, "biased"}, {GC_COMP_RANDOM, "random"}, {GC_COMP_SPARSE, "sparse"},
    {GC_COMP_CONTRACTIVE, "contractive"}, {GC_COMP_NEEDS_SHAPE, "needs-shape"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (f & names[i].bit) {
      if (out[0])
        strncat(out, ",", cap - strlen(out) - 1);
      strncat(out, names[i].name, cap - strlen(out) - 1);
    }
  if (!(f & GC_COMP_BIASED))
    strncat(out, out[0] ? ",unbiased" : "unbiased", cap - strlen(out) - 1);
}

static void list_types(void)
{
  printf("%-16s %-32s %s\n", "name", "flags", "summary");
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++) {
    char fl[128];
    flag_names((*t)->flags, fl, sizeof fl);
    printf("%-16s %-32s %s\n", (*t)->name, fl, (*t)->summary);
  }
}

static int unknown(const char *name)
{
  fprintf(stderr, "gradcomp %s: unknown compressor '%s'; valid names:", CMD, name);
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++)
    fprintf(stderr, " %s", (*t)->name);
  fputc('\n', stderr);
  return 2;   /* a bad command line, like every check before the run */
}

int gc_cmd_compress(int argc, char **argv)
{
  gc_cli_comp comp = comp_defaults();
  const char *name = NULL, *in = NULL, *out = NULL;
  int stats = 0, have_shape = 0;
  gc_segment shape = {0, 0, 0};
  uint64_t step64 = 0;
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  static const char *const flags[] = { "--list", "--stats", NULL };
  gc_cli_args args = GC_CLI_ARGS(CMD, "", usage, argc, argv);
  args.flags = flags;
  args.operands = 1;
  const char *a, *val;
  while (gc_cli_next(&args, &a, &val)) {
    int r;
    if (!a) {   /* the compressor's name */
      if (name)
        return gc_cli_usage_error(CMD, "unexpected argument '%s' (compressor is '%s')",
                                  val, name);
      name = val;
    } else if ((r = gc_cli_compressor_option(&args, a, val, &comp)) != GC_CLI_NOT_MINE) {
      if (r != GC_CLI_TAKEN)
        return r;
    } else if (!strcmp(a, "--list")) {
      list_types();
      return 0;
    } else if (!strcmp(a, "--stats")) {
      stats = 1;
    } else if (!strcmp(a, "--seed")) {
      if (gc_cli_u64(CMD, a, val, &comp.up.seed))
        return 2;
    } else if (!strcmp(a, "--step")) {
      if (gc_cli_u64(CMD, a, val, &step64))
        return 2;
      if (step64 > 0xffffffffu)
        return gc_cli_usage_error(CMD, "--step: %s does not fit in 32 bits", val);
    } else if (!strcmp(a, "--shape")) {
      char *end;
      unsigned long long rows = strtoull(val, &end, 10), cols = 0;
      if (end != val && (*end == 'x' || *end == 'X')) {
        const char *c2 = end + 1;
        cols = strtoull(c2, &end, 10);
        if (end == c2)
          cols = 0;
      }
      if (*end || rows == 0 || cols == 0 || val[0] == '-')
        return gc_cli_usage_error(CMD, "--shape: '%s' is not ROWSxCOLS with "
                                  "positive integers (e.g. 64x784)", val);
      shape.rows = (size_t) rows;
      shape.cols = (size_t) cols;
      have_shape = 1;
    } else if (!strcmp(a, "--in")) {
      in = val;
    } else if (!strcmp(a, "--out")) {
      out = val;
    } else {
      return gc_cli_unknown(&args, a);
    }
  }
  if (args.exit >= 0)
    return args.exit;
  if (gc_cli_compressor_finish(&args, &comp))
    return 2;
  gc_compressor_params p = comp.up;
  if (!name)
    return gc_cli_usage_error(CMD, "no compressor named (see gradcomp compress --list)");
  const gc_compressor_type *T = gc_compressor_type_by_name(name);
  if (!T)
    return unknown(name);
  if ((T->flags & GC_COMP_NEEDS_SHAPE) && !have_shape)
    return gc_cli_usage_error(CMD, "%s needs layer shapes: give --shape ROWSxCOLS "
                              "(the first ROWS*COLS entries as a row-major matrix)", name);
  if (have_shape && !(T->flags & GC_COMP_NEEDS_SHAPE))
    return gc_cli_usage_error(CMD, "--shape is only for shaped compressors "
                              "(needs-shape in --list); %s takes a plain vector", name);
  if (have_shape) {
    p.segments = &shape;
    p.nsegments = 1;
  }
  if (!in)
    return gc_cli_usage_error(CMD, "missing --in x.npy");
  if (!out && !stats)
    return gc_cli_usage_error(CMD, "missing --out y.npy (or --stats)");

  gc_array x = {0};
  int st = gc_npy_read(in, &x);
  if (st)
    return gc_cli_fail(CMD, st, "cannot read %s", in);
  int rc = 1;
  gc_compressor *c = NULL;
  uint8_t *buf = NULL;
  void *y = NULL;
  if (x.ndim != 1) {
    gc_cli_fail(CMD, 0, "%s: expected a 1-D array, got %zu dimensions", in, x.ndim);
    goto done;
  }
  size_t n = x.count;
  if (n == 0) {
    gc_cli_fail(CMD, 0, "%s: the vector is empty", in);
    goto done;
  }
  c = gc_compressor_alloc(T, n, &p);   /* checks k <= n and the rest */
  if (!c) {
    /* alloc returns no status; any non-zero one appends the reason */
    gc_cli_fail(CMD, GC_EINVAL, "%s", name);
    goto done;
  }
  size_t cap = gc_compressor_max_bytes(c), len = 0;
  buf = malloc(cap ? cap : 1);
  y = calloc(n, (size_t) x.dtype);
  if (!buf || !y) {
    gc_cli_fail(CMD, 0, "out of memory for d = %zu", n);
    goto done;
  }
  uint32_t step = (uint32_t) step64;
  gc_compress_info info;
  if (x.dtype == GC_F32) {
    st = gc_compress_f32(c, x.data, step, buf, cap, &len, &info);
    if (!st)
      st = gc_decompress_add_f32(c, buf, len, step, 1.0f, y);
  } else {
    st = gc_compress_f64(c, x.data, step, buf, cap, &len, &info);
    if (!st)
      st = gc_decompress_add_f64(c, buf, len, step, 1.0, y);
  }
  if (st) {
    gc_cli_fail(CMD, st, "%s on %s", name, in);
    goto done;
  }
  if (out && (st = gc_npy_write(out, x.dtype, 1, &n, y))) {
    gc_cli_fail(CMD, st, "cannot write %s", out);
    goto done;
  }
  /* Gaussian-k's count is whatever its threshold rule gives (theory.md
   * 2.5), which can be far from k on non-Gaussian x: say so */
  size_t k = (T->flags & GC_COMP_COUNT_VARIES) ? gc_compressor_k(c) : 0;
  if (k && (3 * info.selected < 2 * k || 3 * info.selected > 4 * k))
    fprintf(stderr, "gradcomp %s: warning: %s selected %zu entries of %s, k = %zu "
            "(%.3g k, outside [2k/3, 4k/3])\n", CMD, name, info.selected, in, k,
            (double) info.selected / (double) k);
  if (stats) {
    /* in units of the largest |x_i|, |y_i|, so that squares of float64
     * entries beyond 1e154 do not overflow the ratio */
    double num = 0, den = 0, big = 0;
    size_t nnz = 0;
    for (size_t i = 0; i < n; i++) {
      double xi = x.dtype == GC_F32 ? ((float *) x.data)[i] : ((double *) x.data)[i];
      double yi = x.dtype == GC_F32 ? ((float *) y)[i] : ((double *) y)[i];
      big = fmax(big, fmax(fabs(xi), fabs(yi)));
    }
    int e = big > 0 && isfinite(big) ? ilogb(big) : 0;
    for (size_t i = 0; i < n; i++) {
      double xi = x.dtype == GC_F32 ? ((float *) x.data)[i] : ((double *) x.data)[i];
      double yi = x.dtype == GC_F32 ? ((float *) y)[i] : ((double *) y)[i];
      double xs = ldexp(xi, -e), ds = xs - ldexp(yi, -e);
      num += ds * ds;
      den += xs * xs;
      nnz += yi != 0;
    }
    printf("bytes=%zu rel_err=%.9g nnz=%zu", len, den > 0 ? num / den : 0.0, nnz);
    if (k)
      printf(" selected=%zu k=%zu", info.selected, k);
    putchar('\n');
  }
  rc = 0;
done:
  free(buf);
  free(y);
  gc_compressor_free(c);
  gc_array_free(&x);
  return rc;
}
