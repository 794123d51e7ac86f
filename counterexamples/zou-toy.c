/* zou-toy -- the reference toy of theory.md 5.1 (Zou et al.'s notebook).
 *
 * P = 3, d = 100, f_p = 1/2||x - a_p 1||^2 with a = (1,5,10), exact
 * gradients, K = K_d = 1, lr = 0.01, 1000 steps, ties to the highest index
 * (the notebook's stable sort).  Unidirectional (a), bidirectional (b) and
 * downlink-only (b') top-K run through gc_sim.  The phenomenon: bi's
 * plateau of F-F* over t in [500,1000) is below uni's, and downlink-only
 * converges to F*.  Exit 0 iff it reproduces (for every seed of --sweep),
 * 1 if it does not or a run fails, 2 for a bad command line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_npy.h"
#include "gc_theory.h"

#define CMD "zou-toy"

/* downlink-only "converges": its gap fell by this factor from the start
 * (with lr = 0.01 over 1000 steps it falls by about 1e-8; uni and bi stay
 * on plateaus near 1). */
#define DOWN_FACTOR 1e-6

static void usage(FILE *out)
{
  fprintf(out,
          "usage: zou-toy [--x0 FILE.npy] [--ties low|high] [--steps N] [--lr A]\n"
          "               [--seed S] [--sweep N] [--csv FILE]\n"
          "  The 100-d toy of theory.md 5.1: uni vs bi vs downlink-only top-1.\n"
          "  --x0      start (100 values, .npy) for all three methods; default\n"
          "            20 + N(0,1) (downlink-only: 20 + N(0,25)) from the counter RNG\n"
          "  --ties    top-K tie rule (default high: the notebook's stable sort)\n"
          "  --steps   default 1000;  --lr  default 0.01;  --seed  default 0\n"
          "  --sweep N run N start seeds (seed, seed+1, ...) and count bi's wins\n"
          "  --csv     per step: step,uni,bi,down (with --sweep: seed,uni_mean,\n"
          "            bi_mean,down_final,bi_wins)\n");
}

int main(int argc, char **argv)
{
  /* Failures are printed once, by gc_cli_fail with the library's reason. */
  gc_set_error_handler_off();
  if (gc_cli_start(CMD))
    return 1;
  size_t steps = 1000, sweep = 0;
  double lr = 0.01;
  uint64_t seed = 0;
  int ties = GC_TIES_HIGH;
  const char *x0file = NULL, *csv = NULL;
  gc_cli_args args = GC_CLI_ARGS(CMD, "", usage, argc, argv);
  const char *o, *v;
  while (gc_cli_next(&args, &o, &v)) {
    if (!strcmp(o, "--steps")) {
      if (gc_cli_size(CMD, o, v, &steps))
        return 2;
    } else if (!strcmp(o, "--sweep")) {
      if (gc_cli_size(CMD, o, v, &sweep))
        return 2;
    } else if (!strcmp(o, "--lr")) {
      if (gc_cli_double(CMD, o, v, &lr))
        return 2;
    } else if (!strcmp(o, "--seed")) {
      if (gc_cli_u64(CMD, o, v, &seed))
        return 2;
    } else if (!strcmp(o, "--ties")) {
      if (gc_cli_ties(CMD, v, &ties))
        return 2;
    } else if (!strcmp(o, "--x0")) {
      x0file = v;
    } else if (!strcmp(o, "--csv")) {
      csv = v;
    } else {
      return gc_cli_unknown(&args, o);
    }
  }
  if (args.exit >= 0)
    return args.exit;
  if (steps < 2 || steps > 100000000)
    return gc_cli_usage_error(CMD, "--steps must be in [2, 1e8]");
  if (!(lr > 0))
    return gc_cli_usage_error(CMD, "--lr must be > 0 (got %g)", lr);
  if (sweep && x0file)
    return gc_cli_usage_error(CMD, "--sweep draws its own starts; drop --x0");

  /* An unusable --x0 file is a bad argument too (exit 2, not 1). */
  gc_array x0 = {0};
  if (x0file) {
    if (gc_npy_read(x0file, &x0) || gc_array_convert(&x0, GC_F64))
      return gc_cli_usage_error(CMD, "cannot read --x0 %s: %s", x0file,
                                gc_last_error());
    if (x0.count != 100)
      return gc_cli_usage_error(CMD, "--x0 %s holds %zu values, the toy needs 100",
                                x0file, x0.count);
    for (size_t i = 0; i < 100; i++)
      if (!isfinite(((double *) x0.data)[i]))
        return gc_cli_usage_error(CMD, "--x0 %s holds NaN or Inf", x0file);
  }
  FILE *f = NULL;
  if (csv && !(f = fopen(csv, "w")))
    return gc_cli_fail(CMD, 0, "cannot write %s", csv);

  printf("toy 5.1: P=3 d=100 a=(1,5,10) K=K_d=1 lr=%g steps=%zu ties=%s%s%s\n",
         lr, steps, ties == GC_TIES_HIGH ? "high" : "low",
         x0file ? " x0=" : "", x0file ? x0file : "");
  int ok = 1;
  if (sweep == 0) {
    double *gaps = malloc(steps * 3 * sizeof *gaps);
    if (!gaps)
      return gc_cli_fail(CMD, 0, "out of memory");
    gc_toy_report rep;
    const double *start = x0file ? (const double *) x0.data : NULL;
    if (gc_theory_toy(seed, ties, (long) steps, lr, start, start, &rep, gaps))
      return gc_cli_fail(CMD, 1, "the run failed");
    if (f) {
      fprintf(f, "step,uni,bi,down\n");
      for (size_t t = 0; t < steps; t++)
        fprintf(f, "%zu,%.17g,%.17g,%.17g\n", t, gaps[3 * t], gaps[3 * t + 1],
                gaps[3 * t + 2]);
      if (gc_cli_csv_flush(CMD, f, csv)) {
        fclose(f);
        return 1;
      }
    }
    static const size_t shown[] = { 0, 100, 200, 500, 999 };
    for (size_t j = 0; j < sizeof shown / sizeof shown[0]; j++)
      if (shown[j] < steps)
        printf("t=%zu uni=%.17g bi=%.17g down=%.17g\n", shown[j],
               gaps[3 * shown[j]], gaps[3 * shown[j] + 1], gaps[3 * shown[j] + 2]);
    printf("mean over t in [%ld,%zu): uni=%.17g bi=%.17g (bi/uni = %.4f)\n",
           rep.mean_from, steps, rep.uni_mean, rep.bi_mean, rep.bi_mean / rep.uni_mean);
    printf("downlink-only: F-F* from %.17g to %.17g\n", rep.down_f0, rep.down_final);
    printf("uni xi_t over [%ld,%ld): mean %.4g, max %.4g\n", rep.xi_from, rep.xi_to,
           rep.uni_xi_mean, rep.uni_xi_max);
    int bi_wins = rep.bi_mean < rep.uni_mean;
    int down_ok = rep.down_final <= DOWN_FACTOR * rep.down_f0;
    ok = bi_wins && down_ok;
    if (!bi_wins)
      printf("bi's plateau is NOT below uni's\n");
    if (!down_ok)
      printf("downlink-only did NOT converge (final gap > %g x start gap)\n", DOWN_FACTOR);
    free(gaps);
  } else {
    if (f) {
      fprintf(f, "seed,uni_mean,bi_mean,down_final,bi_wins\n");
      if (gc_cli_csv_flush(CMD, f, csv)) {
        fclose(f);
        return 1;
      }
    }
    size_t wins = 0, downs = 0;
    for (size_t s = 0; s < sweep; s++) {
      gc_toy_report rep;
      uint64_t sd = seed + s;
      if (gc_theory_toy(sd, ties, (long) steps, lr, NULL, NULL, &rep, NULL))
        return gc_cli_fail(CMD, 1, "the run of seed %llu failed",
                           (unsigned long long) sd);
      int w = rep.bi_mean < rep.uni_mean;
      wins += (size_t) w;
      downs += rep.down_final <= DOWN_FACTOR * rep.down_f0;
      printf("seed=%llu uni_mean=%.17g bi_mean=%.17g down_final=%.17g bi_wins=%d\n",
             (unsigned long long) sd, rep.uni_mean, rep.bi_mean, rep.down_final, w);
      if (f) {
        fprintf(f, "%llu,%.17g,%.17g,%.17g,%d\n", (unsigned long long) sd,
                rep.uni_mean, rep.bi_mean, rep.down_final, w);
        if (gc_cli_csv_flush(CMD, f, csv)) {
          fclose(f);
          return 1;
        }
      }
    }
    printf("bi's plateau is lower in %zu of %zu seeds; downlink-only converged in %zu of %zu\n",
           wins, sweep, downs, sweep);
    ok = wins == sweep && downs == sweep;
  }
  if (f && gc_cli_csv_close(CMD, f, csv))
    return 1;
  gc_array_free(&x0);
  printf("%s\n", ok ? "REPRODUCED: bi below uni on the plateau, downlink-only converges"
                    : "NOT REPRODUCED");
  return ok ? 0 : 1;
}
