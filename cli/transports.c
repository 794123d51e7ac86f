/* transports.c -- the transports the front end can run a step over, by
 * name (gc_transports.h): one row each with its --help line, what a
 * build needs for it, and its constructor.  A new transport is one row
 * here and its implementation of lib/algo/gc_transport.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_transport.h"
#include "gc_transports.h"
#ifdef HAVE_MPI
#include "gc_transport_mpi.h"
#endif

int gc_mpi_timeout_option(const char *cmd, const char *opt, const char *val,
                          double *out)
{
  if (gc_cli_double(cmd, opt, val, out))
    return 2;
  if (!(*out >= 0 && *out <= GC_MPI_TIMEOUT_MAX))
    return gc_cli_usage_error(cmd, "%s: %s seconds is outside [0, %g] (0: "
                              "no watchdog)", opt, val, GC_MPI_TIMEOUT_MAX);
  return 0;
}

/* In-process: every worker and the server here; sim_step calls them
 * directly (gc_sim_alloc), so there is no transport object. */
static int inproc_open(const gc_algo_config *cfg, double timeout, gc_transport_link *l)
{
  (void) cfg;
  (void) timeout;
  l->tr = NULL;
  l->proc = 0;
  l->impl = NULL;
  return GC_SUCCESS;
}

static void inproc_close(gc_transport_link *l)
{
  (void) l;
}

#ifdef HAVE_MPI
/* MPI: P+1 ranks of MPI_COMM_WORLD, rank 0 the server (gc_transport_mpi.h).
 * MPI_Init here where the command did not call it; MPI_Finalize and
 * MPI_Abort are the command's, which knows how its job ends. */
static int mpi_open(const gc_algo_config *cfg, double timeout, gc_transport_link *l)
{
  int up = 0;
  MPI_Initialized(&up);
  if (!up && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
    gc_errorf(__FILE__, __LINE__, GC_EMPI, "MPI_Init failed");
    return GC_EMPI;
  }
  gc_mpi *m = gc_mpi_alloc(MPI_COMM_WORLD, cfg);
  if (!m)
    return gc_last_error_code();
  if (timeout >= 0)
    gc_mpi_set_timeout(m, timeout);   /* checked when parsed */
  l->tr = gc_mpi_transport(m);
  l->proc = gc_mpi_rank(m);
  l->impl = m;
  return GC_SUCCESS;
}

static void mpi_close(gc_transport_link *l)
{
  gc_mpi_free(l->impl);
  l->impl = NULL;
  l->tr = NULL;
}
#endif

static const gc_transport_kind kinds[] = {
  { "inproc", "every worker and the server in this process", NULL, 0, 0, inproc_open,
    inproc_close },
#ifdef HAVE_MPI
  { "mpi", "under mpirun -n P+1: rank 0 the server, rank p+1 worker p", NULL, 1, 1, mpi_open,
    mpi_close },
#else
  { "mpi", "under mpirun -n P+1: rank 0 the server, rank p+1 worker p",
    "this build has no MPI (configure found no ompi-c; install libopenmpi-dev and"
    " reconfigure)", 1, 1, NULL, NULL },
#endif
};
enum { NKINDS = sizeof kinds / sizeof kinds[0] };

const gc_transport_kind *gc_transport_kind_by_name(const char *name)
{
  for (size_t i = 0; i < NKINDS; i++)
    if (!strcmp(kinds[i].name, name))
      return &kinds[i];
  return NULL;
}

const gc_transport_kind *gc_transport_kind_default(void)
{
  return &kinds[0];
}

const char *gc_transport_kind_names(const char *sep)
{
  static char buf[256];
  buf[0] = '\0';
  for (size_t i = 0; i < NKINDS; i++) {
    size_t l = strlen(buf);
    snprintf(buf + l, sizeof buf - l, "%s%s", i ? sep : "", kinds[i].name);
  }
  return buf;
}

int gc_transport_choose(const char *cmd, const char *val, const gc_transport_kind **out)
{
  const gc_transport_kind *k = gc_transport_kind_by_name(val);
  if (!k)
    return gc_cli_usage_error(cmd, "--transport: unknown transport '%s' (%s)", val,
                              gc_transport_kind_names(", "));
  if (k->missing)
    return gc_cli_usage_error(cmd, "--transport %s: %s", val, k->missing);
  *out = k;
  return 0;
}

void gc_transport_usage(FILE *out, const char *indent)
{
  for (size_t i = 0; i < NKINDS; i++) {
    char flag[48];
    snprintf(flag, sizeof flag, "--transport %s", kinds[i].name);
    fprintf(out, "%s%-19s %s%s%s\n", indent, flag, kinds[i].help,
            i == 0 ? " (default)" : "", kinds[i].missing ? " (not in this build)" : "");
  }
}
