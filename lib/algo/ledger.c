/* ledger.c -- the byte ledger: one row per message (step, worker,
 * direction, bytes), with running totals per step and per worker so that
 * queries do not rescan the rows.  Broadcasts are also kept once per step
 * (gc_ledger_record_broadcast), beside the per-receiver downlink rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_algo.h"
#include "gc_errno.h"

typedef struct row {
  uint32_t step;
  uint32_t dir;
  size_t worker;     /* GC_LEDGER_BROADCAST for a broadcast total */
  uint64_t bytes;
} row;

struct gc_ledger {
  size_t workers;
  row *rows;
  size_t nrows, caprows;
  uint64_t *step_tot;   /* [3 * nsteps]: up, down, broadcast of steps */
  size_t nsteps;        /* first_step .. first_step + nsteps - 1       */
  uint32_t first_step;
  uint64_t *worker_tot; /* [2 * workers] */
  uint64_t tot[3];
};

gc_ledger *gc_ledger_alloc(size_t workers)
{
  if (workers == 0)
    GC_ERROR_NULL("ledger needs at least one worker", GC_EINVAL);
  gc_ledger *l = calloc(1, sizeof *l);
  if (!l)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  l->workers = workers;
  l->worker_tot = calloc(2 * workers, sizeof *l->worker_tot);
  if (!l->worker_tot) {
    free(l);
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  }
  return l;
}

void gc_ledger_free(gc_ledger *l)
{
  if (!l)
    return;
  free(l->rows);
  free(l->step_tot);
  free(l->worker_tot);
  free(l);
}

void gc_ledger_clear(gc_ledger *l)
{
  l->nrows = 0;
  if (l->step_tot)
    memset(l->step_tot, 0, 3 * l->nsteps * sizeof *l->step_tot);
  memset(l->worker_tot, 0, 2 * l->workers * sizeof *l->worker_tot);
  memset(l->tot, 0, sizeof l->tot);
}

/* Widen the per-step totals to cover `step`.  They span the steps
 * recorded, not 0 .. step: a simulator resumed from a checkpoint at step s
 * must not pay 24 bytes for each step before s (a damaged checkpoint's
 * counter near 2^32 asked for 96 GB). */
static int cover_step(gc_ledger *l, uint32_t step)
{
  if (l->nsteps == 0)
    l->first_step = step;
  else if (step >= l->first_step && step - l->first_step < l->nsteps)
    return GC_SUCCESS;
  size_t lo = step < l->first_step ? step : l->first_step;
  size_t end = (size_t) l->first_step + l->nsteps;   /* one past the last */
  if (step >= end)
    end = (size_t) step + 1;
  size_t ns = l->nsteps ? l->nsteps : 64;
  while (ns < end - lo)
    ns *= 2;
  uint64_t *t = realloc(l->step_tot, 3 * ns * sizeof *t);
  if (!t)
    GC_ERROR("out of memory", GC_ENOMEM);
  size_t shift = l->first_step - lo;   /* new steps in front of the old */
  memmove(t + 3 * shift, t, 3 * l->nsteps * sizeof *t);
  memset(t, 0, 3 * shift * sizeof *t);
  memset(t + 3 * (shift + l->nsteps), 0,
         3 * (ns - shift - l->nsteps) * sizeof *t);
  l->step_tot = t;
  l->nsteps = ns;
  l->first_step = (uint32_t) lo;
  return GC_SUCCESS;
}

/* Grow amortised: the ledger is written by the transport, once per
 * message, not inside a step function. */
static int add_row(gc_ledger *l, uint32_t step, size_t worker, int dir,
                   size_t bytes)
{
  if (l->nrows == l->caprows) {
    size_t cap = l->caprows ? 2 * l->caprows : 256;
    row *r = realloc(l->rows, cap * sizeof *r);
    if (!r)
      GC_ERROR("out of memory", GC_ENOMEM);
    l->rows = r;
    l->caprows = cap;
  }
  GC_TRY(cover_step(l, step));
  l->rows[l->nrows++] = (row) { step, (uint32_t) dir, worker,
                                (uint64_t) bytes };
  l->step_tot[3 * (size_t) (step - l->first_step) + (size_t) dir] += bytes;
  l->tot[dir] += bytes;
  return GC_SUCCESS;
}

int gc_ledger_record(gc_ledger *l, uint32_t step, size_t worker, int dir,
                     size_t bytes)
{
  if (worker >= l->workers)
    GC_ERRORF(GC_EINVAL, "ledger: worker %zu out of range (P = %zu)", worker,
              l->workers);
  if (dir != GC_UP && dir != GC_DOWN)
    GC_ERRORF(GC_EINVAL, "ledger: unknown direction %d", dir);
  GC_TRY(add_row(l, step, worker, dir, bytes));
  l->worker_tot[2 * worker + (size_t) dir] += bytes;
  return GC_SUCCESS;
}

int gc_ledger_record_broadcast(gc_ledger *l, uint32_t step, size_t bytes)
{
  return add_row(l, step, GC_LEDGER_BROADCAST, GC_LEDGER_BCAST, bytes);
}

uint64_t gc_ledger_total(const gc_ledger *l, int dir)
{
  return (dir >= 0 && dir <= GC_LEDGER_BCAST) ? l->tot[dir] : 0;
}

uint64_t gc_ledger_step_total(const gc_ledger *l, uint32_t step, int dir)
{
  if (dir < 0 || dir > GC_LEDGER_BCAST || step < l->first_step ||
      step - l->first_step >= l->nsteps)
    return 0;
  return l->step_tot[3 * (size_t) (step - l->first_step) + (size_t) dir];
}

uint64_t gc_ledger_worker_total(const gc_ledger *l, size_t worker, int dir)
{
  if (worker >= l->workers || (dir != GC_UP && dir != GC_DOWN))
    return 0;
  return l->worker_tot[2 * worker + (size_t) dir];
}

size_t gc_ledger_rows(const gc_ledger *l) { return l->nrows; }

int gc_ledger_write_csv(const gc_ledger *l, const char *path)
{
  FILE *f = fopen(path, "a");
  if (!f)
    GC_ERRORF(GC_EIO, "cannot open %s for appending", path);
  static const char *names[] = { "up", "down", "broadcast" };
  long pos = ftell(f);
  if (pos == 0)
    fputs("step,worker,direction,bytes\n", f);
  for (size_t i = 0; i < l->nrows; i++) {
    const row *r = &l->rows[i];
    if (r->worker == GC_LEDGER_BROADCAST)
      fprintf(f, "%u,all,%s,%llu\n", (unsigned) r->step, names[r->dir],
              (unsigned long long) r->bytes);
    else
      fprintf(f, "%u,%llu,%s,%llu\n", (unsigned) r->step,
              (unsigned long long) r->worker, names[r->dir],
              (unsigned long long) r->bytes);
  }
  int bad = ferror(f);
  if (fclose(f) != 0 || bad)
    GC_ERRORF(GC_EIO, "cannot write %s", path);
  return GC_SUCCESS;
}
