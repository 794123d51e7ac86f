/* transport_mpi.c -- the MPI transport (gc_transport_mpi.h): moves the
 * step's messages between rank 0 (the server) and ranks 1..P (the
 * workers); sim.c's driver does everything else, the same way in every
 * rank.  Every message is a non-blocking point-to-point request, and every
 * wait polls its requests against the watchdog's deadline (await), so a
 * rank that stops answering ends the run with its name instead of hanging
 * the others. */
#define _POSIX_C_SOURCE 200809L   /* nanosleep */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gc_algo_rules.h"
#include "gc_errno.h"
#include "gc_clock.h"
#include "gc_transport_mpi.h"

/* One tag per kind of message: each pair of ranks sees its messages of a
 * kind in the order they were sent (MPI's non-overtaking rule), and a
 * message can never be taken for one of another kind. */
enum { TAG_UP = 12, TAG_DOWN = 13, TAG_AUX_UP = 14, TAG_AUX_DOWN = 15 };

struct gc_mpi {
  MPI_Comm comm;
  int rank, size;
  size_t P, upcap, downcap;
  int allgather;
  gc_transport tr;
  uint8_t *rbuf;         /* P * upcap: received uplinks                 */
  MPI_Request *req;      /* [2P]: the requests of one wait              */
  MPI_Status *st;        /* [2P]                                        */
  int *peer;             /* [2P]: the rank each request waits on        */
  uint8_t *recv;         /* [2P]: 1 for a receive, 0 for a send         */
  int *idx;              /* [2P]: MPI_Testsome's completed indices      */
  MPI_Status *tst;       /* [2P]: and their statuses                    */
  uint64_t up_sent, up_received, down_received;
  /* the watchdog */
  double timeout;        /* seconds; 0: wait for ever                   */
  double last_step;      /* gc__now() at the last gather_up, 0 before   */
  double slowest;        /* the longest step seen (seconds)             */
  int broken;            /* a wait failed: requests may still be pending */
};

/* Report an MPI error code with the call and step it came from. */
static int mpi_fail(int err, const char *call, uint32_t step)
{
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
    snprintf(msg, sizeof msg, "error %d", err);
  GC_ERRORF(GC_EMPI, "MPI %s failed at step %u: %s", call, (unsigned) step,
            msg);
}

#define MPI_TRY(call, name, step)                                        \
  do {                                                                   \
    int mpi_rc_ = (call);                                                \
    if (mpi_rc_ != MPI_SUCCESS)                                          \
      return mpi_fail(mpi_rc_, name, step);                              \
  } while (0)

/* "rank 2 (worker 1)", "rank 0 (the server)" */
static void rank_name(char *buf, size_t cap, int r)
{
  if (r == 0)
    snprintf(buf, cap, "rank 0 (the server)");
  else
    snprintf(buf, cap, "rank %d (worker %d)", r, r - 1);
}

/* The longest a wait may last: the timeout, or GC_MPI_TIMEOUT_STEPS times
 * the slowest step this rank has seen, whichever is longer, so that a run
 * whose steps (or whose epoch's evaluation, which falls inside the step
 * after it) are slow is not taken for a hung one.  A wait on rank 0 gets
 * twice that: rank 0 may itself be waiting up to the limit on another
 * rank before it can send, and so the rank that sees the silent one
 * first-hand reports it first. */
static double wait_limit(const gc_mpi *m, int on_server)
{
  double lim = fmax(m->timeout, GC_MPI_TIMEOUT_STEPS * m->slowest);
  return on_server ? 2 * lim : lim;
}

/* Complete the n requests m->req[0, n) (request i waits on rank
 * m->peer[i]) into m->st.  MPI_Testsome polls them: for the first 0.1 s
 * between sched_yield()s (a step's exchange is over within it, and an
 * oversubscribed rank gives its core to the rank it waits on), then with
 * 1 ms sleeps, so that a rank waiting on a stopped one does not spin at
 * 100% CPU; 1 ms keeps a long transfer's progress calls frequent.  Past
 * the watchdog's limit: GC_EMPI naming the ranks still silent, the
 * message awaited (`what`) and the step.  Then the pending receives are
 * cancelled, so that no late message lands in a buffer the caller frees
 * on its way to MPI_Abort; one already under way cannot be, which is why
 * the job must end, and m->broken keeps m->rbuf alive till then. */
static int await_polls(gc_mpi *m, int n, const char *what, uint32_t step);

static int await(gc_mpi *m, int n, const char *what, uint32_t step)
{
  int st = await_polls(m, n, what, step);
  if (st == GC_SUCCESS)
    return st;
  m->broken = 1;
  for (int i = 0; i < n; i++)
    if (m->recv[i] && m->req[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&m->req[i]);
      MPI_Request_free(&m->req[i]);
    }
  return st;
}

static int await_polls(gc_mpi *m, int n, const char *what, uint32_t step)
{
  double last = gc__now(), waited = 0;
  int on_server = 1;
  for (int i = 0; i < n; i++)
    on_server &= m->peer[i] == 0;
  double limit = wait_limit(m, on_server);
  for (int left = n; left > 0;) {
    int got = 0;
    int rc = MPI_Testsome(n, m->req, &got, m->idx, m->tst);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
      return mpi_fail(rc, "Testsome", step);
    if (got == MPI_UNDEFINED)
      break;
    for (int j = 0; j < got; j++) {
      int i = m->idx[j];
      m->st[i] = m->tst[j];
      int err = m->tst[j].MPI_ERROR;
      if (rc == MPI_ERR_IN_STATUS && err != MPI_SUCCESS) {
        char who[48], msg[MPI_MAX_ERROR_STRING];
        int len = 0, cls = err;
        rank_name(who, sizeof who, m->peer[i]);
        if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
          snprintf(msg, sizeof msg, "error %d", err);
        MPI_Error_class(err, &cls);
        GC_ERRORF(GC_EMPI, "MPI: the %s exchanged with %s failed at step %u:"
                  " %s%s", what, who, (unsigned) step, msg,
                  cls == MPI_ERR_TRUNCATE ? " (longer than the largest "
                  "message of this configuration)" : "");
      }
    }
    left -= got;
    if (left == 0 || got > 0)
      continue;
    /* Time this process did not run (stopped itself, then continued by
     * the job's end) is no one else's silence: a poll comes every 1 ms,
     * so a longer gap counts as at most 1 s. */
    double now = gc__now();
    waited += fmin(now - last, 1.0);
    last = now;
    if (m->timeout > 0 && waited > limit) {
      char who[160] = "", one[48];
      int named = 0, more = 0;
      for (int i = 0; i < n; i++) {
        if (m->req[i] == MPI_REQUEST_NULL)
          continue;
        int dup = 0;   /* a peer with a send and a receive pending */
        for (int j = 0; j < i; j++)
          dup |= m->req[j] != MPI_REQUEST_NULL && m->peer[j] == m->peer[i];
        if (dup)
          continue;
        if (named == 3) {
          more++;
          continue;
        }
        rank_name(one, sizeof one, m->peer[i]);
        size_t l = strlen(who);
        snprintf(who + l, sizeof who - l, "%s%s", named ? ", " : "", one);
        named++;
      }
      if (more)
        snprintf(who + strlen(who), sizeof who - strlen(who), " and %d more",
                 more);
      GC_ERRORF(GC_EMPI, "MPI watchdog: rank %d heard nothing from %s for"
                " %.1f s, waiting on the %s of step %u; the limit is %.3g s ="
                " %smax(the timeout %.3g s, %d x the slowest step so far "
                "%.3g s); %s stopped, hung or cut off", m->rank, who, waited,
                what, (unsigned) step, limit, on_server ? "2 x " : "",
                m->timeout, GC_MPI_TIMEOUT_STEPS, m->slowest,
                named + more > 1 ? "those ranks are" : "that rank is");
    }
    if (waited < 0.1) {
      sched_yield();
    } else {
      struct timespec ms = { 0, 1000000 };
      nanosleep(&ms, NULL);
    }
  }
  return GC_SUCCESS;
}

/* Post a receive of up to cap bytes from `from` as request *n. */
static int post_recv(gc_mpi *m, int *n, void *buf, size_t cap, int from,
                     int tag, uint32_t step)
{
  m->peer[*n] = from;
  m->recv[*n] = 1;
  MPI_TRY(MPI_Irecv(buf, (int) cap, MPI_BYTE, from, tag, m->comm,
                    &m->req[*n]), "Irecv", step);
  ++*n;
  return GC_SUCCESS;
}

static int post_send(gc_mpi *m, int *n, const void *buf, size_t len, int to,
                     int tag, uint32_t step)
{
  m->peer[*n] = to;
  m->recv[*n] = 0;
  MPI_TRY(MPI_Isend(buf, (int) len, MPI_BYTE, to, tag, m->comm, &m->req[*n]),
          "Isend", step);
  ++*n;
  return GC_SUCCESS;
}

/* The length of completed receive i. */
static size_t got_bytes(const gc_mpi *m, int i)
{
  int count = 0;
  MPI_Get_count(&m->st[i], MPI_BYTE, &count);
  return count > 0 ? (size_t) count : 0;
}

/* A step begins: time the one before (from one gather_up to the next). */
static void step_tick(gc_mpi *m)
{
  double now = gc__now();
  if (m->last_step > 0 && now - m->last_step > m->slowest)
    m->slowest = now - m->last_step;
  m->last_step = now;
}

static int ps_gather(gc_mpi *m, uint32_t step, const uint8_t **up,
                     size_t *up_len)
{
  int n = 0;
  if (m->rank > 0) {
    size_t p = (size_t) m->rank - 1;
    GC_TRY(post_send(m, &n, up[p], up_len[p], 0, TAG_UP, step));
    GC_TRY(await(m, n, "uplink", step));
    m->up_sent += up_len[p];
    return GC_SUCCESS;
  }
  for (size_t p = 0; p < m->P; p++)
    GC_TRY(post_recv(m, &n, m->rbuf + p * m->upcap, m->upcap, (int) p + 1,
                     TAG_UP, step));
  GC_TRY(await(m, n, "uplink", step));
  for (size_t p = 0; p < m->P; p++) {
    up[p] = m->rbuf + p * m->upcap;
    up_len[p] = got_bytes(m, (int) p);
    m->up_received += up_len[p];
  }
  return GC_SUCCESS;
}

/* Every worker's uplink to every other rank (rank 0 sends none, as every
 * rank runs the server step on the same bytes). */
static int allgather_gather(gc_mpi *m, uint32_t step, const uint8_t **up,
                            size_t *up_len)
{
  int n = 0;
  for (size_t p = 0; p < m->P; p++)
    if ((int) p + 1 != m->rank)
      GC_TRY(post_recv(m, &n, m->rbuf + p * m->upcap, m->upcap, (int) p + 1,
                       TAG_UP, step));
  int nrecv = n;
  if (m->rank > 0) {
    size_t me = (size_t) m->rank - 1;
    for (int q = 0; q <= (int) m->P; q++)
      if (q != m->rank)
        GC_TRY(post_send(m, &n, up[me], up_len[me], q, TAG_UP, step));
  }
  GC_TRY(await(m, n, "uplink", step));
  if (m->rank > 0)
    m->up_sent += up_len[m->rank - 1];
  for (int i = 0; i < nrecv; i++) {
    size_t p = (size_t) m->peer[i] - 1;
    up[p] = m->rbuf + p * m->upcap;
    up_len[p] = got_bytes(m, i);
    m->up_received += up_len[p];
  }
  return GC_SUCCESS;
}

static int mpi_gather_up(void *state, uint32_t step, const uint8_t **up,
                         size_t *up_len)
{
  gc_mpi *m = state;
  step_tick(m);
  return m->allgather ? allgather_gather(m, step, up, up_len)
                      : ps_gather(m, step, up, up_len);
}

/* Rank 0's downlink to each worker; its length is the message's. */
static int mpi_bcast_down(void *state, uint32_t step, uint8_t *down,
                          size_t *len)
{
  gc_mpi *m = state;
  if (m->allgather)
    return GC_SUCCESS;   /* every rank ran the server step */
  int n = 0;
  if (m->rank == 0) {
    for (int q = 1; q <= (int) m->P; q++)
      GC_TRY(post_send(m, &n, down, *len, q, TAG_DOWN, step));
    return await(m, n, "downlink", step);
  }
  GC_TRY(post_recv(m, &n, down, m->downcap, 0, TAG_DOWN, step));
  GC_TRY(await(m, n, "downlink", step));
  *len = got_bytes(m, 0);
  m->down_received += *len;
  return GC_SUCCESS;
}

/* The driver's own messages: each worker rank's len bytes at buf to rank
 * 0 (which sends nothing), worker p's at buf + p len there; the other way
 * rank 0's len bytes to every worker. */
static int mpi_gather_aux(void *state, uint32_t step, uint8_t *buf,
                          size_t len)
{
  gc_mpi *m = state;
  if (len > (size_t) 2147483647 / (m->P ? m->P : 1))
    GC_ERROR("MPI transport: a message above 2^31 bytes", GC_EUNSUP);
  int n = 0;
  if (m->rank > 0) {
    GC_TRY(post_send(m, &n, buf, len, 0, TAG_AUX_UP, step));
  } else {
    for (size_t p = 0; p < m->P; p++)
      GC_TRY(post_recv(m, &n, buf + p * len, len, (int) p + 1, TAG_AUX_UP,
                       step));
  }
  GC_TRY(await(m, n, "driver message", step));
  for (int i = 0; m->rank == 0 && i < n; i++)
    if (got_bytes(m, i) != len)
      GC_ERRORF(GC_EMPI, "rank %d sent a driver message of %zu bytes at step"
                " %u, not %zu", m->peer[i], got_bytes(m, i), (unsigned) step,
                len);
  return GC_SUCCESS;
}

static int mpi_bcast_aux(void *state, uint32_t step, uint8_t *buf,
                         size_t len)
{
  gc_mpi *m = state;
  if (len > (size_t) 2147483647)
    GC_ERROR("MPI transport: a message above 2^31 bytes", GC_EUNSUP);
  int n = 0;
  if (m->rank == 0) {
    for (int q = 1; q <= (int) m->P; q++)
      GC_TRY(post_send(m, &n, buf, len, q, TAG_AUX_DOWN, step));
    return await(m, n, "driver message", step);
  }
  GC_TRY(post_recv(m, &n, buf, len, 0, TAG_AUX_DOWN, step));
  GC_TRY(await(m, n, "driver message", step));
  if (got_bytes(m, 0) != len)
    GC_ERRORF(GC_EMPI, "rank 0 sent a driver message of %zu bytes at step "
              "%u, not %zu", got_bytes(m, 0), (unsigned) step, len);
  return GC_SUCCESS;
}

static const gc_transport_type mpi_type = { "mpi", mpi_gather_up,
                                            mpi_bcast_down, mpi_gather_aux,
                                            mpi_bcast_aux };

void gc_mpi_free(gc_mpi *m)
{
  if (!m)
    return;
  if (m->comm != MPI_COMM_NULL)
    MPI_Comm_free(&m->comm);
  if (!m->broken)   /* else a pending receive may still write it */
    free(m->rbuf);
  free(m->req);
  free(m->st);
  free(m->peer);
  free(m->recv);
  free(m->idx);
  free(m->tst);
  free(m);
}

gc_mpi *gc_mpi_alloc(MPI_Comm comm, const gc_algo_config *cfg)
{
  if (gc_algo_config_check(cfg) != GC_SUCCESS)
    return NULL;
  gc_mpi *m = calloc(1, sizeof *m);
  if (!m)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  m->comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(comm, &m->comm);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_rank(m->comm, &m->rank);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_size(m->comm, &m->size);
  if (rc != MPI_SUCCESS) {
    gc_mpi_free(m);
    mpi_fail(rc, "communicator setup", 0);
    return NULL;
  }
  m->P = cfg->workers;
  if ((size_t) m->size != m->P + 1) {
    gc_errorf(__FILE__, __LINE__, GC_EMPI, "MPI transport: %zu workers need "
              "%zu ranks (rank 0 the server), the communicator has %d",
              cfg->workers, cfg->workers + 1, m->size);
    gc_mpi_free(m);
    return NULL;
  }
  m->allgather = gc__algo(cfg->kind)->collective == GC__COLL_ALLGATHER;
  m->upcap = gc_algo_max_up_bytes(cfg);
  m->downcap = gc_algo_max_down_bytes(cfg);
  if (!m->upcap || !m->downcap) {
    gc_mpi_free(m);
    return NULL;
  }
  if ((m->P * m->upcap) > (size_t) 2147483647 ||
      m->downcap > (size_t) 2147483647) {
    gc_mpi_free(m);
    GC_ERROR_NULL("MPI transport: messages above 2^31 bytes (MPI int counts)",
                  GC_EUNSUP);
  }
  int need_rbuf = m->rank == 0 || m->allgather;
  /* the most requests of one wait: an allgather worker's P-1 receives
   * and P sends */
  size_t nr = 2 * m->P;
  int ok = (!need_rbuf || (m->rbuf = malloc(m->P * m->upcap))) &&
           (m->req = calloc(nr, sizeof *m->req)) &&
           (m->st = calloc(nr, sizeof *m->st)) &&
           (m->peer = calloc(nr, sizeof *m->peer)) &&
           (m->recv = calloc(nr, sizeof *m->recv)) &&
           (m->idx = calloc(nr, sizeof *m->idx)) &&
           (m->tst = calloc(nr, sizeof *m->tst));
  if (!ok) {
    gc_mpi_free(m);
    GC_ERROR_NULL("MPI transport: out of memory", GC_ENOMEM);
  }
  m->timeout = GC_MPI_TIMEOUT_DEFAULT;
  m->tr.type = &mpi_type;
  m->tr.state = m;
  if (m->rank == 0) {
    m->tr.worker_lo = m->tr.worker_hi = 0;
  } else {
    m->tr.worker_lo = (size_t) m->rank - 1;
    m->tr.worker_hi = (size_t) m->rank;
  }
  m->tr.server = m->rank == 0 || m->allgather;
  return m;
}

const gc_transport *gc_mpi_transport(const gc_mpi *m) { return &m->tr; }

int gc_mpi_set_timeout(gc_mpi *m, double seconds)
{
  if (!(seconds >= 0 && seconds <= GC_MPI_TIMEOUT_MAX))
    GC_ERRORF(GC_EINVAL, "MPI timeout %g s: must lie in [0, %g] seconds (0: "
              "no limit)", seconds, GC_MPI_TIMEOUT_MAX);
  m->timeout = seconds;
  return GC_SUCCESS;
}
int gc_mpi_rank(const gc_mpi *m) { return m->rank; }
MPI_Comm gc_mpi_comm(const gc_mpi *m) { return m->comm; }

void gc_mpi_bytes(const gc_mpi *m, uint64_t *up_sent, uint64_t *up_received,
                  uint64_t *down_received)
{
  *up_sent = m->up_sent;
  *up_received = m->up_received;
  *down_received = m->down_received;
}
