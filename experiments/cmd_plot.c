/* cmd_plot.c -- `gradcomp plot RUN... [--out F.pdf|F.png]`: the training
 * curves of run folders side by side, drawn by gnuplot: train loss and
 * test accuracy against epochs and against the bytes sent (up + down, all
 * workers), one curve per run, a colour per method (its row in the
 * algorithm table), so compressed and dense runs read against each other.  Reads
 * each run's config.json, log.csv and, where present, steps.csv (the loss
 * at every --log-every row); writes nothing but the figure (and the
 * gnuplot script with --script). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gc_algo_rules.h"
#include "gc_cli.h"
#include "gc_errno.h"

#define CMD "plot"

/* A method that compresses nothing: its curves are labelled (dense). */
static int dense(const gc__algo_desc *row)
{
  return row->up == GC__UP_DENSE && row->down == GC__DOWN_DENSE;
}

static void usage(FILE *out)
{
  char names[512];
  fprintf(out, "usage: gradcomp plot RUN... [--out FILE.pdf|FILE.png] [--title T]\n"
          "                            [--script FILE.gp]\n"
          "  The training curves of the run folders RUN (gradcomp train --out\n"
          "  RUN) in four panels: train loss and test accuracy against epochs\n"
          "  and against the bytes sent so far (up + down, all workers; log\n"
          "  scale), one curve per run, a colour per method, labelled with P\n"
          "  and the compressor, or (dense) for a method that compresses\n"
          "  nothing (%s).  The loss comes from steps.csv where the\n"
          "  run has one (every --log-every row), else from log.csv's epochs.\n"
          "  --out FILE: .pdf or .png by its ending (default plot.png)\n"
          "  --title T: the figure's title (default: the runs' model)\n"
          "  --script FILE.gp: also write the gnuplot script (data inline)\n"
          "  gnuplot is $GNUPLOT, else gnuplot on the PATH.\n",
          gc_cli_algorithm_names_where(dense, ", ", names, sizeof names));
}

/* ---- reading the run folder ----------------------------------------- */

/* The value of "key": in a config.json written by gradcomp train (one
 * key per line): a string without its quotes, or a number's text. */
static int json_field(const char *text, const char *key, char *out, size_t cap)
{
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(text, pat);
  if (!p)
    return -1;
  p += strlen(pat);
  while (*p == ' ')
    p++;
  int quoted = *p == '"';
  p += quoted;
  size_t n = 0;
  while (p[n] && p[n] != '\n' && (quoted ? p[n] != '"' : p[n] != ',') && n + 1 < cap)
    n++;
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

static char *slurp(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (cap - len < 2) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
      }
      buf = nb;
    }
  }
  fclose(f);
  if (buf)
    buf[len] = '\0';
  return buf;
}

/* A CSV of gradcomp's (a header, no quoted fields) as columns by name. */
typedef struct table {
  char *text;
  size_t rows, cols;
  char **cell;     /* [rows][cols]: pointers into text, "" where empty */
  char **head;
} table;

static void table_free(table *t)
{
  free(t->text);
  free(t->cell);
  free(t->head);
  memset(t, 0, sizeof *t);
}

static int table_read(const char *path, table *t)
{
  memset(t, 0, sizeof *t);
  if (!(t->text = slurp(path)))
    return -1;
  size_t lines = 0, fields = 1;
  for (const char *p = t->text; *p; p++)
    lines += *p == '\n';
  for (const char *p = t->text; *p && *p != '\n'; p++)
    fields += *p == ',';
  t->cols = fields;
  t->head = malloc(fields * sizeof *t->head);
  t->cell = malloc((lines + 1) * fields * sizeof *t->cell);
  if (!t->head || !t->cell) {
    table_free(t);
    return -1;
  }
  char *p = t->text;
  for (size_t r = 0; *p; r++) {
    char *end = strchr(p, '\n');
    if (!end)
      break;   /* a row cut short (a run being written): left out */
    *end = '\0';
    char **dst = r == 0 ? t->head : t->cell + (r - 1) * fields;
    size_t c = 0;
    for (char *f = p; c < fields; c++) {
      char *comma = strchr(f, ',');
      dst[c] = f;
      if (!comma) {
        c++;
        break;
      }
      *comma = '\0';
      f = comma + 1;
    }
    if (r > 0 && c == fields)
      t->rows++;
    else if (r > 0)
      break;   /* a ragged row: the table ends before it */
    p = end + 1;
  }
  return 0;
}

static long table_col(const table *t, const char *name)
{
  for (size_t c = 0; c < t->cols; c++)
    if (!strcmp(t->head[c], name))
      return (long) c;
  return -1;
}

/* Cell (r, c) as a number; NaN text when empty or absent. */
static const char *cell(const table *t, size_t r, long c)
{
  const char *s = c >= 0 ? t->cell[r * t->cols + (size_t) c] : "";
  return *s ? s : "NaN";
}

typedef struct run_info {
  char algorithm[32], compressor[32], model[48], workers[16], density[32];
  double spe;   /* steps per epoch */
  const gc__algo_desc *row;   /* the algorithm's, NULL for an unknown name */
  gc_algo_kind kind;
} run_info;

/* A curve's colour: the method's row index in a palette the rows cycle
 * through (matplotlib's ten), so every run of a method has one colour;
 * black for a method this build does not know. */
static const char *method_colour(const run_info *ri)
{
  static const char *const palette[] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf" };
  return ri->row ? palette[ri->kind % (sizeof palette / sizeof palette[0])] : "#000000";
}

/* One run's two datablocks: $cI (the loss curve: epoch, loss, MB so far)
 * and $eI (per epoch: epoch, accuracy %, MB so far). */
static int run_data(FILE *gp, const char *dir, size_t i, run_info *ri)
{
  char path[4200], *cfg;
  snprintf(path, sizeof path, "%s/config.json", dir);
  if (!(cfg = slurp(path)))
    return gc_cli_fail(CMD, 0, "%s: cannot read (is %s a run folder of"
                       " gradcomp train?)", path, dir);
  char spe[32] = "";
  memset(ri, 0, sizeof *ri);
  json_field(cfg, "algorithm", ri->algorithm, sizeof ri->algorithm);
  json_field(cfg, "compressor", ri->compressor, sizeof ri->compressor);
  json_field(cfg, "model", ri->model, sizeof ri->model);
  json_field(cfg, "workers", ri->workers, sizeof ri->workers);
  json_field(cfg, "density", ri->density, sizeof ri->density);
  json_field(cfg, "steps_per_epoch", spe, sizeof spe);
  free(cfg);
  if (gc_algo_by_name(ri->algorithm, &ri->kind) == GC_SUCCESS)
    ri->row = gc__algo(ri->kind);
  ri->spe = atof(spe);
  table lg, st = { 0 };
  snprintf(path, sizeof path, "%s/log.csv", dir);
  if (table_read(path, &lg) != 0)
    return gc_cli_fail(CMD, 0, "%s: cannot read", path);
  long le = table_col(&lg, "epoch"), la = table_col(&lg, "test_acc"),
       ll = table_col(&lg, "train_loss"), lu = table_col(&lg, "bytes_up"),
       ld = table_col(&lg, "bytes_down");
  if (le < 0 || la < 0 || ll < 0 || lu < 0 || ld < 0) {
    table_free(&lg);
    return gc_cli_fail(CMD, 0, "%s: not a log.csv of gradcomp train (needs"
                       " epoch, train_loss, test_acc, bytes_up, bytes_down)", path);
  }
  if (lg.rows == 0) {
    table_free(&lg);
    return gc_cli_fail(CMD, 0, "%s: no epoch logged yet", path);
  }
  double mb = 0;
  fprintf(gp, "$e%zu << EOD\n", i);
  for (size_t r = 0; r < lg.rows; r++) {
    mb += (atof(cell(&lg, r, lu)) + atof(cell(&lg, r, ld))) / 1e6;
    fprintf(gp, "%s %.6g %.9g %s\n", cell(&lg, r, le),
            100 * atof(cell(&lg, r, la)), mb, cell(&lg, r, ll));
  }
  fprintf(gp, "EOD\n$c%zu << EOD\n", i);
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  long ss, sl, su, sd;
  if (ri->spe > 0 && table_read(path, &st) == 0 &&
      (ss = table_col(&st, "step")) >= 0 && (sl = table_col(&st, "train_loss")) >= 0 &&
      (su = table_col(&st, "bytes_up_cum")) >= 0 &&
      (sd = table_col(&st, "bytes_down_cum")) >= 0 && st.rows > 0) {
    for (size_t r = 0; r < st.rows; r++)
      fprintf(gp, "%.9g %s %.9g\n", atof(cell(&st, r, ss)) / ri->spe,
              cell(&st, r, sl),
              (atof(cell(&st, r, su)) + atof(cell(&st, r, sd))) / 1e6);
  } else {   /* a run without steps.csv: the epochs' losses */
    mb = 0;
    for (size_t r = 0; r < lg.rows; r++) {
      mb += (atof(cell(&lg, r, lu)) + atof(cell(&lg, r, ld))) / 1e6;
      fprintf(gp, "%s %s %.9g\n", cell(&lg, r, le), cell(&lg, r, ll), mb);
    }
  }
  table_free(&st);
  table_free(&lg);
  fputs("EOD\n", gp);
  return 0;
}

/* A gnuplot string: double quotes with \ and " escaped. */
static void gp_string(FILE *gp, const char *s)
{
  fputc('"', gp);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', gp);
    fputc(*s, gp);
  }
  fputc('"', gp);
}

static int write_script(FILE *gp, char **runs, size_t n, const char *out,
                        const char *title)
{
  size_t len = strlen(out);
  int pdf = len > 4 && !strcmp(out + len - 4, ".pdf");
  fputs("set encoding utf8\n", gp);
  if (pdf)
    fputs("set terminal pdfcairo noenhanced size 7in,4.8in font \",8\"\n", gp);
  else
    fputs("set terminal pngcairo noenhanced size 1400,900 font \",10\"\n", gp);
  fputs("set output ", gp);
  gp_string(gp, out);
  fputc('\n', gp);
  run_info *ri = calloc(n, sizeof *ri);
  if (!ri)
    return gc_cli_fail(CMD, 0, "out of memory");
  for (size_t i = 0; i < n; i++)
    if (run_data(gp, runs[i], i, &ri[i])) {
      free(ri);
      return 1;
    }
  char t[200];
  snprintf(t, sizeof t, "%s", title ? title : ri[0].model);
  fputs("set multiplot layout 2,2 title ", gp);
  gp_string(gp, t);
  /* a margin above and below, so no point sits on the frame */
  fputs("\nset grid\nset offsets 0, 0, graph 0.05, graph 0.05\n", gp);
  static const char *const panel[4][4] = {
    /* xlabel, ylabel, block, columns */
    { "epoch", "train loss", "c", "1:2" },
    { "epoch", "test accuracy (%)", "e", "1:2" },
    { "bytes sent so far, up + down (MB)", "train loss", "c", "3:2" },
    { "bytes sent so far, up + down (MB)", "test accuracy (%)", "e", "3:2" } };
  for (int k = 0; k < 4; k++) {
    /* the key where the curves are not: losses fall, accuracies rise */
    fprintf(gp, "set xlabel \"%s\"\nset ylabel \"%s\"\n%s\nset key %s right\nplot ",
            panel[k][0], panel[k][1], k >= 2 ? "set logscale x" : "unset logscale x",
            panel[k][2][0] == 'e' ? "bottom" : "top");
    for (size_t i = 0; i < n; i++) {
      char label[200];
      if (ri[i].row && dense(ri[i].row))
        snprintf(label, sizeof label, "%s P=%s (dense)", ri[i].algorithm,
                 ri[i].workers);
      else
        snprintf(label, sizeof label, "%s P=%s %s rho=%s", ri[i].algorithm,
                 ri[i].workers, ri[i].compressor, ri[i].density);
      fprintf(gp, "%s$%s%zu using %s with linespoints lc rgb \"%s\" dt %zu pt %d"
              " ps 0.4 lw 1.5 title ", i ? ", \\\n     " : "", panel[k][2], i,
              panel[k][3], method_colour(&ri[i]), 1 + i % 4,
              panel[k][2][0] == 'e' ? 7 : -1);
      gp_string(gp, label);
    }
    fputc('\n', gp);
  }
  fputs("unset multiplot\nunset output\n", gp);
  free(ri);
  return 0;
}

int gc_cmd_plot(int argc, char **argv)
{
  const char *out = "plot.png", *title = NULL, *script = NULL;
  char **runs = calloc((size_t) argc + 1, sizeof *runs);
  size_t n = 0;
  if (!runs)
    return gc_cli_fail(CMD, 0, "out of memory");
  gc_cli_args args = GC_CLI_ARGS(CMD, "", usage, argc, argv);
  args.operands = 1;
  const char *a, *v;
  while (gc_cli_next(&args, &a, &v)) {
    if (!a) {   /* a run folder */
      runs[n++] = (char *) v;
    } else if (!strcmp(a, "--out") || !strcmp(a, "--title") || !strcmp(a, "--script")) {
      *(!strcmp(a, "--out") ? &out : !strcmp(a, "--title") ? &title : &script) = v;
    } else {
      free(runs);
      return gc_cli_unknown(&args, a);
    }
  }
  if (args.exit >= 0) {
    free(runs);
    return args.exit;
  }
  size_t len = strlen(out);
  int st = 0;
  if (n == 0)
    st = gc_cli_usage_error(CMD, "no run folder given (gradcomp plot RUN...)");
  else if (!(len > 4 && (!strcmp(out + len - 4, ".pdf") || !strcmp(out + len - 4, ".png"))))
    st = gc_cli_usage_error(CMD, "--out %s: the name must end in .pdf or .png", out);
  if (st) {
    free(runs);
    return st;
  }
  /* the whole script first: a run that cannot be read stops before
   * gnuplot opens the output */
  char *text = NULL;
  size_t tlen = 0;
  FILE *mem = open_memstream(&text, &tlen);
  if (!mem) {
    free(runs);
    return gc_cli_fail(CMD, 0, "out of memory");
  }
  st = write_script(mem, runs, n, out, title);
  fclose(mem);
  free(runs);
  if (st) {
    free(text);
    return st;
  }
  if (script) {
    FILE *f = fopen(script, "w");
    int bad = !f || fwrite(text, 1, tlen, f) != tlen;
    if ((f && fclose(f) != 0) || bad) {
      free(text);
      return gc_cli_fail(CMD, 0, "%s: cannot write: %s", script, strerror(errno));
    }
  }
  const char *g = getenv("GNUPLOT");
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "'%s'", g && *g ? g : "gnuplot");
  FILE *gp = popen(cmd, "w");
  if (!gp) {
    free(text);
    return gc_cli_fail(CMD, 0, "cannot start gnuplot (%s)", cmd);
  }
  fwrite(text, 1, tlen, gp);
  free(text);
  int rc = pclose(gp);
  if (rc != 0)
    return gc_cli_fail(CMD, 0, "gnuplot failed (exit %d; install gnuplot or set"
                       " GNUPLOT)", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
  printf("%s\n", out);
  return 0;
}
