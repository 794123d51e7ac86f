/* cycle9 -- the derived minimal counterexample of theory.md 5.2.
 *
 * P = 2, d = 2, f_1 = 1/2||x-(0,-1)||^2, f_2 = 1/2||x-(0,1)||^2, K = K_d = 1,
 * lr = 1/2, x_0 = (-3,-1).  Unidirectional top-K enters a cycle of period 9
 * at t = 3 with mean F-F* = 9/256; bidirectional top-K reaches x* = 0 at
 * t = 3 and stays there.  Both methods run through gc_sim in float64; every
 * value is checked to be a dyadic rational with few bits, so the run is
 * exact arithmetic.  Run with both tie rules: no tie is ever met, and the
 * trajectories are bit-identical.  Exit 0 iff all of this holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_theory.h"

#define CMD "cycle9"

static const char *frac(double v, char *buf)
{
  gc_dyadic_format(v, buf, 48);
  return buf;
}

static const char *pair(const double *v, char *buf)
{
  char a[48], b[48];
  snprintf(buf, 112, "(%s,%s)", frac(v[0], a), frac(v[1], b));
  return buf;
}

static void print_table(const char *title, const double *tr, long rows, int bi)
{
  char b1[112], b2[112], b3[112], b4[112], b5[112], b6[112], g[48];
  printf("\n%s\n", title);
  if (bi)
    printf("%4s  %-14s %-10s %-12s %-12s %-12s %s\n", "t", "x_t", "F-F*", "m1",
           "m2", "q(applied)", "delta after");
  else
    printf("%4s  %-14s %-10s %-12s %-12s %-12s %-12s %s\n", "t", "x_t", "F-F*",
           "m1", "m2", "applied", "eps1 after", "eps2 after");
  for (long t = 0; t < rows; t++) {
    const double *r = tr + (size_t) t * GC_CYCLE9_REC;
    double gap = 0.5 * (r[0] * r[0] + r[1] * r[1]);   /* x* = 0, Abar = I */
    if (bi)
      printf("%4ld  %-14s %-10s %-12s %-12s %-12s %s\n", t, pair(r, b1),
             frac(gap, g), pair(r + 2, b2), pair(r + 4, b3), pair(r + 6, b4),
             pair(r + 12, b5));
    else
      printf("%4ld  %-14s %-10s %-12s %-12s %-12s %-12s %s\n", t, pair(r, b1),
             frac(gap, g), pair(r + 2, b2), pair(r + 4, b3), pair(r + 6, b4),
             pair(r + 8, b5), pair(r + 10, b6));
  }
}

static int write_csv(const char *path, const double *uni, const double *bi,
                     long steps)
{
  FILE *f = fopen(path, "w");
  if (!f)
    return gc_cli_fail(CMD, 0, "cannot write %s", path);
  fprintf(f, "t,method,x1,x2,f_gap,f_gap_fraction\n");
  for (int m = 0; m < 2; m++) {
    const double *tr = m ? bi : uni;
    for (long t = 0; t < steps; t++) {
      const double *r = tr + (size_t) t * GC_CYCLE9_REC;
      double gap = 0.5 * (r[0] * r[0] + r[1] * r[1]);
      char g[48];
      fprintf(f, "%ld,%s,%.17g,%.17g,%.17g,%s\n", t, m ? "bi" : "uni", r[0],
              r[1], gap, frac(gap, g));
    }
  }
  return gc_cli_csv_close(CMD, f, path);
}

static void usage(FILE *out)
{
  fprintf(out, "usage: cycle9 [--steps N] [--rows N] [--csv FILE]\n"
               "  Exact period-9 cycle of unidirectional top-K vs the fixed point\n"
               "  of bidirectional top-K (theory.md 5.2).  --steps: run length\n"
               "  (default 2000); --rows: table rows printed (default 14);\n"
               "  --csv: per-step t,method,x1,x2,f_gap,f_gap_fraction.\n");
}

int main(int argc, char **argv)
{
  gc_set_error_handler_off();   /* failures are reported once, by gc_cli_fail */
  if (gc_cli_start(CMD))
    return 1;
  size_t steps = 2000, rows = 14;
  const char *csv = NULL;
  gc_cli_args args = GC_CLI_ARGS(CMD, "", usage, argc, argv);
  const char *o, *v;
  while (gc_cli_next(&args, &o, &v)) {
    if (!strcmp(o, "--steps")) {
      if (gc_cli_size(CMD, o, v, &steps))
        return 2;
    } else if (!strcmp(o, "--rows")) {
      if (gc_cli_size(CMD, o, v, &rows))
        return 2;
    } else if (!strcmp(o, "--csv")) {
      csv = v;
    } else {
      return gc_cli_unknown(&args, o);
    }
  }
  if (args.exit >= 0)
    return args.exit;
  if (steps < 30 || steps > 10000000)
    return gc_cli_usage_error(CMD, "--steps must be in [30, 1e7]");   /* 1 = not reproduced */
  if (rows > steps)
    rows = steps;
  size_t rec = (size_t) steps * GC_CYCLE9_REC;
  double *tr[2][2];
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++)
      if (!(tr[a][b] = malloc(rec * sizeof(double))))
        return gc_cli_fail(CMD, 0, "out of memory");
  gc_cycle_report rep[2];
  static const int rules[2] = { GC_TIES_HIGH, GC_TIES_LOW };
  for (int r = 0; r < 2; r++)
    if (gc_theory_cycle9(rules[r], (long) steps, &rep[r], tr[r][0], tr[r][1]))
      return gc_cli_fail(CMD, 1, "the run failed");

  print_table("Unidirectional top-K (a), lr = 1/2, K = 1:", tr[0][0], (long) rows, 0);
  print_table("Bidirectional top-K (b), lr = 1/2, K = K_d = 1:", tr[0][1], (long) rows, 1);

  char a[48], b[48];
  const gc_cycle_report *R = &rep[0];
  int same = !memcmp(tr[0][0], tr[1][0], rec * sizeof(double)) &&
             !memcmp(tr[0][1], tr[1][1], rec * sizeof(double));
  printf("\nsteps run: %ld, both tie rules\n", R->steps);
  printf("exact dyadic arithmetic: %s\n", R->exact && rep[1].exact ? "yes" : "NO");
  printf("decisive top-K ties met: %d (ties high) / %d (ties low); trajectories %s\n",
         R->ties, rep[1].ties, same ? "bit-identical" : "DIFFER");
  printf("uni: cycle from t=%ld, period %ld, mean F-F* = %s, max F-F* = %s\n",
         R->uni_start, R->uni_period, frac(R->uni_mean_gap, a),
         frac(R->uni_max_gap, b));
  printf("bi:  x = x* = 0 from t=%ld to t=%ld (F-F* = %s); all memories 0 from t=%ld\n",
         R->bi_fixed_from, R->steps, frac(R->bi_final_gap, a), R->bi_state_from);

  if (csv && write_csv(csv, tr[0][0], tr[0][1], (long) steps))
    return 1;

  int ok = R->exact && rep[1].exact && R->ties == 0 && rep[1].ties == 0 &&
           same && R->uni_start == 3 && R->uni_period == 9 &&
           R->uni_mean_gap == 9.0 / 256.0 && R->uni_max_gap == 9.0 / 128.0 &&
           R->bi_fixed_from == 3 && R->bi_state_from == 4 &&
           R->bi_final_gap == 0.0 &&
           rep[1].uni_start == 3 && rep[1].uni_period == 9 &&
           rep[1].bi_fixed_from == 3;
  printf("%s\n", ok ? "REPRODUCED: uni cycles with period 9 (mean 9/256), bi sits at x* from t=3"
                    : "NOT REPRODUCED");
  for (int x = 0; x < 2; x++)
    for (int y = 0; y < 2; y++)
      free(tr[x][y]);
  return ok ? 0 : 1;
}
