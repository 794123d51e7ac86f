/* wire_source.c -- type-generic half of wire.c, included once per REAL
 * (float, double) with SFX (f32, f64), GSL templates_on.h style; both are
 * undefined at the end. */

/* Values [lo, hi) of a message in one pass, copied and counted: x[idx[j]]
 * * factor (the nonzeros of x[idx[j]]), or with idx NULL x[j] as it is;
 * returns the nonzeros among them. */
static size_t FN(put_vals)(uint8_t *v, const uint32_t *idx, const REAL *x,
                           REAL factor, size_t lo, size_t hi)
{
  size_t nz = 0;
  if (!idx) {
    for (size_t j = lo; j < hi; j++) {
      memcpy(v + j * sizeof(REAL), x + j, sizeof(REAL));
      nz += x[j] != 0;
    }
    return nz;
  }
  for (size_t j = lo; j < hi; j++) {
    /* sparse indices outrun the hardware prefetcher: ask ahead */
    if (j + 128 < hi)
      __builtin_prefetch(x + idx[j + 128]);
    REAL xj = x[idx[j]], val = xj * factor;
    nz += xj != 0;
    memcpy(v + j * sizeof(REAL), &val, sizeof(REAL));
  }
  return nz;
}

/* Every value of a message (put_vals over [0, c)), in pieces on the
 * threads where the message is large. */
static size_t FN(put_all_vals)(uint8_t *v, const uint32_t *idx, const REAL *x,
                               REAL factor, size_t c)
{
  int T = gc__wire_threads(c);
  if (T == 1)   /* no parallel region at all: small messages are many */
    return FN(put_vals)(v, idx, x, factor, 0, c);
  size_t np = (c + WIRE_PIECE - 1) / WIRE_PIECE, nz = 0;
  #pragma omp parallel for schedule(static) num_threads(T) reduction(+ : nz)
  for (size_t j = 0; j < np; j++)
    nz += FN(put_vals)(v, idx, x, factor, j * WIRE_PIECE,
                       c - j * WIRE_PIECE < WIRE_PIECE ? c : (j + 1) * WIRE_PIECE);
  return nz;
}

/* The header and index section of a message of c values (implicit: the
 * receiver knows the indices); *v [out] where the values start.  On one
 * thread the delta codes are written while they are counted, below limit
 * (what of buf may be written before the values are). */
static int FN(put_head)(uint8_t type, size_t n, const uint32_t *idx, size_t c,
                        int implicit, uint8_t *buf, size_t cap, const uint8_t *limit,
                        size_t *len, uint8_t **v)
{
  size_t isec = 0;
  wire_plan pl = { .T = 1 };
  int coding, written = 0;
  if (implicit)
    coding = GC__IDX_IMPLICIT;
  else if (delta_may_win(n, c) && gc__wire_threads(c) == 1)
    coding = gc__wire_pick(n, c, delta_write(buf + GC__WIRE_HDR, limit, idx, c, &written),
                           &isec);
  else
    coding = choose_plan(n, idx, c, &isec, &pl);
  GC_TRY(start_message(buf, cap, type, sizeof(REAL), coding, c, isec, len));
  if (!(coding == GC__IDX_DELTA && written))
    put_indices(buf + GC__WIRE_HDR, coding, n, idx, c, &pl);
  *v = buf + GC__WIRE_HDR + isec;
  return GC_SUCCESS;
}

int FN(gc__wire_encode)(uint8_t type, size_t n, const uint32_t *idx, size_t c,
                        int implicit, const REAL *x, REAL factor,
                        uint8_t *buf, size_t cap, size_t *len, size_t *nnz)
{
  uint8_t *v;
  GC_TRY(FN(put_head)(type, n, idx, c, implicit, buf, cap, buf + cap, len, &v));
  *nnz = FN(put_all_vals)(v, idx, x, factor, c);
  return GC_SUCCESS;
}

int FN(gc__wire_encode_vals)(uint8_t type, size_t n, const uint32_t *idx,
                             size_t c, const REAL *val, uint8_t *buf, size_t cap,
                             size_t *len, size_t *nnz)
{
  uint8_t *v;
  GC_TRY(FN(put_head)(type, n, idx, c, 0, buf, cap, buf + cap, len, &v));
  *nnz = FN(put_all_vals)(v, NULL, val, 1, c);
  return GC_SUCCESS;
}

static size_t FN(move_down_par)(uint8_t *v, const REAL *val, size_t c, int T);

/* gc__wire_encode_vals of the concatenation of P pieces (pi[j], pv[j],
 * pc[j] entries), which stay where they lie: each piece's delta codes
 * start where the pieces before it end, so the threads code and copy
 * their pieces at once, with no move joining them first.  With staged,
 * the pieces' values lie in buf past every index section
 * (gc__wire_stage), piece j + 1's past piece j's: they move down in piece
 * order (a piece's destination ends below the next piece's source), each
 * on the threads (FN(move_down_par)). */
static int FN(encode_pieces)(uint8_t type, size_t n, int P, const uint32_t *const *pi,
                             const REAL *const *pv, const size_t *pc, int staged, uint8_t *buf,
                             size_t cap, size_t *len, size_t *nnz)
{
  size_t c = 0, at[WIRE_PAR_MAX + 1], bytes[WIRE_PAR_MAX];
  int first = -1;   /* the first piece with an entry */
  for (int j = 0; j < P; j++) {
    at[j] = c;
    c += pc[j];
    if (first < 0 && pc[j])
      first = j;
  }
  at[P] = c;
  if (P == 1 || first < 0) {
    int f = first < 0 ? 0 : first;
    return staged ? FN(gc__wire_encode_staged)(type, n, pi[f], c, pv[f], buf, cap, len, nnz)
                  : FN(gc__wire_encode_vals)(type, n, pi[f], c, pv[f], buf, cap, len, nnz);
  }
  /* the entry before each piece's first (UINT32_MAX: none), for its gap */
  uint32_t before[WIRE_PAR_MAX];
  uint32_t last = UINT32_MAX;
  for (int j = 0; j < P; j++) {
    before[j] = last;
    if (pc[j])
      last = pi[j][pc[j] - 1];
  }
  size_t delta = SIZE_MAX, isec;
  if (delta_may_win(n, c)) {
    #pragma omp parallel for schedule(static) num_threads(P)
    for (int j = 0; j < P; j++)
      bytes[j] = !pc[j] ? 0
                 : gc__leb_len(before[j] == UINT32_MAX ? pi[j][0] : pi[j][0] - before[j] - 1)
                       + (pc[j] > 1 ? gap_bytes(pi[j], 1, pc[j]) : 0);
    delta = 0;
    for (int j = 0; j < P; j++)
      delta += bytes[j];
  }
  int coding = gc__wire_pick(n, c, delta, &isec);
  GC_TRY(start_message(buf, cap, type, sizeof(REAL), coding, c, isec, len));
  uint8_t *p = buf + GC__WIRE_HDR, *v = p + isec, *code[WIRE_PAR_MAX];
  if (coding == GC__IDX_DELTA) {
    code[0] = p;
    for (int j = 1; j < P; j++)
      code[j] = code[j - 1] + bytes[j - 1];
  } else if (coding == GC__IDX_BITMAP) {   /* pieces may share a byte: one thread */
    memset(p, 0, (n + 7) / 8);
    for (int j = 0; j < P; j++)
      set_bits(p, pi[j], pc[j]);
  }
  size_t nz = 0;
  #pragma omp parallel for schedule(static) num_threads(P) reduction(+ : nz)
  for (int j = 0; j < P; j++) {
    if (!pc[j])
      continue;
    if (coding == GC__IDX_RAW) {
      memcpy(p + 4 * at[j], pi[j], 4 * pc[j]);
    } else if (coding == GC__IDX_DELTA) {
      uint8_t *q = gc__leb_put(code[j], before[j] == UINT32_MAX ? pi[j][0]
                                                             : pi[j][0] - before[j] - 1);
      if (pc[j] > 1)
        put_gap_range(q, pi[j], 1, pc[j]);
    }
    if (!staged)
      nz += FN(put_vals)(v + at[j] * sizeof(REAL), NULL, pv[j], 1, 0, pc[j]);
  }
  for (int j = 0; staged && j < P; j++)
    nz += FN(move_down_par)(v + at[j] * sizeof(REAL), pv[j], pc[j], P);
  *nnz = nz;
  return GC_SUCCESS;
}

int FN(gc__wire_encode_pieces)(uint8_t type, size_t n, int P, const uint32_t *const *pi,
                               const REAL *const *pv, const size_t *pc, uint8_t *buf,
                               size_t cap, size_t *len, size_t *nnz)
{
  return FN(encode_pieces)(type, n, P, pi, pv, pc, 0, buf, cap, len, nnz);
}

int FN(gc__wire_encode_staged_pieces)(uint8_t type, size_t n, int P, const uint32_t *const *pi,
                                      const REAL *const *pv, const size_t *pc, uint8_t *buf,
                                      size_t cap, size_t *len, size_t *nnz)
{
  return FN(encode_pieces)(type, n, P, pi, pv, pc, 1, buf, cap, len, nnz);
}

/* Values [lo, hi) of val moved down to v, chunk by chunk in order (never
 * overwriting one not yet moved), each counted just before it moves,
 * while it is in L1; returns the nonzeros among them. */
static size_t FN(move_count)(uint8_t *v, const REAL *val, size_t lo, size_t hi)
{
  enum { CHUNK = 2048 };
  size_t nz = 0;
  for (; lo < hi; lo += CHUNK) {
    size_t m = hi - lo < CHUNK ? hi - lo : CHUNK;
    for (size_t j = lo; j < lo + m; j++)
      nz += val[j] != 0;
    memmove(v + lo * sizeof(REAL), val + lo, m * sizeof(REAL));
  }
  return nz;
}

/* val lies past every index section (gc__wire_stage): put_head writes
 * below it, and the move goes down.  On threads the move goes in rounds
 * of as many values as the distance down holds: a round's destination is
 * the source of the rounds before it, which are done, so the threads
 * share each round (on one thread the 10 MB move at density 0.1 took
 * most of the encoder's time while the other threads waited). */
static size_t FN(move_down_par)(uint8_t *v, const REAL *val, size_t c, int T)
{
  size_t round = (size_t) ((const uint8_t *) val - v) / sizeof(REAL);
  if (T == 1 || round < STAGE_ROUND_MIN || round < c / STAGE_ROUNDS_MAX)
    return FN(move_count)(v, val, 0, c);
  size_t nz = 0;
  #pragma omp parallel num_threads(T) reduction(+ : nz)
  for (size_t lo = 0; lo < c; lo += round) {
    size_t hi = c - lo < round ? c : lo + round, part = (hi - lo + (size_t) T - 1) / (size_t) T;
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++) {
      size_t a = lo + (size_t) j * part < hi ? lo + (size_t) j * part : hi;
      nz += FN(move_count)(v, val, a, hi - a < part ? hi : a + part);
    }
  }
  return nz;
}

int FN(gc__wire_encode_staged)(uint8_t type, size_t n, const uint32_t *idx,
                               size_t c, const REAL *val, uint8_t *buf, size_t cap,
                               size_t *len, size_t *nnz)
{
  uint8_t *v;
  GC_TRY(FN(put_head)(type, n, idx, c, 0, buf, cap, (const uint8_t *) val, len, &v));
  *nnz = FN(move_down_par)(v, val, c, gc__wire_threads(c));
  return GC_SUCCESS;
}

int FN(gc__wire_encode_coded)(uint8_t type, size_t n, size_t c, size_t delta,
                              const REAL *val, int staged, uint8_t *buf, size_t cap,
                              size_t *len, size_t *nnz)
{
  (void) n;
  GC_TRY(start_message(buf, cap, type, sizeof(REAL), GC__IDX_DELTA, c, delta, len));
  uint8_t *v = buf + GC__WIRE_HDR + delta;
  *nnz = staged ? FN(move_down_par)(v, val, c, gc__wire_threads(c))
                : FN(put_all_vals)(v, NULL, val, 1, c);
  return GC_SUCCESS;
}

int FN(gc__wire_encode_coded_pieces)(uint8_t type, size_t n, size_t c, size_t delta, int P,
                                     const REAL *const *pv, const size_t *pc, int staged,
                                     uint8_t *buf, size_t cap, size_t *len, size_t *nnz)
{
  (void) n;
  GC_TRY(start_message(buf, cap, type, sizeof(REAL), GC__IDX_DELTA, c, delta, len));
  uint8_t *v = buf + GC__WIRE_HDR + delta;
  size_t nz = 0, at[WIRE_PAR_MAX + 1];
  at[0] = 0;
  for (int j = 0; j < P; j++)
    at[j + 1] = at[j] + pc[j];
  if (staged) {
    for (int j = 0; j < P; j++)   /* in order: each lands on pieces already moved */
      nz += FN(move_down_par)(v + at[j] * sizeof(REAL), pv[j], pc[j], P);
  } else {
    #pragma omp parallel for schedule(static) num_threads(P) reduction(+ : nz)
    for (int j = 0; j < P; j++)
      nz += FN(put_vals)(v + at[j] * sizeof(REAL), NULL, pv[j], 1, 0, pc[j]);
  }
  *nnz = nz;
  return GC_SUCCESS;
}

int FN(gc__wire_decode_add)(uint8_t type, const uint8_t *buf, size_t len,
                            size_t n, REAL scale, REAL *y)
{
  size_t c, off;
  int coding;
  GC_TRY(check_explicit(type, sizeof(REAL), buf, len, n, &c, &coding, &off));
  const uint8_t *p = buf + GC__WIRE_HDR, *v = buf + off;
  REAL val;
  /* A message is untrusted input: a NaN or Inf value is rejected before
   * anything is added, so y is untouched on every error. */
  for (size_t j = 0; j < c; j++) {
    memcpy(&val, v + j * sizeof(REAL), sizeof(REAL));
    NONFINITE_CHECK(val, j);
  }
  switch (coding) {
  case GC__IDX_RAW:
    for (size_t j = 0; j < c; j++) {
      memcpy(&val, v + j * sizeof(REAL), sizeof(REAL));
      y[get_u32(p + 4 * j)] += scale * val;
    }
    break;
  case GC__IDX_DELTA: {
    size_t i = 0;
    for (size_t j = 0; j < c; j++) {
      uint32_t g;
      p = gc__leb_get(p, &g);
      i += g;
      memcpy(&val, v + j * sizeof(REAL), sizeof(REAL));
      y[i++] += scale * val;
    }
    break;
  }
  case GC__IDX_BITMAP: {
    size_t j = 0;
    for (size_t b = 0; b < (n + 7) / 8; b++)
      for (unsigned w = p[b]; w; w &= w - 1) {
        memcpy(&val, v + j++ * sizeof(REAL), sizeof(REAL));
        y[8 * b + (size_t) __builtin_ctz(w)] += scale * val;
      }
    break;
  }
  }
  return GC_SUCCESS;
}

/* Exact encoding of the nonzeros of x without a workspace: one pass counts
 * them and sizes the delta coding, a second writes the message. */
int FN(gc_sparse_encode_dense)(const REAL *x, size_t n, uint8_t *buf,
                               size_t cap, size_t *len, size_t *nnz)
{
  if (n == 0 || n >= ((size_t) 1 << 32))
    GC_ERRORF(GC_EINVAL, "sparse vector length %zu must be in [1, 2^32)", n);
  size_t c = 0, delta = 0, last = 0;
  for (size_t i = 0; i < n; i++)
    if (x[i] != 0) {
      delta += gc__leb_len((uint32_t) (c ? i - last - 1 : i));
      last = i;
      c++;
    }
  size_t isec;
  int coding = gc__wire_pick(n, c, delta, &isec);
  GC_TRY(start_message(buf, cap, GC__WIRE_SPARSE, sizeof(REAL), coding, c, isec, len));
  uint8_t *p = buf + GC__WIRE_HDR, *v = p + isec;
  if (coding == GC__IDX_BITMAP)
    memset(p, 0, isec);
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (x[i] == 0)
      continue;
    uint32_t i32 = (uint32_t) i;
    if (coding == GC__IDX_RAW) {
      memcpy(p, &i32, 4);
      p += 4;
    } else if (coding == GC__IDX_DELTA) {
      p = gc__leb_put(p, (uint32_t) (j ? i - last - 1 : i));
    } else {
      p[i >> 3] |= (uint8_t) (1u << (i & 7));
    }
    memcpy(v + j * sizeof(REAL), &x[i], sizeof(REAL));
    last = i;
    j++;
  }
  if (nnz)
    *nnz = c;
  return GC_SUCCESS;
}

int FN(gc_sparse_decode_add)(const uint8_t *buf, size_t len, size_t n,
                             REAL scale, REAL *y)
{
  return FN(gc__wire_decode_add)(0, buf, len, n, scale, y);
}

#undef REAL
#undef SFX
