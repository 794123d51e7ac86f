/* test_transport.c -- the transport seam under gc_sim_step: a transport
 * that moves every message through its own buffers gives the in-process
 * result bit for bit; messages with NaN/Inf values are rejected where
 * they are decoded (a peer is a trust boundary); and, where MPI and
 * mpirun are present, `theory trajectory --transport mpi` writes the same
 * CSV, final iterate and summary as the in-process run for P = 2 and 4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "config.h"
#include "gc_algo.h"
#include "gc_dtype.h"
#include "gc_errno.h"
#include "gc_netmodel.h"
#include "gc_test.h"
#include "gc_transport.h"

enum { P = 3, D = 64, STEPS = 25 };

/* ---- a loopback transport: every message crosses a copy --------------- */

typedef struct loopback {
  uint8_t *up;        /* P * cap */
  size_t cap;
  uint8_t *down;      /* downcap */
  size_t downcap;
  int gathers, bcasts;
} loopback;

/* Copy the uplinks out, then poison the workers' buffers: the server must
 * read the transport's copies. */
static int loop_gather(void *state, uint32_t step, const uint8_t **up,
                       size_t *up_len)
{
  loopback *L = state;
  (void) step;
  for (size_t p = 0; p < P; p++) {
    memcpy(L->up + p * L->cap, up[p], up_len[p]);
    memset((uint8_t *) up[p], 0xA5, up_len[p]);
    up[p] = L->up + p * L->cap;
  }
  L->gathers++;
  return GC_SUCCESS;
}

static int loop_bcast(void *state, uint32_t step, uint8_t *down, size_t *len)
{
  loopback *L = state;
  (void) step;
  memcpy(L->down, down, *len);
  memset(down, 0x5A, L->downcap);
  memcpy(down, L->down, *len);
  L->bcasts++;
  return GC_SUCCESS;
}

static const gc_transport_type loop_type = { "loopback", loop_gather,
                                             loop_bcast, NULL, NULL };

static void config(gc_algo_config *c, gc_algo_kind k)
{
  gc_algo_config_default(c);
  c->kind = k;
  c->workers = P;
  c->n = D;
  c->dtype = GC_F64;
  c->up = gc_compressor_type_by_name(k == GC_ALGO_ALLREDUCE_RANDK ? "randk"
                                                                    : "topk");
  c->down = gc_compressor_type_by_name("topk");
  c->up_params.k = 6;
  c->up_params.seed = 77;
  c->down_params.k = 9;
}

/* f_p(x) = 1/2 ||x - b_p||^2 with different b_p: gradients x - b_p. */
static void run(gc_sim *s, double b[P][D], double g[P][D])
{
  const void *gp[P] = { g[0], g[1], g[2] };
  for (int t = 0; t < STEPS; t++) {
    const double *x = gc_sim_point(s);
    for (size_t p = 0; p < P; p++)
      for (size_t i = 0; i < D; i++)
        g[p][i] = x[i] - b[p][i];
    cr_assert(eq(int, gc_sim_step(s, gp, 0.2), GC_SUCCESS), "step %d", t);
  }
}

Test(transport, loopback_equals_in_process)
{
  double b[P][D], g[P][D], x0[D] = { 0 };
  for (size_t p = 0; p < P; p++)
    gc_test_fill_normal(b[p], D, 11 + p);
  for (int k = GC_ALGO_SGD; k <= GC_ALGO_ALLGATHER; k++) {
    gc_algo_config c;
    config(&c, (gc_algo_kind) k);
    loopback L = { 0 };
    L.cap = gc_algo_max_up_bytes(&c);
    L.downcap = gc_algo_max_down_bytes(&c);
    L.up = malloc(P * L.cap);
    L.down = malloc(L.downcap);
    gc_transport tr = { &loop_type, &L, 0, P, 1 };
    gc_sim *a = gc_sim_alloc(&c, x0);
    gc_sim *m = gc_sim_alloc_transport(&c, x0, &tr);
    cr_assert(a && m);
    run(a, b, g);
    run(m, b, g);
    const char *name = gc_algo_name((gc_algo_kind) k);
    cr_assert(eq(int, L.gathers, STEPS), "%s", name);
    cr_assert(eq(int, memcmp(gc_sim_model(a), gc_sim_model(m), sizeof x0), 0),
              "%s: the model differs through the transport", name);
    for (int dir = GC_UP; dir <= GC_LEDGER_BCAST; dir++)
      cr_assert(eq(u64, gc_ledger_total(gc_sim_ledger(a), dir),
                   gc_ledger_total(gc_sim_ledger(m), dir)), "%s dir %d", name, dir);
    size_t sa = gc_sim_state_bytes(a);
    cr_assert(eq(sz, sa, gc_sim_state_bytes(m)));
    uint8_t *ba = malloc(sa), *bm = malloc(sa);
    gc_sim_state_save(a, ba);
    gc_sim_state_save(m, bm);
    cr_assert(eq(int, memcmp(ba, bm, sa), 0), "%s: state differs", name);
    free(ba);
    free(bm);
    gc_sim_free(a);
    gc_sim_free(m);
    free(L.up);
    free(L.down);
  }
}

/* A process that runs the server only (no worker) still applies the
 * downlink to its copy; one that runs one worker has no ledger rows. */
Test(transport, partial_nodes)
{
  gc_test_quiet();
  gc_algo_config c;
  config(&c, GC_ALGO_BI);
  double x0[D] = { 0 };
  loopback L = { 0 };
  gc_transport bad = { &loop_type, &L, 2, P + 1, 1 };
  cr_assert(eq(ptr, gc_sim_alloc_transport(&c, x0, &bad), NULL));
  cr_assert(eq(int, gc_last_error_code(), GC_EINVAL));
  gc_transport one = { &loop_type, &L, 1, 2, 0 };
  gc_sim *w = gc_sim_alloc_transport(&c, x0, &one);
  cr_assert(w != NULL);
  cr_assert(gc_sim_worker(w, 0) == NULL && gc_sim_worker(w, 1) != NULL);
  cr_assert(gc_sim_server(w) == NULL);
  gc_sim_free(w);
}

/* ---- a received message is untrusted ----------------------------------- */

/* Put v into the j-th value of a sparse message (values follow the header
 * and index section, at its end: c values of the dtype). */
static void poison_last_values(uint8_t *msg, size_t len, size_t c, double v)
{
  for (size_t j = 0; j < c; j++)
    memcpy(msg + len - (c - j) * sizeof v, &v, sizeof v);
}

Test(transport, server_rejects_non_finite_uplinks)
{
  gc_test_quiet();
  double specials[2] = { NAN, INFINITY };
  gc_algo_kind kinds[3] = { GC_ALGO_UNI, GC_ALGO_SGD, GC_ALGO_ALLGATHER };
  for (int s = 0; s < 2; s++)
    for (int ki = 0; ki < 3; ki++) {
      gc_algo_config c;
      config(&c, kinds[ki]);
      gc_worker *w[P];
      gc_server *srv = gc_server_alloc(&c);
      size_t cap = gc_algo_max_up_bytes(&c), dcap = gc_algo_max_down_bytes(&c);
      uint8_t *buf = malloc(P * cap), *down = malloc(dcap);
      const uint8_t *up[P];
      size_t len[P];
      double g[D];
      for (size_t p = 0; p < P; p++) {
        w[p] = gc_worker_alloc(&c, p);
        gc_test_fill_normal(g, D, 5 + p);
        up[p] = buf + p * cap;
        cr_assert(eq(int, gc_worker_step(w[p], g, 0.1, 0, buf + p * cap, cap,
                                         &len[p]), GC_SUCCESS));
      }
      /* worker 1's message carries a NaN or Inf in place of its values */
      size_t nvals = kinds[ki] == GC_ALGO_SGD ? D : 6;
      poison_last_values(buf + cap, len[1], nvals, specials[s]);
      size_t dlen;
      cr_assert(eq(int, gc_server_step(srv, up, len, 0.1, 0, down, dcap, &dlen),
                   GC_ECORRUPT), "%s", gc_algo_name(kinds[ki]));
      cr_assert(strstr(gc_last_error(), "worker 1") != NULL, "%s", gc_last_error());
      for (size_t p = 0; p < P; p++)
        gc_worker_free(w[p]);
      gc_server_free(srv);
      free(buf);
      free(down);
    }
}

/* A rejected message leaves the target as it was (here all zero). */
static void assert_untouched(const double *x)
{
  for (size_t i = 0; i < D; i++)
    cr_assert(eq(dbl, x[i], 0.0), "x[%zu] changed by a rejected message", i);
}

Test(transport, worker_rejects_non_finite_downlink)
{
  gc_test_quiet();
  gc_algo_config c;
  config(&c, GC_ALGO_SGD);   /* dense downlink */
  gc_worker *w = gc_worker_alloc(&c, 0);
  double g[D], x[D] = { 0 };
  uint8_t msg[D * sizeof(double)];
  size_t len;
  gc_test_fill_normal(g, D, 3);
  cr_assert(eq(int, gc_worker_step(w, g, 0.1, 0, msg, sizeof msg, &len), 0));
  double v = NAN;
  memcpy(msg + 17 * sizeof v, &v, sizeof v);
  cr_assert(eq(int, gc_worker_apply(w, msg, len, 0, x), GC_ECORRUPT));
  assert_untouched(x);
  gc_worker_free(w);
  /* the identity compressor's raw values, through its own decoder */
  gc_compressor *id = gc_compressor_alloc(gc_compressor_type_by_name("identity"),
                                          D, NULL);
  size_t cap = gc_compressor_max_bytes(id);
  uint8_t *m = malloc(cap);
  cr_assert(eq(int, gc_compress_f64(id, g, 0, m, cap, &len, NULL), 0));
  v = -INFINITY;
  memcpy(m + len - sizeof v, &v, sizeof v);
  cr_assert(eq(int, gc_decompress_add_f64(id, m, len, 0, 1.0, x), GC_ECORRUPT));
  assert_untouched(x);
  free(m);
  gc_compressor_free(id);
  /* a sparse top-K message whose last value is NaN (found by fuzz_wire:
   * the decoders added the values before the bad one) */
  gc_compressor_params tp;
  gc_compressor_params_default(&tp);
  tp.k = 6;
  gc_compressor *tk = gc_compressor_alloc(gc_compressor_type_by_name("topk"), D, &tp);
  cap = gc_compressor_max_bytes(tk);
  m = malloc(cap);
  cr_assert(eq(int, gc_compress_f64(tk, g, 0, m, cap, &len, NULL), 0));
  v = NAN;
  memcpy(m + len - sizeof v, &v, sizeof v);
  cr_assert(eq(int, gc_decompress_add_f64(tk, m, len, 0, 1.0, x), GC_ECORRUPT));
  assert_untouched(x);
  free(m);
  gc_compressor_free(tk);
}

/* ---- the alpha-beta network model --------------------------------------- */

Test(transport, net_parse)
{
  gc_test_quiet();
  double v;
  cr_assert(eq(int, gc_net_parse_bandwidth("10Gbps", &v), 0));
  cr_assert(eq(dbl, v, 1.25e9));
  cr_assert(eq(int, gc_net_parse_bandwidth("800MB/s", &v), 0));
  cr_assert(eq(dbl, v, 8e8));
  cr_assert(eq(int, gc_net_parse_latency("50us", &v), 0));
  /* 50 times 1e-6 (itself rounded): two roundings, <= 2 ulp of 5e-5 */
  cr_assert(ieee_ulp_eq(dbl, v, 5e-5, 4));
  cr_assert(eq(int, gc_net_parse_latency("0s", &v), 0));
  cr_assert(eq(dbl, v, 0.0));
  const char *bad_bw[] = { "10", "10Gbs", "-1Gbps", "0Gbps", "fast", "nanGbps" };
  for (size_t i = 0; i < sizeof bad_bw / sizeof *bad_bw; i++)
    cr_assert(eq(int, gc_net_parse_bandwidth(bad_bw[i], &v), GC_EINVAL), "%s", bad_bw[i]);
  const char *bad_lat[] = { "50", "5 us", "-1ms", "infs" };
  for (size_t i = 0; i < sizeof bad_lat / sizeof *bad_lat; i++)
    cr_assert(eq(int, gc_net_parse_latency(bad_lat[i], &v), GC_EINVAL), "%s", bad_lat[i]);
}

/* The model over a real run's ledger against its closed form, with the
 * message sizes worked out by hand: dense float64 messages of D values. */
Test(transport, net_model_closed_form)
{
  gc_net_model m = { 1e6, 1e-3 };   /* 8 Mbps, 1 ms */
  double b[P][D], g[P][D], x0[D] = { 0 };
  for (size_t p = 0; p < P; p++)
    gc_test_fill_normal(b[p], D, 40 + p);
  /* SGD: P uplinks and P copies of the downlink through the server link */
  double ps = 2 * 1e-3 + (2.0 * P * D * 8) / 1e6;
  /* ring allreduce: 2(P-1) rounds, each rank sends 2(P-1)/P of D values */
  double ring = 2 * (P - 1) * 1e-3 + (2.0 * (P - 1) / P * D * 8) / 1e6;
  gc_algo_kind kinds[2] = { GC_ALGO_SGD, GC_ALGO_ALLREDUCE };
  double want[2] = { ps, ring };
  for (int i = 0; i < 2; i++) {
    gc_algo_config c;
    config(&c, kinds[i]);
    gc_sim *s = gc_sim_alloc(&c, x0);
    run(s, b, g);
    for (uint32_t t = 0; t < STEPS; t++) {
      double got = gc_net_ledger_step_time(&m, &c, gc_sim_ledger(s), t);
      /* both sides: a latency term plus a bytes/bandwidth term, about 4
       * roundings each, summed in different orders: 8 ulp */
      cr_assert(ieee_ulp_eq(dbl, got, want[i], 8), "%s step %u: %.17g vs %.17g",
                gc_algo_name(kinds[i]), t, got, want[i]);
    }
    cr_assert(eq(dbl, gc_net_ledger_step_time(&m, &c, gc_sim_ledger(s), STEPS), 0.0));
    gc_sim_free(s);
  }
  /* zero latency, bandwidth halved: the time doubles exactly */
  gc_algo_config c;
  config(&c, GC_ALGO_UNI);
  double u1, d1, u2, d2;
  gc_net_model m0 = { 1e6, 0 }, mh = { 5e5, 0 };
  gc_net_step_time(&m0, &c, 1234, 5678, &u1, &d1);
  gc_net_step_time(&mh, &c, 1234, 5678, &u2, &d2);
  cr_assert(eq(dbl, u2, 2 * u1));
  cr_assert(eq(dbl, d2, 2 * d1));
  cr_assert(eq(dbl, u1, 1234 / 1e6));
}

/* ---- MPI: the same run in-process and under mpirun --------------------- */

static char gradcomp[1024];

static void need_mpirun(void)
{
#ifndef HAVE_MPI
  cr_skip_test("this build has no MPI (configure found no ompi-c)");
#endif
  char out[256];
  if (gc_test_run("command -v mpirun", out, sizeof out) != 0)
    cr_skip_test("mpirun not found: install openmpi-bin to run the MPI tests");
  snprintf(gradcomp, sizeof gradcomp, "%s",
           gc_test_builddir("experiments/gradcomp"));
}

/* OpenMPI's components leak at MPI_Finalize (dlclosed modules, so an
 * ASan build's leak check can neither name nor suppress them): the ranks
 * run without it.  The same code's own leaks are checked in-process. */
#define MPIRUN "mpirun --oversubscribe --allow-run-as-root " \
               "-x ASAN_OPTIONS=detect_leaks=0 -n %zu "

/* Drop the "mpi:" line (the MPI run's own cross-check) from stdout. */
static void drop_mpi_line(char *out)
{
  char *l = strstr(out, "mpi: ");
  if (l) {
    char *e = strchr(l, '\n');
    memmove(l, e ? e + 1 : l + strlen(l), strlen(e ? e + 1 : l + strlen(l)) + 1);
  }
}

/* step sizes: the constant lr, or (lr_args) a schedule every rank follows */
static void same_trajectory(const char *algo, const char *comp, size_t nw,
                     const char *lr_args)
{
  need_mpirun();
  char args[512], cmd[4096], out1[16384], out2[16384];
  char csv1[256], csv2[256], x1[256], x2[256];
  char tag[64];
  snprintf(tag, sizeof tag, "mpi-%s-%zu", algo, nw);
  snprintf(csv1, sizeof csv1, "%s.csv", gc_test_tmp(tag));
  snprintf(x1, sizeof x1, "%s.npy", gc_test_tmp(tag));
  snprintf(csv2, sizeof csv2, "%s-mpi.csv", gc_test_tmp(tag));
  snprintf(x2, sizeof x2, "%s-mpi.npy", gc_test_tmp(tag));
  snprintf(args, sizeof args, "theory trajectory --problem quadratic:P=%zu,"
           "d=48,sigma=0.2,hetero=1 --algorithm %s --compressor %s --k 5 "
           "--k-down 7 %s --steps 40 --seed 9", nw, algo, comp, lr_args);
  snprintf(cmd, sizeof cmd, "%s %s --csv %s --save-x %s", gradcomp, args,
           csv1, x1);
  cr_assert(eq(int, gc_test_run(cmd, out1, sizeof out1), 0), "%s", out1);
  snprintf(cmd, sizeof cmd, MPIRUN "%s %s --csv %s --save-x %s --transport mpi",
           nw + 1, gradcomp, args, csv2, x2);
  cr_assert(eq(int, gc_test_run(cmd, out2, sizeof out2), 0), "%s", out2);
  /* the MPI run checked its ranks and its bytes against the ledger */
  cr_assert(strstr(out2, "worker ranks end on rank 0's iterate") != NULL,
            "%s", out2);
  /* the probes read records, not mirrors: rank 0 steps no worker */
  cr_assert(strstr(out2, "rank 0 holds no worker") != NULL, "%s", out2);
  drop_mpi_line(out2);
  cr_assert(eq(str, out1, out2));
  const char *files[2][2] = { { csv1, csv2 }, { x1, x2 } };
  for (int i = 0; i < 2; i++) {
    size_t la, lb;
    char *a = gc_test_slurp(files[i][0], &la), *b = gc_test_slurp(files[i][1], &lb);
    cr_assert(a && b && la > 0);
    cr_assert(eq(sz, la, lb), "%s vs %s", files[i][0], files[i][1]);
    cr_assert(eq(int, memcmp(a, b, la), 0), "%s and %s differ", files[i][0],
              files[i][1]);
    free(a);
    free(b);
    remove(files[i][0]);
    remove(files[i][1]);
  }
}

static void same_as_in_process(const char *algo, const char *comp, size_t nw)
{
  same_trajectory(algo, comp, nw, "--lr 0.05");
}

Test(transport_mpi, sgd) { same_as_in_process("sgd", "topk", 2); same_as_in_process("sgd", "topk", 4); }
Test(transport_mpi, uni) { same_as_in_process("uni", "topk", 2); same_as_in_process("uni", "topk", 4); }
Test(transport_mpi, bi) { same_as_in_process("bi", "topk", 2); same_as_in_process("bi", "topk", 4); }
Test(transport_mpi, downlink) { same_as_in_process("downlink", "topk", 2); same_as_in_process("downlink", "topk", 4); }
Test(transport_mpi, doublesqueeze) { same_as_in_process("doublesqueeze", "topk", 2); same_as_in_process("doublesqueeze", "topk", 4); }
Test(transport_mpi, ef21) { same_as_in_process("ef21", "topk", 2); same_as_in_process("ef21", "topk", 4); }
Test(transport_mpi, allgather) { same_as_in_process("allgather", "topk", 2); same_as_in_process("allgather", "topk", 4); }
Test(transport_mpi, allreduce_randk) { same_as_in_process("allreduce-randk", "randk", 2); }
/* a decreasing schedule and its weighted average (printed in the summary) */
Test(transport_mpi, lr_schedule) { same_trajectory("bi", "topk", 3, "--lr-schedule inverse:c=1,a=20"); }

/* Wrong rank count: a message naming the ranks needed, non-zero exit. */
Test(transport_mpi, wrong_rank_count)
{
  need_mpirun();
  char cmd[2048], out[16384];
  snprintf(cmd, sizeof cmd, MPIRUN "%s theory trajectory --problem "
           "quadratic:P=4,d=16 --algorithm uni --compressor topk --k 2 --lr 0.1"
           " --steps 3 --transport mpi", (size_t) 2, gradcomp);
  cr_assert(ne(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(strstr(out, "need 5 ranks") != NULL, "%s", out);
}

/* A worker rank killed mid-run: the job stops (mpirun ends every rank)
 * with the dead rank named and a non-zero exit, and the CSV rows written
 * before stay whole.  The kill waits until rows appear, so it lands in
 * the middle of the run; the run itself is far longer than the test. */
Test(transport_mpi, killed_worker_stops_the_run, .timeout = 120)
{
  need_mpirun();
  char dir[512], cmd[4096], out[16384];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("mpi-kill"));
  snprintf(cmd, sizeof cmd, "sh '%s' '%s' '%s'",
           gc_test_srcdir("tests/mpi_kill.sh"), dir, gradcomp);
  gc_test_run(cmd, out, sizeof out);
  char *rc = strstr(out, "rc=");
  cr_assert(rc && rc[3] != '\n' && strncmp(rc, "rc=0\n", 5) != 0,
            "the run did not stop with a non-zero exit within 30 s: %s", out);
  cr_assert(strstr(out, "rank 2") != NULL, "%s", out);
  char path[600];
  snprintf(path, sizeof path, "%s/k.csv", dir);
  size_t len;
  char *csv = gc_test_slurp(path, &len);
  cr_assert(csv && len > 0);
  cr_assert(eq(chr, csv[len - 1], '\n'), "the last row is cut");
  size_t rows = 0, fields = 0, want = 0;
  for (size_t i = 0; i < len; i++) {
    if (csv[i] == ',')
      fields++;
    if (csv[i] == '\n') {
      if (rows++ == 0)
        want = fields;
      cr_assert(eq(sz, fields, want), "row %zu has %zu commas", rows, fields);
      fields = 0;
    }
  }
  cr_assert(rows >= 5, "%zu rows", rows);
  free(csv);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  gc_test_run(cmd, out, sizeof out);
}

/* The seconds an MPI watchdog message gives as its limit ("the limit is
 * 10 s = ..."); -1 without one. */
static double watchdog_limit(const char *out)
{
  const char *l = strstr(out, "the limit is ");
  return l ? strtod(l + 13, NULL) : -1;
}

/* A worker rank stopped (SIGSTOP: alive, silent) mid-run with
 * --mpi-timeout 8: rank 0's watchdog ends the job within its limit, which
 * it states, naming the silent rank and the step; the CSV rows written
 * before stay whole; and while they wait the other ranks sleep between
 * polls rather than spin.  A poll every 1 ms costs ~1% of a core (3 of
 * the 300 ticks of 3 s at 100 Hz), and sleeping it does not grow on a
 * loaded machine; a spinning rank takes whatever CPU the machine leaves
 * it, a whole idle core, and --oversubscribe's yielding gives back only
 * what other processes ask for.  8% sits well above the first and below
 * what a spinning rank gets beside a few busy processes.  Without
 * the watchdog the job waits for ever (the script's 120 s bound then
 * reports no exit). */
Test(transport_mpi, stopped_worker_watchdog, .timeout = 300)
{
  need_mpirun();
  char dir[512], cmd[4096], out[16384];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("mpi-stop"));
  snprintf(cmd, sizeof cmd, "sh '%s' '%s' '%s' STOP",
           gc_test_srcdir("tests/mpi_kill.sh"), dir, gradcomp);
  gc_test_run(cmd, out, sizeof out);
  cr_assert(strstr(out, "rc=1\n") != NULL,
            "the watchdog did not end the job with exit 1: %s", out);
  cr_assert(strstr(out, "rank 0 heard nothing from rank 2 (worker 1)") != NULL,
            "%s", out);
  cr_assert(strstr(out, " of step ") != NULL, "%s", out);
  double lim = watchdog_limit(out);
  const char *s = strstr(out, "stop_s=");
  /* the limit is max(8 s, 50 x the slowest step) by construction; the job
   * then ends as mpirun tears it down, given 30 s on a loaded machine */
  cr_assert(lim >= 8 && s && atof(s + 7) <= lim + 30,
            "limit %g s, stopped after %s", lim, s ? s + 7 : "?");
  const char *cpu = strstr(out, "wait_cpu_pct=");
  cr_assert(cpu && atoi(cpu + 13) < 8, "the waiting ranks spin: %s", out);
  char path[600];
  snprintf(path, sizeof path, "%s/k.csv", dir);
  size_t len;
  char *csv = gc_test_slurp(path, &len);
  cr_assert(csv && len > 0 && csv[len - 1] == '\n', "the last row is cut");
  free(csv);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  gc_test_run(cmd, out, sizeof out);
}

/* ---- MPI: gradcomp train, the same run in-process and under mpirun ------ */

/* log.csv without the four times, the only columns a transport may
 * change: the ledger's bytes, bytes_stats, the losses, the test accuracy
 * and the probes (xi, delta: from the workers' vectors gathered to rank 0)
 * stay. */
static char *log_kept_columns(const char *path)
{
  size_t len;
  char *csv = gc_test_slurp(path, &len);
  cr_assert(csv && len > 0, "%s missing", path);
  char *out = csv;
  int field = 0;
  for (const char *s = csv; *s; s++) {
    int keep = field < 9 || field > 12;
    if (*s == '\n') {
      field = 0;
      *out++ = '\n';
      continue;
    }
    if (*s == ',') {
      field++;
      keep = field < 9 || field > 12;
    }
    if (keep)
      *out++ = *s;
  }
  *out = '\0';
  return csv;
}

static void same_bytes(const char *a, const char *b)
{
  size_t la, lb;
  char *x = gc_test_slurp(a, &la), *y = gc_test_slurp(b, &lb);
  cr_assert(x && y && la > 0, "%s or %s missing", a, b);
  cr_assert(la == lb && memcmp(x, y, la) == 0, "%s and %s differ", a, b);
  free(x);
  free(y);
}

/* Two run folders hold the same final model, byte for byte, and the same
 * log.csv but for the times. */
static void same_run(const char *a, const char *b)
{
  char pa[700], pb[700];
  snprintf(pa, sizeof pa, "%s/model.npy", a);
  snprintf(pb, sizeof pb, "%s/model.npy", b);
  same_bytes(pa, pb);
  snprintf(pa, sizeof pa, "%s/log.csv", a);
  snprintf(pb, sizeof pb, "%s/log.csv", b);
  char *la = log_kept_columns(pa), *lb = log_kept_columns(pb);
  cr_assert(eq(str, la, lb), "%s vs %s", pa, pb);
  free(la);
  free(lb);
}

/* Run `args` in-process into DIR-inproc and under mpirun -n P+1 into
 * DIR-mpi; the final model bytes, the ledger's and statistics' bytes, the
 * losses and accuracies must agree.  Returns the MPI run's folder. */
static const char *train_both(const char *tag, const char *ds, size_t nw,
                              const char *args)
{
  need_mpirun();
  gc_test_need_dataset(ds);
  static char b[512];
  char a[512], cmd[4096], out[16384], pb[600];
  snprintf(a, sizeof a, "%s-inproc", gc_test_tmp(tag));
  snprintf(b, sizeof b, "%s-mpi", gc_test_tmp(tag));
  snprintf(cmd, sizeof cmd, "%s train --data %s --dataset %s --workers %zu "
           "%s --quiet --out %s", gradcomp, gc_test_data_dir(), ds, nw, args, a);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  snprintf(cmd, sizeof cmd, MPIRUN "%s train --data %s --dataset %s --workers"
           " %zu %s --quiet --out %s --transport mpi", nw + 1, gradcomp,
           gc_test_data_dir(), ds, nw, args, b);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  same_run(a, b);
  /* the MPI run's folder says what it did; rank 0 wrote every file */
  snprintf(pb, sizeof pb, "%s/config.json", b);
  size_t len;
  char *cfg = gc_test_slurp(pb, &len);
  cr_assert(cfg && strstr(cfg, "\"transport\": \"mpi\"") != NULL, "%s", cfg);
  cr_assert(strstr(cfg, "gathered to rank 0") != NULL, "%s", cfg);
  free(cfg);
  return b;
}

static void train_same(const char *algo, size_t nw)
{
  char tag[64], args[512];
  snprintf(tag, sizeof tag, "train-%s-%zu", algo, nw);
  snprintf(args, sizeof args, "--algorithm %s --density 0.01 --lr 0.05 "
           "--train-subset 240 --test-subset 100 --epochs 1 --seed 7", algo);
  train_both(tag, "mnist", nw, args);
}

Test(train_mpi, sgd) { train_same("sgd", 2); train_same("sgd", 4); }
Test(train_mpi, uni) { train_same("uni", 2); train_same("uni", 4); }
Test(train_mpi, bi) { train_same("bi", 2); train_same("bi", 4); }
Test(train_mpi, downlink) { train_same("downlink", 2); train_same("downlink", 4); }
Test(train_mpi, doublesqueeze) { train_same("doublesqueeze", 2); train_same("doublesqueeze", 4); }
Test(train_mpi, ef21) { train_same("ef21", 2); train_same("ef21", 4); }

/* Field f (0-based) of data row `row` (1-based) of a log.csv. */
static double log_field(const char *path, int row, int f)
{
  size_t len;
  char *csv = gc_test_slurp(path, &len);
  cr_assert(csv != NULL, "%s", path);
  const char *s = csv;
  for (int r = 0; r < row; r++) {
    s = strchr(s, '\n');
    cr_assert(s && s[1], "%s: no row %d", path, row);
    s++;
  }
  for (; f > 0; f--)
    s = strchr(s, ',') + 1;
  double v = strtod(s, NULL);
  free(csv);
  return v;
}

/* BatchNorm (fmnist-cnn: 16 + 32 channels, a mean and a variance each,
 * ns = 96 float32): the statistics travel every step, P messages up and P
 * back, so bytes_stats = steps x 2 P x 96 x 4 in both runs, and the model
 * file (which ends with the statistics) is the same. */
Test(train_mpi, batchnorm_statistics_are_counted_messages)
{
  const char *b = train_both("train-bn", "fmnist", 2, "--model fmnist-cnn "
                             "--algorithm bi --density 0.01 --lr 0.05 "
                             "--train-subset 80 --test-subset 50 --epochs 2 "
                             "--seed 3");
  char p[600];
  snprintf(p, sizeof p, "%s/log.csv", b);
  for (int r = 1; r <= 2; r++)
    cr_assert(eq(dbl, log_field(p, r, 13), 4.0 * 2 * 2 * 96 * 4), "row %d", r);
}

/* One epoch under mpirun, then --resume to three: every rank reloads its
 * own checkpoint file, and the final model is the uninterrupted one's.
 * A checkpoint is resumed with the transport that wrote it. */
Test(train_mpi, resume_equals_uninterrupted)
{
  const char *args = "--algorithm ef21 --density 0.01 --lr 0.05 "
                     "--train-subset 240 --test-subset 100 --epochs 3 --seed 5";
  const char *b = train_both("train-resume", "mnist", 2, args);
  char r[600], cmd[4096], out[16384], pa[700];
  snprintf(r, sizeof r, "%s-resumed", gc_test_tmp("train-resume"));
  const char *base = MPIRUN "%s train --data %s --workers 2 --algorithm ef21 "
    "--density 0.01 --lr 0.05 --train-subset 240 --test-subset 100 --seed 5 "
    "--quiet --out %s --transport mpi --epochs %d%s";
  snprintf(cmd, sizeof cmd, base, (size_t) 3, gradcomp, gc_test_data_dir(), r,
           1, "");
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  snprintf(pa, sizeof pa, "%s/checkpoint-e1-r2.bin", r);
  size_t len;
  char *ck = gc_test_slurp(pa, &len);
  cr_assert(ck != NULL, "no per-rank checkpoint %s", pa);
  free(ck);
  snprintf(cmd, sizeof cmd, base, (size_t) 3, gradcomp, gc_test_data_dir(), r,
           3, " --resume");
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  same_run(b, r);
  /* in one process, the per-rank checkpoint is refused by name */
  snprintf(cmd, sizeof cmd, "%s train --data %s --workers 2 --algorithm ef21 "
           "--density 0.01 --lr 0.05 --train-subset 240 --test-subset 100 "
           "--seed 5 --quiet --out %s --epochs 4 --resume", gradcomp,
           gc_test_data_dir(), r);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s", out);
  cr_assert(strstr(out, "resume it with --transport mpi") != NULL, "%s", out);
}

/* Under mpirun: a second job into a folder that holds a run, or whose
 * lock another process holds, is refused by rank 0 and the other ranks
 * stop with it (no hang, nothing changed, no stop record);
 * and two ranks' checkpoint files swapped are refused naming the rank
 * each file belongs to, not resumed into another model. */
Test(train_mpi, run_folder_and_rank_files_are_checked, .timeout = 240)
{
  need_mpirun();
  gc_test_need_dataset("mnist");
  char r[600], cmd[4096], out[16384], a[700], b[700], t[700];
  snprintf(r, sizeof r, "%s", gc_test_tmp("train-swap"));
  const char *base = "timeout 120 " MPIRUN "%s train --data %s --workers 2 "
    "--algorithm ef21 --density 0.01 --lr 0.05 --train-subset 240 "
    "--test-subset 100 --seed 5 --quiet --out %s --transport mpi --epochs %d%s";
  snprintf(cmd, sizeof cmd, base, (size_t) 3, gradcomp, gc_test_data_dir(), r,
           1, "");
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  snprintf(a, sizeof a, "%s/log.csv", r);
  size_t l0, l1;
  char *log0 = gc_test_slurp(a, &l0);
  cr_assert(log0 != NULL);
  snprintf(cmd, sizeof cmd, base, (size_t) 3, gradcomp, gc_test_data_dir(), r,
           2, "");
  int st = gc_test_run(cmd, out, sizeof out);
  cr_assert(st != 0 && st < 124 && strstr(out, "already holds a run"), "exit %d\n%s",
            st, out);
  char *log1 = gc_test_slurp(a, &l1);
  cr_assert(log1 && l1 == l0 && memcmp(log0, log1, l0) == 0, "log.csv changed");
  free(log1);
  /* nor a stop record: the job ended by rank 0's refusal, not by mpirun */
  snprintf(t, sizeof t, "%s/stopped.txt", r);
  cr_assert(gc_test_slurp(t, &l1) == NULL, "the refused job left %s", t);
  /* while another process holds the folder's lock (flock(1) here), even
   * --resume is refused, naming the folder */
  char held[4800];
  snprintf(held, sizeof held, "flock %s/.lock %s", r, cmd);
  char *rs = strstr(held, "--epochs 2");
  cr_assert(rs != NULL);
  memcpy(rs, "--resume  ", 10);
  st = gc_test_run(held, out, sizeof out);
  cr_assert(st == 2 && strstr(out, "is in use by another run"), "exit %d\n%s", st, out);
  log1 = gc_test_slurp(a, &l1);
  cr_assert(log1 && l1 == l0 && memcmp(log0, log1, l0) == 0, "log.csv changed");
  cr_assert(gc_test_slurp(t, &l1) == NULL, "the refused job left %s", t);
  free(log0);
  free(log1);
  snprintf(a, sizeof a, "%s/checkpoint-e1-r1.bin", r);
  snprintf(b, sizeof b, "%s/checkpoint-e1-r2.bin", r);
  snprintf(t, sizeof t, "%s/swap.bin", r);
  cr_assert(rename(a, t) == 0 && rename(b, a) == 0 && rename(t, b) == 0);
  snprintf(cmd, sizeof cmd, base, (size_t) 3, gradcomp, gc_test_data_dir(), r,
           2, " --resume");
  st = gc_test_run(cmd, out, sizeof out);
  cr_assert(st != 0 && st < 124, "exit %d\n%s", st, out);
  cr_assert(strstr(out, "checkpoint-e1-r1.bin: holds rank 2's state") ||
            strstr(out, "checkpoint-e1-r2.bin: holds rank 1's state"), "%s", out);
  /* put back, the run resumes */
  cr_assert(rename(a, t) == 0 && rename(b, a) == 0 && rename(t, b) == 0);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
}

/* train's network model options: both or neither, and valid values. */
Test(transport, train_net_options)
{
  char cmd[2048], out[4096];
  const char *g = gc_test_builddir("experiments/gradcomp");
  snprintf(cmd, sizeof cmd, "%s train --net-bandwidth 10Gbps --quiet --out %s",
           g, gc_test_tmp("train-net"));
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s", out);
  cr_assert(strstr(out, "needs both --net-bandwidth and --net-latency") != NULL,
            "%s", out);
  snprintf(cmd, sizeof cmd, "%s train --net-bandwidth 10Gbps --net-latency 5 "
           "--quiet --out %s", g, gc_test_tmp("train-net"));
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s", out);
  cr_assert(strstr(out, "--net-latency") != NULL, "%s", out);
}

/* Bad use: a rank count other than P+1, and no mpirun at all. */
Test(train_mpi, wrong_rank_count_and_no_mpirun)
{
  need_mpirun();
  char cmd[4096], out[16384];
  snprintf(cmd, sizeof cmd, MPIRUN "%s train --workers 4 --algorithm uni "
           "--train-subset 80 --quiet --out %s --transport mpi", (size_t) 3,
           gradcomp, gc_test_tmp("train-ranks"));
  cr_assert(ne(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(strstr(out, "need 5 ranks") != NULL, "%s", out);
  cr_assert(strstr(out, "mpirun -n 5") != NULL, "%s", out);
  snprintf(cmd, sizeof cmd, "env -u OMPI_COMM_WORLD_SIZE %s train --workers 4"
           " --quiet --out %s --transport mpi", gradcomp,
           gc_test_tmp("train-ranks"));
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s", out);
  cr_assert(strstr(out, "not started by mpirun") != NULL, "%s", out);
}

/* Rank `rank` killed mid-run: the job stops within 30 s with a non-zero
 * exit, mpirun names the dead rank and the others the epoch and step; the
 * log rows written stay whole; --resume under mpirun then ends with the
 * uninterrupted run's model, byte for byte (mpi_train_kill.sh). */
static void killed_rank_then_resume(int rank)
{
  need_mpirun();
  gc_test_need_dataset("mnist");
  char dir[512], cmd[4096], out[32768], name[16];
  snprintf(dir, sizeof dir, "%s-%d", gc_test_tmp("mpi-train-kill"), rank);
  snprintf(cmd, sizeof cmd, "sh '%s' '%s' '%s' '%s' %d",
           gc_test_srcdir("tests/mpi_train_kill.sh"), dir, gradcomp,
           gc_test_data_dir(), rank);
  gc_test_run(cmd, out, sizeof out);
  char *rc = strstr(out, "rc=");
  cr_assert(rc && rc[3] != '\n' && strncmp(rc, "rc=0\n", 5) != 0,
            "the run did not stop with a non-zero exit within 30 s: %s", out);
  snprintf(name, sizeof name, "rank %d", rank);
  cr_assert(strstr(out, name) != NULL, "%s", out);
  /* in its output line or, should mpirun drop that, in its stop record */
  cr_assert(strstr(out, "at step ") != NULL, "no rank named the step: %s",
            out);
  if (rank == 0) {
    /* rank 0 died at once: the workers' records say where the run was */
    const char *f = strstr(out, "stop_file stopped-r1.txt: ");
    cr_assert(f && strstr(f, "rank 1 (worker 0) stopped") &&
              strstr(f, " during epoch ") && strstr(f, " at step "),
              "worker rank 1 left no stop record: %s", out);
  }
  char *rows = strstr(out, "rows_at_stop=");
  cr_assert(rows && atoi(rows + 13) >= 2 && atoi(rows + 13) < 12,
            "the kill did not land mid-run: %s", out);
  char p[700];
  snprintf(p, sizeof p, "%s/log-at-stop.csv", dir);
  size_t len;
  char *csv = gc_test_slurp(p, &len);
  cr_assert(csv && len > 0 && csv[len - 1] == '\n', "the last row is cut");
  size_t fields = 0, want = 0, nrows = 0;
  for (size_t i = 0; i < len; i++) {
    if (csv[i] == ',')
      fields++;
    if (csv[i] == '\n') {
      if (nrows++ == 0)
        want = fields;
      cr_assert(eq(sz, fields, want), "row %zu has %zu commas", nrows, fields);
      fields = 0;
    }
  }
  free(csv);
  cr_assert(strstr(out, "resume_rc=0") != NULL, "%s", out);
  char a[600], b[600];
  snprintf(a, sizeof a, "%s/ref", dir);
  snprintf(b, sizeof b, "%s/run", dir);
  same_run(a, b);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  gc_test_run(cmd, out, sizeof out);
}

Test(train_mpi, killed_worker_then_resume, .timeout = 240)
{
  killed_rank_then_resume(2);
}

/* Rank 0 killed: mpirun names it, and the workers' own stop records keep
 * the epoch and step the run was at. */
Test(train_mpi, killed_server_then_resume, .timeout = 240)
{
  killed_rank_then_resume(0);
}

/* The MPI watchdog in training (mpi_stop.sh): rank RANK stopped (SIGSTOP)
 * after two epochs, --mpi-timeout 5.  The job ends within the limit the
 * message states (by construction max(5 s, 50 x the slowest step), twice
 * that for a wait on rank 0) plus 30 s for mpirun's teardown on a loaded
 * machine, with exit 1, the silent rank, the epoch and the step named on
 * stderr and in the reporting rank's stop record; --resume under mpirun
 * then ends with the uninterrupted run's model and log, byte for byte,
 * and removes every stop record.  `who` is the reporting rank's name of
 * the silent one, `record` the start of the name of the stop record that
 * must hold it, `wrong` a blame no rank may print: a worker waiting on
 * rank 0 while rank 0 waits on the stopped worker must not name rank 0
 * (it waits twice the limit), and rank 0, continued by the job's end
 * after a stop of its own, must not name the workers (its own stopped
 * time is not their silence). */
static void stopped_rank(int rank, const char *who, const char *record,
                         const char *wrong)
{
  need_mpirun();
  gc_test_need_dataset("mnist");
  char dir[512], cmd[4096], out[32768];
  snprintf(dir, sizeof dir, "%s-%d", gc_test_tmp("mpi-train-stop"), rank);
  snprintf(cmd, sizeof cmd, "sh '%s' '%s' '%s' '%s' %d",
           gc_test_srcdir("tests/mpi_stop.sh"), dir, gradcomp,
           gc_test_data_dir(), rank);
  gc_test_run(cmd, out, sizeof out);
  cr_assert(strstr(out, "rc=1\n") != NULL,
            "the watchdog did not end the job with exit 1: %s", out);
  char *rows = strstr(out, "rows_at_stop=");
  cr_assert(rows && atoi(rows + 13) >= 2 && atoi(rows + 13) < 12,
            "the stop did not land mid-run: %s", out);
  cr_assert(strstr(out, who) != NULL, "%s", out);
  cr_assert(strstr(out, wrong) == NULL, "%s", out);
  cr_assert(strstr(out, "ended the job during epoch ") != NULL, "%s", out);
  cr_assert(strstr(out, " at step ") != NULL, "%s", out);
  double lim = watchdog_limit(out);
  const char *s = strstr(out, "stop_s=");
  cr_assert(lim >= 5 && s && atof(s + 7) <= lim + 30,
            "limit %g s, stopped after %s", lim, s ? s + 7 : "?");
  char want[256];
  snprintf(want, sizeof want, "stop_file %s", record);
  int found = 0;
  for (const char *f = strstr(out, want); f && !found;
       f = strstr(f + 1, want)) {
    const char *w = strstr(f, who), *nl = strchr(f, '\n');
    found = w && (!nl || w < nl);
  }
  cr_assert(found, "no stop record %s* holds the watchdog's message: %s",
            record, out);
  char p[700];
  snprintf(p, sizeof p, "%s/log-at-stop.csv", dir);
  size_t len;
  char *csv = gc_test_slurp(p, &len);
  cr_assert(csv && len > 0 && csv[len - 1] == '\n', "the last row is cut");
  free(csv);
  cr_assert(strstr(out, "resume_rc=0") != NULL, "%s", out);
  cr_assert(strstr(out, "left: ") == NULL, "a stop record outlived the "
            "finished run: %s", out);
  char a[600], b[600];
  snprintf(a, sizeof a, "%s/ref", dir);
  snprintf(b, sizeof b, "%s/run", dir);
  same_run(a, b);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  gc_test_run(cmd, out, sizeof out);
}

/* A stopped worker: rank 0 sees it first-hand and reports it. */
Test(train_mpi, stopped_worker_watchdog_then_resume, .timeout = 600)
{
  stopped_rank(2, "rank 0 heard nothing from rank 2 (worker 1)",
               "stopped.txt", "heard nothing from rank 0");
}

/* A stopped rank 0: the workers' watchdogs report it (after twice the
 * limit) in their own stop records, since rank 0 writes nothing; the one
 * that reports first aborts the job, which may end the other before its
 * own watchdog speaks. */
Test(train_mpi, stopped_server_watchdog_then_resume, .timeout = 600)
{
  stopped_rank(0, "heard nothing from rank 0 (the server)", "stopped-r",
               "rank 0 heard nothing");
}

/* Under mpirun -n 3 without --transport mpi each process would run the
 * whole job into the same files: refused before anything is written, for
 * train (also after a --config file), theory and compress; a --config
 * file's `transport mpi` counts (that run then fails on its rank count). */
Test(train_mpi, mpirun_without_transport_refused)
{
  need_mpirun();
  char cmd[4096], out[16384], dir[600];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("mpi-notransport"));
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
  gc_test_run(cmd, out, sizeof out);
  const char *runs[] = {
    "train --workers 2 --train-subset 80 --quiet --out %s/run",
    "theory trajectory --problem quadratic:P=2,d=8 --algorithm uni "
      "--compressor topk --k 2 --lr 0.1 --steps 3 --csv %s/run",
    "compress topk --k 1 --in %s/x.npy --out %s/run",
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    char args[1024];
    snprintf(args, sizeof args, runs[i], dir, dir);
    snprintf(cmd, sizeof cmd, MPIRUN "%s %s", (size_t) 3, gradcomp, args);
    cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s: %s", args,
              out);
    cr_assert(strstr(out, "started as one of 3 processes by an MPI launcher")
              && strstr(out, "pass --transport mpi"), "%s: %s", args, out);
    snprintf(cmd, sizeof cmd, "test -e '%s/run'", dir);
    cr_assert(ne(int, gc_test_run(cmd, out, sizeof out), 0),
              "%s wrote %s/run", args, dir);
  }
  snprintf(cmd, sizeof cmd, "printf 'transport mpi\\nworkers 4\\n' > '%s/c.conf'"
           " && " MPIRUN "%s train --config '%s/c.conf' --train-subset 80 "
           "--quiet --out '%s/run'", dir, (size_t) 3, gradcomp, dir, dir);
  cr_assert(ne(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(strstr(out, "need 5 ranks") != NULL, "%s", out);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  gc_test_run(cmd, out, sizeof out);
}
