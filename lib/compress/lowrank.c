/* lowrank.c -- PowerSGD (Vogels, Karimireddy, Jaggi, NeurIPS 2019, arXiv
 * 1905.13727): a rank-r approximation of each layer's gradient matrix from
 * one step of subspace (power) iteration with a warm start.  One source
 * (lowrank_source.c) is instantiated for float32 and float64.
 *
 * Shapes.  The caller splits the vector into segments (offset, rows, cols)
 * through gc_compressor_params.segments.  A segment with rows > 1,
 * cols > 1 and r (rows + cols) < rows cols is compressed as the row-major
 * matrix M (rows x cols) it holds; a conv weight is out x (in kh kw).
 * Every other segment (biases, BatchNorm, small matrices), and every entry
 * that no segment covers, is sent raw, as the reference implementation
 * does with tensors that would not shrink.  Segments may come in any
 * order but must not overlap or leave [0, n); a segment with rows > 1 and
 * cols > 1 must have r <= min(rows, cols) even if it ends up raw.
 *
 * One compress call, per matrix in offset order:
 *   P   = M Q            Q (cols x r) is the instance's warm start
 *   P^  = orth(P)        Gram-Schmidt on the columns 0, 1, ..., r-1
 *   Q   = M^T P^         sent with P^; its columns, normalised, become the
 *                        next call's warm start
 *   C(M) = P^ Q^T = P^ P^^T M, the orthogonal projection of M onto
 *   span(P^): ||M - C(M)||^2 = ||M||^2 - ||C(M)||^2 <= ||M||^2, and M is
 *   reproduced exactly when rank M <= r.  Repeated calls on a fixed M are
 *   subspace iteration and converge to its best rank-r approximation.
 * The first Q has standard normal entries drawn at allocation from
 * gc_rng_normal keyed by (seed, stream, step slot = matrix index m,
 * element j cols + i for entry (i, j)): deterministic, and the same on
 * every worker that shares (seed, stream) -- the algorithm layer keeps one
 * stream for this type, as the reference shares its seed.  The warm start
 * is stored with unit columns: Gram-Schmidt is invariant to a positive
 * scaling of the columns of P, so this changes nothing but keeps M Q from
 * growing with the gradient's norm over the steps.
 * Gram-Schmidt runs twice per column (classical Gram-Schmidt with
 * reorthogonalisation, in double), which leaves P^ orthonormal to working
 * precision.  A column whose norm after projection is at most sqrt(eps)
 * of its norm before (eps of the message precision) lies in the span of
 * the earlier ones, up to rounding, or is zero: it is sent as zero and
 * its warm-start column is kept, so a zero or rank-deficient gradient does
 * not lose the subspace.
 *
 * This is the per-worker (parameter-server) form: each worker
 * orthogonalises its own P and sends P^ and Q; the receiver decodes
 * P^ Q^T.  The all-reduce form of the paper averages P across workers
 * before orthogonalising and then averages Q, two communication rounds
 * that belong to the collective transport and are not done here.
 * Error feedback: C is a biased compressor, so the memories of gc_ef.h
 * (e = acc - C(acc)) work unchanged.
 *
 * Wire format (little-endian; W = 4 for float32 messages, 8 for float64):
 *   u8 tag 0xE0 | u8 precision 32 or 64 | u32 rank r          H = 6 bytes
 *   then the blocks in offset order:
 *     matrix  P^ column by column (r columns of rows values), then Q column
 *             by column (r columns of cols values)
 *     raw     the values of a maximal run of entries outside every
 *             compressed matrix
 *   length = H + W (sum over compressed matrices of r (rows + cols)
 *                   + number of raw entries)
 * which is exact for every message (gc_compressor_max_bytes is the float64
 * length).  Decoders check the tag, precision, rank, exact length and that
 * every value is finite before touching y.
 *
 * Arithmetic: the products are CBLAS gemm calls on workspaces sized at
 * allocation (no allocation per call; BLAS dimensions fit in int because a
 * matrix has rows, cols >= 2 and rows cols <= n < 2^32).  An instance
 * serves one caller at a time: compress updates the warm start, and
 * decode uses the instance's scratch, as random-K's decoder does. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gc_vec.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_compressor_internal.h"
#include "gc_template.h"
#include "gc_rng.h"

enum { HDR = 6, TAG_POWERSGD = 0xE0 };

/* A maximal run of raw entries, or one compressed matrix. */
typedef struct lrblock {
  size_t off, len;       /* entries x[off .. off + len)                  */
  size_t rows, cols;     /* matrix shape (raw: 1 x len)                  */
  int matrix;
  size_t m;              /* matrix index (RNG step slot, keep flags)     */
  size_t qoff;           /* its r x cols warm start in q and qnew        */
} lrblock;

typedef struct lrstate {
  size_t n, r;
  lrblock *blk;
  size_t nblk, nmat;
  size_t nvalues;        /* values in every message                      */
  size_t qlen;           /* sum over matrices of r cols                  */
  double *q;             /* warm start, column j of matrix m at
                            q[qoff + j cols], unit norm                  */
  void *qnew;            /* this call's Q (REAL), qlen entries           */
  void *pw, *qw;         /* scratch: r x max rows, r x max cols (REAL)   */
  uint8_t *keep;         /* nmat x r: column j of P^ is nonzero          */
} lrstate;

static void lr_release(void *state)
{
  lrstate *s = state;
  free(s->blk);
  free(s->q);
  free(s->qnew);
  free(s->pw);
  free(s->qw);
  free(s->keep);
}

static int compressed(size_t rows, size_t cols, size_t r)
{
  return rows > 1 && cols > 1 && r * (rows + cols) < rows * cols;
}

/* Segment indices sorted by offset (insertion sort: layer lists are short
 * and usually sorted already; the order of equal offsets is irrelevant,
 * they overlap and are rejected). */
static void sort_by_offset(const gc_segment *seg, size_t *ord, size_t ns)
{
  for (size_t i = 0; i < ns; i++) {
    size_t j = i, v = i;
    while (j > 0 && seg[ord[j - 1]].offset > seg[v].offset) {
      ord[j] = ord[j - 1];
      j--;
    }
    ord[j] = v;
  }
}

/* Check every segment; list the blocks (raw runs merged) in offset order. */
static int plan(lrstate *s, const gc_compressor_params *p, size_t *ord)
{
  const gc_segment *seg = p->segments;
  size_t ns = p->nsegments, n = s->n, r = s->r;
  for (size_t i = 0; i < ns; i++) {
    const gc_segment *g = &seg[i];
    if (g->rows == 0 || g->cols == 0)
      GC_ERRORF(GC_EINVAL, "powersgd: segment %zu (offset %zu) is empty "
                "(%zu x %zu)", i, g->offset, g->rows, g->cols);
    if (g->offset >= n || g->rows > n || g->cols > (n - g->offset) / g->rows)
      GC_ERRORF(GC_EINVAL, "powersgd: segment %zu (%zu x %zu at offset %zu) "
                "does not fit in the vector of length %zu", i, g->rows,
                g->cols, g->offset, n);
    size_t mn = g->rows < g->cols ? g->rows : g->cols;
    if (g->rows > 1 && g->cols > 1 && r > mn)
      GC_ERRORF(GC_EINVAL, "powersgd: rank %zu exceeds min(rows, cols) = %zu "
                "of segment %zu (%zu x %zu at offset %zu)", r, mn, i,
                g->rows, g->cols, g->offset);
  }
  for (size_t i = 0; i < ns; i++)
    ord[i] = i;
  sort_by_offset(seg, ord, ns);
  size_t end = 0, pos = 0, nb = 0, nm = 0, q = 0, nv = 0;
  for (size_t t = 0; t < ns; t++) {
    const gc_segment *g = &seg[ord[t]];
    if (t > 0 && g->offset < end)
      GC_ERRORF(GC_EINVAL, "powersgd: segment %zu (offset %zu) overlaps "
                "segment %zu, which ends at %zu", ord[t], g->offset,
                ord[t - 1], end);
    end = g->offset + g->rows * g->cols;
    if (!compressed(g->rows, g->cols, r))
      continue;   /* part of a raw run */
    if (g->offset > pos) {
      s->blk[nb++] = (lrblock){ pos, g->offset - pos, 1, g->offset - pos,
                                0, 0, 0 };
      nv += g->offset - pos;
    }
    s->blk[nb++] = (lrblock){ g->offset, g->rows * g->cols, g->rows, g->cols,
                              1, nm++, q };
    q += r * g->cols;
    nv += r * (g->rows + g->cols);
    pos = end;
  }
  if (pos < n) {
    s->blk[nb++] = (lrblock){ pos, n - pos, 1, n - pos, 0, 0, 0 };
    nv += n - pos;
  }
  s->nblk = nb;
  s->nmat = nm;
  s->qlen = q;
  s->nvalues = nv;
  return GC_SUCCESS;
}

/* Normalise the columns of the r x cols warm start (double). */
static void unit_columns(double *q, size_t cols, size_t r)
{
  for (size_t j = 0; j < r; j++) {
    double *c = q + j * cols, ss = 0;
    for (size_t i = 0; i < cols; i++)
      ss += c[i] * c[i];
    if (ss > 0) {
      double inv = 1.0 / sqrt(ss);
      for (size_t i = 0; i < cols; i++)
        c[i] *= inv;
    }
  }
}

static int lr_init(void *state, size_t n, const gc_compressor_params *p)
{
  lrstate *s = state;
  if (!p->segments || p->nsegments == 0)
    GC_ERROR("powersgd needs layer shapes: params.segments is empty (give "
             "one (offset, rows, cols) segment per weight matrix; biases "
             "may be left out or listed as 1 x len)", GC_EINVAL);
  if (p->rank == 0)
    GC_ERROR("powersgd: rank must be at least 1 (got 0)", GC_EINVAL);
  s->n = n;
  s->r = p->rank;
  /* at most 2 blocks per segment (a raw gap, the matrix) plus a tail */
  size_t *ord = malloc(p->nsegments * sizeof *ord);
  s->blk = malloc((2 * p->nsegments + 1) * sizeof *s->blk);
  if (!ord || !s->blk) {
    free(ord);
    lr_release(s);
    GC_ERROR("powersgd: out of memory for the segment plan", GC_ENOMEM);
  }
  int st = plan(s, p, ord);
  free(ord);
  if (st != GC_SUCCESS) {
    lr_release(s);
    return st;
  }
  size_t rmax = 1, cmax = 1, r = s->r;
  for (size_t b = 0; b < s->nblk; b++)
    if (s->blk[b].matrix) {
      rmax = s->blk[b].rows > rmax ? s->blk[b].rows : rmax;
      cmax = s->blk[b].cols > cmax ? s->blk[b].cols : cmax;
    }
  /* REAL workspaces take double's size so one instance serves both */
  s->q = malloc((s->qlen ? s->qlen : 1) * sizeof(double));
  s->qnew = malloc((s->qlen ? s->qlen : 1) * sizeof(double));
  s->pw = malloc(r * rmax * sizeof(double));
  s->qw = malloc(r * cmax * sizeof(double));
  s->keep = calloc(s->nmat * r + 1, 1);
  if (!s->q || !s->qnew || !s->pw || !s->qw || !s->keep) {
    lr_release(s);
    GC_ERROR("powersgd: out of memory for the workspaces", GC_ENOMEM);
  }
  for (size_t b = 0; b < s->nblk; b++) {
    const lrblock *k = &s->blk[b];
    if (!k->matrix)
      continue;
    double *q = s->q + k->qoff;
    for (size_t e = 0; e < r * k->cols; e++)
      q[e] = gc_rng_normal(p->seed, p->stream, (uint32_t) k->m, e);
    unit_columns(q, k->cols, r);
  }
  return GC_SUCCESS;
}

static size_t lr_max_bytes(const void *state)
{
  return HDR + 8 * ((const lrstate *) state)->nvalues;
}

#define REAL float
#define SFX f32
#define PREC 32
#define GEMM cblas_sgemm
#define EPS FLT_EPSILON
#include "lowrank_source.c"

#define REAL double
#define SFX f64
#define PREC 64
#define GEMM cblas_dgemm
#define EPS DBL_EPSILON
#include "lowrank_source.c"

/* The warm start is the only state that outlives a call. */
static size_t lr_state_bytes(const void *state)
{
  return ((const lrstate *) state)->qlen * sizeof(double);
}

static void lr_state_save(const void *state, void *buf)
{
  const lrstate *s = state;
  memcpy(buf, s->q, s->qlen * sizeof *s->q);
}

static void lr_state_load(void *state, const void *buf)
{
  lrstate *s = state;
  memcpy(s->q, buf, s->qlen * sizeof *s->q);
}

static const gc_compressor_type powersgd_type = {
  "powersgd",
  "PowerSGD: rank-r (--rank) power step per layer matrix, warm start; "
  "needs layer shapes",
  GC_COMP_BIASED | GC_COMP_RANDOM | GC_COMP_NEEDS_SHAPE,
  sizeof(lrstate), lr_init, lr_release, lr_max_bytes,
  psgd_encode_f32, psgd_encode_f64, psgd_decode_f32, psgd_decode_f64,
  lr_state_bytes, lr_state_save, lr_state_load };

const gc_compressor_type *const gc_compressor_powersgd = &powersgd_type;

const gc_compressor_type *const gc__lowrank_types[] = { &powersgd_type, NULL };
