/* test_train.c -- training through gc_sim on real MNIST: a short run learns
 * (accuracy a broken gradient could not reach), the thread count changes
 * no bit, --resume equals an uninterrupted run, and divergence stops with
 * GC_EDIVERGE keeping the log.  Skipped when the MNIST files are absent
 * (tools/get-data fetches them; the test never downloads). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_errno.h"
#include "gc_train_run.h"
#include "gc_ladder.h"
#include "gc_probe.h"
#include "gc_test.h"

static void base(gc_train_config *c, const char *out)
{
  gc_train_config_default(c);
  c->dataset = "mnist";
  c->model = "mnist-mlp";
  c->data_dir = gc_test_data_dir();
  c->quiet = 1;
  c->out = out;
}

/* log.csv without the four timing columns */
static void strip_times(char *csv)
{
  char *out = csv;
  for (char *line = csv; *line;) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t) (end - line) : strlen(line);
    int commas = 0;
    for (size_t i = 0; i < len; i++) {
      if (line[i] == ',' && ++commas == 9)
        break;
      *out++ = line[i];
    }
    *out++ = '\n';
    line += len + (end ? 1 : 0);
  }
  *out = '\0';
}

static void same_files(const char *a, const char *b, const char *name, int csv)
{
  char pa[1200], pb[1200];
  size_t la, lb;
  snprintf(pa, sizeof pa, "%s/%s", a, name);
  snprintf(pb, sizeof pb, "%s/%s", b, name);
  char *x = gc_test_slurp(pa, &la), *y = gc_test_slurp(pb, &lb);
  cr_assert(x && y, "%s or %s missing", pa, pb);
  if (csv) {
    strip_times(x);
    strip_times(y);
    cr_assert_str_eq(x, y, "%s differs from %s", pa, pb);
  } else {
    cr_assert(la == lb && memcmp(x, y, la) == 0, "%s differs from %s", pa, pb);
  }
  free(x);
  free(y);
}

/* One epoch of 2 workers at lr 0.1 on the first `sub` training examples,
 * evaluated on 2000 test examples. */
static gc_train_result learn(const char *name, const char *algo,
                             double density, size_t sub)
{
  gc_train_config c;
  char out[600];
  snprintf(out, sizeof out, "%s", gc_test_tmp(name));
  base(&c, out);
  c.workers = 2;
  c.algorithm = algo;
  c.density = density;
  c.lr = 0.1;
  c.train_subset = sub;
  c.test_subset = 2000;
  c.epochs = 1;
  gc_train_result r;
  cr_assert_eq(gc_train_run(&c, &r), GC_SUCCESS, "%s", gc_last_error());
  return r;
}

Test(train, mnist_mlp_learns)
{
  gc_test_need_dataset("mnist");
  /* 300 steps of 2 x 10 examples */
  gc_train_result r = learn("learn", "sgd", 0.001, 6000);
  cr_assert_eq(r.steps_done, 300);
  cr_assert_geq(r.test_acc, 0.85, "test accuracy %g after 300 steps", r.test_acc);
}

Test(train, uni_topk_learns)
{
  gc_test_need_dataset("mnist");
  gc_train_result r = learn("uni", "uni", 0.01, 8000);   /* 400 steps */
  cr_assert_geq(r.test_acc, 0.80, "uni top-K at 1%%: accuracy %g", r.test_acc);
}

/* bi (worker and server memories) on the MLP, and the CNNs with dropout
 * and batch-norm: one thread and two threads give the same bytes. */
Test(train, threads_do_not_change_results)
{
  gc_test_need_dataset("mnist");
  static const struct { const char *model, *ds; size_t sub; } m[] = {
    { "mnist-mlp", "mnist", 800 }, { "mnist-cnn", "mnist", 160 },
    { "fmnist-cnn", "fmnist", 400 } };
  for (size_t i = 0; i < 3; i++) {
    if (!gc_test_have_dataset(m[i].ds))
      continue;
    char a[600], b[600], name[64];
    snprintf(name, sizeof name, "t1-%zu", i);
    snprintf(a, sizeof a, "%s", gc_test_tmp(name));
    snprintf(name, sizeof name, "t2-%zu", i);
    snprintf(b, sizeof b, "%s", gc_test_tmp(name));
    gc_train_config c;
    base(&c, a);
    c.model = m[i].model;
    c.dataset = m[i].ds;
    c.workers = 4;
    c.algorithm = "bi";
    c.density = 0.01;
    c.lr = 0.05;
    c.train_subset = m[i].sub;
    c.test_subset = 200;
    c.epochs = 2;
    c.threads = 1;
    cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
    c.out = b;
    c.threads = 2;
    cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
    same_files(a, b, "checkpoint-e2.bin", 0);
    same_files(a, b, "log.csv", 1);
  }
}

/* Run 3 epochs whole, and 1 epoch then --resume to 3: the checkpoints
 * and logs must agree bit for bit.  The checkpoint carries every state a
 * method keeps (memories, DGC momentum, EF21 h, PowerSGD warm starts). */
static void check_resume(const char *tag, const char *algo,
                         const char *compressor, double momentum)
{
  char a[600], b[600], name[64];
  snprintf(name, sizeof name, "full-%s", tag);
  snprintf(a, sizeof a, "%s", gc_test_tmp(name));
  snprintf(name, sizeof name, "resumed-%s", tag);
  snprintf(b, sizeof b, "%s", gc_test_tmp(name));
  gc_train_config c;
  base(&c, a);
  c.workers = 3;
  c.algorithm = algo;
  c.compressor = compressor;
  c.momentum = momentum;
  c.density = 0.01;
  c.lr = 0.1;
  c.train_subset = 600;
  c.test_subset = 200;
  c.epochs = 3;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s: %s", tag, gc_last_error());
  c.out = b;
  c.epochs = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s: %s", tag, gc_last_error());
  c.epochs = 3;
  c.resume = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s: %s", tag, gc_last_error());
  same_files(a, b, "checkpoint-e3.bin", 0);
  same_files(a, b, "log.csv", 1);
}

Test(train, resume_equals_uninterrupted)
{
  gc_test_need_dataset("mnist");
  check_resume("bi", "bi", "topk", 0);
  check_resume("ef21", "ef21", "topk", 0);
  check_resume("momentum", "uni", "topk", 0.9);
  check_resume("powersgd", "bi", "powersgd", 0);
  check_resume("randk", "doublesqueeze", "randk", 0);
}

Test(train, resume_refuses_foreign_or_damaged_checkpoints)
{
  gc_test_need_dataset("mnist");
  char a[600];
  /* a run folder whose parents do not exist yet is created with them */
  snprintf(a, sizeof a, "%s/nested/run", gc_test_tmp("damaged"));
  gc_train_config c;
  base(&c, a);
  c.workers = 2;
  c.algorithm = "bi";
  c.density = 0.01;
  c.lr = 0.1;
  c.train_subset = 400;
  c.test_subset = 100;
  c.epochs = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  gc_set_error_handler_off();
  c.epochs = 2;
  c.resume = 1;
  c.lr = 0.2;   /* another configuration */
  cr_assert_eq(gc_train_run(&c, NULL), GC_EINVAL);
  cr_assert(strstr(gc_last_error(), "another configuration"), "%s", gc_last_error());
  /* the refusal names the option that differs, with both values */
  cr_assert(strstr(gc_last_error(), "--lr 0.1 there, 0.2 in this run"), "%s",
            gc_last_error());
  c.lr = 0.1;
  char p[700];
  snprintf(p, sizeof p, "%s/checkpoint-e1.bin", a);
  FILE *f = fopen(p, "r+b");
  cr_assert_not_null(f);
  fseek(f, 100, SEEK_SET);
  int ch = fgetc(f);
  fseek(f, 100, SEEK_SET);
  fputc(ch ^ 1, f);
  fclose(f);
  cr_assert_eq(gc_train_run(&c, NULL), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "checksum"), "%s", gc_last_error());
  cr_assert(strstr(gc_last_error(), "checkpoint-e1.bin"), "%s", gc_last_error());
}

/* A small run of 2 workers on 200 examples (10 steps an epoch). */
static void small(gc_train_config *c, const char *out, size_t epochs)
{
  base(c, out);
  c->workers = 2;
  c->train_subset = 200;
  c->test_subset = 100;
  c->epochs = epochs;
}

/* The bytes of dir/name (NULL if absent); *len [out]. */
static char *file_of(const char *dir, const char *name, size_t *len)
{
  char p[800];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return gc_test_slurp(p, len);
}

static int exists_in(const char *dir, const char *name)
{
  size_t len;
  char *t = file_of(dir, name, &len);
  free(t);
  return t != NULL;
}

static void put_file(const char *dir, const char *name, const void *bytes,
                     size_t len)
{
  char p[800];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  cr_assert_not_null(f, "%s", p);
  cr_assert_eq(fwrite(bytes, 1, len, f), len);
  fclose(f);
}

/* A finished run is not replaced by a new run into its folder: refused
 * naming its files and --resume/--force, every file left as it was;
 * --force starts over leaving nothing of the old run (no epoch-2
 * checkpoint, a one-row log).  And --force with --resume is refused. */
Test(train, a_finished_run_is_not_replaced_without_force)
{
  gc_test_need_dataset("mnist");
  char a[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("replace"));
  gc_train_config c;
  small(&c, a, 2);
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  size_t l0, m0, l1, m1;
  char *log0 = file_of(a, "log.csv", &l0), *model0 = file_of(a, "model.npy", &m0);
  gc_set_error_handler_off();
  c.epochs = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_EINVAL);
  const char *e = gc_last_error();
  cr_assert(strstr(e, "already holds a run") && strstr(e, "log.csv (2 epoch rows)") &&
            strstr(e, "model.npy") && strstr(e, "checkpoint.json") &&
            strstr(e, "--resume") && strstr(e, "--force"), "%s", e);
  char *log1 = file_of(a, "log.csv", &l1), *model1 = file_of(a, "model.npy", &m1);
  cr_assert(log1 && l1 == l0 && !memcmp(log0, log1, l0), "log.csv changed");
  cr_assert(model1 && m1 == m0 && !memcmp(model0, model1, m0), "model.npy changed");
  cr_assert(exists_in(a, "checkpoint-e2.bin"));
  free(log1);
  free(model1);
  c.force = 1;
  c.resume = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_EINVAL);
  cr_assert(strstr(gc_last_error(), "--force starts the run over"), "%s", gc_last_error());
  c.resume = 0;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  cr_assert(!exists_in(a, "checkpoint-e2.bin"), "the old run's checkpoint is left");
  cr_assert(exists_in(a, "checkpoint-e1.bin"));
  log1 = file_of(a, "log.csv", &l1);
  size_t lines = 0;
  for (size_t i = 0; i < l1; i++)
    lines += log1[i] == '\n';
  cr_assert_eq(lines, 2, "log.csv: %s", log1);
  free(log0);
  free(model0);
  free(log1);
}

/* A checkpoint file of another run (seed 0's, copied into the seed-7 run's
 * folder) is refused naming the option; so is a file of another epoch
 * under checkpoint.json's name, and one of the first format (GCCKPT1). */
Test(train, foreign_checkpoint_files_are_refused_by_name)
{
  gc_test_need_dataset("mnist");
  char a[600], b[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("fp-seed0"));
  snprintf(b, sizeof b, "%s", gc_test_tmp("fp-seed7"));
  gc_train_config c;
  small(&c, a, 2);
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  c.out = b;
  c.seed = 7;
  c.epochs = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  size_t len, l7;
  char *e2 = file_of(a, "checkpoint-e2.bin", &len), *mine = file_of(b, "checkpoint-e1.bin", &l7);
  cr_assert_not_null(e2);
  cr_assert_not_null(mine);
  /* seed 0's epoch-1 state: its epoch-2 file's header says epoch 2 */
  gc_set_error_handler_off();
  c.resume = 1;
  c.epochs = 2;
  put_file(b, "checkpoint-e1.bin", e2, len);
  cr_assert_eq(gc_train_run(&c, NULL), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "checkpoint-e1.bin: written by a run of another"
                   " configuration: --seed 0 in the file, 7 in this run"), "%s",
            gc_last_error());
  /* its own file of epoch 1 is refused under an epoch-2 commit */
  put_file(b, "checkpoint-e1.bin", mine, l7);
  char *cj = file_of(b, "checkpoint.json", &len);
  char *ep = strstr(cj, "\"epoch\": 1"), *st = strstr(cj, "\"steps\": 10,");
  cr_assert(ep && st, "%s", cj);
  ep[9] = '2';
  st[9] = '2';
  put_file(b, "checkpoint.json", cj, len);
  put_file(b, "checkpoint-e2.bin", mine, l7);
  cr_assert_eq(gc_train_run(&c, NULL), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "the state after epoch 1 (10 steps), but"
                   " checkpoint.json commits epoch 2"), "%s", gc_last_error());
  /* the first format, which records neither */
  memcpy(mine, "GCCKPT1\n", 8);
  put_file(b, "checkpoint-e2.bin", mine, l7);
  cr_assert_eq(gc_train_run(&c, NULL), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "older gradcomp (format GCCKPT1)"), "%s",
            gc_last_error());
  free(cj);
  free(e2);
  free(mine);
}

/* On --resume log.csv must hold the header and a row per epoch up to the
 * checkpoint: junk, or a header alone beside a checkpoint of epoch 1, is
 * refused naming the file and line, and left as it was. */
Test(train, resume_checks_the_log_against_the_checkpoint)
{
  gc_test_need_dataset("mnist");
  char a[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("logcheck"));
  gc_train_config c;
  small(&c, a, 1);
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  size_t len;
  char *log = file_of(a, "log.csv", &len);
  cr_assert_not_null(log);
  static const struct { const char *text, *why; } bad[] = {
    { "this is not a log\n", "log.csv line 1: not the header" },
    { NULL, "log.csv line 2: missing the row of epoch 1" },          /* header only */
    { NULL, "log.csv line 2: field 3 ('x') of the row of epoch 1" },   /* a junk field */
  };
  gc_set_error_handler_off();
  c.resume = 1;
  c.epochs = 2;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[4096];
    size_t hl = (size_t) (strchr(log, '\n') + 1 - log);
    if (bad[i].text) {
      snprintf(text, sizeof text, "%s", bad[i].text);
    } else if (i == 1) {
      snprintf(text, sizeof text, "%.*s", (int) hl, log);
    } else {
      /* the row with its train_loss replaced by x */
      const char *row = log + hl, *f3 = strchr(strchr(row, ',') + 1, ',') + 1;
      snprintf(text, sizeof text, "%.*sx%s", (int) (f3 - log), log, strchr(f3, ','));
    }
    put_file(a, "log.csv", text, strlen(text));
    cr_assert_eq(gc_train_run(&c, NULL), GC_EFORMAT, "case %zu", i);
    cr_assert(strstr(gc_last_error(), bad[i].why), "case %zu: %s", i, gc_last_error());
    size_t l2;
    char *now = file_of(a, "log.csv", &l2);
    cr_assert(now && l2 == strlen(text) && !memcmp(now, text, l2), "log.csv changed");
    free(now);
  }
  /* the log restored, the run resumes */
  put_file(a, "log.csv", log, len);
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  free(log);
}

Test(train, divergence_stops_and_keeps_rows)
{
  gc_test_need_dataset("mnist");
  char a[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("diverge"));
  gc_train_config c;
  base(&c, a);
  c.workers = 2;
  c.algorithm = "sgd";
  c.lr = 1e30;
  c.train_subset = 400;
  c.test_subset = 100;
  c.epochs = 2;
  gc_set_error_handler_off();
  cr_assert_eq(gc_train_run(&c, NULL), GC_EDIVERGE);
  cr_assert(strstr(gc_last_error(), "diverged"), "%s", gc_last_error());
  char p[700];
  size_t len;
  snprintf(p, sizeof p, "%s/log.csv", a);
  char *log = gc_test_slurp(p, &len);
  cr_assert(log && strncmp(log, "epoch,steps,train_loss", 22) == 0);
  free(log);
}

/* Field f (0-based) of the first data row of a run's log.csv. */
static double log_field(const char *dir, int f)
{
  char p[700];
  size_t len;
  snprintf(p, sizeof p, "%s/log.csv", dir);
  char *log = gc_test_slurp(p, &len);
  cr_assert_not_null(log, "%s", p);
  const char *s = strchr(log, '\n');
  cr_assert_not_null(s);
  for (s++; f > 0; f--)
    s = strchr(s, ',') + 1;
  double v = strtod(s, NULL);
  free(log);
  return v;
}

/* Field f (0-based) of data row `row` (1-based) of a run's log.csv. */
static double log_row_field(const char *dir, int row, int f)
{
  char p[700];
  size_t len;
  snprintf(p, sizeof p, "%s/log.csv", dir);
  char *log = gc_test_slurp(p, &len);
  cr_assert_not_null(log, "%s", p);
  const char *s = log;
  for (int r = 0; r < row; r++) {
    s = strchr(s, '\n');
    cr_assert(s && s[1], "%s: no row %d", p, row);
    s++;
  }
  for (; f > 0; f--) {
    s = strchr(s, ',');
    cr_assert_not_null(s, "%s: row %d is short", p, row);
    s++;
  }
  double v = strtod(s, NULL);
  free(log);
  return v;
}

/* The logged xi is gc_probe.h's, the method's own assumption: undefined
 * (NaN) without memories (sgd) and for EF21 / EF21-BC, which still log the
 * uplink contraction; xi_bi for the methods with a server memory, so that
 * downlink-only (dense uplink: both aggregates are the same vector) logs
 * exactly 0 and DoubleSqueeze a positive xi_bi. */
Test(train, xi_probe_follows_theory)
{
  gc_test_need_dataset("mnist");
  static const struct { const char *algo; int xi, delta; } m[] = {
    { "sgd", 0, 0 }, { "uni", 1, 1 }, { "bi", 1, 1 }, { "downlink", 1, 0 },
    { "doublesqueeze", 1, 1 }, { "ef21", 0, 1 }, { "ef21-bc", 0, 1 } };
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
    char a[600], name[64];
    snprintf(name, sizeof name, "xi-%s", m[i].algo);
    snprintf(a, sizeof a, "%s", gc_test_tmp(name));
    gc_train_config c;
    base(&c, a);
    c.workers = 2;
    c.algorithm = m[i].algo;
    c.density = 0.05;
    c.lr = 0.05;
    c.train_subset = 400;
    c.test_subset = 100;
    cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s: %s", m[i].algo,
                 gc_last_error());
    double xi = log_field(a, 7), delta = log_field(a, 8);
    cr_assert_eq(isfinite(xi) != 0, m[i].xi, "%s: xi %g", m[i].algo, xi);
    cr_assert_eq(isfinite(delta) != 0, m[i].delta, "%s: delta %g", m[i].algo,
                 delta);
    if (!strcmp(m[i].algo, "downlink"))
      cr_assert(xi == 0, "downlink: xi_bi %g", xi);
    if (!strcmp(m[i].algo, "doublesqueeze"))
      cr_assert(xi > 0, "doublesqueeze: xi_bi %g", xi);
  }
}

/* ---- --bounds ------------------------------------------------------------- */

/* Column `col` of data row `row` (1-based) of DIR/bounds.csv, as a number. */
static double bounds_field(const char *dir, int row, const char *col)
{
  char p[700];
  size_t len;
  snprintf(p, sizeof p, "%s/bounds.csv", dir);
  char *csv = gc_test_slurp(p, &len);
  cr_assert_not_null(csv, "%s", p);
  int k = 0;
  const char *h = csv;
  while (*h == '#')   /* the label line */
    h = strchr(h, '\n') + 1;
  const char *end = strchr(h, '\n');
  size_t cl = strlen(col);
  while (h < end && !(strncmp(h, col, cl) == 0 && (h[cl] == ',' || h[cl] == '\n'))) {
    h = strchr(h, ',');
    cr_assert(h && h < end, "no column %s in %s", col, p);
    h++;
    k++;
  }
  const char *line = end;
  for (int r = 0; r < row; r++) {
    cr_assert(line && line[1], "%s: no row %d", p, row);
    line = strchr(line, '\n') + 1;
  }
  for (; k > 0; k--)
    line = strchr(line, ',') + 1;
  double v = strtod(line, NULL);
  free(csv);
  return v;
}

static void bounds_base(gc_train_config *c, const char *out, const char *algo)
{
  base(c, out);
  c->algorithm = algo;
  c->bounds_every = 1;
  c->bounds_hvps = 3;
  c->bounds_batch = 100;
}

/* P = 1, one batch holding the whole training subset: the stochastic
 * gradient at x_0 is the full gradient that --bounds measures, and the
 * first training loss is f(x_0).  A wrong weighting, slicing or
 * normalisation of the full gradient breaks the equalities. */
Test(train, bounds_full_gradient_is_the_batch_gradient)
{
  gc_test_need_dataset("mnist");
  char a[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("bounds-sgd"));
  gc_train_config c;
  bounds_base(&c, a, "sgd");
  c.workers = 1;
  c.batch = 200;
  c.train_subset = 200;
  c.test_subset = 100;
  c.epochs = 2;
  c.lr = 0.05;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  double m2 = bounds_field(a, 1, "M2_max"), g2 = bounds_field(a, 1, "grad2_epoch");
  /* float32 sums of 200 examples in two orders (one batch of 200; eight
   * slices of 25).  Rounding model: roundings independent (Higham and
   * Mary 2019), a sum of m terms off by ~ lambda sqrt(m) u of the sum of
   * magnitudes, lambda ~ 3, u = 2^-24.  A gradient chains sums of 784, 64,
   * 10 and <= 200 terms: relative ~ 3 sqrt(1058) u = 6e-6 per component,
   * 1.2e-5 on a squared norm; 1e-4 keeps 8x.  A logit (784 + 64 terms,
   * sum |x w| ~ 10 at init against a loss ~ 2.3) is off by ~ 3 sqrt(848)
   * u 10 / 2.3 = 2e-5 of the loss, averaged over 200 examples of
   * independent errors: 1.3e-6, two paths 2e-6; 1e-5 keeps 5x. */
  cr_assert(fabs(m2 - g2) <= 1e-4 * g2, "||gbar_0||^2 %g, ||grad f(x0)||^2 %g", m2, g2);
  double f0 = bounds_field(a, 1, "f0"), loss = log_field(a, 2);
  cr_assert(fabs(f0 - loss) <= 1e-5 * loss, "f(x0) %g, first loss %g", f0, loss);
  /* two epochs of one step each: the means agree too (as M2_max above) */
  double m2mean = bounds_field(a, 2, "M2_mean"), g2mean = bounds_field(a, 2, "grad2_mean");
  cr_assert(fabs(m2mean - g2mean) <= 1e-4 * g2mean, "%g vs %g", m2mean, g2mean);
  cr_assert_eq(bounds_field(a, 2, "grad2_samples"), 2);
  cr_assert_eq(bounds_field(a, 2, "gamma"), 0);
  cr_assert(bounds_field(a, 2, "L") > 0);
}

/* bi: gamma_d and xi_bi enter the bound as written in 4.3, every row's
 * bound is the sum of its terms recomputed from its own columns, the
 * ratio is bound / measured, and the thread count changes no byte. */
Test(train, bounds_rows_follow_the_formula_and_threads_change_nothing)
{
  gc_test_need_dataset("mnist");
  char a[600], b[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("bounds-bi1"));
  snprintf(b, sizeof b, "%s", gc_test_tmp("bounds-bi2"));
  gc_train_config c;
  bounds_base(&c, a, "bi");
  c.workers = 4;
  c.density = 0.01;
  c.density_down = 0.005;
  c.lr = 0.1;
  c.train_subset = 800;
  c.test_subset = 100;
  c.epochs = 2;
  c.threads = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  c.out = b;
  c.threads = 2;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  same_files(a, b, "bounds.csv", 0);
  double d = 50890, kd = floor(0.005 * d);
  for (int r = 1; r <= 2; r++) {
    double gamma = bounds_field(a, r, "gamma");
    /* printed with 17 digits: the same double, or one rounding off */
    cr_assert(fabs(gamma - sqrt(1 - kd / d)) < 1e-15, "gamma_d %.17g", gamma);
    double t[3];
    double want = gc_bound_nonconvex_terms(
        bounds_field(a, r, "f0"), c.lr, (size_t) bounds_field(a, r, "steps"),
        bounds_field(a, r, "L"), bounds_field(a, r, "M2_max"), gamma,
        bounds_field(a, r, "xi_max"), t);
    double got = bounds_field(a, r, "bound");
    /* bounds.csv prints L, M2_max, xi_max, f0, the terms, the bound,
     * grad2_mean and the ratio to 9 significant digits (%.9g: within
     * 5e-9 relative), gamma to 17.  The formula from the printed columns:
     * t2 ~ L^2 M2 c^2 with c = (gamma + xi)/(1 - gamma) is off by at most
     * (2 + 1 + 2) 5e-9, t1 ~ L M2 and t0 ~ f0 less, the printed bound and
     * term by 5e-9 more: 3e-8; the ratio, three printed values: 1.5e-8.
     * Doubles' own rounding (~1e-15) adds nothing comparable. */
    cr_assert(fabs(got - want) <= 3e-8 * want, "row %d: bound %g, formula %g", r, got, want);
    cr_assert(fabs(bounds_field(a, r, "term_compression") - t[2]) <= 3e-8 * t[2]);
    double ratio = bounds_field(a, r, "ratio"), g2 = bounds_field(a, r, "grad2_mean");
    cr_assert(fabs(ratio - got / g2) <= 1.5e-8 * ratio, "ratio %g", ratio);
    cr_assert(bounds_field(a, r, "xi_max") > 0, "xi_bi max is 0 on a top-K uplink");
    /* L is the running max of the local estimates */
    cr_assert(bounds_field(a, r, "L") >= bounds_field(a, r, "L_epoch"));
  }
}

/* bounds.csv is plain CSV (one header line, no comment: any reader loads
 * it without options; the notes are in bounds.json) and carries the ladder
 * of theory.md 4.9: each rung recomputed from the row's own columns, the
 * rungs that rest on the memory recursion ordered, the ratios rung /
 * grad2_mean. */
Test(train, bounds_csv_is_plain_and_carries_the_ladder)
{
  gc_test_need_dataset("mnist");
  char a[600], p[700];
  snprintf(a, sizeof a, "%s", gc_test_tmp("bounds-ladder"));
  gc_train_config c;
  bounds_base(&c, a, "uni");
  c.workers = 4;
  c.density = 0.01;
  c.lr = 0.1;
  c.train_subset = 800;
  c.test_subset = 100;
  c.epochs = 2;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  size_t len;
  snprintf(p, sizeof p, "%s/bounds.csv", a);
  char *csv = gc_test_slurp(p, &len);
  cr_assert_not_null(csv);
  cr_assert(strncmp(csv, "epoch,", 6) == 0, "%.80s", csv);
  size_t lines = 0, want = 0;
  for (char *q = csv; *q; lines++) {
    char *e = strchr(q, '\n');
    cr_assert_not_null(e);
    size_t commas = 0;
    for (char *k = q; k < e; k++)
      commas += *k == ',';
    if (lines == 0)
      want = commas;
    cr_assert_eq(commas, want, "line %zu", lines + 1);
    q = e + 1;
  }
  cr_assert_eq(lines, 3);
  free(csv);
  snprintf(p, sizeof p, "%s/bounds.json", a);
  char *json = gc_test_slurp(p, &len);
  cr_assert(json && strstr(json, "\"r7_curvature\"") && strstr(json, "local estimate"));
  free(json);
  static const char *rung[] = { "r0_theorem", "r1_delta", "r2_xi", "r3_memory", "r4_m2",
                                "r5_gradient", "r6_inner", "r7_curvature" };
  for (int r = 1; r <= 2; r++) {
    double v[8];
    for (int k = 0; k < 8; k++)
      v[k] = bounds_field(a, r, rung[k]);
    double g2 = bounds_field(a, r, "grad2_mean"), L = bounds_field(a, r, "L");
    double t0 = bounds_field(a, r, "term_f0"), ts = bounds_field(a, r, "term_sgd");
    double sgd_mean = L * c.lr * bounds_field(a, r, "M2_mean");
    /* %.9g columns: 9 significant digits, summed over three terms */
    double tol = 1e-8;
    cr_assert(fabs(v[0] - bounds_field(a, r, "bound")) <= tol * v[0]);
    for (int k = 1; k < 5; k++)
      cr_assert(v[k] <= v[k - 1] * (1 + tol), "row %d: %s %g > %g", r, rung[k], v[k],
                v[k - 1]);
    double r3 = t0 + ts + L * L * bounds_field(a, r, "mem2_mean");
    cr_assert(fabs(v[3] - r3) <= tol * r3, "row %d: r3 %g, recomputed %g", r, v[3], r3);
    double r4 = t0 + sgd_mean + L * L * bounds_field(a, r, "mem2_mean");
    cr_assert(fabs(v[4] - r4) <= tol * r4, "row %d: r4 %g, recomputed %g", r, v[4], r4);
    double r5 = t0 + sgd_mean + bounds_field(a, r, "gdiff2_mean");
    cr_assert(fabs(v[5] - r5) <= tol * r5, "row %d: r5 %g, recomputed %g", r, v[5], r5);
    double r6 = 0.5 * (t0 + sgd_mean) + bounds_field(a, r, "inner_mean");
    cr_assert(fabs(v[6] - r6) <= tol * fabs(r6) + 1e-12, "row %d: r6 %g, recomputed %g", r,
              v[6], r6);
    cr_assert(isnan(v[7]), "row %d: r7 %g on a net", r, v[7]);   /* quadratics only */
    for (int k = 0; k < 7; k++) {
      char name[16];
      snprintf(name, sizeof name, "ratio_r%d", k);
      cr_assert(fabs(bounds_field(a, r, name) - v[k] / g2) <= tol * v[k] / g2);
    }
    cr_assert(bounds_field(a, r, "mem_norm2") > 0 && bounds_field(a, r, "worker_mem2") > 0);
    cr_assert_eq(bounds_field(a, r, "server_mem2"), 0);   /* uni: no server memory */
  }
}

/* The bound is refused, naming the failing assumption, where 4.3 does not
 * apply. */
Test(train, bounds_refuse_what_the_theorem_does_not_cover)
{
  gc_test_need_dataset("mnist");
  static const struct { const char *algo, *comp; double mom; int resume;
                        const char *why; } m[] = {
    { "uni", "randk", 0, 0, "top-K" }, { "uni", "topk", 0.9, 0, "momentum" },
    { "ef21", "topk", 0, 0, "ef21" }, { "bi", "topk", 0, 1, "resume" } };
  gc_set_error_handler_off();
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
    char a[600];
    snprintf(a, sizeof a, "%s", gc_test_tmp("bounds-refuse"));
    gc_train_config c;
    bounds_base(&c, a, m[i].algo);
    c.workers = 2;
    c.compressor = m[i].comp;
    c.momentum = m[i].mom;
    c.resume = m[i].resume;
    c.train_subset = 200;
    c.test_subset = 100;
    cr_assert_eq(gc_train_run(&c, NULL), GC_EINVAL, "%s/%s", m[i].algo, m[i].comp);
    cr_assert(strstr(gc_last_error(), m[i].why), "%s", gc_last_error());
  }
}

/* ---- the device seam (gc_nn_device_type) --------------------------------
 * A device that runs the CPU nets behind the type table: training through
 * it must write the CPU path's bytes, so the gather order of the P batches,
 * the per-worker statistics, the dropout keys, the evaluation and the
 * bounds' gradients are the same on any device that computes the same
 * numbers.  (The CUDA device is compared with the CPU in test_cuda_nn.) */
typedef struct host_dev {
  gc_nn *net, *evalnet;
  size_t groups;
} host_dev;

static void host_free(void *p)
{
  host_dev *h = p;
  if (!h)
    return;
  gc_nn_free(h->net);
  gc_nn_free(h->evalnet);
  free(h);
}

static void *host_alloc(const char *model, size_t groups, size_t batch)
{
  host_dev *h = calloc(1, sizeof *h);
  if (!h)
    return NULL;
  h->groups = groups;
  h->net = gc_nn_alloc_model(model, batch);
  h->evalnet = gc_nn_alloc_model(model, 100);
  if (!h->net || !h->evalnet) {
    host_free(h);
    return NULL;
  }
  return h;
}

static int host_grads(void *p, const float *w, float *stats, const float *x,
                      const uint8_t *y, size_t G, size_t B, int train,
                      uint64_t seed, uint32_t worker0, uint32_t step,
                      double *loss, float *grads)
{
  host_dev *h = p;
  if (G > h->groups)
    return GC_EINVAL;
  size_t d = gc_nn_nparams(h->net), ns = gc_nn_nstats(h->net);
  size_t dim = gc_nn_in_dim(h->net);
  for (size_t g = 0; g < G; g++) {
    if (!gc_nn_forward(h->net, w, train ? stats + g * ns : stats, x + g * B * dim,
                       B, train, seed, worker0 + (uint32_t) g, step))
      return GC_EINVAL;
    loss[g] = gc_nn_loss(h->net, y + g * B);
    gc_nn_backward(h->net, w, NULL, grads + g * d, NULL);
  }
  return GC_SUCCESS;
}

static int host_evaluate(void *p, const float *w, const float *stats,
                         const gc_dataset *ds, double *acc, double *loss)
{
  host_dev *h = p;
  return gc_nn_evaluate(h->evalnet, w, (float *) stats, ds, acc, loss);
}

static const gc_nn_device_type host_device = {
  "host", host_alloc, host_free, host_grads, host_evaluate,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
};

/* ... and with a step of its own: a second gc_sim that the run drives for
 * the steps it does not probe, moving the state between the two. */
typedef struct host_step {
  host_dev *dev;
  gc_sim *sim;
  float *grads;
  const void **gp;
  size_t P, d;
} host_step;

static void host_step_free(void *p)
{
  host_step *h = p;
  if (!h)
    return;
  gc_sim_free(h->sim);
  free(h->grads);
  free(h->gp);
  free(h);
}

static void *host_step_alloc(void *dev, const gc_algo_config *cfg, const float *x0)
{
  host_step *h = calloc(1, sizeof *h);
  if (!h)
    return NULL;
  h->dev = dev;
  h->P = cfg->workers;
  h->d = cfg->n;
  h->sim = gc_sim_alloc(cfg, x0);
  h->grads = malloc(h->P * h->d * sizeof *h->grads);
  h->gp = malloc(h->P * sizeof *h->gp);
  if (!h->sim || !h->grads || !h->gp) {
    host_step_free(h);
    return NULL;
  }
  for (size_t p = 0; p < h->P; p++)
    h->gp[p] = h->grads + p * h->d;
  return h;
}

static int host_step_grads(void *p, float *stats, const float *x, const uint8_t *y,
                           size_t B, uint64_t seed, uint32_t t, double *loss)
{
  host_step *h = p;
  return host_grads(h->dev, gc_sim_point(h->sim), stats, x, y, h->P, B, 1, seed, 0,
                    t, loss, h->grads);
}

static int host_step_run(void *p, double lr, size_t *support)
{
  host_step *h = p;
  int st = gc_sim_step(h->sim, h->gp, lr);
  *support = gc_server_support_union(gc_sim_server(h->sim));
  return st;
}

static const gc_ledger *host_step_ledger(const void *p)
{
  return gc_sim_ledger(((const host_step *) p)->sim);
}

static size_t host_step_state_bytes(const void *p)
{
  return gc_sim_state_bytes(((const host_step *) p)->sim);
}

static int host_step_state_save(const void *p, void *buf)
{
  gc_sim_state_save(((const host_step *) p)->sim, buf);
  return GC_SUCCESS;
}

static int host_step_state_load(void *p, const void *buf, size_t len)
{
  return gc_sim_state_load(((host_step *) p)->sim, buf, len);
}

static const gc_nn_device_type host_device_step = {
  "host-step", host_alloc, host_free, host_grads, host_evaluate,
  host_step_alloc, host_step_free, host_step_grads, host_step_run,
  host_step_ledger, host_step_state_bytes, host_step_state_save,
  host_step_state_load
};

Test(train, device_seam_writes_the_cpu_bytes)
{
  gc_test_need_dataset("mnist");
  char a[600], b[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("dev-cpu"));
  snprintf(b, sizeof b, "%s", gc_test_tmp("dev-host"));
  gc_train_config c;
  base(&c, a);
  c.model = "mnist-cnn";              /* dropout: keyed per worker and step */
  c.workers = 3;
  c.algorithm = "bi";
  c.density = 0.01;
  c.lr = 0.05;
  c.train_subset = 120;
  c.test_subset = 150;                /* not a multiple of the eval batch */
  c.epochs = 2;
  c.threads = 2;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  c.out = b;
  c.device = &host_device;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  same_files(a, b, "checkpoint-e2.bin", 0);
  same_files(a, b, "log.csv", 1);
}

/* The device's own step for the plain steps, the CPU's for the probed
 * ones (xi, delta), the state moved between them each time: the same
 * checkpoint and log bytes (bytes up and down merged from both ledgers,
 * |S|/K from both), here over two epochs with a resume between them. */
Test(train, device_step_writes_the_cpu_bytes)
{
  gc_test_need_dataset("mnist");
  char a[600], b[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("dstep-cpu"));
  snprintf(b, sizeof b, "%s", gc_test_tmp("dstep-host"));
  gc_train_config c;
  base(&c, a);
  c.workers = 3;
  c.algorithm = "bi";
  c.density = 0.01;
  c.density_down = 0.005;
  c.lr = 0.1;
  c.train_subset = 600;               /* 20 steps an epoch, 10 probed */
  c.test_subset = 100;
  c.epochs = 2;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  c.out = b;
  c.device = &host_device_step;
  c.epochs = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  c.epochs = 2;
  c.resume = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  same_files(a, b, "checkpoint-e2.bin", 0);
  same_files(a, b, "log.csv", 1);
}

/* --bounds through the device where its chunks are the CPU's: 800
 * examples make the CPU's eight slices one full chunk of BOUND_CHUNK = 100
 * each, the device's groups the same eight chunks, and both add the
 * chunks' float32 gradients and losses, weighted by 100, into doubles in
 * chunk order; L's batch is the same 800.  Every bound value must then be
 * the same bits whatever BLAS kernel computes the chunks. */
Test(train, device_seam_bounds_equal_the_cpu_on_common_chunks)
{
  gc_test_need_dataset("mnist");
  char a[600], b[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("devbx-cpu"));
  snprintf(b, sizeof b, "%s", gc_test_tmp("devbx-host"));
  gc_train_config c;
  bounds_base(&c, a, "uni");
  c.workers = 2;
  c.density = 0.01;
  c.lr = 0.1;
  c.train_subset = 800;
  c.bounds_batch = 800;
  c.test_subset = 100;
  c.epochs = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  c.out = b;
  c.device = &host_device;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  same_files(a, b, "bounds.csv", 0);
}

/* --bounds through the device where the chunks differ: 650 examples are
 * six chunks of 100 and a short one of 50 on the device, eight slices of
 * 81 or 82 on the CPU, and L's batch of 100 one chunk on the device, eight
 * of 12 or 13 on the CPU.  Each chunk's gradient and loss are float32
 * (sgemm in whatever order the BLAS kernel sums), then added into doubles
 * (rounding ~1e-16, negligible).  Error bound: a float32 sum of m
 * terms in any order is within gamma_m ~ m u of the exact sum relative to
 * the sum of magnitudes (u = 2^-24, Higham, Accuracy and Stability of
 * Numerical Algorithms, 3.1); a gradient of mnist-mlp chains sums of 784
 * (layer 1), 64 (layer 2), 10 (the backward through layer 2) and <= 100
 * terms (the batch), plus a few roundings in the softmax and the 1/B
 * scaling, so to first order each path is within eps = 1000 u of the
 * exact values, and the two paths within
 *   f0, grad2_mean:  2 eps, 4 eps relative (||g||^2: twice g's error);
 *   L = ||g(x + h v) - g(x - h v)|| / 2h, h = 1e-3: the gradients' errors
 *       do not cancel in the difference, so each path's L is within
 *       2 eps ||g|| / 2h of the exact one, the two within 2 eps ||g|| / h,
 *       with ||g||^2 <= M2_max (the largest squared norm of the mean
 *       stochastic gradient seen, above the batch gradients' near the same
 *       points by the sampling variance): about 2% of L here, the finite
 *       difference amplifying float32 rounding ~ ||g|| / (h L) = 200-fold;
 *   bound = t0 + t1 + t2 with t1 ~ L and t2 ~ L^2 and f0 in t0, the rest
 *       (M2, xi, gamma: the training steps, the same bits on both paths)
 *       equal: |d bound| <= (t1 + 2 t2) dL / L + t0 df0 / f0.
 * A wrong weighting of the short chunk or a wrong normalisation moves f0
 * and grad2_mean by percents, far outside 4 eps = 2.4e-4. */
Test(train, device_seam_bounds_agree_with_the_cpu)
{
  gc_test_need_dataset("mnist");
  char a[600], b[600];
  snprintf(a, sizeof a, "%s", gc_test_tmp("devb-cpu"));
  snprintf(b, sizeof b, "%s", gc_test_tmp("devb-host"));
  gc_train_config c;
  bounds_base(&c, a, "uni");
  c.workers = 2;
  c.density = 0.01;
  c.lr = 0.1;
  c.train_subset = 650;               /* a short last chunk */
  c.test_subset = 100;
  c.epochs = 1;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  c.out = b;
  c.device = &host_device;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  const double eps = 1000 * 0x1p-24, h = 1e-3;   /* h: bound_fd_step */
  double L = bounds_field(a, 1, "L"), f0 = bounds_field(a, 1, "f0");
  double tol_L = 2 * eps * sqrt(bounds_field(a, 1, "M2_max")) / h;
  double tol_bound = (bounds_field(a, 1, "term_sgd") +
                      2 * bounds_field(a, 1, "term_compression")) * tol_L / L +
                     bounds_field(a, 1, "term_f0") * 2 * eps;
  cr_assert(tol_L <= 0.05 * L, "the float32 error bound on L, %g, is no test "
            "of L = %g", tol_L, L);
  static const char *const cols[] = { "f0", "L", "grad2_mean", "bound" };
  const double tol[] = { 2 * eps * f0, tol_L,
                         4 * eps * bounds_field(a, 1, "grad2_mean"), tol_bound };
  for (size_t i = 0; i < 4; i++) {
    double x = bounds_field(a, 1, cols[i]), y = bounds_field(b, 1, cols[i]);
    cr_assert(fabs(x - y) <= tol[i], "%s: cpu %.9g, device %.9g (tolerance %.3g)",
              cols[i], x, y, tol[i]);
  }
}

/* ---- the network model (--net-bandwidth, --net-latency) ------------------ */

/* log.csv's net_comm_s against the alpha-beta model's closed form for a
 * parameter server (gc_netmodel.h): each step costs alpha + U_t/B up and
 * alpha + D_t/B down, so an epoch of S steps costs 2 S alpha + (bytes_up +
 * bytes_down)/B with the epoch's ledger totals from the same row.
 * time_model_cum adds the epoch's three compute times (printed to 1 ms)
 * and net_comm_s to the previous row's. */
Test(train, net_model_columns_follow_the_closed_form)
{
  gc_test_need_dataset("mnist");
  char a[600], p[700];
  snprintf(a, sizeof a, "%s", gc_test_tmp("net"));
  gc_train_config c;
  base(&c, a);
  c.workers = 3;
  c.algorithm = "bi";
  c.density = 0.01;
  c.lr = 0.1;
  c.train_subset = 600;                 /* 20 steps an epoch */
  c.test_subset = 100;
  c.epochs = 3;
  gc_net_model m = { 1.25e7, 5e-5 };    /* 100 Mbps, 50 us */
  c.net = &m;
  cr_assert_eq(gc_train_run(&c, NULL), GC_SUCCESS, "%s", gc_last_error());
  snprintf(p, sizeof p, "%s/log.csv", a);
  size_t len;
  char *log = gc_test_slurp(p, &len);
  cr_assert(log && strstr(log, ",bytes_stats,net_comm_s,time_model_cum\n") != NULL,
            "%s", log);
  free(log);
  double prev_steps = 0, prev_cum = 0;
  for (int r = 1; r <= 3; r++) {
    double steps = log_row_field(a, r, 1) - prev_steps;
    double up = log_row_field(a, r, 4), down = log_row_field(a, r, 5);
    double want = 2 * steps * m.latency + (up + down) / m.bandwidth;
    double got = log_row_field(a, r, 14);
    cr_assert(steps == 20 && up > 0 && down > 0);
    /* a sum of 20 per-step times in double: a few ulps */
    cr_assert(fabs(got - want) <= 1e-12 * want, "row %d: net_comm_s %.17g, "
              "closed form %.17g", r, got, want);
    double compute = log_row_field(a, r, 9) + log_row_field(a, r, 10) +
                     log_row_field(a, r, 11);
    double cum = log_row_field(a, r, 15);
    /* each time column is printed to 1 ms, time_model_cum to 1 us */
    cr_assert(fabs(cum - prev_cum - compute - got) <= 2e-3 + 2e-6,
              "row %d: time_model_cum %g after %g, compute %g, net %g", r, cum,
              prev_cum, compute, got);
    prev_steps += steps;
    prev_cum = cum;
  }
}

/* The compressors' other parameters reach the run's configuration
 * (gc_train_config.up_params/down_params): gc_train_algo_config starts
 * from them, while density, density_down, rank and the seed still come
 * from their own fields.  Without them the library's defaults hold. */
Test(train, compressor_params_reach_the_algorithm)
{
  gc_train_config c;
  gc_train_config_default(&c);
  c.compressor = "qsgd";
  c.density = 0.02;
  c.density_down = 0.05;
  c.rank = 3;
  c.seed = 11;
  gc_algo_config a;
  gc_segment *segs = NULL;
  cr_assert(gc_train_algo_config(&c, &a, &segs) == GC_SUCCESS, "%s", gc_last_error());
  free(segs);
  cr_assert(a.up_params.levels == 1 && a.down_params.bucket == 0 && a.up_params.k == 0);
  gc_compressor_params up, down;
  gc_compressor_params_default(&up);
  up.levels = 4;
  up.bucket = 64;
  up.density = 0.5;   /* replaced by c.density */
  up.rank = 9;        /* replaced by c.rank */
  down = up;
  down.k = 7;
  c.up_params = &up;
  c.down_params = &down;
  cr_assert(gc_train_algo_config(&c, &a, &segs) == GC_SUCCESS, "%s", gc_last_error());
  free(segs);
  cr_assert(a.up_params.levels == 4 && a.up_params.bucket == 64 && a.down_params.k == 7);
  cr_assert(a.up_params.k == 0 && a.down_params.levels == 4);
  cr_assert(a.up_params.density == 0.02 && a.down_params.density == 0.05);
  cr_assert(a.up_params.rank == 3 && a.down_params.rank == 3);
  cr_assert(a.up_params.seed == 11 && a.down_params.seed == 11);
}
