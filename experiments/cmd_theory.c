/* cmd_theory.c -- `gradcomp theory contraction|trajectory|bounds`: tiny
 * drivers that print what the theory module measures (theory/gc_theory.h).
 * CSV rows are appended and flushed one by one, so a failure keeps every
 * row written before it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_algo.h"
#include "gc_algo_rules.h"
#include "gc_cli.h"
#include "gc_transport_cli.h"
#include "gc_errno.h"
#include "gc_theory.h"
#include "gc_transport.h"

#define CMD "theory"

/* header: the first line, or NULL when the caller writes its own. */
static FILE *open_csv(const char *path, const char *header)
{
  FILE *f = fopen(path, "w");
  if (!f) {
    gc_cli_fail(CMD, 0, "cannot write %s", path);
    return NULL;
  }
  if (header)
    fputs(header, f);
  if (gc_cli_csv_flush(CMD, f, path)) {
    fclose(f);
    return NULL;
  }
  return f;
}

/* ---- contraction ---------------------------------------------------------- */

/* contraction's compressor options: all but K and the density, which its
 * --densities sweep sets; threshold's v is 1 (an absolute compressor, 2.4). */
static gc_cli_comp contraction_comp(void)
{
  gc_cli_comp c = { .take = GC_CLI_P_ALL & ~(GC_CLI_P_K | GC_CLI_P_DENSITY | GC_CLI_P_RANK) };
  gc_compressor_params_default(&c.up);
  c.up.threshold = 1.0;
  return c;
}

static void contraction_usage(FILE *out)
{
  gc_cli_comp comp = contraction_comp();
  fprintf(out,
          "usage: gradcomp theory contraction [--csv FILE] [--d N] [--densities a,b,...]\n"
          "                                   [--trials T] [--compressors c1,c2,...] [--seed S]\n"
          "                                   [COMPRESSOR OPTIONS]\n"
          "  Empirical contraction delta = 1 - ||C(x)-x||^2/||x||^2 (worst and mean over\n"
          "  T inputs) of every compressor x input distribution (gaussian, laplace,\n"
          "  student-t3, equal-magnitude worst case, trajectory = accumulators of uni\n"
          "  top-K on a heterogeneous quadratic) x density, beside K/d and the Gaussian\n"
          "  tail share 1-rho-2 tau phi(tau) of docs/theory.md 4.5.\n"
          "  --levels S: QSGD's number of levels s (omega = min(d/s^2, sqrt(d)/s)).\n"
          "  Defaults: d = 100000, densities 0.001,0.01, T = 5, every compressor\n"
          "  that takes a plain vector, seed 1.\n"
          "  CSV: compressor,distribution,d,density,k,trials,delta_worst,delta_mean,\n"
          "       delta_topk_theory,gauss_share,selected_mean,levels,bytes_mean\n"
          "  selected_mean: entries sent per trial (the achieved count of\n"
          "  Gaussian-k and DGC against k); levels: L (only QSGD reads it);\n"
          "  bytes_mean: length of the encoded message per trial (bits per entry\n"
          "  = 8 bytes_mean / d).\n"
          "Compressor options (each compressor reads the ones it uses):\n");
  gc_cli_compressor_usage(out, &comp);
}

/* Trajectory inputs: worker 0's accumulators of uni top-K at this density
 * on a diagonal heterogeneous quadratic, after a warm-up. */
static int record_trajectory(size_t d, double density, size_t trials,
                             uint64_t seed, double *xs)
{
  char spec[160];
  snprintf(spec, sizeof spec,
           "quadratic:P=4,d=%zu,rotate=0,L=10,mu=0.1,hetero=1,x0=3,sigma=0.1,seed=%llu",
           d, (unsigned long long) seed);
  gc_problem *prob;
  GC_TRY(gc_problem_parse(spec, seed, &prob));
  gc_algo_config cfg;
  gc_algo_config_default(&cfg);
  cfg.kind = GC_ALGO_UNI;
  cfg.up = cfg.down = gc_compressor_type_by_name("topk");
  cfg.up_params.density = cfg.down_params.density = density;
  gc_theory_run *r = gc_theory_run_alloc(prob, &cfg, NULL);
  if (!r) {
    gc_problem_free(prob);
    return GC_ENOMEM;
  }
  enum { WARMUP = 20 };
  int st = GC_SUCCESS;
  for (size_t t = 0; t < WARMUP + trials && st == GC_SUCCESS; t++) {
    st = gc_theory_run_step(r, 0.05, NULL);
    if (st == GC_SUCCESS && t >= WARMUP)
      memcpy(xs + (t - WARMUP) * d,
             gc_worker_accumulator(gc_sim_worker(gc_theory_run_sim(r), 0)),
             d * sizeof *xs);
  }
  gc_theory_run_free(r);
  gc_problem_free(prob);
  return st;
}

static int cmd_contraction(int argc, char **argv)
{
  enum { MAXL = 64 };
  size_t d = 100000, trials = 5, nd = 2, nt = 0;
  double dens[MAXL] = { 0.001, 0.01 };
  const gc_compressor_type *types[MAXL];
  uint64_t seed = 1;
  const char *csv = NULL;
  gc_cli_comp comp = contraction_comp();
  gc_cli_args args = GC_CLI_ARGS(CMD, "contraction: ", contraction_usage, argc, argv);
  const char *o, *v;
  while (gc_cli_next(&args, &o, &v)) {
    int r = gc_cli_compressor_option(&args, o, v, &comp);
    if (r == GC_CLI_TAKEN) continue;
    if (r != GC_CLI_NOT_MINE) return r;
    if (!strcmp(o, "--csv")) csv = v;
    else if (!strcmp(o, "--d")) { if (gc_cli_size(CMD, o, v, &d)) return 2; }
    else if (!strcmp(o, "--trials")) { if (gc_cli_size(CMD, o, v, &trials)) return 2; }
    else if (!strcmp(o, "--seed")) { if (gc_cli_u64(CMD, o, v, &seed)) return 2; }
    else if (!strcmp(o, "--densities")) {
      if (!(nd = gc_cli_doubles(CMD, o, v, dens, MAXL)))
        return 2;
    } else if (!strcmp(o, "--compressors")) {
      if (!(nt = gc_cli_compressors(CMD, o, v, types, MAXL)))
        return 2;
    } else
      return gc_cli_unknown(&args, o);
  }
  if (args.exit >= 0)
    return args.exit;
  if (gc_cli_compressor_finish(&args, &comp))
    return 2;
  if (d < 2 || d >= ((size_t) 1 << 32))
    return gc_cli_usage_error(CMD, "--d must be in [2, 2^32)");
  if (trials == 0)
    return gc_cli_usage_error(CMD, "--trials must be at least 1");
  for (size_t j = 0; j < nd; j++)
    if (!(dens[j] > 0 && dens[j] <= 1))
      return gc_cli_usage_error(CMD, "contraction: --densities: %g must be in (0, 1]", dens[j]);
  if (nt == 0)   /* no --compressors: every one that takes a plain vector */
    for (const gc_compressor_type *const *t = gc_compressor_types(); *t && nt < MAXL; t++)
      if (!((*t)->flags & GC_COMP_NEEDS_SHAPE))
        types[nt++] = *t;
  double *xs = malloc(trials * d * sizeof *xs), *scratch = malloc(d * sizeof *scratch);
  if (!xs || !scratch)
    return gc_cli_fail(CMD, 0, "out of memory");
  FILE *f = NULL;
  if (csv && !(f = open_csv(csv, "compressor,distribution,d,density,k,trials,delta_worst,"
                                 "delta_mean,delta_topk_theory,gauss_share,selected_mean,levels,"
                                 "bytes_mean\n")))
    return 1;
  printf("%-16s %-11s %9s %8s %8s %12s %12s %10s %11s\n", "compressor", "distribution",
         "d", "density", "k", "delta_worst", "delta_mean", "K/d", "gauss_share");
  int rc = 0;
  for (size_t j = 0; j < nd && !rc; j++) {
    size_t k = (size_t) (dens[j] * (double) d);
    if (k == 0)
      k = 1;
    double rho = (double) k / (double) d;
    double share = gc_theory_gauss_share(rho);
    for (int dist = 0; dist <= GC_DIST_COUNT && !rc; dist++) {
      const char *dname = dist < GC_DIST_COUNT ? gc_theory_dist_name(dist) : "trajectory";
      if (dist < GC_DIST_COUNT) {
        for (size_t t = 0; t < trials; t++)
          gc_theory_fill(dist, seed, (uint32_t) t, xs + t * d, d);
      } else if (record_trajectory(d, dens[j], trials, seed, xs)) {
        rc = gc_cli_fail(CMD, 1, "recording the trajectory inputs failed");
        break;
      }
      for (size_t c = 0; c < nt; c++) {
        gc_compressor_params p = comp.up;
        p.density = dens[j];
        p.seed = seed;
        gc_compressor *cmp = gc_compressor_alloc(types[c], d, &p);
        if (!cmp) {
          rc = gc_cli_fail(CMD, 1, "cannot set up compressor %s", types[c]->name);
          break;
        }
        uint8_t *buf = malloc(gc_compressor_max_bytes(cmp));
        if (!buf) {
          gc_compressor_free(cmp);
          rc = gc_cli_fail(CMD, 0, "out of memory");
          break;
        }
        double worst = INFINITY, sum = 0, selected = 0, bytes = 0;
        size_t cnt = 0;
        for (size_t t = 0; t < trials; t++) {
          double dl;
          gc_compress_info info = { 0 };
          if (gc_theory_delta_info(cmp, xs + t * d, (uint32_t) t, buf, scratch, &dl,
                                   &info)) {
            rc = gc_cli_fail(CMD, 1, "compressor %s failed", types[c]->name);
            break;
          }
          selected += (double) info.selected;
          /* the message's length: the same call again (a compressor's
           * output is fixed by its input, seed and step), so these are the
           * bytes delta was measured on */
          size_t len;
          if (gc_compress_f64(cmp, xs + t * d, (uint32_t) t, buf,
                              gc_compressor_max_bytes(cmp), &len, NULL)) {
            rc = gc_cli_fail(CMD, 1, "compressor %s failed", types[c]->name);
            break;
          }
          bytes += (double) len;
          if (isfinite(dl)) {
            worst = fmin(worst, dl);
            sum += dl;
            cnt++;
          }
        }
        size_t kc = gc_compressor_k(cmp) ? gc_compressor_k(cmp) : k;
        free(buf);
        gc_compressor_free(cmp);
        if (rc)
          break;
        double mean = cnt ? sum / (double) cnt : NAN;
        if (!cnt)
          worst = NAN;
        printf("%-16s %-11s %9zu %8g %8zu %12.6f %12.6f %10.6f %11.6f\n", types[c]->name,
               dname, d, dens[j], kc, worst, mean, rho, share);
        if (f) {
          fprintf(f, "%s,%s,%zu,%.17g,%zu,%zu,%.17g,%.17g,%.17g,%.17g,%.17g,%u,%.17g\n",
                  types[c]->name, dname, d, dens[j], kc, trials, worst, mean, rho,
                  share, selected / (double) trials, p.levels,
                  bytes / (double) trials);
          if (gc_cli_csv_flush(CMD, f, csv)) {
            rc = 1;
            break;
          }
        }
      }
    }
  }
  if (f && gc_cli_csv_close(CMD, f, csv))
    rc = 1;
  free(xs);
  free(scratch);
  return rc;
}

/* ---- shared: algorithm configuration from options ------------------------- */

/* The algorithm, its compressors (names) and their parameters
 * (gc_cli_compressor_finish done) as a configuration for dimension d. */
static int make_config(const char *algorithm, const char *comp, const char *comp_down,
                       const gc_cli_comp *p, size_t d, gc_algo_config *cfg)
{
  gc_algo_config_default(cfg);
  gc_algo_kind kind;
  if (!gc_cli_algorithms(CMD, "--algorithm", algorithm, &kind, 1))
    return 2;
  cfg->kind = kind;
  if (!gc_cli_compressors(CMD, "--compressor", comp, &cfg->up, 1))
    return 2;
  if (!gc_cli_compressors(CMD, "--compressor-down", comp_down ? comp_down : comp,
                          &cfg->down, 1))
    return 2;
  if (p->up.k > d || p->down.k > d)
    return gc_cli_usage_error(CMD, "k = %zu exceeds the dimension d = %zu",
                              p->up.k > d ? p->up.k : p->down.k, d);
  cfg->up_params = p->up;
  cfg->down_params = p->down;
  return 0;
}

/* trajectory's and bounds' compressor options: every field, each with
 * its downlink twin. */
static gc_cli_comp algo_comp(double density)
{
  gc_cli_comp c = { .take = GC_CLI_P_ALL, .twin = GC_CLI_P_ALL };
  gc_compressor_params_default(&c.up);
  c.up.density = density;
  return c;
}

/* ---- trajectory -------------------------------------------------------------- */

static void trajectory_usage(FILE *out)
{
  gc_cli_comp comp = algo_comp(0.01);
  fprintf(out,
          "usage: gradcomp theory trajectory --problem toy|cycle9|quadratic[:spec]|npy:DIR\n"
          "         --algorithm %s\n"
          "         --compressor NAME [--compressor-down NAME] [COMPRESSOR OPTIONS]\n"
          "         (--lr A | --lr-schedule SPEC) --steps N [--seed S] [--csv FILE]\n"
          "         [--transport %s [--mpi-timeout S]] [--save-x FILE.npy]\n"
          "         [--net-bandwidth 10Gbps --net-latency 50us [--net-csv FILE]]\n"
          "  Runs the algorithm (in-process, or under mpirun -n P+1 with --transport\n"
          "  mpi: rank 0 the server, rank p+1 worker p) and logs per step\n"
          "  F-F*, ||grad F||^2, xi_t, xi_bi,t, ||E_t|| and its recursion bound, bytes\n"
          "  up/down and |support union| (docs/theory.md 4.2-4.4).  mem_bound is nan\n"
          "  where the recursion is no bound (a downlink compressor other than topk).\n"
          "  quadratic spec: key=value list of P, d, L, mu, spectrum=geom|lin, hetero,\n"
          "  x0, sigma, seed, rotate=0|1 (e.g. quadratic:P=8,d=64,L=10,mu=0.1).\n"
          "  npy:DIR reads DIR/A.npy (optional), DIR/b.npy, DIR/x0.npy.\n"
          "  --lr-schedule SPEC: constant (the step --lr), inverse:c=C,a=A (step c/(a+t))\n"
          "  or mem-sgd:a=A (step 8/(mu(a+t)) with the problem's mu, Stich et al. 2018);\n"
          "  a decreasing schedule also reports F(xbar_T)-F* of the weighted average\n"
          "  xbar_T = sum_t (a+t)^2 x_t / sum_t (a+t)^2 (docs/theory.md 4.6).\n"
          "  CSV: step,f_gap,grad_norm2,xi,xi_bi,mem_norm,mem_bound,bytes_up,bytes_down,\n"
          "       support_union\n"
          "  --mpi-timeout S (300): the MPI watchdog: a rank that waits longer than\n"
          "  max(S, 50 x the slowest step so far) seconds for another rank's message\n"
          "  (twice that for rank 0's, which may itself be waiting) ends the job,\n"
          "  naming the silent rank and the step; 0: wait for ever.\n"
          "  Defaults: --algorithm uni, --compressor topk, --compressor-down =\n"
          "  --compressor, --seed 0 (also the compressors'), --transport inproc; no\n"
          "  --csv: a summary only.  --problem, --lr (or a decreasing\n"
          "  --lr-schedule) and --steps have no default.\n"
          "Transports:\n", gc_cli_algorithm_names("|"), gc_transport_kind_names("|"));
  gc_transport_usage(out, "  ");
  fprintf(out, "Compressor options (each compressor reads the ones it uses):\n");
  gc_cli_compressor_usage(out, &comp);
}

static int cmd_trajectory(int argc, char **argv)
{
  const char *algorithm = "uni", *comp = "topk", *comp_down = NULL;
  gc_cli_comp p = algo_comp(0.01);
  const char *problem = NULL, *csv = NULL, *schedule = NULL;
  double lr = 0;
  size_t steps = 0;
  uint64_t seed = 0;
  gc_transport_opts tro = { 0 };
  gc_cli_args args = GC_CLI_ARGS(CMD, "trajectory: ", trajectory_usage, argc, argv);
  const char *o, *v;
  while (gc_cli_next(&args, &o, &v)) {
    int err = gc_cli_compressor_option(&args, o, v, &p);
    if (err == GC_CLI_TAKEN) continue;
    if (err != GC_CLI_NOT_MINE) return err;
    err = 0;
    if (!strcmp(o, "--algorithm")) algorithm = v;
    else if (!strcmp(o, "--compressor")) comp = v;
    else if (!strcmp(o, "--compressor-down")) comp_down = v;
    else if (!strcmp(o, "--problem")) problem = v;
    else if (!strcmp(o, "--csv")) csv = v;
    else if (!strcmp(o, "--lr")) err = gc_cli_double(CMD, o, v, &lr);
    else if (!strcmp(o, "--lr-schedule")) schedule = v;
    else if (!strcmp(o, "--steps")) err = gc_cli_size(CMD, o, v, &steps);
    else if (!strcmp(o, "--seed")) err = gc_cli_u64(CMD, o, v, &seed);
    else if (!gc_transport_option(CMD, o, v, &tro, &err))
      return gc_cli_unknown(&args, o);
    if (err)
      return 2;
  }
  if (args.exit >= 0)
    return args.exit;
  if (gc_cli_compressor_finish(&args, &p))
    return 2;
  if (!problem)
    return gc_cli_usage_error(CMD, "trajectory: --problem is required");
  int constant = !schedule || !strcmp(schedule, "constant");
  if (constant && !(lr > 0))   /* also when --lr is not given (lr = 0) */
    return gc_cli_usage_error(CMD, "trajectory: --lr must be given and > 0");
  if (!constant && lr != 0)    /* the schedule's spec sets every step */
    return gc_cli_usage_error(CMD, "trajectory: --lr %g has no effect with"
                              " --lr-schedule %s (its spec sets the steps);"
                              " give one of them", lr, schedule);
  if (steps == 0 || steps > 100000000)
    return gc_cli_usage_error(CMD, "trajectory: --steps must be in [1, 1e8]");
  gc_problem *prob;
  if (gc_problem_parse(problem, seed, &prob))
    return gc_cli_fail(CMD, 1, "bad --problem '%s'", problem);
  gc_lr_schedule sched;
  if (gc_lr_schedule_parse(schedule ? schedule : "constant", lr, prob->mu, &sched)) {
    gc_problem_free(prob);
    return gc_cli_usage_error(CMD, "trajectory: bad --lr-schedule '%s'", schedule);
  }
  gc_algo_config cfg;
  int st = make_config(algorithm, comp, comp_down, &p, prob->n, &cfg);
  if (st) {
    gc_problem_free(prob);
    return st;
  }
  cfg.up_params.seed = cfg.down_params.seed = seed;
  const gc_transport *tr;
  int leader;
  int rc = gc_trajectory_transport_begin(&tro, prob, &cfg, &tr, &leader);
  if (rc >= 0) {
    gc_problem_free(prob);
    return rc;
  }
  rc = 0;
  gc_theory_run *r = gc_theory_run_alloc_transport(prob, &cfg, NULL, tr, leader);
  if (!r || (sched.kind == GC_LR_INVERSE && gc_theory_run_set_average(r, sched.a))) {
    rc = gc_trajectory_transport_end(&tro, NULL,
                                     gc_cli_fail(CMD, 1, "cannot set up the run"));
    gc_theory_run_free(r);
    gc_problem_free(prob);
    return rc;
  }
  if (!leader) {   /* an MPI worker rank: its worker's steps, no output */
    for (size_t t = 0; t < steps && !rc; t++)
      if ((st = gc_theory_run_step(r, gc_lr_schedule_at(&sched, t), NULL)))
        rc = gc_cli_fail(CMD, st, "a worker rank failed at step %zu", t);
    rc = gc_trajectory_transport_end(&tro, r, rc);
    gc_theory_run_free(r);
    gc_problem_free(prob);
    return rc;
  }
  FILE *f = NULL;
  if (csv) {
    if (!(f = open_csv(csv, NULL)))
      rc = 1;
    else
      gc_probe_csv_header(f);
    if (f && gc_cli_csv_flush(CMD, f, csv)) {
      fclose(f);
      f = NULL;
      rc = 1;
    }
  }
  gc_probe_row row;
  for (size_t t = 0; t < steps && !rc; t++) {
    st = gc_theory_run_step(r, gc_lr_schedule_at(&sched, t), &row);
    if (st == GC_SUCCESS && !(isfinite(row.f_gap) && isfinite(row.grad_norm2)))
      st = GC_EDIVERGE;
    if (st != GC_SUCCESS) {
      rc = gc_cli_fail(CMD, st, "%s %s at step %zu", algorithm,
                       st == GC_EDIVERGE ? "diverged" : "failed", t);
      break;
    }
    if (f) {
      gc_probe_csv_row(f, &row);
      if ((rc = gc_cli_csv_flush(CMD, f, csv)))
        break;
    }
    gc_cli_progress("theory trajectory", t + 1, steps, 0);
  }
  if (!rc) {
    gc_probe_summary s;
    gc_theory_run_summary(r, &s);
    if (!isfinite(s.final_gap))
      rc = gc_cli_fail(CMD, GC_EDIVERGE, "%s diverged (final F-F* is not finite)",
                       algorithm);
    printf("problem %s: P=%zu d=%zu L=%.6g mu=%.6g F*=%.17g\n", prob->name,
           prob->workers, prob->n, prob->L, prob->mu, prob->fstar);
    char sname[96];
    gc_lr_schedule_name(&sched, sname, sizeof sname);
    printf("algorithm %s, compressor %s/%s, K=%zu K_d=%zu, lr %s, steps=%zu\n",
           algorithm, comp, comp_down ? comp_down : comp, s.k, s.k_down,
           sname, s.steps);
    printf("F-F*: start %.6g, final %.6g; ||grad F||^2 min %.6g mean %.6g\n",
           s.f0_gap, s.final_gap, s.min_grad2, s.mean_grad2);
    if (sched.kind == GC_LR_INVERSE)
      printf("weighted average xbar_T (w_t = (a+t)^2): F(xbar_T)-F* %.6g\n", s.wavg_gap);
    printf("xi: mean %.6g max %.6g; xi_bi: mean %.6g max %.6g\n", s.xi_mean,
           s.xi_max, s.xi_bi_mean, s.xi_bi_max);
    printf("contraction up: worst %.6g mean %.6g (K/d %.6g); down: worst %.6g mean %.6g\n",
           s.delta_up_worst, s.delta_up_mean, (double) s.k / (double) prob->n,
           s.delta_down_worst, s.delta_down_mean);
    if (s.recursion_fails)   /* mem_bound is NaN in the CSV: no bound to check */
      printf("memory recursion: no bound (%s); mean |support union| %.6g\n",
             s.recursion_fails, s.support_mean);
    else
      printf("memory recursion: max(||E_t|| - bound) = %.3g; mean |support union| %.6g\n",
             s.mem_excess_max, s.support_mean);
    const gc_ledger *l = gc_sim_ledger(gc_theory_run_sim(r));
    printf("bytes: up %llu, down %llu\n", (unsigned long long) gc_ledger_total(l, GC_UP),
           (unsigned long long) gc_ledger_total(l, GC_DOWN));
  }
  if (f && gc_cli_csv_close(CMD, f, csv))
    rc = 1;
  rc = gc_trajectory_transport_end(&tro, r, rc);
  gc_theory_run_free(r);
  gc_problem_free(prob);
  return rc;
}

/* ---- bounds ------------------------------------------------------------------ */

/* bounds' default algorithms: the parameter-server methods that a theorem
 * covers (their rows' collective and bounds). */
static int bounds_default(const gc__algo_desc *row)
{
  return row->collective == GC__COLL_NONE && row->bounds != 0;
}

static void bounds_usage(FILE *out)
{
  gc_cli_comp comp = algo_comp(0.1);
  char names[512];
  fprintf(out,
          "usage: gradcomp theory bounds [--list] [--csv FILE] [--steps N] [--problem P]...\n"
          "                              [--compressors c1,c2] [--algorithms a1,a2]\n"
          "                              [--lr A | --lr-schedule SPEC] [--runs R]\n"
          "                              [--draws M] [--seed S] [COMPRESSOR OPTIONS]\n"
          "  Runs every algorithm x compressor x problem, measures the constants the\n"
          "  theorems need and prints one row per bound: nonconvex_4.3 (mean_t\n"
          "  ||grad F||^2), ef_sgd_4.6 (min_t, Karimireddy et al.), ef21_3d (mean_t,\n"
          "  Richtarik et al.), mem_sgd_2.4 (F(xbar_T)-F* of the weighted average,\n"
          "  Stich et al. 2018; needs --lr-schedule mem-sgd:a=A, uni and P = 1) and\n"
          "  omega_ef_4.8 (mean_t, unbiased uplink with omega < 1: randk-unbiased,\n"
          "  qsgd, terngrad).  A bound is printed only when the run meets its\n"
          "  theorem's assumptions (workers P, exact or noisy gradients, compressor\n"
          "  class and contraction, step-size cap, constant step); otherwise the row\n"
          "  says 'refused' and names the failed assumption with the measured value.\n"
          "  With noisy gradients or a random compressor a bound holds in expectation:\n"
          "  R runs with seeds S..S+R-1 are averaged per step.  delta is the worst on\n"
          "  the path for a deterministic compressor, K/d for randk, and otherwise a\n"
          "  lower estimate from M extra draws per input (mean + 3 standard errors).\n"
          "  --list prints each bound's source, what it bounds and its assumptions;\n"
          "  docs/theory.md 4.7 states them with the derivations.\n"
          "  Defaults: problems toy (lr 0.01), cycle9 (lr 0.5), quadratic:P=4,d=50 and\n"
          "  quadratic:P=1,d=50 (lr 0.1/L); algorithms: the parameter-server methods\n"
          "  that a theorem covers (%s);\n"
          "  compressors topk,randk at K = 1 (toy, cycle9) or density 0.1;\n"
          "  1000 steps; R = 8; M = 16; S = 0.  --lr replaces every default step size.\n"
          "  --k or --density (either direction) replaces K = 1 for toy and cycle9;\n"
          "  --levels S sets the QSGD levels (omega = min(d/S^2, sqrt(d)/S)).\n"
          "  --lr-schedule SPEC: constant, inverse:c=C,a=A (step c/(a+t)) or\n"
          "  mem-sgd:a=A (step 8/(mu(a+t)), mu of each problem); the constant-step\n"
          "  bounds refuse a decreasing schedule.\n"
          "  CSV (no field contains a comma; the problem spec's commas become ';'):\n"
          "       problem,algorithm,compressor,density,steps,lr,L,gamma,xi_max,\n"
          "       measured_min_grad2,measured_mean_grad2,bound,bound_name,runs,sigma,\n"
          "       delta,bounds,expectation,measured,lr_schedule,alpha,r0_theorem,\n"
          "       r1_delta,r2_xi,r3_memory,r4_m2,r5_gradient,r6_inner,\n"
          "       r7_curvature,ratio_r0..ratio_r7,\n"
          "       status,\n"
          "       failed_assumption\n"
          "  bounds: min_t_grad2, mean_t_grad2 or wavg_fgap (F(xbar_T)-F*); alpha: the\n"
          "  alpha of mem_sgd_2.4, omega of omega_ef_4.8.\n"
          "  Rungs (docs/theory.md 4.9; nonconvex_4.3 only, also printed under its\n"
          "  row; ratio_rK = rK / measured): r0_theorem the bound as derived (=\n"
          "  bound); r1_delta with the measured contraction of the recursion's top-K\n"
          "  input instead of sqrt(1-K/d); r2_xi also with xi_t per step (the\n"
          "  recursion run along the path) instead of max xi; r3_memory also with\n"
          "  the measured ||E_t||^2 instead of their bound; r4_m2 also with\n"
          "  ||gbar_t||^2 per step (its mean) instead of its max; r5_gradient also\n"
          "  with ||grad F(x_t - E_t) - grad F(x_t)||^2 instead of L^2 ||E_t||^2;\n"
          "  r6_inner without the proof's Young step: half of r4's first two terms\n"
          "  plus the measured <grad F(x_t) - grad F(x_t - E_t), grad F(x_t)>;\n"
          "  r7_curvature also with the curvature along the steps, E gbar^T A gbar,\n"
          "  instead of L ||gbar||^2 in the descent lemma.\n"
          "  Each is a bound\n"
          "  given what it measures; nan where its memory bound fails on the run.\n"
          "  A run whose updates round away (an update losing half its norm or more\n"
          "  to floating point: the iterates stop moving) is refused for every bound.\n"
          "Compressor options (every compressor of the run; each reads the ones it\n"
          "uses):\n", gc_cli_algorithm_names_where(bounds_default, ",", names, sizeof names));
  gc_cli_compressor_usage(out, &comp);
}

/* The problem spec as one CSV field: commas become ';'. */
static void csv_field(const char *in, char *out, size_t cap)
{
  snprintf(out, cap, "%s", in);
  for (char *p = out; *p; p++)
    if (*p == ',' || *p == '"' || *p == '\n')
      *p = ';';
}

static int cmd_bounds(int argc, char **argv)
{
  enum { MAXP = 16, MAXL = 32 };
  const char *problems[MAXP];
  size_t np = 0, steps = 1000, nc = 0, na = 0, runs = 8, draws = 16;
  double lr_opt = 0;
  gc_cli_comp comp = algo_comp(0.1);
  uint64_t seed = 0;
  const char *csv = NULL, *schedule = NULL;
  const gc_compressor_type *comps[MAXL];
  gc_algo_kind algs[MAXL];
  int list = 0;
  static const char *const flags[] = { "--list", NULL };
  gc_cli_args args = GC_CLI_ARGS(CMD, "bounds: ", bounds_usage, argc, argv);
  args.flags = flags;
  const char *o, *v;
  while (gc_cli_next(&args, &o, &v)) {
    int err = gc_cli_compressor_option(&args, o, v, &comp);
    if (err == GC_CLI_TAKEN) continue;
    if (err != GC_CLI_NOT_MINE) return err;
    err = 0;
    if (!strcmp(o, "--list")) list = 1;
    else if (!strcmp(o, "--csv")) csv = v;
    else if (!strcmp(o, "--steps")) err = gc_cli_size(CMD, o, v, &steps);
    else if (!strcmp(o, "--runs")) err = gc_cli_size(CMD, o, v, &runs);
    else if (!strcmp(o, "--draws")) err = gc_cli_size(CMD, o, v, &draws);
    else if (!strcmp(o, "--lr")) err = gc_cli_double(CMD, o, v, &lr_opt);
    else if (!strcmp(o, "--lr-schedule")) schedule = v;
    else if (!strcmp(o, "--seed")) err = gc_cli_u64(CMD, o, v, &seed);
    else if (!strcmp(o, "--problem")) {
      if (np == MAXP)
        return gc_cli_usage_error(CMD, "at most %d --problem options", MAXP);
      problems[np++] = v;
    } else if (!strcmp(o, "--compressors")) {
      if (!(nc = gc_cli_compressors(CMD, o, v, comps, MAXL)))
        return 2;
    } else if (!strcmp(o, "--algorithms")) {
      if (!(na = gc_cli_algorithms(CMD, o, v, algs, MAXL)))
        return 2;
    } else
      return gc_cli_unknown(&args, o);
    if (err)
      return 2;
  }
  if (args.exit >= 0)
    return args.exit;
  if (gc_cli_compressor_finish(&args, &comp))
    return 2;
  if (list) {   /* what each bound declares; runs nothing */
    for (size_t i = 0; gc_theory_bound_info(i); i++) {
      const gc_bound_info *b = gc_theory_bound_info(i);
      printf("%s  (%s)\n  bounds: %s\n  assumptions: %s\n", b->name, b->source,
             b->bounds, b->assumptions);
    }
    printf("every bound: exact arithmetic (a run whose updates lose half their total\n"
           "  length or more to floating-point rounding is refused, docs/theory.md 4.7);\n"
           "  nonconvex_4.3 rows also carry the ladder of 4.9 (r0_theorem..r7_curvature)\n");
    return 0;
  }
  if (steps == 0 || steps > 100000000)
    return gc_cli_usage_error(CMD, "--steps must be in [1, 1e8]");
  if (runs == 0 || runs > 10000)
    return gc_cli_usage_error(CMD, "--runs must be in [1, 10000]");
  if (draws > 10000)
    return gc_cli_usage_error(CMD, "--draws must be at most 10000");
  if (lr_opt < 0 || !isfinite(lr_opt))
    return gc_cli_usage_error(CMD, "--lr must be > 0");
  gc_lr_schedule probe_sched;   /* its syntax, before any output is written */
  if (schedule && gc_lr_schedule_parse(schedule, 1, 1, &probe_sched))
    return gc_cli_usage_error(CMD, "bad --lr-schedule '%s'", schedule);
  if (np == 0) {
    problems[np++] = "toy";
    problems[np++] = "cycle9";
    problems[np++] = "quadratic:P=4,d=50";
    problems[np++] = "quadratic:P=1,d=50";
  }
  if (nc == 0)   /* the defaults go through the same parser */
    nc = gc_cli_compressors(CMD, "--compressors", "topk,randk", comps, MAXL);
  char names[512];
  if (na == 0)
    na = gc_cli_algorithms(CMD, "--algorithms", gc_cli_algorithm_names_where(
                             bounds_default, ",", names, sizeof names), algs, MAXL);
  FILE *f = NULL;
  if (csv && !(f = open_csv(csv, "problem,algorithm,compressor,density,steps,lr,L,gamma,"
                                 "xi_max,measured_min_grad2,measured_mean_grad2,bound,"
                                 "bound_name,runs,sigma,delta,bounds,expectation,measured,"
                                 "lr_schedule,alpha,r0_theorem,r1_delta,r2_xi,r3_memory,"
                                 "r4_m2,r5_gradient,r6_inner,r7_curvature,ratio_r0,"
                                 "ratio_r1,ratio_r2,ratio_r3,ratio_r4,ratio_r5,ratio_r6,"
                                 "ratio_r7,"
                                 "status,failed_assumption\n")))
    return 1;
  /* columns as wide as the longest problem and compressor name: a cut
   * name could not be told from another (quadratic:P=4,d=50,...) */
  int pw = 7, cw = 4;
  for (size_t ip = 0; ip < np; ip++)
    if ((int) strlen(problems[ip]) > pw)
      pw = (int) strlen(problems[ip]);
  for (size_t c = 0; c < nc; c++)
    if ((int) strlen(comps[c]->name) > cw)
      cw = (int) strlen(comps[c]->name);
  printf("%-*s %-13s %-*s %7s %9s %-13s %-13s %12s %12s  %s\n", pw, "problem",
         "algorithm", cw, "comp", "density", "lr", "bound", "bounds", "measured",
         "bound", "status");
  int rc = 0;
  for (size_t ip = 0; ip < np && !rc; ip++) {
    gc_problem *prob;
    if (gc_problem_parse(problems[ip], 0, &prob)) {
      rc = gc_cli_fail(CMD, 1, "bad --problem '%s'", problems[ip]);
      break;
    }
    char pfield[256];
    csv_field(problems[ip], pfield, sizeof pfield);
    /* toy, cycle9: K = 1 and their own step sizes, as in docs/theory.md 5 */
    int is_toy = !strcmp(problems[ip], "toy"), is_c9 = !strcmp(problems[ip], "cycle9");
    int small = is_toy || is_c9;
    /* there K = 1 unless the command line sizes the messages */
    gc_cli_comp pc = comp;
    if (small && !((comp.given | comp.given_down) & (GC_CLI_P_K | GC_CLI_P_DENSITY)))
      pc.up.k = pc.down.k = 1;
    double lr = lr_opt > 0 ? lr_opt : is_toy ? 0.01 : is_c9 ? 0.5 : 0.1 / prob->L;
    gc_lr_schedule sched;
    if (gc_lr_schedule_parse(schedule ? schedule : "constant", lr, prob->mu, &sched)) {
      gc_problem_free(prob);
      rc = gc_cli_usage_error(CMD, "bad --lr-schedule '%s'", schedule);
      break;
    }
    char sname[96];
    gc_lr_schedule_name(&sched, sname, sizeof sname);
    lr = gc_lr_schedule_at(&sched, 0);
    for (size_t j = 0; j < na && !rc; j++) {
      gc_algo_kind kind = algs[j];
      const char *aname = gc_algo_name(kind);
      const gc__algo_desc *A = gc__algo(kind);
      int compresses = A->up == GC__UP_COMP || A->down == GC__DOWN_COMP;
      for (size_t c = 0; c < nc && !rc; c++) {
        if (!compresses && c > 0)
          break;   /* no compression: one row */
        const char *cname = comps[c]->name;
        gc_algo_config cfg;
        if ((rc = make_config(aname, cname, NULL, &pc, prob->n, &cfg)))
          break;
        gc_bound_case bc;
        int st = gc_theory_bounds_run_schedule(prob, &cfg, &sched, steps, runs, draws,
                                               seed, &bc);
        if (st != GC_SUCCESS) {
          rc = gc_cli_fail(CMD, st, "%s/%s on %s diverged or failed", aname, cname,
                           problems[ip]);
          break;
        }
        gc_bound_row rows[GC_BOUND_COUNT];
        gc_theory_bounds_eval(&bc, rows);
        if (!compresses)
          cname = "none";
        double dens = bc.up || bc.down ? (double) (bc.up ? bc.k : bc.k_down) / (double) prob->n
                                       : 1.0;
        for (size_t q = 0; q < GC_BOUND_COUNT; q++) {
          const gc_bound_row *b = &rows[q];
          const char *on = gc_bound_on_name(b->on);
          const char *ex = b->expectation ? "expectation" : "path";
          int ok = !b->failed[0];
          char what[32];
          snprintf(what, sizeof what, "%s%s", b->expectation ? "E " : "", on);
          printf("%-*s %-13s %-*s %7.4g %9.4g %-13s %-13s %12.5g %12.5g  %s%s\n",
                 pw, problems[ip], aname, cw, cname, dens, lr, b->name, what,
                 b->measured, b->value, ok ? "ok" : "refused: ", b->failed);
          if (ok && q == 0) {   /* the ladder of 4.9 */
            printf("%-*s %-13s %-*s   rungs (ratio to measured):", pw, "", "", cw, "");
            for (int k = 0; k < GC_RUNG_COUNT; k++)
              printf(" %s %.4g (%.3g)", gc_rung_name(k), b->rung[k],
                     b->rung[k] / b->measured);
            printf("\n");
          }
          if (f) {
            fprintf(f, "%s,%s,%s,%.17g,%zu,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%s,"
                       "%zu,%.17g,%.17g,%s,%s,%.17g,%s,%.17g,",
                    pfield, aname, cname, dens, bc.T, lr, prob->L, b->gamma, b->xi,
                    bc.min_grad2, bc.mean_grad2, b->value, b->name, bc.runs, bc.sigma,
                    b->delta, on, ex, b->measured, sname, b->alpha);
            for (int k = 0; k < GC_RUNG_COUNT; k++)
              fprintf(f, "%.17g,", b->rung[k]);
            for (int k = 0; k < GC_RUNG_COUNT; k++)
              fprintf(f, "%.17g,", b->rung[k] / b->measured);
            fprintf(f, "%s,%s\n", ok ? "ok" : "refused", b->failed);
            if ((rc = gc_cli_csv_flush(CMD, f, csv)))
              break;
          }
        }
      }
    }
    gc_problem_free(prob);
  }
  if (f && gc_cli_csv_close(CMD, f, csv))
    rc = 1;
  return rc;
}

/* ---- dispatch ---------------------------------------------------------------- */

static void usage(FILE *out)
{
  fprintf(out, "usage: gradcomp theory contraction|trajectory|bounds [OPTIONS]\n"
               "  contraction  empirical contraction of every compressor (docs/theory.md 4.1, 4.5)\n"
               "  trajectory   one run with the xi / xi_bi / memory probes (4.2-4.4)\n"
               "  bounds       the bounds of 4.7 with measured constants, each printed only\n"
               "               when the run meets its theorem's assumptions\n"
               "  gradcomp theory SUBCOMMAND --help for the options.\n");
}

int gc_cmd_theory(int argc, char **argv)
{
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(sub, "contraction"))
    return cmd_contraction(argc - 1, argv + 1);
  if (!strcmp(sub, "trajectory"))
    return cmd_trajectory(argc - 1, argv + 1);
  if (!strcmp(sub, "bounds"))
    return cmd_bounds(argc - 1, argv + 1);
  gc_cli_fail(CMD, 0, "'%s' is not a theory subcommand", sub);
  usage(stderr);
  return 2;
}
