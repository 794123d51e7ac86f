/* bench_comm.c -- `gradcomp bench comm`: the MPI transport on this machine
 * (loopback) against the in-process transport, for uni and bi with top-K
 * both ways, at MNIST-MLP and MNIST-CNN sized float32 vectors.
 *
 * For each P the command runs itself under `mpirun -n P+1` (the
 * --under-mpirun form, which also runs across nodes with a hostfile) and
 * measures the in-process rate of the same configuration in this process.
 * Gradients are synthetic: worker p's is a fixed N(0,1) vector from the
 * counter RNG (stream p), so every run compresses the same inputs.  The
 * bytes per step come from the ledger (real message sizes); the downlink
 * ratio uni/bi is printed beside mean |S| / K_d, its prediction (uni sends
 * the union of the P supports, bi K_d entries). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "gc_algo.h"
#include "gc_bench.h"
#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_netmodel.h"
#include "gc_npy.h"
#include "gc_rng.h"
#include "gc_transport.h"
#include "gc_transports.h"
static const char CMD[] = "bench comm";

#ifndef HAVE_MPI
int gc_bench_comm(int argc, char **argv)
{
  (void) argc;
  (void) argv;
  return gc_cli_fail(CMD, 0, "this build has no MPI (configure found no "
                     "ompi-c; install libopenmpi-dev and reconfigure)");
}
#else
#include "gc_transport_mpi.h"

static const struct {
  const char *name;
  size_t d;
} models[] = { { "mnist-mlp", 50890 }, { "mnist-cnn", 1199882 } };
enum { NMODELS = sizeof models / sizeof models[0] };
static const gc_algo_kind algos[] = { GC_ALGO_UNI, GC_ALGO_BI };
enum { NALGOS = sizeof algos / sizeof algos[0], MAXP = 64 };

typedef struct comm_row {
  double steps_s, up_b, down_b, support;   /* per step */
} comm_row;

static void usage(FILE *out)
{
  fprintf(out,
          "usage: gradcomp bench comm [--csv FILE] [--workers 2,4,8] [--steps N]\n"
          "                           [--density R] [--net-bandwidth 10Gbps]\n"
          "                           [--net-latency 50us]\n"
          "  steps/s and bytes per step up and down of the MPI transport (mpirun\n"
          "  -n P+1 on this machine) beside the in-process transport, uni vs bi\n"
          "  with top-K both ways (density R, default 0.01), at MNIST-MLP\n"
          "  (d = 50890) and MNIST-CNN (d = 1199882) sized float32 vectors.\n"
          "  Bytes are summed over the P workers; \"net ms\" is the alpha-beta\n"
          "  model's time for those bytes (server link shared).\n"
          "  mpirun -n P+1 [--hostfile H] gradcomp bench comm --under-mpirun\n"
          "  runs the MPI half alone, e.g. across nodes.\n"
          "  Defaults: --workers 2,4,8, --steps 10 (timed, after a warm-up\n"
          "  step), --density 0.01, --net-bandwidth 10Gbps, --net-latency 50us;\n"
          "  no --csv: the table on stdout only.\n");
}

static void bench_config(gc_algo_config *c, gc_algo_kind k, size_t P,
                         size_t d, double density)
{
  gc_algo_config_default(c);
  c->kind = k;
  c->workers = P;
  c->n = d;
  c->dtype = GC_F32;
  c->up = c->down = gc_compressor_type_by_name("topk");
  c->up_params.density = c->down_params.density = density;
  c->up_params.seed = c->down_params.seed = 1;
}

static float *synthetic_grad(size_t d, size_t p)
{
  float *g = malloc(d * sizeof *g);
  if (g)
    for (size_t i = 0; i < d; i++)
      g[i] = (float) gc_rng_normal(2026, (uint32_t) p, 0, i);
  return g;
}

/* One warm-up step, then `steps` timed ones; bytes and |S| over all. */
static int time_steps(gc_sim *s, const void *const *grads, size_t steps,
                      void (*sync)(void), comm_row *r)
{
  double support = 0;
  for (size_t t = 0; t <= steps; t++) {
    if (t == 1) {
      if (sync)
        sync();
      r->steps_s = gc_cli_now();
    }
    GC_TRY(gc_sim_step(s, grads, 0.01));
    if (gc_sim_server(s))
      support += (double) gc_server_support_union(gc_sim_server(s));
  }
  if (sync)
    sync();
  r->steps_s = (double) steps / (gc_cli_now() - r->steps_s);
  const gc_ledger *l = gc_sim_ledger(s);
  double all = (double) (steps + 1);
  r->up_b = (double) gc_ledger_total(l, GC_UP) / all;
  r->down_b = (double) gc_ledger_total(l, GC_DOWN) / all;
  r->support = support / all;
  return GC_SUCCESS;
}

static int inproc_row(gc_algo_kind k, size_t P, size_t d, double density,
                      size_t steps, float *const *g, comm_row *r)
{
  gc_algo_config c;
  bench_config(&c, k, P, d, density);
  float *x0 = calloc(d, sizeof *x0);
  gc_sim *s = x0 ? gc_sim_alloc(&c, x0) : NULL;
  int rc = s ? time_steps(s, (const void *const *) g, steps, NULL, r)
             : GC_ENOMEM;
  gc_sim_free(s);
  free(x0);
  return rc;
}

static void barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

/* Under mpirun: every model and method, one "row" line each from rank 0. */
static int under_mpirun(size_t steps, double density)
{
  int up = 0, rank, size;
  MPI_Initialized(&up);
  if (!up && MPI_Init(NULL, NULL) != MPI_SUCCESS)
    return gc_cli_fail(CMD, 0, "MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  if (size < 2) {
    rc = gc_cli_fail(CMD, 0, "--under-mpirun needs mpirun -n P+1 with P >= 1");
    MPI_Finalize();
    return rc;
  }
  size_t P = (size_t) size - 1;
  for (size_t m = 0; !rc && m < NMODELS; m++) {
    size_t d = models[m].d;
    float *g = rank ? synthetic_grad(d, (size_t) rank - 1) : NULL;
    float *x0 = calloc(d, sizeof *x0);
    const void **grads = calloc(P, sizeof *grads);
    if (!x0 || !grads || (rank && !g))
      rc = gc_cli_fail(CMD, GC_ENOMEM, "rank %d: out of memory", rank);
    if (rank && grads)
      grads[rank - 1] = g;
    for (size_t a = 0; !rc && a < NALGOS; a++) {
      gc_algo_config c;
      bench_config(&c, algos[a], P, d, density);
      /* the registry's mpi row (transports.c): the same constructor as
       * train and theory trajectory */
      const gc_transport_kind *kind = gc_transport_kind_by_name("mpi");
      gc_transport_link link = { 0 };
      int opened = kind->open(&c, -1, &link) == GC_SUCCESS;
      gc_sim *s = opened ? gc_sim_alloc_transport(&c, x0, link.tr) : NULL;
      comm_row r;
      int st = s ? time_steps(s, grads, steps, barrier, &r)
                 : gc_last_error_code();
      if (st) {
        /* before freeing: a failed wait may leave requests on s's buffers */
        rc = gc_cli_fail(CMD, st, "rank %d: %s at d = %zu", rank,
                         gc_algo_name(algos[a]), d);
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, rc);
      } else if (rank == 0)
        printf("row %s %s %zu %.17g %.17g %.17g %.17g\n", models[m].name,
               gc_algo_name(algos[a]), P, r.steps_s, r.up_b, r.down_b,
               r.support);
      fflush(stdout);
      gc_sim_free(s);
      if (opened)
        kind->close(&link);
    }
    free(g);
    free(x0);
    free(grads);
  }
  if (rc) {
    fflush(NULL);
    MPI_Abort(MPI_COMM_WORLD, rc);
  }
  MPI_Finalize();
  return rc;
}

/* Run this program under mpirun for P workers; rows[model][algo]. */
static int mpi_rows(size_t P, size_t steps, double density,
                    comm_row rows[NMODELS][NALGOS])
{
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return gc_cli_fail(CMD, 0, "cannot find this program (/proc/self/exe)");
  self[n] = 0;
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "mpirun --oversubscribe %s-n %zu '%s' bench comm "
           "--under-mpirun --steps %zu --density %.17g",
           geteuid() == 0 ? "--allow-run-as-root " : "", P + 1, self, steps,
           density);
  FILE *f = popen(cmd, "r");
  if (!f)
    return gc_cli_fail(CMD, 0, "cannot run mpirun (is openmpi-bin installed?)");
  char line[1024];
  int got = 0;
  while (fgets(line, sizeof line, f)) {
    char model[64], algo[64];
    size_t p;
    comm_row r;
    if (sscanf(line, "row %63s %63s %zu %lf %lf %lf %lf", model, algo, &p,
               &r.steps_s, &r.up_b, &r.down_b, &r.support) != 7)
      continue;
    for (size_t m = 0; m < NMODELS; m++)
      for (size_t a = 0; a < NALGOS; a++)
        if (!strcmp(model, models[m].name) &&
            !strcmp(algo, gc_algo_name(algos[a]))) {
          rows[m][a] = r;
          got++;
        }
  }
  int st = pclose(f);
  if (st != 0 || got != NMODELS * NALGOS)
    return gc_cli_fail(CMD, 0, "mpirun -n %zu failed (exit %d, %d of %d rows):"
                       " %s", P + 1, st, got, NMODELS * NALGOS, cmd);
  return 0;
}

int gc_bench_comm(int argc, char **argv)
{
  const char *csv = NULL;
  size_t steps = 10, workers[8] = { 2, 4, 8 }, nw = 3;
  double density = 0.01;
  const char *bw = "10Gbps", *lat = "50us";
  gc_net_model net;
  int child = 0;
  gc_cli_args args = GC_CLI_ARGS(CMD, "", usage, argc, argv);
  static const char *const flags[] = { "--under-mpirun", NULL };
  args.flags = flags;
  const char *o, *v;
  gc_cli_comp comp = { .take = GC_CLI_P_DENSITY };   /* --density, as everywhere */
  gc_compressor_params_default(&comp.up);
  comp.up.density = density;
  while (gc_cli_next(&args, &o, &v)) {
    int err = gc_cli_compressor_option(&args, o, v, &comp);
    if (err == GC_CLI_TAKEN) continue;
    if (err != GC_CLI_NOT_MINE) return err;
    err = 0;
    if (!strcmp(o, "--csv")) csv = v;
    else if (!strcmp(o, "--steps")) err = gc_cli_size(CMD, o, v, &steps);
    else if (!strcmp(o, "--under-mpirun")) child = 1;
    else if (!strcmp(o, "--net-bandwidth")) bw = v;
    else if (!strcmp(o, "--net-latency")) lat = v;
    else if (!strcmp(o, "--workers")) {
      double w[8];
      nw = gc_cli_doubles(CMD, o, v, w, 8);
      err = nw == 0;
      for (size_t i = 0; !err && i < nw; i++) {
        err = !(w[i] >= 1 && w[i] <= MAXP && w[i] == (double) (size_t) w[i]);
        workers[i] = (size_t) w[i];
      }
      if (err)
        gc_cli_usage_error(CMD, "--workers takes up to 8 counts in [1, %d]",
                           MAXP);
    } else
      return gc_cli_unknown(&args, o);
    if (err)
      return 2;
  }
  if (args.exit >= 0)
    return args.exit;
  density = comp.up.density;   /* in (0, 1]: checked when parsed */
  if (steps == 0)
    return gc_cli_usage_error(CMD, "--steps must be >= 1");
  if (gc_net_parse_bandwidth(bw, &net.bandwidth) ||
      gc_net_parse_latency(lat, &net.latency))
    return gc_cli_usage_error(CMD, "%s", gc_last_error());
  if (child)
    return under_mpirun(steps, density);
  FILE *f = NULL;
  if (csv && !(f = fopen(csv, "w")))
    return gc_cli_fail(CMD, GC_EIO, "cannot write --csv %s", csv);
  if (f)
    fprintf(f, "model,d,workers,algorithm,transport,steps_per_s,"
               "bytes_up_per_step,bytes_down_per_step,support_mean,k_down,"
               "net_model_s\n");
  printf("# synthetic float32 gradients, topk density %g both ways, %zu timed"
         " steps after one warm-up; MPI on this machine (loopback)\n",
         density, steps);
  printf("# net ms: alpha-beta model at %s, %s per direction\n", bw, lat);
  printf("%-10s %2s %-4s %12s %12s %8s %13s %13s %9s\n", "model", "P", "algo",
         "mpi step/s", "inproc st/s", "mpi/in", "up B/step", "down B/step",
         "net ms");
  int rc = 0;
  for (size_t w = 0; !rc && w < nw; w++) {
    size_t P = workers[w];
    comm_row mrow[NMODELS][NALGOS], irow[NMODELS][NALGOS];
    if ((rc = mpi_rows(P, steps, density, mrow)))
      break;
    for (size_t m = 0; !rc && m < NMODELS; m++) {
      size_t d = models[m].d;
      float *g[MAXP] = { 0 };
      for (size_t p = 0; p < P; p++)
        if (!(g[p] = synthetic_grad(d, p)))
          rc = gc_cli_fail(CMD, GC_ENOMEM, "out of memory");
      for (size_t a = 0; !rc && a < NALGOS; a++)
        if (inproc_row(algos[a], P, d, density, steps, g, &irow[m][a]))
          rc = gc_cli_fail(CMD, gc_last_error_code(), "in-process %s",
                           gc_algo_name(algos[a]));
      for (size_t p = 0; p < P; p++)
        free(g[p]);
      size_t kd = (size_t) (density * (double) d);
      for (size_t a = 0; !rc && a < NALGOS; a++) {
        comm_row *mr = &mrow[m][a], *ir = &irow[m][a];
        gc_algo_config c;
        bench_config(&c, algos[a], P, d, density);
        double up_s, down_s;
        gc_net_step_time(&net, &c, (uint64_t) mr->up_b, (uint64_t) mr->down_b,
                         &up_s, &down_s);
        printf("%-10s %2zu %-4s %12.2f %12.2f %8.3f %13.0f %13.0f %9.4f\n",
               models[m].name, P, gc_algo_name(algos[a]), mr->steps_s,
               ir->steps_s, mr->steps_s / ir->steps_s, mr->up_b, mr->down_b,
               1e3 * (up_s + down_s));
        for (int t = 0; f && t < 2; t++) {
          comm_row *r = t ? ir : mr;
          fprintf(f, "%s,%zu,%zu,%s,%s,%.6g,%.17g,%.17g,%.17g,%zu,%.17g\n",
                  models[m].name, d, P, gc_algo_name(algos[a]),
                  t ? "inproc" : "mpi", r->steps_s, r->up_b, r->down_b,
                  r->support, kd, up_s + down_s);
        }
      }
      if (!rc)
        printf("%-10s %2zu downlink bytes uni/bi %.3f; mean |S|/K_d %.3f "
               "(|S| %.0f, K_d %zu)\n", models[m].name, P,
               mrow[m][0].down_b / mrow[m][1].down_b,
               irow[m][0].support / (double) kd, irow[m][0].support, kd);
      if (f)
        fflush(f);
    }
  }
  if (f && fclose(f) != 0 && !rc)
    rc = gc_cli_fail(CMD, GC_EIO, "cannot write --csv %s", csv);
  return rc;
}
#endif /* HAVE_MPI */
