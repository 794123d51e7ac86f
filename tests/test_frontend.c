/* test_frontend.c -- `gradcomp compress` run as a program on small .npy
 * files: --list, --stats format, thread-count independence, and a clear
 * message with a non-zero exit for every bad input. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_errno.h"
#include "gc_npy.h"
#include "gc_test.h"

enum { N = 2000 };

static char xpath[512], x64path[512], nanpath[512], badpath[512], out1[512], out2[512];
static char gradcomp[1024];

static void setup(void)
{
  snprintf(gradcomp, sizeof gradcomp, "%s", gc_test_builddir("experiments/gradcomp"));
  snprintf(xpath, sizeof xpath, "%s", gc_test_tmp("fe-x.npy"));
  snprintf(x64path, sizeof x64path, "%s", gc_test_tmp("fe-x64.npy"));
  snprintf(nanpath, sizeof nanpath, "%s", gc_test_tmp("fe-nan.npy"));
  snprintf(badpath, sizeof badpath, "%s", gc_test_tmp("fe-bad.npy"));
  snprintf(out1, sizeof out1, "%s", gc_test_tmp("fe-y1.npy"));
  snprintf(out2, sizeof out2, "%s", gc_test_tmp("fe-y2.npy"));
  float x[N];
  double xd[N];
  gc_test_fill_normal_f32(x, N, 17);
  for (size_t i = 0; i < N; i++)
    xd[i] = x[i];
  size_t n = N;
  cr_assert(eq(int, gc_npy_write(xpath, GC_F32, 1, &n, x), GC_SUCCESS));
  cr_assert(eq(int, gc_npy_write(x64path, GC_F64, 1, &n, xd), GC_SUCCESS));
  x[123] = NAN;
  cr_assert(eq(int, gc_npy_write(nanpath, GC_F32, 1, &n, x), GC_SUCCESS));
  FILE *f = fopen(badpath, "wb");
  fputs("\x93NUMPY garbage that is not a header", f);
  fclose(f);
}

static void teardown(void)
{
  remove(xpath);
  remove(x64path);
  remove(nanpath);
  remove(badpath);
  remove(out1);
  remove(out2);
}

TestSuite(frontend, .init = setup, .fini = teardown);

static int run(char *out, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int run(char *out, size_t cap, const char *fmt, ...)
{
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  return gc_test_run(cmd, out, cap);
}

Test(frontend, list_and_help)
{
  char out[16384];
  cr_assert(eq(int, run(out, sizeof out, "%s compress --list", gradcomp), 0));
  cr_assert(strstr(out, "topk") && strstr(out, "randk-unbiased") && strstr(out, "dgc"), "%s", out);
  cr_assert(eq(int, run(out, sizeof out, "%s compress --help", gradcomp), 0));
  cr_assert(strstr(out, "--stats") != NULL);
}

Test(frontend, stats_format_and_values)
{
  char out[4096];
  cr_assert(eq(int, run(out, sizeof out, "%s compress topk --k 20 --in %s --out %s --stats",
                        gradcomp, xpath, out1), 0), "%s", out);
  size_t bytes, nnz;
  double rel;
  char tail[8];
  cr_assert(eq(int, sscanf(out, "bytes=%zu rel_err=%lf nnz=%zu%1s", &bytes, &rel, &nnz, tail), 3),
            "format: %s", out);
  cr_assert(eq(sz, nnz, 20));
  cr_assert(bytes <= 7 + 8 * 20, "%zu", bytes);
  cr_assert(rel > 0 && rel < 1 - 20.0 / N, "%g", rel);
  gc_array y = {0};
  cr_assert(eq(int, gc_npy_read(out1, &y), GC_SUCCESS));
  cr_assert(eq(int, y.dtype, GC_F32));
  cr_assert(eq(sz, y.count, N));
  gc_array_free(&y);
  /* float64 in, float64 out */
  cr_assert(eq(int, run(out, sizeof out, "%s compress qsgd --levels 4 --in %s --out %s",
                        gradcomp, x64path, out1), 0), "%s", out);
  cr_assert(eq(int, gc_npy_read(out1, &y), GC_SUCCESS));
  cr_assert(eq(int, y.dtype, GC_F64));
  gc_array_free(&y);
}

static int same_file(const char *a, const char *b)
{
  FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
  int same = f && g;
  while (same) {
    int c = fgetc(f), d = fgetc(g);
    same = c == d;
    if (c == EOF || d == EOF)
      break;
  }
  if (f)
    fclose(f);
  if (g)
    fclose(g);
  return same;
}

Test(frontend, bit_identical_across_thread_counts)
{
  const char *names[] = {"topk", "randk", "randk-unbiased", "gaussk", "dgc", "qsgd", "terngrad"};
  char out[4096];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    cr_assert(eq(int, run(out, sizeof out, "OMP_NUM_THREADS=1 %s compress %s --density 0.05 --seed 9 --step 3 --in %s --out %s",
                          gradcomp, names[i], xpath, out1), 0), "%s", out);
    cr_assert(eq(int, run(out, sizeof out, "OMP_NUM_THREADS=2 %s compress %s --density 0.05 --seed 9 --step 3 --in %s --out %s",
                          gradcomp, names[i], xpath, out2), 0), "%s", out);
    cr_assert(same_file(out1, out2), "%s differs between 1 and 2 threads", names[i]);
  }
}

/* Each bad input: non-zero exit, "gradcomp compress: " and a word naming
 * the problem. */
Test(frontend, bad_inputs_named)
{
  struct { const char *args, *word; } cases[] = {
    {"nosuch --in X --out O", "topk"},            /* lists the valid names */
    {"topk --k 5000 --in X --out O", "5000"},      /* k > d */
    {"topk --density 0 --in X --out O", "density"},
    {"topk --density 1.5 --in X --out O", "density"},
    {"qsgd --levels 0 --in X --out O", "levels"},
    {"topk --k 3 --in N --out O", "index 123"},    /* NaN input */
    {"topk --k 3 --in B --out O", "B"},            /* malformed .npy */
    {"topk --k 3 --out O", "--in"},                 /* missing --in */
    {"topk --k 3 --in /nonexistent/x.npy --out O", "nonexistent"},
    {"topk --k abc --in X --out O", "abc"},
    {"topk --ties sideways --in X --out O", "sideways"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char args[1024] = "", out[4096];
    for (const char *p = cases[i].args; *p; p++) {
      const char *sub = NULL;
      if (*p == 'X' && (p[1] == ' ' || !p[1])) sub = xpath;
      else if (*p == 'O' && (p[1] == ' ' || !p[1])) sub = out1;
      else if (*p == 'N' && (p[1] == ' ' || !p[1])) sub = nanpath;
      else if (*p == 'B' && (p[1] == ' ' || !p[1])) sub = badpath;
      size_t l = strlen(args);
      if (sub)
        snprintf(args + l, sizeof args - l, "%s", sub);
      else if (l + 1 < sizeof args) {
        args[l] = *p;
        args[l + 1] = '\0';
      }
    }
    int st = run(out, sizeof out, "%s compress %s", gradcomp, args);
    cr_assert(st > 0 && st < 128, "'%s': exit %d (crash or success)\n%s", args, st, out);
    cr_assert(strstr(out, "gradcomp compress: ") != NULL, "'%s': %s", args, out);
    const char *word = cases[i].word;
    if (!strcmp(word, "B"))
      word = badpath;
    cr_assert(strstr(out, word) != NULL, "'%s' should name '%s': %s", args, word, out);
  }
}

/* A misspelt model is an error that lists the models, not an empty table. */
Test(frontend, bench_train_unknown_model)
{
  char out[4096];
  int st = run(out, sizeof out, "%s bench train --model vgg19 --no-peer", gradcomp);
  cr_assert(st == 2, "exit %d\n%s", st, out);
  cr_assert(strstr(out, "unknown model 'vgg19'") && strstr(out, "cifar-vgg19"),
            "%s", out);
}

/* Config values that start with "--" ("seed --5", "dataset --x") are plain
 * values: a bad one is named with the usage exit 2, never a crash when the
 * config's strings are freed (free(): invalid pointer, exit 134). */
Test(frontend, train_config_values_with_dashes)
{
  static const struct { const char *line, *word; } cases[] = {
    {"seed --5", "'--5'"},          /* rejected while parsing the file */
    {"dataset --x", "--x"},         /* kept until the library rejects it */
  };
  char cfg[512], dir[512], out[4096];
  snprintf(cfg, sizeof cfg, "%s", gc_test_tmp("fe-train.cfg"));
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("fe-train-out"));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    FILE *f = fopen(cfg, "w");
    cr_assert(f != NULL);
    fprintf(f, "# a value that looks like an option\n%s\nworkers 2\n", cases[i].line);
    fclose(f);
    int st = run(out, sizeof out, "%s train --config %s --quiet --out %s", gradcomp, cfg, dir);
    cr_assert(st == 2, "'%s': exit %d\n%s", cases[i].line, st, out);
    cr_assert(strstr(out, "gradcomp train: ") && strstr(out, cases[i].word),
              "'%s': %s", cases[i].line, out);
  }
  remove(cfg);
  remove(dir);   /* the library may have made the (empty) output folder */
}

/* bench compress: --device cpu is taken (cmd_bench.c removes the pair),
 * a bad device is a usage error, a dense compressor named in --compressors
 * gets one row per d, not one per density, and qsgd's --levels and
 * --bucket are taken and checked. */
Test(frontend, bench_compress_device_and_dense_rows)
{
  char out[8192], csv[512];
  snprintf(csv, sizeof csv, "%s", gc_test_tmp("fe-bench.csv"));
  int st = run(out, sizeof out, "%s bench compress --device cpu --d 1000 --density 0.1,0.2 "
               "--compressors topk,qsgd --repeat 1 --csv %s", gradcomp, csv);
  cr_assert(st == 0, "exit %d\n%s", st, out);
  FILE *f = fopen(csv, "r");
  cr_assert(f != NULL);
  char line[512];
  size_t topk = 0, qsgd = 0;
  while (fgets(line, sizeof line, f)) {
    topk += !strncmp(line, "topk,", 5);
    qsgd += !strncmp(line, "qsgd,", 5);
  }
  fclose(f);
  remove(csv);
  cr_assert(topk == 2 && qsgd == 1, "topk rows %zu (want 2), qsgd rows %zu (want 1)", topk, qsgd);
  st = run(out, sizeof out, "%s bench compress --device tpu --d 1000", gradcomp);
  cr_assert(st == 2 && strstr(out, "tpu"), "exit %d\n%s", st, out);
  /* qsgd's levels and buckets (the paper's bucketed form) */
  st = run(out, sizeof out, "%s bench compress --d 1000 --compressors qsgd --levels 8 "
           "--bucket 100 --repeat 1", gradcomp);
  cr_assert(st == 0 && strstr(out, "qsgd"), "exit %d\n%s", st, out);
  st = run(out, sizeof out, "%s bench compress --d 1000 --levels 0", gradcomp);
  cr_assert(st == 2 && strstr(out, "--levels"), "exit %d\n%s", st, out);
}

/* bench compress --threads 1,2: each row once per thread count, its
 * speedup over the one-thread row in the last column (1 on that row, empty
 * when 1 is not listed); a count that is not a whole number in [1, 256]
 * is a usage error. */
Test(frontend, bench_compress_thread_list_rows)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP: bench compress refuses more than one thread");
#endif
  char out[8192], csv[512];
  snprintf(csv, sizeof csv, "%s", gc_test_tmp("fe-bench-thr.csv"));
  for (int listed = 0; listed < 2; listed++) {
    int st = run(out, sizeof out, "%s bench compress --d 5000 --density 0.1 --compressors "
                 "topk --repeat 1 --threads %s --csv %s", gradcomp, listed ? "1,2" : "2", csv);
    cr_assert(st == 0, "exit %d\n%s", st, out);
    FILE *f = fopen(csv, "r");
    cr_assert(f != NULL);
    char line[512];
    cr_assert(fgets(line, sizeof line, f) && strstr(line, ",ratio_memcpy,speedup_1thread\n"),
              "header %s", line);
    int rows = 0, reads = 0, copies = 0, read_thr = 0, copy_thr = 0;
    while (fgets(line, sizeof line, f)) {
      int bt;   /* the baselines: one-core, and all-core where there are more */
      if (sscanf(line, "stream-read,5000,0,%d,", &bt) == 1)
        reads++, read_thr = bt;
      if (sscanf(line, "memcpy,5000,0,%d,", &bt) == 1)
        copies++, copy_thr = bt;
      if (strncmp(line, "topk,", 5))
        continue;
      int thr;
      char speedup[64] = "";
      cr_assert(sscanf(line, "topk,5000,0.1,%d,%*[^,],%*[^,],%*[^,],%*[^,],%63s", &thr,
                       speedup) >= 1, "row %s", line);
      cr_assert(thr == (listed ? rows + 1 : 2), "row %d: threads %d", rows, thr);
      if (!listed)
        cr_assert(speedup[0] == '\0', "no one-thread row, yet speedup '%s'", speedup);
      else if (thr == 1)
        cr_assert(strcmp(speedup, "1.0000") == 0, "one-thread row's speedup '%s'", speedup);
      else
        cr_assert(atof(speedup) > 0, "two-thread row's speedup '%s'", speedup);
      rows++;
    }
    fclose(f);
    cr_assert(rows == (listed ? 2 : 1), "%d topk rows", rows);
    cr_assert(reads >= 1 && reads == copies && read_thr == copy_thr,
              "baselines: %d reads (last on %d threads), %d copies (last on %d)", reads,
              read_thr, copies, copy_thr);
  }
  remove(csv);
  for (int i = 0; i < 3; i++) {
    static const char *const bad[3] = {"0", "1.5", "1,300"};
    int st = run(out, sizeof out, "%s bench compress --d 1000 --threads %s", gradcomp, bad[i]);
    cr_assert(st == 2 && strstr(out, "--threads"), "--threads %s: exit %d\n%s", bad[i], st,
              out);
  }
}

/* --resume before the first checkpoint exists (a run killed in epoch 1)
 * starts the run from the beginning instead of refusing; it says so, and
 * the run then leaves a checkpoint to resume from. */
Test(frontend, train_resume_without_checkpoint_starts_fresh)
{
  const char *data = gc_test_need_dataset("mnist");
  char dir[512], out[8192], ck[600];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("fe-fresh"));
  snprintf(ck, sizeof ck, "%s/checkpoint.json", dir);
  int st = run(out, sizeof out, "%s train --data %s --train-subset 200 --test-subset 100"
               " --workers 2 --epochs 1 --out %s --resume", gradcomp, data, dir);
  cr_assert(st == 0, "exit %d\n%s", st, out);
  cr_assert(strstr(out, "no checkpoint in") && strstr(out, "starting from the beginning"),
            "%s", out);
  FILE *f = fopen(ck, "r");
  cr_assert(f != NULL, "%s missing", ck);
  fclose(f);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert(system(cmd) == 0);
}

/* Gaussian-k's count is whatever its threshold rule gives: on uniformly
 * spread x it kept 0 of k = 3146 (d = 3145733, density 0.001) without a
 * word.  compress names the count in --stats (selected=, k=) and warns on
 * stderr when it leaves [2k/3, 4k/3]; top-K (exactly k) keeps its line. */
Test(frontend, gaussk_count_outside_band_warned)
{
  enum { D = 200000 };
  char path[512], out[4096];
  snprintf(path, sizeof path, "%s", gc_test_tmp("fe-uniform.npy"));
  float *x = malloc(D * sizeof *x);
  for (size_t i = 0; i < D; i++)   /* uniform on [-1, 1], shuffled order */
    x[i] = (float) (2.0 * (double) ((i * 2654435761u) % D) / D - 1.0);
  size_t n = D;
  cr_assert(eq(int, gc_npy_write(path, GC_F32, 1, &n, x), GC_SUCCESS));
  free(x);
  cr_assert(eq(int, run(out, sizeof out, "%s compress gaussk --density 0.001 --in %s --stats",
                        gradcomp, path), 0), "%s", out);
  size_t bytes, nnz, sel, k;
  double rel;
  const char *line = strstr(out, "bytes=");
  cr_assert(line && sscanf(line, "bytes=%zu rel_err=%lf nnz=%zu selected=%zu k=%zu", &bytes,
                           &rel, &nnz, &sel, &k) == 5, "%s", out);
  cr_assert(eq(sz, k, 200));
  cr_assert(3 * sel < 2 * k, "selected %zu: the uniform case is meant to miss", sel);
  cr_assert(strstr(out, "warning: gaussk selected") && strstr(out, "outside [2k/3, 4k/3]"),
            "%s", out);
  cr_assert(eq(int, run(out, sizeof out, "%s compress topk --density 0.001 --in %s --stats",
                        gradcomp, path), 0), "%s", out);
  cr_assert(strstr(out, "warning") == NULL && strstr(out, "selected=") == NULL, "%s", out);
  remove(path);
}

/* In training the warning comes once per run, not per step, and each
 * epoch line gives the mean count over k (log.csv's support_union_over_k
 * is that count with one worker). */
Test(frontend, train_gaussk_count_warned_once)
{
  const char *data = gc_test_need_dataset("mnist");
  char dir[512], out[16384];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("fe-gaussk"));
  int st = run(out, sizeof out, "%s train --data %s --train-subset 2000 --test-subset 100"
               " --workers 2 --batch 32 --epochs 2 --algorithm uni --compressor gaussk"
               " --density 0.001 --out %s", gradcomp, data, dir);
  cr_assert(st == 0, "exit %d\n%s", st, out);
  size_t warnings = 0;
  for (const char *p = out; (p = strstr(p, "warning: gaussk sent")); p++)
    warnings++;
  cr_assert(eq(sz, warnings, 1), "%s", out);
  cr_assert(strstr(out, "epoch 1: ") && strstr(out, "gaussk count"), "%s", out);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert(system(cmd) == 0);
}
