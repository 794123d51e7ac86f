/* transport_mpi.c -- the MPI transport (gc_transport_mpi.h): moves the
 * step's messages between rank 0 (the server) and ranks 1..P (the
 * workers); sim.c's driver does everything else, the same way in every
 * rank. */
#include <stdio.h>
#include <stdlib.h>

#include "gc_errno.h"
#include "gc_transport_mpi.h"

enum { TAG_UP = 12 };

struct gc_mpi {
  MPI_Comm comm;
  int rank, size;
  size_t P, upcap, downcap;
  int allgather;
  gc_transport tr;
  uint8_t *rbuf;         /* P * upcap: received uplinks                 */
  MPI_Request *req;      /* [P]                                         */
  MPI_Status *st;        /* [P]                                         */
  int *counts, *displs;  /* [P+1] Allgatherv                            */
  uint64_t *lens;        /* [P+1] Allgather of the lengths              */
  uint64_t up_sent, up_received, down_received;
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

static int ps_gather(gc_mpi *m, uint32_t step, const uint8_t **up,
                     size_t *up_len)
{
  if (m->rank > 0) {
    size_t p = (size_t) m->rank - 1;
    MPI_TRY(MPI_Send(up[p], (int) up_len[p], MPI_BYTE, 0, TAG_UP, m->comm),
            "Send (uplink)", step);
    m->up_sent += up_len[p];
    return GC_SUCCESS;
  }
  for (size_t p = 0; p < m->P; p++)
    MPI_TRY(MPI_Irecv(m->rbuf + p * m->upcap, (int) m->upcap, MPI_BYTE,
                      (int) p + 1, TAG_UP, m->comm, &m->req[p]),
            "Irecv (uplink)", step);
  int rc = MPI_Waitall((int) m->P, m->req, m->st);
  if (rc == MPI_ERR_IN_STATUS) {
    for (size_t p = 0; p < m->P; p++)
      if (m->st[p].MPI_ERROR != MPI_SUCCESS && m->st[p].MPI_ERROR != MPI_ERR_PENDING) {
        GC_ERRORF(GC_EMPI, "MPI receive of the uplink of rank %zu (worker %zu)"
                  " failed at step %u (error class %d; a message above %zu"
                  " bytes is truncated)", p + 1, p, (unsigned) step,
                  m->st[p].MPI_ERROR, m->upcap);
      }
  }
  if (rc != MPI_SUCCESS)
    return mpi_fail(rc, "Waitall (uplinks)", step);
  for (size_t p = 0; p < m->P; p++) {
    int count;
    MPI_TRY(MPI_Get_count(&m->st[p], MPI_BYTE, &count), "Get_count", step);
    const uint8_t *got = m->rbuf + p * m->upcap;
    up[p] = got;
    up_len[p] = (size_t) count;
    m->up_received += (uint64_t) count;
  }
  return GC_SUCCESS;
}

static int allgather_gather(gc_mpi *m, uint32_t step, const uint8_t **up,
                            size_t *up_len)
{
  uint64_t mine = m->rank > 0 ? up_len[m->rank - 1] : 0;
  const uint8_t *send = m->rank > 0 ? up[m->rank - 1] : m->rbuf;
  MPI_TRY(MPI_Allgather(&mine, 1, MPI_UINT64_T, m->lens, 1, MPI_UINT64_T,
                        m->comm), "Allgather (lengths)", step);
  m->counts[0] = m->displs[0] = 0;
  for (size_t q = 1; q <= m->P; q++) {
    if (m->lens[q] > m->upcap)
      GC_ERRORF(GC_EMPI, "rank %zu announced an uplink of %llu bytes at step"
                " %u, above the %zu a message of this configuration can "
                "have", q, (unsigned long long) m->lens[q], (unsigned) step,
                m->upcap);
    m->counts[q] = (int) m->lens[q];
    m->displs[q] = (int) ((q - 1) * m->upcap);
  }
  MPI_TRY(MPI_Allgatherv(send, (int) mine, MPI_BYTE, m->rbuf, m->counts,
                         m->displs, MPI_BYTE, m->comm),
          "Allgatherv (uplinks)", step);
  m->up_sent += mine;
  for (size_t p = 0; p < m->P; p++) {
    const uint8_t *got = m->rbuf + p * m->upcap;
    size_t len = (size_t) m->counts[p + 1];
    if ((int) p + 1 != m->rank)
      m->up_received += len;
    up[p] = got;
    up_len[p] = len;
  }
  return GC_SUCCESS;
}

static int mpi_gather_up(void *state, uint32_t step, const uint8_t **up,
                         size_t *up_len)
{
  gc_mpi *m = state;
  return m->allgather ? allgather_gather(m, step, up, up_len)
                      : ps_gather(m, step, up, up_len);
}

static int mpi_bcast_down(void *state, uint32_t step, uint8_t *down,
                          size_t *len)
{
  gc_mpi *m = state;
  if (m->allgather)
    return GC_SUCCESS;   /* every rank ran the server step */
  uint64_t n = m->rank == 0 ? *len : 0;
  MPI_TRY(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, m->comm), "Bcast (length)",
          step);
  if (n > m->downcap)
    GC_ERRORF(GC_EMPI, "rank 0 announced a downlink of %llu bytes at step "
              "%u, above the %zu a message of this configuration can have",
              (unsigned long long) n, (unsigned) step, m->downcap);
  MPI_TRY(MPI_Bcast(down, (int) n, MPI_BYTE, 0, m->comm), "Bcast (downlink)",
          step);
  if (m->rank > 0)
    m->down_received += n;
  *len = (size_t) n;
  return GC_SUCCESS;
}

/* The driver's own messages: one MPI_Gatherv to rank 0 (which sends
 * nothing; a worker rank's one message is at buf), worker p's bytes at
 * buf + p len there; the other way one MPI_Bcast. */
static int mpi_gather_aux(void *state, uint32_t step, uint8_t *buf,
                          size_t len)
{
  gc_mpi *m = state;
  if (len > (size_t) 2147483647 / (m->P ? m->P : 1))
    GC_ERROR("MPI transport: a message above 2^31 bytes", GC_EUNSUP);
  m->counts[0] = m->displs[0] = 0;
  for (size_t q = 1; q <= m->P; q++) {
    m->counts[q] = (int) len;
    m->displs[q] = (int) ((q - 1) * len);
  }
  MPI_TRY(MPI_Gatherv(m->rank > 0 ? (const void *) buf : MPI_IN_PLACE,
                      m->rank > 0 ? (int) len : 0, MPI_BYTE, buf,
                      m->counts, m->displs, MPI_BYTE, 0, m->comm),
          "Gatherv (driver messages)", step);
  return GC_SUCCESS;
}

static int mpi_bcast_aux(void *state, uint32_t step, uint8_t *buf,
                         size_t len)
{
  gc_mpi *m = state;
  if (len > (size_t) 2147483647)
    GC_ERROR("MPI transport: a message above 2^31 bytes", GC_EUNSUP);
  MPI_TRY(MPI_Bcast(buf, (int) len, MPI_BYTE, 0, m->comm),
          "Bcast (driver message)", step);
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
  free(m->rbuf);
  free(m->req);
  free(m->st);
  free(m->counts);
  free(m->displs);
  free(m->lens);
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
  m->allgather = cfg->kind == GC_ALGO_ALLGATHER;
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
  int ok = (!need_rbuf || (m->rbuf = malloc(m->P * m->upcap))) &&
           (m->req = calloc(m->P, sizeof *m->req)) &&
           (m->st = calloc(m->P, sizeof *m->st)) &&
           (m->counts = calloc(m->P + 1, sizeof *m->counts)) &&
           (m->displs = calloc(m->P + 1, sizeof *m->displs)) &&
           (m->lens = calloc(m->P + 1, sizeof *m->lens));
  if (!ok) {
    gc_mpi_free(m);
    GC_ERROR_NULL("MPI transport: out of memory", GC_ENOMEM);
  }
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
int gc_mpi_rank(const gc_mpi *m) { return m->rank; }
MPI_Comm gc_mpi_comm(const gc_mpi *m) { return m->comm; }

void gc_mpi_bytes(const gc_mpi *m, uint64_t *up_sent, uint64_t *up_received,
                  uint64_t *down_received)
{
  *up_sent = m->up_sent;
  *up_received = m->up_received;
  *down_received = m->down_received;
}
