/* transport_cli.c -- the --transport flag and `theory trajectory` over MPI
 * (gc_transport_cli.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gc_algo_rules.h"
#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_netmodel.h"
#include "gc_npy.h"
#include "gc_transport.h"
#include "gc_transport_cli.h"
#ifdef HAVE_MPI
#include "gc_transport_mpi.h"
#endif

int gc_transport_option(const char *cmd, const char *opt, const char *val,
                        gc_transport_opts *o, int *err)
{
  *err = 0;
  double unused;
  if (!strcmp(opt, "--mpi-timeout")) {
    *err = gc_mpi_timeout_option(cmd, opt, val, &o->mpi_timeout);
    o->mpi_timeout_set = 1;
    return 1;
  }
  if (!strcmp(opt, "--save-x")) {
    o->save_x = val;
    return 1;
  }
  if (!strcmp(opt, "--net-bandwidth") || !strcmp(opt, "--net-latency")) {
    int bw = opt[6] == 'b';
    if ((bw ? gc_net_parse_bandwidth(val, &unused)
            : gc_net_parse_latency(val, &unused)) != GC_SUCCESS)
      *err = gc_cli_usage_error(cmd, "%s: %s", opt, gc_last_error());
    *(bw ? &o->net_bw : &o->net_lat) = val;
    return 1;
  }
  if (!strcmp(opt, "--net-csv")) {
    o->net_csv = val;
    return 1;
  }
  if (strcmp(opt, "--transport") != 0)
    return 0;
  *err = gc_transport_choose(cmd, val, &o->kind);
  return 1;
}

/* The configuration a theory run actually uses (gc_theory_run_alloc). */
static gc_algo_config run_config(const gc_problem *prob,
                                 const gc_algo_config *cfg)
{
  gc_algo_config c = *cfg;
  c.n = prob->n;
  c.workers = prob->workers;
  c.dtype = GC_F64;
  return c;
}

#ifdef HAVE_MPI
/* A run over MPI: the registry's link (its impl the gc_mpi). */
struct gc_traj_mpi {
  gc_transport_link link;
  gc_mpi *m;
};

static const char CMD[] = "theory";

/* Per rank: its payload counters and whether its final iterate differs
 * from rank 0's (every rank, collective).  Through the transport's own
 * driver messages, so the watchdog covers the end of the run too: rank
 * 0's iterate to every rank, each worker's counters to rank 0 (all: rank
 * r's NF at all + r NF there). */
enum { F_SENT, F_RECV, F_DOWN, F_DIFFERS, NF };

static int gather_finals(struct gc_traj_mpi *t, uint32_t step, const double *x,
                         size_t n, uint64_t *all)
{
  const gc_transport *tr = gc_mpi_transport(t->m);
  double *ref = malloc(n * sizeof *ref);
  if (!ref)
    return GC_ENOMEM;
  memcpy(ref, x, n * sizeof *ref);
  uint64_t mine[NF];
  int st = tr->type->bcast_aux(tr->state, step, (uint8_t *) ref,
                               n * sizeof *ref);
  gc_mpi_bytes(t->m, &mine[F_SENT], &mine[F_RECV], &mine[F_DOWN]);
  mine[F_DIFFERS] = memcmp(ref, x, n * sizeof *ref) != 0;
  free(ref);
  if (st != GC_SUCCESS)
    return st;
  if (gc_mpi_rank(t->m) > 0)
    return tr->type->gather_aux(tr->state, step, (uint8_t *) mine,
                                sizeof mine);
  memcpy(all, mine, sizeof mine);
  return tr->type->gather_aux(tr->state, step, (uint8_t *) (all + NF),
                              sizeof mine);
}

/* Rank 0: every rank holds rank 0's final iterate, and the payload bytes
 * agree: sent by the workers, received (MPI_Get_count) and in the ledger.
 * Dense and random-K allreduce go through rank 0, while their ledger
 * counts the ring the method stands for: printed side by side. */
static int server_check(gc_transport_opts *o, gc_theory_run *r)
{
  struct gc_traj_mpi *t = o->run;
  gc_sim *sim = gc_theory_run_sim(r);
  size_t P = o->cfg.workers;
  uint64_t *all = calloc((P + 1) * NF, sizeof *all);
  if (!all)
    return gc_cli_fail(CMD, GC_ENOMEM, "out of memory");
  if (gather_finals(t, (uint32_t) gc_sim_steps_done(sim), gc_sim_point(sim),
                    o->cfg.n, all) != GC_SUCCESS) {
    free(all);
    return gc_cli_fail(CMD, GC_EMPI, "the final check across ranks failed");
  }
  uint64_t sent = 0, recv_workers = 0, down = 0;
  int rc = 0;
  for (size_t q = 1; q <= P; q++) {
    sent += all[q * NF + F_SENT];
    recv_workers += all[q * NF + F_RECV];
    down += all[q * NF + F_DOWN];
    if (all[q * NF + F_DIFFERS] && !rc)
      rc = gc_cli_fail(CMD, 0, "rank %zu (worker %zu) ended with a final "
                       "iterate that differs from rank 0's", q, q - 1);
  }
  uint64_t recv0 = all[F_RECV];
  free(all);
  const gc_ledger *l = gc_sim_ledger(sim);
  uint64_t lup = gc_ledger_total(l, GC_UP), ldown = gc_ledger_total(l, GC_DOWN);
  gc__collective coll = gc__algo(o->cfg.kind)->collective;
  int ring = coll == GC__COLL_ALLREDUCE;
  /* allgather: each worker receives the P-1 others' messages */
  uint64_t up_moved = coll == GC__COLL_ALLGATHER ? recv_workers : recv0;
  if (!rc && sent != recv0)
    rc = gc_cli_fail(CMD, 0, "uplink payload: workers sent %llu bytes, rank 0"
                     " received %llu", (unsigned long long) sent,
                     (unsigned long long) recv0);
  if (!rc && !ring && (up_moved != lup || down != ldown))
    rc = gc_cli_fail(CMD, 0, "payload moved (up %llu, down %llu bytes) "
                     "differs from the ledger (up %llu, down %llu)",
                     (unsigned long long) up_moved, (unsigned long long) down,
                     (unsigned long long) lup, (unsigned long long) ldown);
  if (!rc)
    printf("mpi: rank 0 holds %s; %zu worker ranks end on rank 0's "
           "iterate; uplink payload "
           "sent %llu, received %llu (%s), ledger %llu%s; "
           "downlink received %llu, ledger %llu\n",
           gc_sim_worker(sim, 0) ? "a worker" : "no worker", P,
           (unsigned long long) sent, (unsigned long long) up_moved,
           coll == GC__COLL_ALLGATHER ? "Allgatherv, by the P workers"
                                  : "MPI_Get_count at rank 0",
           (unsigned long long) lup, ring ? " (ring allreduce model)" : "",
           (unsigned long long) down, (unsigned long long) ldown);
  return rc;
}

/* Leave MPI: a failed run aborts the job (the other ranks may wait on
 * this one), a finished one finalizes. */
static int mpi_finish(gc_transport_opts *o, int rc)
{
  struct gc_traj_mpi *t = o->run;
  if (rc) {
    fflush(NULL);
    MPI_Abort(MPI_COMM_WORLD, rc);
  }
  o->kind->close(&t->link);
  free(t);
  o->run = NULL;
  MPI_Finalize();
  return rc;
}
#endif

int gc_trajectory_transport_begin(gc_transport_opts *o,
                                  const gc_problem *prob,
                                  const gc_algo_config *cfg,
                                  const gc_transport **tr, int *leader)
{
  o->run = NULL;
  o->cfg = run_config(prob, cfg);
  *tr = NULL;
  *leader = 1;
  if ((o->net_bw != NULL) != (o->net_lat != NULL) || (o->net_csv && !o->net_bw))
    return gc_cli_usage_error("theory", "the network model needs both "
                              "--net-bandwidth and --net-latency");
  if (!o->kind)
    o->kind = gc_transport_kind_default();
  if (o->mpi_timeout_set && !o->kind->watchdog)
    return gc_cli_usage_error("theory", "--mpi-timeout applies only with "
                              "--transport mpi");
  if (!o->kind->launched)
    return -1;
#ifdef HAVE_MPI
  struct gc_traj_mpi *t = calloc(1, sizeof *t);
  if (!t)
    return gc_cli_fail(CMD, GC_ENOMEM, "out of memory");
  int st = o->kind->open(&o->cfg, o->mpi_timeout_set ? o->mpi_timeout : -1, &t->link);
  if (st != GC_SUCCESS) {
    free(t);
    int rc = gc_cli_fail(CMD, st, "--transport %s: run it as mpirun -n %zu (P+1)",
                         o->kind->name, prob->workers + 1);
    int up = 0;
    MPI_Initialized(&up);
    if (up)
      MPI_Finalize();
    return rc;
  }
  t->m = t->link.impl;
  o->run = t;
  *tr = t->link.tr;
  *leader = t->link.proc == 0;
  return -1;
#else
  return 2;   /* gc_transport_choose refused a launched transport */
#endif
}

/* The alpha-beta model over the run's ledger: a summary line and, with
 * --net-csv, one row per step. */
static int net_report(const gc_transport_opts *o, gc_theory_run *r)
{
  gc_net_model m;
  gc_net_parse_bandwidth(o->net_bw, &m.bandwidth);   /* checked when parsed */
  gc_net_parse_latency(o->net_lat, &m.latency);
  const gc_ledger *l = gc_sim_ledger(gc_theory_run_sim(r));
  uint32_t steps = gc_sim_steps_done(gc_theory_run_sim(r));
  FILE *f = NULL;
  if (o->net_csv) {
    if (!(f = fopen(o->net_csv, "w")))
      return gc_cli_fail("theory", GC_EIO, "--net-csv %s: cannot open",
                         o->net_csv);
    fprintf(f, "step,bytes_up,bytes_down,net_s,net_cum_s\n");
  }
  double total = 0;
  for (uint32_t t = 0; t < steps; t++) {
    double s = gc_net_ledger_step_time(&m, &o->cfg, l, t);
    total += s;
    if (f)
      fprintf(f, "%u,%llu,%llu,%.17g,%.17g\n", (unsigned) t,
              (unsigned long long) gc_ledger_step_total(l, t, GC_UP),
              (unsigned long long) gc_ledger_step_total(l, t, GC_DOWN), s,
              total);
  }
  if (f && fclose(f) != 0)
    return gc_cli_fail("theory", GC_EIO, "--net-csv %s: write failed",
                       o->net_csv);
  printf("network model (%s, %s per direction, server link shared): "
         "%.6g s per step, %.6g s over %u steps\n", o->net_bw, o->net_lat,
         steps ? total / steps : 0.0, total, (unsigned) steps);
  return 0;
}

int gc_trajectory_transport_end(gc_transport_opts *o, gc_theory_run *r,
                                int rc)
{
#ifdef HAVE_MPI
  struct gc_traj_mpi *t = o->run;
  if (t && gc_mpi_rank(t->m) > 0) {   /* a worker rank: the final check */
    uint64_t unused[NF];
    gc_sim *sim = gc_theory_run_sim(r);
    if (!rc && gather_finals(t, (uint32_t) gc_sim_steps_done(sim),
                             gc_sim_point(sim), o->cfg.n, unused) != GC_SUCCESS)
      rc = gc_cli_fail(CMD, GC_EMPI, "rank %d: final check failed",
                       gc_mpi_rank(t->m));
    return mpi_finish(o, rc);
  }
#endif
  if (!rc && o->net_bw)
    rc = net_report(o, r);
  if (!rc && o->save_x) {
    size_t n = o->cfg.n;
    int st = gc_npy_write(o->save_x, GC_F64, 1, &n,
                          gc_sim_model(gc_theory_run_sim(r)));
    if (st != GC_SUCCESS)
      rc = gc_cli_fail("theory", st, "--save-x %s: cannot write the final "
                       "iterate", o->save_x);
  }
#ifdef HAVE_MPI
  if (o->run) {
    if (!rc)
      rc = server_check(o, r);
    return mpi_finish(o, rc);
  }
#endif
  return rc;
}
