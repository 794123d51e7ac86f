/* test_frontend.c -- `gradcomp compress` run as a program on small .npy
 * files: --list, --stats format, thread-count independence, and a clear
 * message with a non-zero exit for every bad input. */
#define _GNU_SOURCE   /* fork, kill, inotify, flock, usleep */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
  /* top-K's |x - C(x)|^2/|x|^2 <= 1 - K/N exactly; printed with %.9g
   * (relative 5e-9), and Gaussian x sits about 0.08 below the bound (the
   * top 1% hold ~8% of the energy), so no rounding is at stake */
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

/* Both bench targets list the GPU's options in every build, under the same
 * flag names on both devices, and take a list of models on the CPU too. */
Test(frontend, bench_help_lists_the_gpu_options)
{
  static const char *const targets[] = { "compress", "train" };
  for (int i = 0; i < 2; i++) {
    char out[8192];
    int st = run(out, sizeof out, "%s bench %s --help", gradcomp, targets[i]);
    cr_assert(st == 0, "exit %d\n%s", st, out);
    cr_assert(strstr(out, "[--device cpu|cuda]") && strstr(out, "--device cuda ("),
              "bench %s --help: %s", targets[i], out);
  }
  char out[8192];
  run(out, sizeof out, "%s bench train --help", gradcomp);
  const char *gpu = strstr(out, "--device cuda (");
  cr_assert(gpu && strstr(gpu, "--models a,b") && strstr(gpu, "--seconds S"), "%s", out);
  int st = run(out, sizeof out, "%s bench train --models mnist-mlp,vgg19 --no-peer", gradcomp);
  cr_assert(st == 2 && strstr(out, "unknown model 'vgg19'"), "exit %d\n%s", st, out);
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

/* One parser of the compressor options (cli/compopt.c): every command
 * that builds a compressor takes the same flag with the same range and
 * message, and its --help has the flag's one line.  Each bad value must
 * fail with exit 2 and "--FLAG: VALUE must be RANGE"; the commands' own
 * options (the CSV path, the output) are valid, so nothing else can fail. */
Test(frontend, compressor_options_alike_in_every_command)
{
  static const struct { const char *cmd; const char *flags; } cmds[] = {
    { "compress topk --in X --out O", "k density levels bucket threshold clip ties "
                                      "gauss-loops sample-ratio rank" },
    { "bench compress --d 1000 --repeat 1", "density levels bucket clip ties gauss-loops "
                                            "sample-ratio" },
    { "theory contraction --d 1000 --trials 1", "levels bucket threshold clip ties "
                                                "gauss-loops sample-ratio" },
    { "theory trajectory --problem toy --lr 0.01 --steps 2", "k density levels bucket "
      "threshold clip ties gauss-loops sample-ratio rank k-down density-down levels-down "
      "rank-down ties-down" },
    { "theory bounds --problem toy --steps 2 --runs 1", "k density levels bucket threshold "
      "clip ties gauss-loops sample-ratio rank k-down density-down levels-down rank-down "
      "ties-down" },
    { "train --out O", "k density levels bucket threshold clip ties gauss-loops sample-ratio "
      "rank k-down density-down levels-down ties-down" },
  };
  static const struct { const char *flag, *bad, *want; } bad[] = {
    { "k", "0", "--k: 0 must be >= 1" },
    { "density", "1.5", "--density: 1.5 must be in (0, 1]" },
    { "levels", "0", "--levels: 0 must be in [1, 2^32)" },
    { "bucket", "-1", "--bucket: '-1' is not a non-negative integer" },
    { "threshold", "-2", "--threshold: -2 must be >= 0" },
    { "clip", "-1", "--clip: -1 must be >= 0" },
    { "ties", "middle", "--ties: 'middle' is not low or high" },
    { "gauss-loops", "0", "--gauss-loops: 0 must be in [1, 2^32)" },
    { "sample-ratio", "0", "--sample-ratio: 0 must be in (0, 1]" },
    { "rank", "4294967296", "--rank: 4294967296 must be in [1, 2^32)" },
    { "k-down", "0", "--k-down: 0 must be >= 1" },
    { "density-down", "0", "--density-down: 0 must be in (0, 1]" },
    { "levels-down", "0", "--levels-down: 0 must be in [1, 2^32)" },
    { "rank-down", "0", "--rank-down: 0 must be in [1, 2^32)" },
    { "ties-down", "up", "--ties-down: 'up' is not low or high" },
  };
  char out[65536], cmd[2048];
  for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
    char line[512];
    snprintf(line, sizeof line, "%s", cmds[c].cmd);
    char *x = strstr(line, " X "), *o = strstr(line, " O");
    /* compress reads a real vector; O is a path that is never written */
    if (x)
      snprintf(cmd, sizeof cmd, "%.*s %s --out %s", (int) (x - line), line, xpath, out1);
    else if (o)
      snprintf(cmd, sizeof cmd, "%.*s %s", (int) (o - line), line, gc_test_tmp("fe-never"));
    else
      snprintf(cmd, sizeof cmd, "%s", line);
    char help[1024];
    snprintf(help, sizeof help, "%.*s --help", (int) strcspn(cmds[c].cmd, "-"), cmds[c].cmd);
    if (!strncmp(help, "compress topk", 13))
      snprintf(help, sizeof help, "compress --help");
    cr_assert(eq(int, run(out, sizeof out, "%s %s", gradcomp, help), 0), "%s", help);
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
      char word[40];
      snprintf(word, sizeof word, " %s ", bad[b].flag);
      char padded[512];
      snprintf(padded, sizeof padded, " %s ", cmds[c].flags);
      int takes = strstr(padded, word) != NULL;
      int st = run(out, sizeof out, "%s %s --%s %s", gradcomp, cmd, bad[b].flag, bad[b].bad);
      cr_assert(eq(int, st, 2), "%s --%s %s: exit %d\n%s", cmd, bad[b].flag, bad[b].bad, st,
                out);
      if (takes)
        cr_assert(strstr(out, bad[b].want) != NULL, "%s --%s %s: want '%s'\n%s", cmd,
                  bad[b].flag, bad[b].bad, bad[b].want, out);
      else   /* a flag the command does not take is an unknown option */
        cr_assert(strstr(out, "unknown option") != NULL, "%s --%s: %s", cmd, bad[b].flag, out);
    }
  }
  /* the help line of a flag is the same text everywhere */
  const char *levels = "  --levels S          qsgd's levels s, in [1, 2^32) (";
  cr_assert(eq(int, run(out, sizeof out, "%s compress --help", gradcomp), 0));
  cr_assert(strstr(out, levels) != NULL, "%s", out);
  cr_assert(eq(int, run(out, sizeof out, "%s theory trajectory --help", gradcomp), 0));
  cr_assert(strstr(out, levels) != NULL, "%s", out);
  cr_assert(eq(int, run(out, sizeof out, "%s bench compress --help", gradcomp), 0));
  cr_assert(strstr(out, levels) != NULL, "%s", out);
}

/* The transports come from one registry (experiments/transports.c): both
 * commands that take --transport list every row in --help and refuse an
 * unknown name naming the known ones. */
Test(frontend, transports_listed_and_unknown_refused)
{
  static const char *const cmds[] = { "train", "theory trajectory" };
  char out[65536];
  for (size_t c = 0; c < 2; c++) {
    cr_assert(eq(int, run(out, sizeof out, "%s %s --help", gradcomp, cmds[c]), 0));
    cr_assert(strstr(out, "--transport inproc  every worker and the server in this process"
                          " (default)") && strstr(out, "--transport mpi     under mpirun"),
              "%s --help:\n%s", cmds[c], out);
    /* the first option, so nothing else can be refused before it */
    int st = run(out, sizeof out, "%s %s --transport carrier-pigeon %s", gradcomp, cmds[c],
                 c ? "--problem toy --lr 0.1 --steps 1" : "--out /nonexistent/never");
    cr_assert(st == 2 && strstr(out, "--transport: unknown transport 'carrier-pigeon' "
                                     "(inproc, mpi)"), "%s: exit %d\n%s", cmds[c], st, out);
  }
}

/* theory trajectory takes every compressor option, e.g. qsgd's --levels,
 * and --levels 1 (the default) runs what no --levels runs; --k-down alone
 * sizes the downlink. */
Test(frontend, trajectory_takes_compressor_options)
{
  char a[8192], b[8192];
  const char *t = "theory trajectory --problem quadratic:P=2,d=20 --lr 0.05 --steps 5 "
                  "--algorithm bi --compressor qsgd --compressor-down topk";
  cr_assert(eq(int, run(a, sizeof a, "%s %s --k-down 3", gradcomp, t), 0), "%s", a);
  cr_assert(eq(int, run(b, sizeof b, "%s %s --k-down 3 --levels 1", gradcomp, t), 0), "%s", b);
  cr_assert(strcmp(a, b) == 0, "%s\n---\n%s", a, b);
  cr_assert(strstr(a, "K_d=3") != NULL, "%s", a);
  cr_assert(eq(int, run(b, sizeof b, "%s %s --k-down 3 --levels 4", gradcomp, t), 0), "%s", b);
  cr_assert(strcmp(a, b) != 0, "--levels 4 changed nothing:\n%s", b);
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

/* Lines of dir/name (-1 if it does not exist). */
static long lines_in(const char *dir, const char *name)
{
  char p[700];
  size_t len;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  char *t = gc_test_slurp(p, &len);
  if (!t)
    return -1;
  long n = 0;
  for (size_t i = 0; i < len; i++)
    n += t[i] == '\n';
  free(t);
  return n;
}

static int exists_in(const char *dir, const char *name)
{
  char p[700];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* Start `gradcomp train ARGS --out dir` in the background; its pid. */
static long train_bg(const char *data, const char *dir, const char *args)
{
  char out[256];
  int st = run(out, sizeof out, "%s train --data %s --workers 2 --quiet %s --out %s"
               " >/dev/null 2>&1 & echo $!", gradcomp, data, args, dir);
  cr_assert(st == 0, "exit %d\n%s", st, out);
  return atol(out);
}

/* Kill pid and wait until dir/.lock is free (the lock goes with the
 * process however it ends: a dead run's lock blocks nobody). */
static void kill_and_free(long pid, const char *dir)
{
  char p[700];
  kill((pid_t) pid, SIGKILL);
  snprintf(p, sizeof p, "%s/.lock", dir);
  int fd = open(p, O_RDWR);
  cr_assert(fd >= 0, "%s", p);
  int i = 0;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0 && i++ < 3000)
    usleep(10000);
  cr_assert(i < 3000, "%s still locked 30 s after the kill", p);
  close(fd);
}

/* Two runs into one --out: while one runs, a second is refused (exit 2)
 * naming the folder and the first's pid, and touches nothing; once the
 * first is killed, --force may start over (the dead run's lock blocks
 * nothing), and a --force run killed before its first epoch ends leaves
 * no log.csv beside the old run's model or checkpoint. */
Test(frontend, train_out_is_locked_and_force_leaves_nothing_old, .timeout = 300)
{
  const char *data = gc_test_need_dataset("mnist");
  char dir[512], out[8192], want[128];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("fe-lock"));
  long a = train_bg(data, dir, "--train-subset 2000 --test-subset 100 --epochs 100000");
  for (int i = 0; i < 6000 && !exists_in(dir, "checkpoint.json"); i++)
    usleep(10000);
  cr_assert(exists_in(dir, "checkpoint.json"), "the first run wrote no checkpoint in 60 s");
  int st = run(out, sizeof out, "%s train --data %s --workers 2 --train-subset 2000"
               " --test-subset 100 --epochs 1 --quiet --out %s --resume", gradcomp,
               data, dir);
  snprintf(want, sizeof want, "is in use by another run (pid %ld on ", a);
  cr_assert(st == 2 && strstr(out, dir) && strstr(out, want), "exit %d\n%s", st, out);
  kill_and_free(a, dir);
  cr_assert(exists_in(dir, "model.npy"));
  /* a worker rank's stop record of an old MPI run goes with the rest */
  snprintf(out, sizeof out, "echo old > '%s/stopped-r2.txt'", dir);
  cr_assert(system(out) == 0);
  /* an epoch of 1000 steps: time to stop the --force run inside it */
  long c = train_bg(data, dir, "--train-subset 20000 --test-subset 100 --epochs 3 --force");
  for (int i = 0; i < 6000 && !(lines_in(dir, "log.csv") == 1 && !exists_in(dir, "model.npy"));
       i++)
    usleep(10000);
  kill_and_free(c, dir);
  cr_assert(exists_in(dir, "stopped-r2.txt") == 0, "--force left an old stop record");
  long rows = lines_in(dir, "log.csv") - 1;
  cr_assert(rows >= 0, "no log.csv");
  cr_log_info("the --force run killed with %ld rows in its log.csv", rows);
  if (rows == 0)
    cr_assert(exists_in(dir, "model.npy") + exists_in(dir, "checkpoint.json") +
              exists_in(dir, "checkpoint-e1.bin") == 0,
              "a header-only log.csv beside the old run's model or checkpoint");
  snprintf(out, sizeof out, "rm -rf '%s'", dir);
  cr_assert(system(out) == 0);
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

/* A config file is read to its end, one option a line: past 256 lines, a
 * boolean option with a value (0/1/true/false), and a second value or a
 * missing one refused naming the line instead of dropped or read as an
 * option.  "epochs 0" last: a file read to the end fails on it (exit 2,
 * "--epochs must be at least 1") after every line before it was taken. */
Test(frontend, train_config_lines_and_boolean_values)
{
  static const struct { const char *text, *want; } cases[] = {
    { "quiet 0\nepochs 0\n", "--epochs must be at least 1" },
    { "quiet true\nresume no\niid 1\nnoniid false\nepochs 0\n",
      "--epochs must be at least 1" },
    { "workers 4 8\n", "line 1: 'workers' takes one value, not '4 8'" },
    { "# comment\n\nquiet maybe\n", "line 3: 'quiet' is on or off" },
    { "workers\nbatch 3\n", "line 1: 'workers' has no value" },
    { "help\n", "line 1: 'help' is not an option of a config file" },
  };
  char cfg[512], dir[512], out[4096];
  snprintf(cfg, sizeof cfg, "%s", gc_test_tmp("fe-lines.cfg"));
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("fe-lines-out"));
  for (size_t i = 0; i <= sizeof cases / sizeof cases[0]; i++) {
    FILE *f = fopen(cfg, "w");
    cr_assert(f != NULL);
    const char *want = "--epochs must be at least 1";
    if (i < sizeof cases / sizeof cases[0]) {
      fputs(cases[i].text, f);
      want = cases[i].want;
    } else {
      for (int l = 0; l < 600; l++)   /* well past the old 256-line cut */
        fprintf(f, "seed %d\n", l);
      fputs("epochs 0\n", f);
    }
    fclose(f);
    int st = run(out, sizeof out, "%s train --config %s --out %s", gradcomp, cfg, dir);
    cr_assert(st == 2 && strstr(out, want), "case %zu: exit %d, wanted '%s':\n%s", i,
              st, want, out);
    cr_assert(access(dir, F_OK) != 0, "case %zu made %s", i, dir);
  }
  remove(cfg);
}

/* config.json stays JSON whatever bytes the config file's path and the
 * environment hold: a quote, a backslash and a tab in both, read back by
 * Python's json module. */
Test(frontend, train_config_json_escapes_strings)
{
  const char *data = gc_test_need_dataset("mnist");
  if (access("/usr/bin/python3", X_OK) != 0)
    cr_skip_test("no /usr/bin/python3 to parse config.json");
  char cfg[512], dir[512], json[600], out[8192];
  snprintf(cfg, sizeof cfg, "%s", gc_test_tmp("q\"uote\\back\ttab.conf"));
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("fe-json"));
  snprintf(json, sizeof json, "%s/config.json", dir);
  FILE *f = fopen(cfg, "w");
  cr_assert(f != NULL);
  fputs("epochs 1\n", f);
  fclose(f);
  const char *env = "Has\"well\\\t";
  int st = run(out, sizeof out, "OPENBLAS_CORETYPE='%s' %s train --config '%s' --data %s"
               " --train-subset 64 --test-subset 20 --max-steps 1 --workers 2 --batch 4 --quiet"
               " --out %s", env, gradcomp, cfg, data, dir);
  cr_assert(st == 0, "exit %d\n%s", st, out);
  st = run(out, sizeof out, "/usr/bin/python3 -c 'import json, sys; d = json.load(open("
           "sys.argv[1])); sys.exit(d[\"config_file\"] != sys.argv[2] or "
           "d[\"openblas_coretype_env\"] != sys.argv[3])' %s '%s' '%s'", json, cfg, env);
  cr_assert(st == 0, "config.json is not JSON or lost the strings (exit %d)\n%s", st, out);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, cfg);
  cr_assert(system(cmd) == 0);
}

/* A subnormal option value is a double like any other (strtod says ERANGE
 * for it): --threshold 1e-310 keeps the entries above it, subnormal ones
 * included; a value below the smallest subnormal, which strtod would turn
 * into 0, is refused naming the flag. */
Test(frontend, subnormal_option_values)
{
  char in[512], y[512], out[4096];
  snprintf(in, sizeof in, "%s", gc_test_tmp("fe-sub.npy"));
  snprintf(y, sizeof y, "%s", gc_test_tmp("fe-sub-y.npy"));
  double x[5] = { 1e-309, -3e-310, 1e-311, 0.5, -5e-324 };
  size_t n = 5;
  cr_assert(eq(int, gc_npy_write(in, GC_F64, 1, &n, x), GC_SUCCESS));
  int st = run(out, sizeof out, "%s compress threshold --threshold 1e-310 --in %s --out %s"
               " --stats", gradcomp, in, y);
  cr_assert(st == 0 && strstr(out, "nnz=3"), "exit %d\n%s", st, out);
  st = run(out, sizeof out, "%s compress threshold --threshold 1e-400 --in %s --out %s",
           gradcomp, in, y);
  cr_assert(st == 2 && strstr(out, "--threshold: '1e-400' is below the smallest double"),
            "exit %d\n%s", st, out);
  remove(in);
  remove(y);
}

/* Ctrl-C while compress writes its output: the handler removes the
 * temporary (y.npy.tmp.PID) before it exits 130.  The test waits for the
 * temporary to appear (inotify), then sends SIGINT while the 16 MB are
 * being written; a run that finished first proves nothing and is retried. */
Test(frontend, ctrl_c_leaves_no_temporary)
{
  char dir[512], in[600], y[600];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("fe-int"));
  cr_assert(mkdir(dir, 0700) == 0 || errno == EEXIST);
  snprintf(in, sizeof in, "%s/x.npy", dir);
  snprintf(y, sizeof y, "%s/y.npy", dir);
  size_t n = (size_t) 4 << 20;
  float *x = malloc(n * sizeof *x);
  cr_assert(x != NULL);
  gc_test_fill_normal_f32(x, n, 5);
  cr_assert(eq(int, gc_npy_write(in, GC_F32, 1, &n, x), GC_SUCCESS));
  free(x);
  int caught = 0;
  for (int attempt = 0; attempt < 5 && !caught; attempt++) {
    int ino = inotify_init1(IN_CLOEXEC);
    cr_assert(ino >= 0 && inotify_add_watch(ino, dir, IN_CREATE) >= 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);   /* not ignored: gradcomp installs its handler */
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      execl(gradcomp, gradcomp, "compress", "identity", "--in", in, "--out", y,
            (char *) NULL);
      _exit(127);
    }
    char buf[4096] __attribute__((aligned(8)));
    while (!caught) {
      ssize_t got = read(ino, buf, sizeof buf);
      if (got <= 0)
        break;
      for (char *p = buf; p < buf + got;) {
        struct inotify_event *ev = (struct inotify_event *) p;
        if (ev->len && strstr(ev->name, "y.npy.tmp.")) {
          kill(pid, SIGINT);
          caught = 1;
        }
        p += sizeof *ev + ev->len;
      }
    }
    close(ino);
    int st;
    cr_assert(waitpid(pid, &st, 0) == pid);
    int exited = WIFEXITED(st);
    cr_assert(exited != 0, "gradcomp died of signal %d", WTERMSIG(st));
    if (caught && WEXITSTATUS(st) != 130)
      caught = 0;   /* it renamed the file before the signal came */
    DIR *d = opendir(dir);
    cr_assert(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)))
      cr_assert(strstr(e->d_name, ".tmp.") == NULL, "%s left in %s", e->d_name, dir);
    closedir(d);
    remove(y);
  }
  cr_assert(caught, "compress finished before SIGINT every time");
  remove(in);
  rmdir(dir);
}

/* A CSV that hits a full disk (here the file-size limit: ulimit -f with
 * SIGXFSZ ignored fails the write at a byte, as a full disk does) keeps
 * only whole rows, and the failure is told once. */
Test(frontend, csv_on_a_full_disk_keeps_whole_rows)
{
  char csv[512], out[8192];
  snprintf(csv, sizeof csv, "%s", gc_test_tmp("fe-full.csv"));
  int st = run(out, sizeof out, "{ ulimit -f 8; %s theory contraction --d 1000 --trials 1"
               " --csv %s >/dev/null; }", gradcomp, csv);
  cr_assert(st == 1, "exit %d\n%s", st, out);
  const char *m = strstr(out, "write failed");
  cr_assert(m && strstr(out, csv) && !strstr(m + 1, "write failed"),
            "the failure is not told exactly once:\n%s", out);
  size_t len;
  char *text = gc_test_slurp(csv, &len);
  cr_assert(text && len > 0 && text[len - 1] == '\n', "%zu bytes, last row cut", len);
  int rows = 0, header = -1;   /* every row has the header's fields */
  for (char *line = text; *line; rows++) {
    char *end = strchr(line, '\n');
    int commas = 0;
    for (char *c = line; c < end; c++)
      commas += *c == ',';
    if (header < 0)
      header = commas;
    cr_assert(commas == header, "row %d has %d fields, the header %d", rows,
              commas + 1, header + 1);
    line = end + 1;
  }
  cr_assert(rows > 1, "nothing written before the limit");
  free(text);
  remove(csv);
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
