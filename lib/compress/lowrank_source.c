/* lowrank_source.c -- PowerSGD for one precision.  Included twice by
 * lowrank.c (GSL template style) with REAL = float / double, SFX = f32 /
 * f64, PREC = the header's precision byte, GEMM = cblas_sgemm /
 * cblas_dgemm and EPS = the machine epsilon, all undefined again at the
 * end; not compiled on its own.  The method and the byte layout are
 * documented at the top of lowrank.c. */

#define W ((size_t) sizeof(REAL))

/* Orthonormalise the r rows of p (each a column of P, length rows) in
 * order 0..r-1: classical Gram-Schmidt in double, run twice per column.
 * keep[j] = 0 marks a column that was (numerically) dependent or zero and
 * is now zero.  Returns nonzero when a norm overflowed. */
static int FN(orthonormalise)(REAL *p, size_t rows, size_t r, uint8_t *keep)
{
  const double drop = sqrt((double) EPS);
  for (size_t j = 0; j < r; j++) {
    REAL *v = p + j * rows;
    double n0 = gc__vnorm(W, v, rows);
    if (!isfinite(n0))
      return 1;
    for (int pass = 0; pass < 2; pass++)
      for (size_t k = 0; k < j; k++) {
        if (!keep[k])
          continue;
        const REAL *u = p + k * rows;
        double d = 0;
        for (size_t i = 0; i < rows; i++)
          d += (double) u[i] * (double) v[i];
        for (size_t i = 0; i < rows; i++)
          v[i] = (REAL) ((double) v[i] - d * (double) u[i]);
      }
    double nn = gc__vnorm(W, v, rows);
    if (nn > drop * n0) {
      double inv = 1.0 / nn;
      for (size_t i = 0; i < rows; i++)
        v[i] = (REAL) ((double) v[i] * inv);
      keep[j] = 1;
    } else {
      memset(v, 0, rows * W);
      keep[j] = 0;
    }
  }
  return 0;
}

/* Rows of the r x len block v (stored column by column) with a nonzero
 * entry in some column: for P^ the nonzero rows of C(M), for Q its
 * nonzero columns. */
static size_t FN(nonzero_lines)(const REAL *v, size_t len, size_t r)
{
  size_t c = 0;
  for (size_t i = 0; i < len; i++) {
    int nz = 0;
    for (size_t j = 0; j < r && !nz; j++)
      nz = v[j * len + i] != 0;
    c += (size_t) nz;
  }
  return c;
}

static int FN(psgd_encode)(void *state, const REAL *x, uint32_t step,
                             uint8_t *buf, size_t cap, size_t *len,
                             gc_compress_info *info)
{
  lrstate *s = state;
  size_t n = s->n, r = s->r, need = HDR + W * s->nvalues;
  (void) step;   /* the warm start, not the step, carries the history */
  size_t bad = gc__vfirst_nonfinite(W, x, n);
  if (bad < n)
    GC_ERRORF(GC_EDOM, "powersgd: x[%zu] = %g is not finite", bad,
              (double) x[bad]);
  if (cap < need)
    GC_ERRORF(GC_ENOSPACE, "powersgd: buffer of %zu bytes, need %zu", cap,
              need);
  REAL *pw = s->pw, *qw = s->qw, *qnew = s->qnew;
  uint8_t *out = buf + HDR;
  size_t nnz = 0;
  for (size_t b = 0; b < s->nblk; b++) {
    const lrblock *k = &s->blk[b];
    const REAL *M = x + k->off;
    if (!k->matrix) {
      for (size_t i = 0; i < k->len; i++)
        nnz += M[i] != 0;
      memcpy(out, M, W * k->len);
      out += W * k->len;
      continue;
    }
    size_t rows = k->rows, cols = k->cols;
    uint8_t *keep = s->keep + k->m * r;
    REAL *qn = qnew + k->qoff;
    for (size_t e = 0; e < r * cols; e++)
      qw[e] = (REAL) s->q[k->qoff + e];
    /* P^T = Q^T M^T: r x rows, one column of P per row */
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int) r, (int) rows,
         (int) cols, 1, qw, (int) cols, M, (int) cols, 0, pw, (int) rows);
    if (gc__vfirst_nonfinite(W, pw, r * rows) < r * rows ||
        FN(orthonormalise)(pw, rows, r, keep))
      GC_ERRORF(GC_EDOM, "powersgd: M Q overflowed for the %zu x %zu matrix "
                "at offset %zu", rows, cols, k->off);
    /* Q^T = P^^T M: r x cols */
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) r, (int) cols,
         (int) rows, 1, pw, (int) rows, M, (int) cols, 0, qn, (int) cols);
    if (gc__vfirst_nonfinite(W, qn, r * cols) < r * cols)
      GC_ERRORF(GC_EDOM, "powersgd: M^T P overflowed for the %zu x %zu "
                "matrix at offset %zu", rows, cols, k->off);
    memcpy(out, pw, W * r * rows);
    out += W * r * rows;
    memcpy(out, qn, W * r * cols);
    out += W * r * cols;
    nnz += FN(nonzero_lines)(pw, rows, r) * FN(nonzero_lines)(qn, cols, r);
  }
  /* Success: only now does the warm start move (unit columns; a dropped
   * or zero column keeps its previous direction). */
  for (size_t b = 0; b < s->nblk; b++) {
    const lrblock *k = &s->blk[b];
    if (!k->matrix)
      continue;
    for (size_t j = 0; j < r; j++) {
      const REAL *c = qnew + k->qoff + j * k->cols;
      double nc = gc__vnorm(W, c, k->cols);
      if (!s->keep[k->m * r + j] || !(nc > 0) || !isfinite(nc))
        continue;
      double *q = s->q + k->qoff + j * k->cols;
      for (size_t i = 0; i < k->cols; i++)
        q[i] = (double) c[i] / nc;
    }
  }
  uint32_t r32 = (uint32_t) r;
  buf[0] = TAG_POWERSGD;
  buf[1] = PREC;
  memcpy(buf + 2, &r32, 4);
  *len = need;
  info->nnz = nnz;   /* exact unless sums of r products cancel */
  info->selected = s->nvalues;
  info->loops = 0;
  return GC_SUCCESS;
}

static int FN(psgd_decode)(const void *state, const uint8_t *buf,
                             size_t len, uint32_t step, REAL scale, REAL *y)
{
  const lrstate *s = state;
  size_t r = s->r, need = HDR + W * s->nvalues;
  (void) step;
  GC_TRY(gc__check_msg(buf, len, HDR, TAG_POWERSGD, PREC, "powersgd"));
  uint32_t r32;
  memcpy(&r32, buf + 2, 4);
  if (r32 != r)
    GC_ERRORF(GC_ECORRUPT, "powersgd: message of rank %u, decoder has rank "
              "%zu", r32, r);
  GC_TRY(gc__check_msg_len(len, need, "powersgd"));
  for (size_t i = 0; i < s->nvalues; i++) {
    REAL v;
    memcpy(&v, buf + HDR + W * i, W);
    if (!isfinite(v))
      GC_ERRORF(GC_ECORRUPT, "powersgd: value %zu of the message is not "
                "finite", i);
  }
  /* the factors are copied into the instance's scratch (aligned for
   * BLAS): one decode at a time per instance */
  REAL *pw = s->pw, *qw = s->qw;
  const uint8_t *in = buf + HDR;
  for (size_t b = 0; b < s->nblk; b++) {
    const lrblock *k = &s->blk[b];
    REAL *yk = y + k->off;
    if (!k->matrix) {
      for (size_t i = 0; i < k->len; i++) {
        REAL v;
        memcpy(&v, in + W * i, W);
        yk[i] += scale * v;
      }
      in += W * k->len;
      continue;
    }
    size_t rows = k->rows, cols = k->cols;
    memcpy(pw, in, W * r * rows);
    in += W * r * rows;
    memcpy(qw, in, W * r * cols);
    in += W * r * cols;
    /* y += scale P^ Q^T, with P^ stored as its transpose (r x rows) */
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int) rows, (int) cols,
         (int) r, scale, pw, (int) rows, qw, (int) cols, 1, yk, (int) cols);
  }
  return GC_SUCCESS;
}

#undef W
#undef REAL
#undef SFX
#undef PREC
#undef GEMM
#undef EPS
