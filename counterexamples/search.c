/* search -- a counterexample finder: enumerate small heterogeneous
 * instances (P in {2,3}, d in {2,3}, K = K_d = 1, f_p = 1/2||x - b_p||^2
 * with integer targets and starts, dyadic step sizes) and compare bi with
 * uni top-K by the mean F-F* over the limit cycle of the full state.
 *
 * Each instance runs in exact rational arithmetic (gc_search.h) and through
 * gc_sim in float64, with both top-K tie rules.  It is called exact only if
 * all four rational runs ended without an overflow; otherwise its verdict
 * comes from float64 and says so.  Exit 0 iff some exact instance without a
 * decisive tie has bi strictly better. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_search.h"

#define CMD "search"
#define MAX_STEPS 4000
#define DEFAULT_LIMIT 1500

/* The grid: target entries, start entries, step sizes (all exact). */
static const int tvals[] = { -1, 0, 1 };
static const int xvals[] = { -3, -1, 1, 3 };
static const int alpha_den[] = { 2, 4 };   /* alpha = 1/2, 1/4 */
#define NT (sizeof tvals / sizeof *tvals)
#define NX (sizeof xvals / sizeof *xvals)
#define NA (sizeof alpha_den / sizeof *alpha_den)

static size_t ipow(size_t b, size_t e)
{
  size_t r = 1;
  while (e--)
    r *= b;
  return r;
}

/* A class (P, d): its canonical target tuples and instance count.  The
 * algorithms are symmetric in the workers, so one instance stands for every
 * order of the same targets: the tuples are the non-decreasing sequences
 * v_1 <= ... <= v_P of per-worker target vectors (numbered 0..NT^d-1),
 * without the homogeneous ones (all equal: nothing tells the methods
 * apart).  Instance i of the class: alpha = i % NA, then the start x0 (NX^d
 * choices), then the tuple. */
typedef struct klass {
  size_t P, d, nvec, ntuple, n;   /* n = ntuple * NX^d * NA instances */
  size_t *tuple;                   /* ntuple x P vector numbers        */
} klass;

static int class_init(klass *c, size_t P, size_t d)
{
  c->P = P;
  c->d = d;
  c->nvec = ipow(NT, d);
  size_t cap = ipow(c->nvec, P), v[GC_SEARCH_MAX_P] = { 0 };
  if (!(c->tuple = malloc(cap * P * sizeof *c->tuple)))
    return GC_ENOMEM;
  c->ntuple = 0;
  for (;;) {
    int homogeneous = 1;
    for (size_t p = 1; p < P; p++)
      homogeneous &= v[p] == v[0];
    if (!homogeneous)
      memcpy(c->tuple + c->ntuple++ * P, v, P * sizeof *v);
    /* next non-decreasing sequence: bump the last entry that can grow and
     * set every later one equal to it */
    size_t p = P;
    while (p > 0 && v[p - 1] == c->nvec - 1)
      p--;
    if (p == 0)
      break;
    v[p - 1]++;
    for (size_t q = p; q < P; q++)
      v[q] = v[p - 1];
  }
  c->n = c->ntuple * ipow(NX, d) * NA;
  return GC_SUCCESS;
}

static void decode(const klass *c, size_t idx, gc_search_instance *in)
{
  memset(in, 0, sizeof *in);
  in->P = c->P;
  in->d = c->d;
  in->k = in->kd = 1;
  gc_rat_make(1, alpha_den[idx % NA], &in->alpha);
  idx /= NA;
  for (size_t i = 0; i < c->d; i++, idx /= NX)
    gc_rat_make(xvals[idx % NX], 1, &in->x0[i]);
  const size_t *v = c->tuple + idx * c->P;
  for (size_t p = 0; p < c->P; p++) {
    size_t code = v[p];
    for (size_t i = 0; i < c->d; i++, code /= NT)
      gc_rat_make(tvals[code % NT], 1, &in->b[p * c->d + i]);
  }
}

static size_t gcd_size(size_t a, size_t b)
{
  while (b) {
    size_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The sample of a class larger than the limit: instances j*G mod n for
 * j < limit, G the first number >= 0.618 n coprime to n (a Weyl sequence:
 * distinct instances spread over the whole class, alphas, starts and
 * targets alike).  G = 1 when the class is complete. */
static size_t sample_stride(size_t n, size_t limit)
{
  if (limit >= n)
    return 1;
  size_t g = (size_t) (0.6180339887498949 * (double) n);
  while (gcd_size(g, n) != 1)
    g++;
  return g;
}

static void usage(FILE *out)
{
  fprintf(out,
          "usage: search [--limit N] [--class PxD] [--csv FILE] [--examples N]\n"
          "  Compare uni and bi top-K (K = K_d = 1) in the limit on small\n"
          "  heterogeneous instances: f_p = 1/2||x-b_p||^2, b_p in {-1,0,1}^d,\n"
          "  x0 in {-3,-1,1,3}^d, alpha in {1/2,1/4}, one instance per multiset\n"
          "  of targets (the methods are symmetric in the workers), homogeneous\n"
          "  targets left out.  Classes and their canonical instances:\n");
  for (size_t P = 2; P <= 3; P++)
    for (size_t d = 2; d <= 3; d++) {
      klass c;
      if (class_init(&c, P, d) == GC_SUCCESS)
        fprintf(out, "    P=%zu d=%zu: %7zu (%s at the default --limit)\n", P, d,
                c.n, c.n <= DEFAULT_LIMIT ? "complete" : "sampled");
      free(c.tuple);
    }
  fprintf(out,
          "  --limit N: instances per class (default %d).  A class with at\n"
          "  most N instances runs complete; a larger one runs the N instances\n"
          "  j*G mod n, j < N, G the first integer >= 0.618n coprime to n.\n"
          "  --class PxD: only that class (e.g. 2x2; default: all four).\n"
          "  Each instance runs uni and bi with both tie rules in exact\n"
          "  rational arithmetic (64-bit fractions; an overflow makes it a\n"
          "  float64 instance, labelled so) and through gc_sim in float64; a\n"
          "  float64 run that stays dyadic must agree with its exact twin.\n"
          "  Limit = mean F-F* over the cycle of the full state (x and every\n"
          "  memory), found within %d steps; two limits below %g both\n"
          "  converge (equal).  A decisive tie: a top-K selection where a kept\n"
          "  and a dropped entry have the same non-zero magnitude.\n"
          "  --examples N: exact tie-free examples printed per verdict\n"
          "  (default 3).  --csv FILE: one row per instance:\n"
          "  P,d,alpha,targets,x0,uni_limit,bi_limit,verdict (ties low; suffix\n"
          "  _float when not exact),arithmetic (exact|float),uni_limit_exact,\n"
          "  bi_limit_exact (fractions; empty without an exact cycle),uni_start,\n"
          "  uni_period,bi_start,bi_period (period 0: no cycle),ties_low,\n"
          "  ties_high (decisive ties in uni + bi),verdict_ties_high,\n"
          "  tie_rule_survives (1: same verdict with both rules),verdict_float\n"
          "  (float64, ties low).  Exit 0 iff some exact instance without a\n"
          "  decisive tie has bi strictly better.\n"
          "  Time: about 2 minutes of one core at the default --limit (the\n"
          "  3-worker classes take most), ~7 s at --limit 100.  Progress on\n"
          "  stderr: a bar with an ETA on a terminal, and a line per class.\n",
          DEFAULT_LIMIT, MAX_STEPS, GC_SEARCH_CONVERGED);
}

static void fmt_vec(char *buf, size_t cap, const gc_rat *v, size_t n)
{
  size_t o = 0;
  o += (size_t) snprintf(buf + o, cap - o, "(");
  for (size_t i = 0; i < n && o < cap; i++) {
    char f[48];
    gc_rat_format(v[i], f, sizeof f);
    o += (size_t) snprintf(buf + o, cap - o, "%s%s", i ? " " : "", f);
  }
  if (o < cap)
    snprintf(buf + o, cap - o, ")");
}

/* The limit of the run behind verdict[rule]: exact fraction or empty. */
static void limit_text(const gc_search_result *r, int method, char *buf,
                       size_t cap)
{
  const gc_search_run *e = &r->ex[0][method];
  if (r->exact && e->status == GC_RUN_CYCLE)
    gc_rat_format(e->limit, buf, cap);
  else
    buf[0] = '\0';
}

/* Tie categories of the summary. */
enum { TIE_FREE = 0, TIE_SAME, TIE_CHANGES, NTIE };
static const char *tie_name[NTIE] = {
  "tie-free", "tie-dependent, same verdict with ties high",
  "tie-dependent, verdict changes with ties high" };

int main(int argc, char **argv)
{
  gc_set_error_handler_off();   /* failures are reported once, by gc_cli_fail */
  if (gc_cli_start(CMD))
    return 1;
  size_t limit = DEFAULT_LIMIT, examples = 3, only_P = 0, only_d = 0;
  const char *csv = NULL;
  gc_cli_args args = GC_CLI_ARGS(CMD, "", usage, argc, argv);
  const char *o, *val;
  while (gc_cli_next(&args, &o, &val)) {
    if (!strcmp(o, "--limit")) {
      if (gc_cli_size(CMD, o, val, &limit))
        return 2;
    } else if (!strcmp(o, "--examples")) {
      if (gc_cli_size(CMD, o, val, &examples))
        return 2;
    } else if (!strcmp(o, "--csv")) {
      csv = val;
    } else if (!strcmp(o, "--class")) {
      char tail;
      if (sscanf(val, "%zux%zu%c", &only_P, &only_d, &tail) != 2 ||
          only_P < 2 || only_P > 3 || only_d < 2 || only_d > 3)
        return gc_cli_usage_error(CMD, "--class: '%s' is not one of 2x2, "
                                  "2x3, 3x2, 3x3", val);
    } else {
      return gc_cli_unknown(&args, o);
    }
  }
  if (args.exit >= 0)
    return args.exit;
  if (limit == 0)
    return gc_cli_usage_error(CMD, "--limit must be at least 1");   /* 1 = not reproduced */
  FILE *f = NULL;
  if (csv) {
    if (!(f = fopen(csv, "w")))
      return gc_cli_fail(CMD, 0, "cannot write %s", csv);
    fprintf(f, "P,d,alpha,targets,x0,uni_limit,bi_limit,verdict,arithmetic,"
               "uni_limit_exact,bi_limit_exact,uni_start,uni_period,bi_start,"
               "bi_period,ties_low,ties_high,verdict_ties_high,"
               "tie_rule_survives,verdict_float\n");
    if (gc_cli_csv_flush(CMD, f, csv)) {
      fclose(f);
      return 1;
    }
  }
  gc_search_ws *ws = gc_search_ws_alloc(MAX_STEPS);
  if (!ws)
    return gc_cli_fail(CMD, 1, "out of memory");
  size_t count[2][NTIE][GC_VERDICT_COUNT] = { { { 0 } } };   /* [exact?] */
  size_t shown[GC_VERDICT_COUNT] = { 0 };
  size_t float_differs = 0, checked = 0, total = 0, low_only = 0;
  printf("search: K = K_d = 1, f_p = 1/2||x-b_p||^2, b_p in {-1,0,1}^d, "
         "x0 in {-3,-1,1,3}^d, alpha in {1/2,1/4}, limit cycles within %d "
         "steps\n", MAX_STEPS);
  char cover[4][160];
  int status = 0;
  for (size_t P = 2, ci = 0; P <= 3 && !status; P++)
    for (size_t d = 2; d <= 3 && !status; d++, ci++) {
      if (only_P && (P != only_P || d != only_d)) {
        cover[ci][0] = '\0';
        continue;
      }
      klass c;
      if (class_init(&c, P, d) != GC_SUCCESS) {
        status = gc_cli_fail(CMD, 1, "out of memory");
        break;
      }
      size_t runs = limit < c.n ? limit : c.n, G = sample_stride(c.n, limit);
      size_t nexact = 0;
      double t0 = gc_cli_now();
      char label[64];
      snprintf(label, sizeof label, "search: class P=%zu d=%zu", P, d);
      for (size_t j = 0; j < runs; j++) {
        gc_cli_progress(label, j + 1, runs, 0);   /* terminals: bar, ETA */
        size_t idx = (size_t) ((unsigned long long) j * G % c.n);
        gc_search_instance in;
        decode(&c, idx, &in);
        gc_search_result r;
        char tb[160], xb[64];
        fmt_vec(tb, sizeof tb, in.b, P * d);
        fmt_vec(xb, sizeof xb, in.x0, d);
        int st = gc_search_eval(ws, &in, &r);
        if (st != GC_SUCCESS) {
          status = gc_cli_fail(CMD, st, "instance P=%zu d=%zu alpha=1/%d "
                               "b=%s x0=%s", P, d, alpha_den[idx % NA], tb, xb);
          break;
        }
        int v = r.verdict[0];
        int tie = r.ties[0] == 0 && r.ties[1] == 0 ? TIE_FREE
                  : r.verdict[0] == r.verdict[1]   ? TIE_SAME
                                                   : TIE_CHANGES;
        count[r.exact][tie][v]++;
        nexact += (size_t) r.exact;
        float_differs += r.exact && r.verdict_float[0] != v;
        low_only += !r.exact && r.ex[0][0].status != GC_RUN_OVERFLOW &&
                    r.ex[0][1].status != GC_RUN_OVERFLOW;
        checked += (size_t) r.checked;
        total++;
        const gc_search_run *eu = &r.ex[0][0], *eb = &r.ex[0][1];
        const gc_cycle_result *fu = &r.fl[0][0], *fb = &r.fl[0][1];
        double ul = r.exact ? eu->limit_f : fu->limit;
        double bl = r.exact ? eb->limit_f : fb->limit;
        long us = r.exact ? eu->start : fu->start, up = r.exact ? eu->period : fu->period;
        long bs = r.exact ? eb->start : fb->start, bp = r.exact ? eb->period : fb->period;
        if (r.exact && eu->status != GC_RUN_CYCLE)
          us = up = 0;
        if (r.exact && eb->status != GC_RUN_CYCLE)
          bs = bp = 0;
        if (f) {
          char ue[48], be[48];
          limit_text(&r, 0, ue, sizeof ue);
          limit_text(&r, 1, be, sizeof be);
          fprintf(f, "%zu,%zu,%g,%s,%s,%.17g,%.17g,%s%s,%s,%s,%s,%ld,%ld,%ld,"
                     "%ld,%d,%d,%s,%d,%s\n",
                  P, d, 1.0 / alpha_den[idx % NA], tb, xb, ul, bl,
                  gc_search_verdict_name(v), r.exact ? "" : "_float",
                  gc_search_arithmetic_name(&r), ue, be, us, up, bs, bp,
                  r.ties[0], r.ties[1], gc_search_verdict_name(r.verdict[1]),
                  r.verdict[0] == r.verdict[1],
                  gc_search_verdict_name(r.verdict_float[0]));
          if (gc_cli_csv_flush(CMD, f, csv)) {   /* reported once, here */
            fclose(f);
            f = NULL;
            status = 1;
            break;
          }
        }
        if (r.exact && tie == TIE_FREE && shown[v] < examples) {
          char ue[48], be[48];
          limit_text(&r, 0, ue, sizeof ue);
          limit_text(&r, 1, be, sizeof be);
          shown[v]++;
          printf("  %-9s P=%zu d=%zu alpha=1/%d b=%s x0=%s  uni: %s (cycle "
                 "from t=%ld, period %ld)  bi: %s (from t=%ld, period %ld)\n",
                 gc_search_verdict_name(v), P, d, alpha_den[idx % NA], tb, xb,
                 ue[0] ? ue : "no exact cycle", us, up,
                 be[0] ? be : "no exact cycle", bs, bp);
        }
      }
      /* one line per class on stderr even when it is not a terminal: the
       * default --limit runs for minutes */
      if (!status)
        fprintf(stderr, "%s: %zu instances in %.1f s\n", label, runs,
                gc_cli_now() - t0);
      snprintf(cover[ci], sizeof cover[ci],
               "  P=%zu d=%zu  %7zu canonical  %7zu run  %-8s  %6zu exact  "
               "%6zu float", P, d, c.n, runs,
               runs == c.n ? "complete" : "sampled", nexact, runs - nexact);
      free(c.tuple);
    }
  gc_search_ws_free(ws);
  if (f && gc_cli_csv_close(CMD, f, csv))
    status = 1;
  if (status)
    return status;

  printf("\ncoverage (per class: canonical instances, instances run):\n");
  for (int ci = 0; ci < 4; ci++)
    if (cover[ci][0])
      printf("%s\n", cover[ci]);
  printf("instances: %zu; float64 runs that stayed dyadic and matched their "
         "exact twin: %zu\n", total, checked);
  printf("\nverdicts under ties low (bi against uni by the mean F-F* over the "
         "limit cycle):\n");
  printf("  %-5s %-46s %9s %9s %9s %9s %7s\n", "", "", "bi_better", "bi_worse",
         "equal", "no_cycle", "total");
  for (int e = 1; e >= 0; e--)
    for (int t = 0; t < NTIE; t++) {
      size_t sum = 0;
      printf("  %-5s %-46s", e ? "exact" : "float", tie_name[t]);
      for (int v = 0; v < GC_VERDICT_COUNT; v++) {
        printf(" %9zu", count[e][t][v]);
        sum += count[e][t][v];
      }
      printf(" %7zu\n", sum);
    }
  printf("exact instances whose float64 verdict differs: %zu\n", float_differs);
  printf("float instances whose ties-low runs were exact (a ties-high rerun "
         "overflowed): %zu\n", low_only);
  int ok = count[1][TIE_FREE][GC_VERDICT_BETTER] > 0;
  printf("%s\n", ok ? "FOUND: tie-free instances where bi is strictly better "
                      "in exact arithmetic"
                    : "NOT FOUND: no tie-free exact instance with bi strictly "
                      "better");
  return ok ? 0 : 1;
}
