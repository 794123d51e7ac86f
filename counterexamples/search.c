/* search -- a counterexample finder: enumerate small instances
 * (P in {2,3}, d in {2,3}, K = K_d = 1, dyadic step sizes, small integer
 * targets b_p and starts x_0, f_p = 1/2||x - b_p||^2), run uni and bi top-K
 * through gc_sim with dyadic-exactness checks and cycle detection on the
 * full state (x and all memories), and classify bi against uni by the mean
 * F-F* over the limit cycle.  Instances whose arithmetic is not exact
 * (P = 3 averages divide by 3) are still classified, with the suffix
 * "_float".  Exit 0 iff some instance has bi strictly better. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_theory.h"

#define CMD "search"
#define MAX_STEPS 4000

enum { V_BETTER, V_WORSE, V_EQUAL, V_NOCYCLE, NV };
static const char *vname[NV] = { "bi_better", "bi_worse", "equal", "no_cycle" };

/* The grid: target entries, start entries, step sizes (all dyadic). */
static const int tvals[] = { -1, 0, 1 };
static const int xvals[] = { -3, -1, 1, 3 };
static const double alphas[] = { 0.5, 0.25 };

static void usage(FILE *out)
{
  fprintf(out, "usage: search [--limit N] [--csv FILE] [--examples N]\n"
               "  Enumerate small heterogeneous instances and compare uni and bi\n"
               "  top-1 in the limit.  --limit: instances per (P,d) class, spread\n"
               "  evenly over the class (default 1500); --examples: examples\n"
               "  printed per verdict (default 3); --csv: one row per instance\n"
               "  P,d,alpha,targets,x0,uni_limit,bi_limit,verdict.\n");
}

static size_t ipow(size_t b, size_t e)
{
  size_t r = 1;
  while (e--)
    r *= b;
  return r;
}

/* Decode instance number idx of class (P,d) into targets and start.
 * Targets are ordered tuples of distinct... (any), start and alpha. */
static void decode(size_t idx, size_t P, size_t d, double *b, double *x0,
                   double *alpha)
{
  size_t nt = sizeof tvals / sizeof *tvals, nx = sizeof xvals / sizeof *xvals;
  *alpha = alphas[idx % 2];
  idx /= 2;
  for (size_t i = 0; i < d; i++) {
    x0[i] = xvals[idx % nx];
    idx /= nx;
  }
  for (size_t p = 0; p < P; p++)
    for (size_t i = 0; i < d; i++) {
      b[p * d + i] = tvals[idx % nt];
      idx /= nt;
    }
}

/* Keep one representative per multiset of workers (the algorithms are
 * symmetric in the workers) and drop homogeneous instances (all b_p equal:
 * the workers agree and nothing distinguishes the methods). */
static int canonical(const double *b, size_t P, size_t d)
{
  int all_equal = 1;
  for (size_t p = 1; p < P; p++) {
    const double *u = b + (p - 1) * d, *v = b + p * d;
    int cmp = 0;
    for (size_t i = 0; i < d && !cmp; i++)
      cmp = (u[i] > v[i]) - (u[i] < v[i]);
    if (cmp > 0)
      return 0;   /* not in non-decreasing lexicographic order */
    if (cmp)
      all_equal = 0;
  }
  return !all_equal;
}

static void fmt_vec(char *buf, size_t cap, const double *v, size_t n)
{
  size_t o = 0;
  o += (size_t) snprintf(buf + o, cap - o, "(");
  for (size_t i = 0; i < n && o < cap; i++)
    o += (size_t) snprintf(buf + o, cap - o, "%s%g", i ? " " : "", v[i]);
  if (o < cap)
    snprintf(buf + o, cap - o, ")");
}

int main(int argc, char **argv)
{
  gc_set_error_handler_off();   /* failures are reported once, by gc_cli_fail */
  if (gc_cli_start(CMD))
    return 1;
  size_t limit = 1500, examples = 3;
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
    fprintf(f, "P,d,alpha,targets,x0,uni_limit,bi_limit,verdict\n");
    if (gc_cli_csv_flush(CMD, f, csv)) {
      fclose(f);
      return 1;
    }
  }
  size_t count[2][NV] = { { 0 } };   /* [exact?][verdict] */
  size_t shown[NV] = { 0 };
  size_t total = 0;
  printf("search: K = K_d = 1, f_p = 1/2||x-b_p||^2, b_p in {-1,0,1}^d, "
         "x0 in {-3,-1,1,3}^d, alpha in {1/2,1/4}\n");
  for (size_t P = 2; P <= 3; P++)
    for (size_t d = 2; d <= 3; d++) {
      size_t nx = sizeof xvals / sizeof *xvals, nt = sizeof tvals / sizeof *tvals;
      size_t N = 2 * ipow(nx, d) * ipow(nt, P * d);
      /* Walk the class with a stride coprime-ish to the digit layout so a
       * limited run still covers targets, starts and step sizes. */
      size_t stride = N / limit > 1 ? N / limit : 1;
      if (stride > 1 && stride % 2 == 0)
        stride++;
      size_t done = 0;
      for (size_t j = 0; j < N && done < limit; j += stride) {
        gc_problem *prob = gc_problem_alloc(P, d, GC_PROBLEM_DIAG);
        if (!prob)
          return gc_cli_fail(CMD, 1, "out of memory");
        double alpha;
        decode(j, P, d, prob->b, prob->x0, &alpha);
        if (!canonical(prob->b, P, d)) {
          gc_problem_free(prob);
          continue;
        }
        for (size_t i = 0; i < P * d; i++)
          prob->a[i] = 1.0;
        if (gc_problem_finalize(prob)) {
          gc_problem_free(prob);
          return gc_cli_fail(CMD, 1, "bad instance");
        }
        gc_cycle_result ru, rb;
        if (gc_theory_cycle_run(prob, GC_ALGO_UNI, 1, 1, GC_TIES_LOW, alpha,
                                MAX_STEPS, &ru) ||
            gc_theory_cycle_run(prob, GC_ALGO_BI, 1, 1, GC_TIES_LOW, alpha,
                                MAX_STEPS, &rb))
          return gc_cli_fail(CMD, 1, "run failed");
        int exact = ru.exact && rb.exact;
        int v;
        /* Exact runs compare exactly; float runs up to rounding. */
        double tol = exact ? 0.0 : 1e-9 * fmax(ru.limit, rb.limit) + 1e-300;
        if (!ru.period || !rb.period)
          v = V_NOCYCLE;
        else if (rb.limit < ru.limit - tol)
          v = V_BETTER;
        else if (rb.limit > ru.limit + tol)
          v = V_WORSE;
        else
          v = V_EQUAL;
        count[exact][v]++;
        total++;
        done++;
        char tb[160], xb[64];
        fmt_vec(tb, sizeof tb, prob->b, P * d);
        fmt_vec(xb, sizeof xb, prob->x0, d);
        if (f) {
          fprintf(f, "%zu,%zu,%g,%s,%s,%.17g,%.17g,%s%s\n", P, d, alpha, tb, xb,
                  ru.limit, rb.limit, vname[v], exact ? "" : "_float");
          if (gc_cli_csv_flush(CMD, f, csv)) {
            gc_problem_free(prob);
            fclose(f);
            return 1;
          }
        }
        if (exact && shown[v] < examples) {
          shown[v]++;
          printf("  %-9s P=%zu d=%zu alpha=%g b=%s x0=%s  uni: limit %.6g "
                 "(cycle from t=%ld, period %ld)  bi: limit %.6g (from t=%ld, "
                 "period %ld)\n",
                 vname[v], P, d, alpha, tb, xb, ru.limit, ru.start, ru.period,
                 rb.limit, rb.start, rb.period);
        }
        gc_problem_free(prob);
      }
    }
  if (f && gc_cli_csv_close(CMD, f, csv))
    return 1;
  printf("instances: %zu (exact dyadic: %zu)\n", total,
         count[1][0] + count[1][1] + count[1][2] + count[1][3]);
  printf("exact: bi strictly better %zu, strictly worse %zu, equal %zu, no cycle %zu\n",
         count[1][V_BETTER], count[1][V_WORSE], count[1][V_EQUAL],
         count[1][V_NOCYCLE]);
  printf("float: bi strictly better %zu, strictly worse %zu, equal %zu, no cycle %zu\n",
         count[0][V_BETTER], count[0][V_WORSE], count[0][V_EQUAL],
         count[0][V_NOCYCLE]);
  int ok = count[1][V_BETTER] > 0;
  printf("%s\n", ok ? "FOUND: instances where bi is strictly better in exact arithmetic"
                    : "NOT FOUND");
  return ok ? 0 : 1;
}
