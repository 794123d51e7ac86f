/* quant_source.c -- the quantizers for one precision.  Included twice by
 * quant.c (GSL template style) with REAL = float / double, SFX = f32 / f64
 * and PREC = the precision byte of the header, undefined again at the end;
 * not compiled on its own.
 * The byte layouts are documented at the top of quant.c. */

#define W ((size_t) sizeof(REAL))

/* A compressor that is one flavour of a shared codec (sign and scaled
 * sign; fp16 and bf16), which ignores the step: its two entry points call
 * family_common_encode / _decode with the flavour flag. */
#define FLAVOUR(name, family, flag)                                          \
  static int FN(name##_encode)(void *st, const REAL *x, uint32_t step,       \
                               uint8_t *buf, size_t cap, size_t *len,        \
                               gc_compress_info *info)                       \
  {                                                                          \
    (void) step;                                                             \
    return FN(family##_common_encode)(st, x, buf, cap, len, info, flag);     \
  }                                                                          \
  static int FN(name##_decode)(const void *st, const uint8_t *buf,           \
                               size_t len, uint32_t step, REAL scale,        \
                               REAL *y)                                      \
  {                                                                          \
    (void) step;                                                             \
    return FN(family##_common_decode)(st, buf, len, scale, y, flag);         \
  }

/* GC_EDOM naming the first NaN or Inf, else GC_SUCCESS.  Encoders that
 * make a pass over x anyway OR an integer test of the exponent field
 * (FN(isfin)) into it and call this only to name the culprit. */
static int FN(check_finite)(const REAL *x, size_t n, const char *who)
{
  size_t i = gc__vfirst_nonfinite(W, x, n);
  if (i < n)
    GC_ERRORF(GC_EDOM, "%s: x[%zu] = %g is not finite", who, i, (double) x[i]);
  return GC_SUCCESS;
}

/* GC_ENOSPACE when cap < need; a non-finite x takes precedence (GC_EDOM),
 * as it does when the buffer is large enough. */
static int FN(check_cap)(const REAL *x, size_t n, size_t cap, size_t need,
                           const char *who)
{
  if (cap >= need)
    return GC_SUCCESS;
  GC_TRY(FN(check_finite)(x, n, who));
  GC_ERRORF(GC_ENOSPACE, "%s: buffer of %zu bytes, need %zu", who, cap, need);
}

static REAL FN(load)(const uint8_t *p)
{
  REAL v;
  memcpy(&v, p, W);
  return v;
}

/* A scale or norm read from a message must be finite and >= 0. */
static int FN(check_scale)(REAL v, const char *who)
{
  if (!(v >= 0) || !FN(isfin)(v))
    GC_ERRORF(GC_ECORRUPT, "%s: invalid scale %g in message", who, (double) v);
  return GC_SUCCESS;
}

/* ---- identity --------------------------------------------------------- */

static int FN(identity_encode)(void *st, const REAL *x, uint32_t step,
                                 uint8_t *buf, size_t cap, size_t *len,
                                 gc_compress_info *info)
{
  const qstate *q = st;
  size_t n = q->n, need = HDR + W * n;
  (void) step;
  GC_TRY(FN(check_cap)(x, n, cap, need, "identity"));
  size_t nnz = 0;
#if PREC == 32
  uint32_t amax;   /* one pass: copy, count, check */
  nnz = copy_count(x, n, buf + HDR, &amax);
  if (amax >= 0x7f800000u)
    return FN(check_finite)(x, n, "identity");
#else
  unsigned bad = 0;
  for (size_t i = 0; i < n; i++) {
    nnz += x[i] != 0;
    bad |= !FN(isfin)(x[i]);
  }
  if (bad)
    return FN(check_finite)(x, n, "identity");
  memcpy(buf + HDR, x, W * n);
#endif
  buf[0] = TAG_IDENTITY;
  buf[1] = PREC;
  *len = need;
  info->nnz = nnz;
  info->selected = n;
  info->loops = 0;
  return GC_SUCCESS;
}

static int FN(identity_decode)(const void *st, const uint8_t *buf,
                                 size_t len, uint32_t step, REAL scale, REAL *y)
{
  const qstate *q = st;
  size_t n = q->n;
  (void) step;
  GC_TRY(gc__check_msg(buf, len, HDR, TAG_IDENTITY, PREC, "identity"));
  GC_TRY(gc__check_msg_len(len, HDR + W * n, "identity"));
  const uint8_t *p = buf + HDR;
  /* untrusted input: a non-finite value is rejected before y is touched */
  for (size_t i = 0; i < n; i++)
    if (!FN(isfin)(FN(load)(p + W * i)))
      GC_ERRORF(GC_ECORRUPT, "identity: message value %zu is not finite", i);
  for (size_t i = 0; i < n; i++)
    y[i] += scale * FN(load)(p + W * i);
  return GC_SUCCESS;
}

/* ---- sign and scaled-sign -------------------------------------------- */

/* Pack sign bits (1 = negative, so sign(0) = sign(-0) = +1) into
 * ceil(n/8) bytes, 64 per word; when l1 is given also sum |x_i| in double.
 * Returns nonzero when some entry is NaN or Inf.  One pass over x: the
 * sign compressors should run at streaming bandwidth. */
static unsigned FN(sign_pack)(const REAL *x, size_t n, uint8_t *out,
                                double *l1)
{
  unsigned bad = 0;
  double acc = 0;
  size_t nw = n / 64;
#if PREC == 32
  bad = sign_words_f32(x, nw, out, l1 ? &acc : NULL);   /* dispatched */
#else
  for (size_t w = 0; w < nw; w++) {
    const REAL *xw = x + 64 * w;
    uint64_t bits = 0;
    unsigned b = 0;
    for (unsigned j = 0; j < 64; j++) {
      bits |= (uint64_t) (xw[j] < 0) << j;
      b |= !FN(isfin)(xw[j]);
    }
    if (l1) {   /* four partial sums: independent chains pipeline */
      double a[4] = {0, 0, 0, 0};
      for (unsigned j = 0; j < 64; j += 4)
        for (unsigned t = 0; t < 4; t++)
          a[t] += fabs((double) xw[j + t]);
      acc += (a[0] + a[1]) + (a[2] + a[3]);
    }
    bad |= b;
    gc__store64le(out + 8 * w, bits);
  }
#endif
  size_t rest = n - 64 * nw;
  if (rest) {
    const REAL *xw = x + 64 * nw;
    uint64_t bits = 0;
    for (size_t j = 0; j < rest; j++) {
      bits |= (uint64_t) (xw[j] < 0) << j;
      bad |= !FN(isfin)(xw[j]);
      acc += fabs((double) xw[j]);
    }
    for (size_t k = 0; k < (rest + 7) / 8; k++)
      out[8 * nw + k] = (uint8_t) (bits >> (8 * k));
  }
  if (l1)
    *l1 = acc;
  return bad;
}

/* The padding bits above entry n in the last byte must be zero. */
static int FN(check_pad)(uint8_t last, size_t nbits, const char *who)
{
  unsigned used = (unsigned) (nbits % 8);
  if (used && (last >> used))
    GC_ERRORF(GC_ECORRUPT, "%s: nonzero padding bits in message", who);
  return GC_SUCCESS;
}

static int FN(sign_common_encode)(const qstate *q, const REAL *x,
                                    uint8_t *buf, size_t cap, size_t *len,
                                    gc_compress_info *info, int scaled)
{
  size_t n = q->n, off = HDR + (scaled ? W : 0), need = off + (n + 7) / 8;
  const char *who = scaled ? "scaled-sign" : "sign";
  GC_TRY(FN(check_cap)(x, n, cap, need, who));
  double l1 = 0;
  if (FN(sign_pack)(x, n, buf + off, scaled ? &l1 : NULL))
    return FN(check_finite)(x, n, who);
  buf[0] = scaled ? TAG_SCALED_SIGN : TAG_SIGN;
  buf[1] = PREC;
  REAL sc = 1;
  if (scaled) {
    if (!(l1 <= DBL_MAX)) {
      /* The mean of |x_i| is at most max |x_i|, but the sum can pass
       * DBL_MAX (float64 x only: a float32 sum stays below 2^160): add
       * |x_i| 2^-32 instead, which n < 2^32 entries keep finite, and
       * scale the mean back, clamped where rounding lifted it past
       * DBL_MAX.  Messages whose sum stays finite keep their bytes. */
      double a = 0;
      for (size_t i = 0; i < n; i++)
        a += ldexp(fabs((double) x[i]), -32);
      sc = (REAL) fmin(ldexp(a / (double) n, 32), DBL_MAX);
    } else {
      sc = (REAL) (l1 / (double) n);
    }
    memcpy(buf + HDR, &sc, W);
  }
  *len = need;
  info->nnz = sc > 0 ? n : 0;
  info->selected = n;
  info->loops = 0;
  return GC_SUCCESS;
}

static int FN(sign_common_decode)(const qstate *q, const uint8_t *buf,
                                    size_t len, REAL scale, REAL *y, int scaled)
{
  size_t n = q->n, off = HDR + (scaled ? W : 0), need = off + (n + 7) / 8;
  const char *who = scaled ? "scaled-sign" : "sign";
  GC_TRY(gc__check_msg(buf, len, HDR, scaled ? TAG_SCALED_SIGN : TAG_SIGN,
                       PREC, who));
  GC_TRY(gc__check_msg_len(len, need, who));
  GC_TRY(FN(check_pad)(buf[len - 1], n, who));
  REAL a = scale;
  if (scaled) {
    REAL sc = FN(load)(buf + HDR);
    GC_TRY(FN(check_scale)(sc, who));
    a = scale * sc;
  }
  const uint8_t *p = buf + off;
  size_t nw = n / 64;
  for (size_t w = 0; w < nw; w++) {
    uint64_t bits = gc__load64le(p + 8 * w);
    REAL *yw = y + 64 * w;
    for (unsigned j = 0; j < 64; j++)
      yw[j] += ((bits >> j) & 1) ? -a : a;
  }
  for (size_t i = 64 * nw; i < n; i++)
    y[i] += ((p[i >> 3] >> (i & 7)) & 1) ? -a : a;
  return GC_SUCCESS;
}

FLAVOUR(sign, sign, 0)
FLAVOUR(scaled_sign, sign, 1)

/* ---- qsgd --------------------------------------------------------------- */

#if PREC == 32
/* ||x[lo,hi)||_2 as sqrt of sumsq (quant.c): no float32 square overflows
 * a double.  *bad is set (and 0 returned) when some entry is NaN or Inf. */
static double FN(bucket_norm)(const REAL *x, size_t lo, size_t hi,
                                unsigned *bad)
{
  uint32_t amax;
  double ss = sumsq(x + lo, hi - lo, &amax);
  *bad = amax >= 0x7f800000u;
  return *bad ? 0 : sqrt(ss);
}
#else
/* ||x[lo,hi)||_2 without overflow: scale by the largest magnitude.  *bad
 * is set (and 0 returned) when some entry is NaN or Inf. */
static double FN(bucket_norm)(const REAL *x, size_t lo, size_t hi,
                                unsigned *bad)
{
  double amax = 0, ss = 0;
  unsigned b = 0;
  for (size_t i = lo; i < hi; i++) {
    double a = fabs((double) x[i]);
    amax = a > amax ? a : amax;
    b |= !FN(isfin)(x[i]);
  }
  *bad = b;
  if (b || amax == 0)
    return 0;
  for (size_t i = lo; i < hi; i++) {
    double t = (double) x[i] / amax;
    ss += t * t;
  }
  return amax * sqrt(ss);
}
#endif

/* The symbols (see qstate.pair) of x[0, m) from their uniforms uc, for
 * s <= PAIR_MAX_S: r_i = |x_i| s / norm (k = s / norm), xi = l + 1 with
 * probability r - l, tested as u_i < (r - l) 2^16 with the 16-bit uniform
 * of element i (bias < 2^-16); returns the nonzero levels.  A loop that
 * vectorises. */
INLINE size_t FN(qsgd_syms_chunk)(const REAL *xc, const uint16_t *uc, size_t m,
                                    double k, int s, uint8_t *sym)
{
  unsigned nz = 0;
  for (size_t t = 0; t < m; t++) {
    /* 0 <= r <= s (1 + 2^-23): truncation is floor */
    double r = fabs((double) xc[t]) * k;
    int l = (int) r;
    int xi = l + ((double) uc[t] < (r - (double) l) * 65536.0);
    xi = xi < s ? xi : s;            /* above s only by rounding */
    sym[t] = (uint8_t) (2 * xi + ((xi != 0) & (xc[t] < 0)));
    nz += xi != 0;
  }
  return nz;
}

/* qsgd_syms_chunk with the kernel of fill's instruction set: float32
 * entries have their own with AVX-512 and AVX2 (quant.c), the rest the
 * generic loop; the same symbols. */
INLINE size_t FN(qsgd_syms_isa)(const REAL *xc, const uint16_t *uc, size_t m, double k,
                                  int s, uint8_t *sym, u16_fill *fill)
{
  size_t nz = 0, t = 0;
#if PREC == 32 && defined(HAVE_ISA_PATHS)
  if (fill == u16_blocks_avx512) {
    nz = qsgd_syms_avx512(xc, uc, m, k, s, sym);
    t = m & ~(size_t) 15;
  } else if (fill == u16_blocks_avx2) {
    nz = qsgd_syms_avx2(xc, uc, m, k, s, sym);
    t = m & ~(size_t) 7;
  }
#else
  (void) fill;
#endif
  return nz + FN(qsgd_syms_chunk)(xc + t, uc + t, m - t, k, s, sym + t);
}

/* The codes of the symbols sym[0, m) (m <= CHUNK) appended to w. */
INLINE void FN(qsgd_pack_chunk)(const qstate *q, const uint8_t *sym, size_t m,
                                  gc__bw *w, u16_fill *fill)
{
  gc__bw lw = *w;   /* a local copy stays in registers: byte stores alias */
  size_t t = 0;
#ifdef HAVE_ISA_PATHS
  if (fill == u16_blocks_avx512)   /* the kernel of fill's instruction set */
    t = qsgd_pack_avx512(q->code16, sym, m, &lw);
#else
  (void) fill;
#endif
  if (lw.end - lw.p >= (ptrdiff_t) (6 * m + 16)) {
    /* Room for the chunk's worst case (24 bits an entry) and an 8-byte
     * store past it: four symbols per step with no branch, the
     * accumulator flushed whole bytes at a time (nb < 8 after each
     * step, so 48 more bits fit). */
    uint64_t acc = lw.acc;
    unsigned nb = lw.nb;
    uint8_t *op = lw.p;
    while (nb >= 8) {
      *op++ = (uint8_t) acc;
      acc >>= 8;
      nb -= 8;
    }
    for (size_t grp = t; t + 4 <= m; ) {
      /* 32 level-0 symbols (code "1" each, the common case of a
       * small s or a large bucket) in one step */
      if (t == grp && t + 32 <= m) {
        uint64_t z[4];
        memcpy(z, sym + t, sizeof z);
        grp = t + 32;
        if (!(z[0] | z[1] | z[2] | z[3])) {
          acc |= (uint64_t) 0xffffffffu << nb;
          nb += 32;
          memcpy(op, &acc, 8);
          op += nb >> 3;
          acc >>= nb & 56;
          nb &= 7;
          t = grp;
          continue;
        }
      }
      uint32_t ea = q->pair[sym[t] + 32u * sym[t + 1]];
      uint32_t eb = q->pair[sym[t + 2] + 32u * sym[t + 3]];
      unsigned la = ea >> 24;
      acc |= ((uint64_t) (ea & 0xffffffu) | (uint64_t) (eb & 0xffffffu) << la) << nb;
      nb += la + (eb >> 24);
      memcpy(op, &acc, 8);
      op += nb >> 3;
      acc >>= nb & 56;   /* nb < 56 here */
      nb &= 7;
      t += 4;
    }
    lw.acc = acc;
    lw.nb = nb;
    lw.p = op;
  }
  for (; t + 2 <= m; t += 2) {
    uint32_t e = q->pair[sym[t] + 32u * sym[t + 1]];
    gc__bw_put(&lw, e & 0xffffffu, e >> 24);
  }
  if (t < m)
    gc__bw_put(&lw, q->one[sym[t]] & 0xffffffu, q->one[sym[t]] >> 24);
  *w = lw;
}

/* The codes of bucket x[lo, hi) with norm > 0 (as sent) into w; returns
 * the nonzero levels.  E[decoded] = x_i up to the uniform's resolution.
 * In chunks: the uniforms and (for s <= PAIR_MAX_S) the symbols first, in
 * loops that vectorise, then the bit writer. */
INLINE size_t FN(qsgd_bucket_body)(const qstate *q, const rngkey *key,
                                     const REAL *x, size_t lo, size_t hi,
                                     REAL norm, gc__bw *w, u16_fill *fill)
{
  uint16_t u[CHUNK + 8];
  uint8_t sym[CHUNK];
  size_t nnz = 0;
  const double k = (double) q->s / (double) norm;
  const int s = (int) (q->s <= PAIR_MAX_S ? q->s : 0);
  for (size_t c0 = lo; c0 < hi; c0 += CHUNK) {
    size_t m = hi - c0 < CHUNK ? hi - c0 : CHUNK, sh = c0 & 7;
    fill(key, c0 >> 3, (sh + m + 7) >> 3, u);
    const uint16_t *uc = u + sh;
    const REAL *xc = x + c0;
    if (s) {
      nnz += FN(qsgd_syms_isa)(xc, uc, m, k, s, sym, fill);
      FN(qsgd_pack_chunk)(q, sym, m, w, fill);
      continue;
    }
    for (size_t t = 0; t < m; t++) {
      double r = fabs((double) xc[t]) * k, l = floor(r);
      uint64_t xi = (uint64_t) l + ((double) uc[t] < (r - l) * 65536.0);
      if (xi > q->s)
        xi = q->s;
      gc__bw_gamma(w, xi + 1);
      if (xi) {
        gc__bw_put(w, xc[t] < 0, 1);
        nnz++;
      }
    }
  }
  return nnz;
}

DISPATCH_RNG(size_t, FN(qsgd_bucket), FN(qsgd_bucket_body),
             (const qstate *q, const rngkey *key, const REAL *x, size_t lo,
              size_t hi, REAL norm, gc__bw *w),
             q, key, x, lo, hi, norm, w)

/* Bucket x[lo, hi) (s <= PAIR_MAX_S, hi - lo <= the workspace) on T <=
 * SHARES_MAX OpenMP threads: share t, the whole chunks [a_t, a_t+1), is
 * coded as qsgd_bucket does, share 0 straight into w and the others into
 * their place in q->scratch (room for their worst case); their streams
 * are then appended to w in order.  An entry's code depends on the entry
 * alone, so these are qsgd_bucket's bits for any T.  (One thread used to
 * code the symbols of the whole bucket, which the threads had stored: a
 * serial pass and a bucket-sized buffer written and read.) */
static size_t FN(qsgd_bucket_par)(const qstate *q, const rngkey *key, const REAL *x,
                                    size_t lo, size_t hi, REAL norm, gc__bw *w, int T)
{
  const size_t nch = (hi - lo + CHUNK - 1) / CHUNK, per = qsgd_entry_bits(q);
  size_t a[SHARES_MAX + 1], nnz = 0;
  uint8_t *start[SHARES_MAX], *next = q->scratch;
  gc__bw part[SHARES_MAX];
  for (int t = 0; t <= T; t++) {
    size_t c = lo + CHUNK * (nch * (size_t) t / (size_t) T);
    a[t] = c < hi ? c : hi;
  }
  part[0] = *w;
  for (int t = 1; t < T; t++) {
    size_t room = (per * (a[t + 1] - a[t]) + 7) / 8 + SHARE_SLACK;
    start[t] = next;
    gc__bw_init(&part[t], next, room);
    next += room;
  }
  #pragma omp parallel for schedule(static, 1) num_threads(T) reduction(+ : nnz)
  for (int t = 0; t < T; t++) {
    gc__bw lw = part[t];   /* a local writer: the array's entries share lines */
    nnz += FN(qsgd_bucket)(q, key, x, a[t], a[t + 1], norm, &lw);
    part[t] = lw;
  }
  *w = part[0];
  for (int t = 1; t < T; t++) {
    w->over |= part[t].over;
    bw_append(w, start[t], (size_t) (part[t].p - start[t]), part[t].acc, part[t].nb);
  }
  return nnz;
}

/* Buckets of B < CHUNK entries, s <= PAIR_MAX_S: the run x[lo, hi) of
 * whole buckets (the last may be short), at most CHUNK entries, with the
 * norms as sent in norm[]: one fill of the uniforms, the symbols of each
 * bucket with its own k (as qsgd_bucket_body computes them), one pass of
 * the writer; returns the nonzero levels.  Coding bucket by bucket filled
 * a few Philox blocks at a time on the scalar path and wrote each bucket
 * alone (buckets of 64: 54 ms for d = 2.5e7). */
INLINE size_t FN(qsgd_run_body)(const qstate *q, const rngkey *key, const REAL *x,
                                  size_t lo, size_t hi, const REAL *norm, gc__bw *w,
                                  u16_fill *fill)
{
  uint16_t u[CHUNK + 8];
  uint8_t sym[CHUNK];
  size_t nnz = 0, B = q->bucket, sh = lo & 7;
  fill(key, lo >> 3, (sh + hi - lo + 7) >> 3, u);
  for (size_t a = lo, j = 0; a < hi; a += B, j++) {
    size_t m = hi - a < B ? hi - a : B;
    if (norm[j] == 0)   /* every level 0 */
      memset(sym + (a - lo), 0, m);
    else
      nnz += FN(qsgd_syms_isa)(x + a, u + sh + (a - lo), m, (double) q->s / (double) norm[j],
                               (int) q->s, sym + (a - lo), fill);
  }
  FN(qsgd_pack_chunk)(q, sym, hi - lo, w, fill);
  return nnz;
}

DISPATCH_RNG(size_t, FN(qsgd_run), FN(qsgd_run_body),
             (const qstate *q, const rngkey *key, const REAL *x, size_t lo,
              size_t hi, const REAL *norm, gc__bw *w),
             q, key, x, lo, hi, norm, w)

/* The norms of the buckets of x[lo, hi) (B < CHUNK entries each, the last
 * may be short) as bucket_norm gives them; returns nonzero when some entry
 * is NaN or Inf. */
static unsigned FN(run_norms)(const REAL *x, size_t lo, size_t hi, size_t B, REAL *norm)
{
#if PREC == 32
  /* a bucket is one block of sumsq: its block sum is its total */
  double ss[CHUNK];
  uint32_t amax = 0;
  size_t nb = sumsq_blocks(x + lo, hi - lo, B, ss, &amax);
  for (size_t j = 0; j < nb; j++)
    norm[j] = (REAL) sqrt(ss[j]);
  return amax >= 0x7f800000u;
#else
  unsigned bad = 0;
  for (size_t a = lo, j = 0; a < hi && !bad; a += B, j++)
    norm[j] = (REAL) FN(bucket_norm)(x, a, hi - a < B ? hi : a + B, &bad);
  return bad;
#endif
}

/* Bucket b of x: its norm into the message at buf and its codes into w;
 * adds its nonzero levels to *nnz.  Returns 0, BUCKET_NONFINITE when some
 * entry is NaN or Inf, or BUCKET_OVERFLOW when the norm overflows REAL. */
static int FN(qsgd_code_bucket)(const qstate *q, const rngkey *key, const REAL *x,
                                  size_t b, uint8_t *buf, gc__bw *w, size_t *nnz)
{
  size_t lo = b * q->bucket, hi = lo + q->bucket < q->n ? lo + q->bucket : q->n;
  unsigned bad;
  REAL norm = (REAL) FN(bucket_norm)(x, lo, hi, &bad);
  if (bad)
    return BUCKET_NONFINITE;
  if (!FN(isfin)(norm))
    return BUCKET_OVERFLOW;
  memcpy(buf + HDR + W * b, &norm, W);
  if (norm == 0) {                     /* every level 0: gamma(1) = "1" */
    for (size_t i = lo; i < hi; i++)
      gc__bw_put(w, 1, 1);
    return 0;
  }
  int T = q->scratch ? gc__threads_for(hi - lo, PAR_MIN, SHARES_MAX) : 1;
  if (T > 1)
    *nnz += FN(qsgd_bucket_par)(q, key, x, lo, hi, norm, w, T);
  else
    *nnz += FN(qsgd_bucket)(q, key, x, lo, hi, norm, w);
  return 0;
}

/* Buckets [b0, b1) of x: norms into the message, codes into w, their
 * nonzero levels added to *nnz; stops at the first bad bucket (*bad_b, the
 * returned BUCKET_* reason).  Buckets of fewer than CHUNK entries with s
 * <= PAIR_MAX_S go by runs (qsgd_run); a run with a NaN or Inf again
 * bucket by bucket, to name the first bad one. */
static int FN(qsgd_code_buckets)(const qstate *q, const rngkey *key, const REAL *x,
                                   size_t b0, size_t b1, uint8_t *buf, gc__bw *w,
                                   size_t *nnz, size_t *bad_b)
{
  const size_t B = q->bucket, per_run = q->s <= PAIR_MAX_S && B < CHUNK ? CHUNK / B : 1;
  REAL norm[CHUNK];
  for (size_t r0 = b0; r0 < b1; r0 += per_run) {
    size_t r1 = r0 + per_run < b1 ? r0 + per_run : b1;
    size_t lo = r0 * B, hi = r1 * B < q->n ? r1 * B : q->n;
    if (per_run == 1 || FN(run_norms)(x, lo, hi, B, norm)) {
      for (size_t j = r0; j < r1; j++) {
        int why = FN(qsgd_code_bucket)(q, key, x, j, buf, w, nnz);
        if (why) {
          *bad_b = j;
          return why;
        }
      }
      continue;
    }
    for (size_t j = r0; j < r1; j++) {
      if (!FN(isfin)(norm[j - r0])) {
        *bad_b = j;
        return BUCKET_OVERFLOW;
      }
      memcpy(buf + HDR + W * j, &norm[j - r0], W);
    }
    *nnz += FN(qsgd_run)(q, key, x, lo, hi, norm, w);
  }
  return 0;
}

/* Buckets smaller than PAR_MIN (s <= PAIR_MAX_S) on T <= SHARES_MAX
 * OpenMP threads: share t, the buckets [nb t / T, nb (t+1) / T), is coded
 * bucket by bucket as on one thread, share 0 straight into w and the
 * others into their place in q->scratch, then appended in order (as
 * qsgd_bucket_par does within a bucket): the same bits for any T.  A share
 * stops at its first bad bucket; the first bad bucket of all, which the
 * caller reports, is that of the first share with one (*bad_b, the
 * returned BUCKET_* reason). */
static int FN(qsgd_shares)(const qstate *q, const rngkey *key, const REAL *x, uint8_t *buf,
                             gc__bw *w, int T, size_t *nnz, size_t *bad_b)
{
  const size_t per = qsgd_entry_bits(q);
  size_t b[SHARES_MAX + 1], cnt[SHARES_MAX], first[SHARES_MAX];
  int why[SHARES_MAX];
  uint8_t *start[SHARES_MAX], *next = q->scratch;
  gc__bw part[SHARES_MAX];
  for (int t = 0; t <= T; t++)
    b[t] = q->nb * (size_t) t / (size_t) T;
  part[0] = *w;
  for (int t = 1; t < T; t++) {
    size_t lo = b[t] * q->bucket, hi = b[t + 1] * q->bucket < q->n ? b[t + 1] * q->bucket : q->n;
    size_t room = (per * (hi - lo) + 7) / 8 + SHARE_SLACK;
    start[t] = next;
    gc__bw_init(&part[t], next, room);
    next += room;
  }
  #pragma omp parallel for schedule(static, 1) num_threads(T)
  for (int t = 0; t < T; t++) {
    gc__bw lw = part[t];   /* a local writer: the array's entries share lines */
    size_t c = 0;
    why[t] = FN(qsgd_code_buckets)(q, key, x, b[t], b[t + 1], buf, &lw, &c, &first[t]);
    part[t] = lw;
    cnt[t] = c;
  }
  *w = part[0];
  for (int t = 0; t < T; t++) {
    if (why[t]) {
      *bad_b = first[t];
      return why[t];
    }
    *nnz += cnt[t];
    if (t > 0) {
      w->over |= part[t].over;
      bw_append(w, start[t], (size_t) (part[t].p - start[t]), part[t].acc, part[t].nb);
    }
  }
  return 0;
}

/* One thread's time (float32, d = 2.5e7, s = 4, one bucket, AVX-512,
 * Zen 5; a read of x takes 2.5-2.7 ms; "from cache": the same work on a
 * cache-sized slice, scaled): the norm pass is memory-bound, 2.5 ms (its
 * sums alone 1.35 from cache); the coding pass is compute-bound, 5.2 ms
 * from memory and 5.0 from cache: Philox uniforms 2.34, levels 1.85,
 * codes 0.66.  Running it backwards into the norm pass's cached tail
 * would gain under 0.2 ms; a read plus the draws alone is 4.9 ms. */
static int FN(qsgd_encode)(void *st, const REAL *x, uint32_t step,
                             uint8_t *buf, size_t cap, size_t *len,
                             gc_compress_info *info)
{
  const qstate *q = st;
  size_t n = q->n, off = HDR + W * q->nb, nnz = 0, bad_b = 0;
  const rngkey key = { q->seed, q->stream, step };
  GC_TRY(FN(check_cap)(x, n, cap, off, "qsgd"));
  buf[0] = TAG_QSGD;
  buf[1] = PREC;
  gc__bw w;
  gc__bw_init(&w, buf + off, cap - off);
  int why = 0;
  int T = q->scratch && q->bucket < PAR_MIN ? gc__threads_for(n, PAR_MIN, SHARES_MAX) : 1;
  if (T > 1)
    why = FN(qsgd_shares)(q, &key, x, buf, &w, T, &nnz, &bad_b);
  else
    why = FN(qsgd_code_buckets)(q, &key, x, 0, q->nb, buf, &w, &nnz, &bad_b);
  if (why == BUCKET_NONFINITE)   /* the earlier buckets are finite: this names bucket bad_b */
    return FN(check_finite)(x, n, "qsgd");
  if (why == BUCKET_OVERFLOW)
    GC_ERRORF(GC_EDOM, "qsgd: norm of bucket %zu overflows float%d", bad_b, PREC);
  if (gc__bw_finish(&w) != 0)
    GC_ERRORF(GC_ENOSPACE, "qsgd: message does not fit in %zu bytes "
              "(gc_compressor_max_bytes always does)", cap);
  *len = (size_t) (w.p - buf);
  info->nnz = nnz;
  info->selected = n;
  info->loops = 0;
  return GC_SUCCESS;
}

/* Parse a qsgd message; with y == NULL only validate.  Decoders call it
 * twice so y is untouched when the message is invalid. */
static int FN(qsgd_parse)(const qstate *q, const uint8_t *buf, size_t len,
                            REAL scale, REAL *y)
{
  size_t n = q->n, B = q->bucket, off = HDR + W * q->nb;
  if (len < off)
    GC_ERRORF(GC_ECORRUPT, "qsgd: message of %zu bytes is truncated (the "
              "bucket norms alone take %zu)", len, off);
  gc__br r;
  gc__br_init(&r, buf + off, len - off);
  for (size_t b = 0; b < q->nb; b++) {
    size_t lo = b * B, hi = lo + B < n ? lo + B : n;
    double norm = (double) FN(load)(buf + HDR + W * b);
    if (!y)
      GC_TRY(FN(check_scale)((REAL) norm, "qsgd"));
    for (size_t i = lo; i < hi; i++) {
      uint64_t v, sg = 0;
      if (gc__br_gamma(&r, &v) != 0)
        GC_ERRORF(GC_ECORRUPT, "qsgd: invalid or truncated Elias code at "
                  "entry %zu", i);
      uint64_t xi = v - 1;
      if (xi > q->s)
        GC_ERRORF(GC_ECORRUPT, "qsgd: level %llu exceeds s = %u at entry %zu",
                  (unsigned long long) xi, q->s, i);
      if (xi && gc__br_get(&r, 1, &sg) != 0)
        GC_ERRORF(GC_ECORRUPT, "qsgd: truncated sign bit at entry %zu", i);
      if (y && xi) {
        REAL c = (REAL) (norm * (double) xi / (double) q->s);
        y[i] += scale * (sg ? -c : c);
      }
    }
  }
  if (!gc__br_at_end(&r))
    GC_ERRORF(GC_ECORRUPT, "qsgd: trailing bytes or nonzero padding after "
              "%zu entries", n);
  return GC_SUCCESS;
}

static int FN(qsgd_decode)(const void *st, const uint8_t *buf, size_t len,
                             uint32_t step, REAL scale, REAL *y)
{
  (void) step;
  GC_TRY(gc__check_msg(buf, len, HDR, TAG_QSGD, PREC, "qsgd"));
  GC_TRY(FN(qsgd_parse)(st, buf, len, scale, NULL));
  return FN(qsgd_parse)(st, buf, len, scale, y);
}

/* ---- terngrad ----------------------------------------------------------- */

/* sum_i x_i, or with `squares` sum_i (x_i - mean)^2, in double in the
 * blocked pairwise order of quant.c (n >= 1). */
static double FN(block_sum)(const REAL *x, size_t n, int squares, double mean)
{
  gc__pairwise t = {{0}, 0, 0};
  for (size_t lo = 0; lo < n; lo += SUM_BLOCK) {
    size_t hi = n - lo < SUM_BLOCK ? n : lo + SUM_BLOCK;
    double p = 0;
    if (squares)
      for (size_t i = lo; i < hi; i++)
        p += ((double) x[i] - mean) * ((double) x[i] - mean);
    else
      for (size_t i = lo; i < hi; i++)
        p += (double) x[i];
    gc__pairwise_push(&t, p);
  }
  return gc__pairwise_total(&t);
}

/* TernGrad codes of x[0, m) into out[0, ceil(m/4)) from the uniforms u:
 * b_i = [u_i < a_i 2^16 / s] (inv = 2^16 / s, bias < 2^-16) with a_i =
 * min(|x_i|, c), code b_i | (b_i & x_i < 0) << 1; returns the nonzeros.
 * Branch-free (b_i is unpredictable); four codes per byte through a
 * 32-bit word, whose byte t lands at bits 2t. */
INLINE size_t FN(tern_chunk)(const REAL *x, size_t m, const uint16_t *u,
                               REAL c, double inv, uint8_t *out)
{
  uint8_t code[CHUNK];
  size_t nnz = 0;
  for (size_t t = 0; t < m; t++) {
    REAL a = (REAL) fabs((double) x[t]);
    a = a < c ? a : c;
    unsigned b = (double) u[t] < (double) a * inv;
    code[t] = (uint8_t) (b | ((b & (x[t] < 0)) << 1));
    nnz += b;
  }
  size_t nbytes = (m + 3) / 4;
  for (size_t t = m; t < 4 * nbytes; t++)
    code[t] = 0;
  for (size_t j = 0; j < nbytes; j++) {
    uint32_t v;
    memcpy(&v, code + 4 * j, sizeof v);
    out[j] = (uint8_t) (v | v >> 6 | v >> 12 | v >> 18);
  }
  return nnz;
}

/* Codes of the entries [lo, hi) (lo a multiple of CHUNK), chunk by chunk. */
INLINE size_t FN(tern_range_body)(const rngkey *key, const REAL *x, size_t lo,
                                    size_t hi, REAL c, double inv, uint8_t *out,
                                    u16_fill *fill)
{
  uint16_t u[CHUNK];
  size_t nnz = 0;
  for (size_t i = lo; i < hi; i += CHUNK) {
    size_t m = hi - i < CHUNK ? hi - i : CHUNK;
    fill(key, i / 8, (m + 7) / 8, u);
    size_t t = 0;
#if PREC == 32 && defined(HAVE_ISA_PATHS)
    /* float32 has its own kernel (quant.c), for inv whose float is finite */
    if (fill == u16_blocks_avx512 && inv < 0x1p127) {
      nnz += tern_codes_avx512(x + i, m, u, c, inv, out + i / 4);
      t = m & ~(size_t) 63;
    }
#endif
    nnz += FN(tern_chunk)(x + i + t, m - t, u + t, c, inv, out + (i + t) / 4);
  }
  return nnz;
}

DISPATCH_RNG(size_t, FN(tern_range), FN(tern_range_body),
             (const rngkey *key, const REAL *x, size_t lo, size_t hi, REAL c,
              double inv, uint8_t *out),
             key, x, lo, hi, c, inv, out)

/* Pieces of PAR_CHUNK entries on the OpenMP threads: the key, not the
 * thread, picks the uniforms, so any thread count writes the same bytes. */
static size_t FN(tern_codes)(const rngkey *key, const REAL *x, size_t n, REAL c,
                               double inv, uint8_t *out)
{
  size_t nnz = 0, np = (n + PAR_CHUNK - 1) / PAR_CHUNK;
  #pragma omp parallel for schedule(static) reduction(+ : nnz) if (n >= PAR_MIN)
  for (size_t j = 0; j < np; j++)
    nnz += FN(tern_range)(key, x, j * PAR_CHUNK,
                          n - j * PAR_CHUNK < PAR_CHUNK ? n : (j + 1) * PAR_CHUNK,
                          c, inv, out);
  return nnz;
}

/* One thread's time (as qsgd_encode's): the max pass 2.45 ms (0.73 from
 * cache), the codes 4.67 from memory or cache (draws 2.34, decisions
 * 2.23). */
static int FN(terngrad_encode)(void *st, const REAL *x, uint32_t step,
                                 uint8_t *buf, size_t cap, size_t *len,
                                 gc_compress_info *info)
{
  const qstate *q = st;
  size_t n = q->n, need = HDR + W + (2 * n + 7) / 8, nnz = 0;
  GC_TRY(FN(check_cap)(x, n, cap, need, "terngrad"));
  /* Clip to +-c std(x) (unbiased 1/(n-1) estimator, as torch.std); the
   * bound is rounded to REAL first so clamped entries equal s exactly.
   * A NaN or Inf makes c meaningless but is caught in the max pass. */
  REAL c = (REAL) INFINITY;
  if (q->clip > 0) {
    double mean = FN(block_sum)(x, n, 0, 0.0) / (double) n;
    double var = FN(block_sum)(x, n, 1, mean);
    int e = 0;
    if (!(var <= DBL_MAX)) {
      /* float64 x beyond about 1e154 (a float32 sum stays finite): the
       * same moments of x 2^-e, e the exponent of max |x_i|, scaled back
       * (a bound past DBL_MAX clips nothing); an Inf bound here had turned
       * clipping off.  A NaN or Inf in x is caught below. */
      double top = 0, m = 0;
      for (size_t i = 0; i < n; i++)
        top = fmax(top, fabs((double) x[i]));
      e = top > 0 && top <= DBL_MAX ? ilogb(top) : 0;
      for (size_t i = 0; i < n; i++)
        m += ldexp((double) x[i], -e);
      m /= (double) n;
      var = 0;
      for (size_t i = 0; i < n; i++) {
        double d = ldexp((double) x[i], -e) - m;
        var += d * d;
      }
    }
    c = (REAL) ldexp(q->clip * (n > 1 ? sqrt(var / (double) (n - 1)) : 0.0), e);
  }
  /* s = max_i min(|x_i|, c) = min(max_i |x_i|, c) */
  REAL s = 0;
#if PREC == 32
  uint32_t amax = absmax_bits(x, n);
  if (amax >= 0x7f800000u)
    return FN(check_finite)(x, n, "terngrad");
  memcpy(&s, &amax, sizeof s);
  s = s < c ? s : c;
#else
  unsigned bad = 0;
  for (size_t i = 0; i < n; i++) {
    REAL a = (REAL) fabs((double) x[i]);
    bad |= !FN(isfin)(x[i]);
    a = a < c ? a : c;
    s = a > s ? a : s;
  }
  if (bad)
    return FN(check_finite)(x, n, "terngrad");
#endif
  buf[0] = TAG_TERNGRAD;
  buf[1] = PREC;
  memcpy(buf + HDR, &s, W);
  uint8_t *out = buf + HDR + W;
  if (s > 0) {
    const rngkey key = { q->seed, q->stream, step };
    nnz = FN(tern_codes)(&key, x, n, c, 65536.0 / (double) s, out);
  } else {
    memset(out, 0, need - HDR - W);
  }
  *len = need;
  info->nnz = nnz;
  info->selected = n;
  info->loops = 0;
  return GC_SUCCESS;
}

static int FN(terngrad_decode)(const void *st, const uint8_t *buf,
                                 size_t len, uint32_t step, REAL scale, REAL *y)
{
  const qstate *q = st;
  size_t n = q->n, need = HDR + W + (2 * n + 7) / 8;
  (void) step;
  GC_TRY(gc__check_msg(buf, len, HDR, TAG_TERNGRAD, PREC, "terngrad"));
  GC_TRY(gc__check_msg_len(len, need, "terngrad"));
  GC_TRY(FN(check_pad)(buf[len - 1], 2 * n, "terngrad"));
  REAL s = FN(load)(buf + HDR);
  GC_TRY(FN(check_scale)(s, "terngrad"));
  const uint8_t *p = buf + HDR + W;
  for (size_t k = 0; k < (2 * n + 7) / 8; k++) {
    /* code 2 (binary 10) in any of the four slots is invalid */
    uint8_t v = p[k];
    if ((v & 0xAA) & ~((v & 0x55) << 1))
      GC_ERRORF(GC_ECORRUPT, "terngrad: invalid 2-bit code near entry %zu",
                4 * k);
  }
  REAL a = scale * s;
  const REAL val[4] = {0, a, 0, -a};    /* by code; 2 was rejected above */
  for (size_t i = 0; i < n; i++)
    y[i] += val[(p[i >> 2] >> (2 * (i & 3))) & 3u];
  return GC_SUCCESS;
}

/* ---- fp16 and bf16 ----------------------------------------------------- */

static int FN(half_common_encode)(const qstate *q, const REAL *x,
                                    uint8_t *buf, size_t cap, size_t *len,
                                    gc_compress_info *info, int bf)
{
  size_t n = q->n, need = HDR + 2 * n, nnz = 0;
  const char *who = bf ? "bf16" : "fp16";
  GC_TRY(FN(check_cap)(x, n, cap, need, who));
  buf[0] = bf ? TAG_BF16 : TAG_FP16;
  buf[1] = PREC;
  uint8_t *p = buf + HDR;
#if PREC == 32
  {   /* one pass: convert, count, check */
    uint32_t amax;
    nnz = bf ? bf16_count(x, n, p, &amax) : fp16_count(x, n, p, &amax);
    if (amax >= 0x7f800000u)
      return FN(check_finite)(x, n, who);
    *len = need;
    info->nnz = nnz;
    info->selected = n;
    info->loops = 0;
    return GC_SUCCESS;
  }
#endif
  /* finiteness first, so that the conversion loops below stay simple
   * enough to vectorise (or to use F16C) */
  GC_TRY(FN(check_finite)(x, n, who));
  size_t i = 0;
  if (bf)
    for (; i < n; i++) {
      uint16_t h = FN(to_bf16)(x[i]);
      p[2 * i] = (uint8_t) h;
      p[2 * i + 1] = (uint8_t) (h >> 8);
    }
  else
    for (; i < n; i++) {
      uint16_t h = gc__half_from_double((double) x[i]);
      p[2 * i] = (uint8_t) h;
      p[2 * i + 1] = (uint8_t) (h >> 8);
    }
  for (size_t j = 0; j < n; j++)   /* nonzero halves (either sign of 0 is 0) */
    nnz += ((p[2 * j] | (p[2 * j + 1] & 0x7fu)) != 0);
  *len = need;
  info->nnz = nnz;
  info->selected = n;
  info->loops = 0;
  return GC_SUCCESS;
}

static int FN(half_common_decode)(const qstate *q, const uint8_t *buf,
                                    size_t len, REAL scale, REAL *y, int bf)
{
  size_t n = q->n;
  const char *who = bf ? "bf16" : "fp16";
  unsigned eb = bf ? 8 : 5, mb = bf ? 7 : 10;
  GC_TRY(gc__check_msg(buf, len, HDR, bf ? TAG_BF16 : TAG_FP16, PREC,
                       who));
  GC_TRY(gc__check_msg_len(len, HDR + 2 * n, who));
  const uint8_t *p = buf + HDR;
  for (size_t i = 0; i < n; i++) {
    uint16_t h = (uint16_t) (p[2 * i] | (p[2 * i + 1] << 8));
    if (gc__minifloat_isnan(h, eb, mb))
      GC_ERRORF(GC_ECORRUPT, "%s: NaN pattern 0x%04x at entry %zu", who, h, i);
  }
  for (size_t i = 0; i < n; i++) {
    uint16_t h = (uint16_t) (p[2 * i] | (p[2 * i + 1] << 8));
    y[i] += scale * (REAL) gc__minifloat_to_double(h, eb, mb);
  }
  return GC_SUCCESS;
}

FLAVOUR(fp16, half, 0)
FLAVOUR(bf16, half, 1)

#undef FLAVOUR
#undef W
#undef REAL
#undef SFX
#undef PREC
