/* sparse_source.c -- type-generic half of sparse.c, included once per
 * precision with REAL, SFX, UKEY (unsigned integer of REAL's width), FABS,
 * NEXTDOWN, REAL_MAX, REAL_MIN, REAL_MAX_EXP and REAL_MANT_DIG defined
 * (GSL templates_on.h style), which it undefines at its end.  Never
 * compiled on its own. */

enum { FN(SCAN_BLOCK) = 32 };

/* Count the i with !(|x_i| <= t), i.e. |x_i| > t or x_i NaN, storing the
 * first `cap` of them (ascending) in out, and x_i in val unless it is
 * NULL.  t must be <= REAL_MAX, so every non-finite x_i is counted; the
 * first one stops the scan with *bad = i.  Blocks are tested with a
 * vectorisable OR before the rare scalar append; SCAN_ISA, where a
 * precision has one, is the dispatched scan of sparse.c. */
static size_t FN(scan)(const REAL *x, size_t n, REAL t, uint32_t *out,
                       REAL *val, size_t cap, size_t *bad)
{
#ifdef SCAN_ISA
  return SCAN_ISA(x, n, t, out, val, cap, bad);
#endif
  enum { B = FN(SCAN_BLOCK) };
  size_t c = 0, i = 0;
  for (; i < n; i += B) {
    size_t m = n - i < B ? n - i : B;
    if (m == B) {
      int any = 0;
      for (size_t j = 0; j < B; j++)
        any |= !(FABS(x[i + j]) <= t);
      if (!any)
        continue;
    }
    for (size_t j = 0; j < m; j++) {
      REAL a = FABS(x[i + j]);
      if (!(a <= t)) {
        if (!(a <= REAL_MAX)) {
          *bad = i + j;
          return c;
        }
        if (c < cap) {
          out[c] = (uint32_t) (i + j);
          if (val)
            val[c] = x[i + j];
        }
        c++;
      }
    }
  }
  *bad = SIZE_MAX;
  return c;
}

/* The scan of threshold, Gaussian-k and DGC, which select up to n entries
 * into out: with *val (room entries, staged in the message buffer by
 * gc__wire_stage) the values come along, so that encoding does not read
 * x again (at density 0.1 that gather read most of x's cache lines a
 * second time).  When more entries pass than *val holds, out and *val
 * hold the first room of them, enough if only the first `need` are used;
 * else the scan runs again without values and *val becomes NULL.  With L
 * (and SCAN_PIECES, and *val), the threads' pieces may be left where they
 * lie, as L says (L->T > 1), for gc__wire_encode_staged_pieces; with
 * L->codes (and SCAN_CODES, and *val holding need), the first need
 * entries' delta codes instead of any index (L->T == 0: FN(encode_codes)
 * writes the message; on threads the values in L->vp pieces of the
 * room). */
static size_t FN(scan_staged)(const REAL *x, size_t n, REAL t, uint32_t *out,
                              REAL **val, size_t room, size_t need, size_t *bad,
                              scan_layout *L)
{
  size_t cap = *val && room < n ? room : n, c;
  if (L)
    L->T = 1;
#ifdef SCAN_CODES
  if (L && *val && room >= need) {   /* the codes of the first need, and their values */
    c = SCAN_CODES(x, n, t, *val, need, room, need, bad, L);
    if (c != SIZE_MAX) {
      L->T = 0;
      return c;
    }
  }
#endif
#ifdef SCAN_PIECES
  if (L && *val) {
    c = SCAN_PIECES(x, n, t, out, *val, cap, bad, L);
    if (L->T > 1)
      return c;
  } else
#endif
    c = FN(scan)(x, n, t, out, *val, cap, bad);
  if (*val && *bad == SIZE_MAX && c > cap && need > cap) {
    *val = NULL;
    c = FN(scan)(x, n, t, out, NULL, n, bad);
  }
  return c;
}

/* The REAL t with |x| > t  <=>  |x| > v for every REAL x (v a double),
 * clamped to REAL_MAX so that non-finite values still show up in scans. */
static REAL FN(strict_t)(double v)
{
  if (!(v < (double) REAL_MAX))
    return REAL_MAX;
  REAL t = (REAL) v;
  if ((double) t > v)
    t = NEXTDOWN(t);
  return t;
}

/* The sampled entry j of the samplers below: x[start + j stride], or
 * with jitter one entry of the stride [j stride, (j + 1) stride) at an
 * offset a fixed hash of j picks.  A plain stride can fall in step with
 * the layout of a gradient (rows, channels, layers), and then the sample
 * misses where the large entries are (top-K then admitted twenty times K
 * candidates on a CNN's gradients and fell back to the radix select). */
static size_t FN(sample_at)(size_t j, size_t start, size_t stride, int jitter)
{
  if (!jitter)
    return start + j * stride;
  uint32_t h = (uint32_t) j * 0x9E3779B1u;
  h ^= h >> 15;
  h *= 0x85EBCA77u;
  h ^= h >> 13;
  return j * stride + (size_t) (((uint64_t) h * stride) >> 32);
}

/* smp[j] = |x| at sample j for j in [lo, hi) (of m), clamped to REAL_MAX:
 * a NaN or Inf must not poison the selection (the scan that follows
 * reports it). */
static void FN(sample_run)(const REAL *x, size_t start, size_t stride, int jitter,
                           size_t lo, size_t hi, size_t m, REAL *smp)
{
  for (size_t j = lo; j < hi; j++) {
    /* one cache line per sample, and the hardware prefetcher stops at
     * page boundaries: ask for lines well ahead (SAMPLE_AHEAD) */
    if (j + SAMPLE_AHEAD < m)
      __builtin_prefetch(x + FN(sample_at)(j + SAMPLE_AHEAD, start, stride, jitter));
    REAL a = FABS(x[FN(sample_at)(j, start, stride, jitter)]);
    smp[j] = a <= REAL_MAX ? a : REAL_MAX;
  }
}

/* The m samples on the OpenMP threads, each a contiguous run of them (the
 * same samples): one cache-line miss each, and they ran alone while the
 * other threads waited for the scan. */
static void FN(sample)(const REAL *x, size_t start, size_t stride, int jitter, size_t m,
                       REAL *smp)
{
  int T = gc__threads_for(m, SAMPLE_PAR_MIN, SCAN_PAR_MAX);
  if (T == 1) {
    FN(sample_run)(x, start, stride, jitter, 0, m, m, smp);
    return;
  }
  size_t run = (m + (size_t) T - 1) / (size_t) T;
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++) {
    size_t lo = (size_t) j * run < m ? (size_t) j * run : m;
    FN(sample_run)(x, start, stride, jitter, lo, m - lo < run ? m : lo + run, m, smp);
  }
}

static int FN(report_bad)(const REAL *x, size_t i)
{
  GC_ERRORF(GC_EDOM, "non-finite value %g at index %zu of the input",
            (double) x[i], i);
}

#define KEY REAL
#define KTH FN(kth_largest)
#include "kth_source.c"

/* Exact top-K among candidate indices cand[0..c) (ascending, all finite,
 * c >= K): out receives K ascending indices (out may be cand: the j-th
 * output is written after cand[j] is read).  Of the entries equal to the
 * K-th magnitude, the lowest (ties low) or highest (ties high) indices
 * fill the remaining places. */
static REAL FN(kth_largest_bucketed)(REAL *a, size_t m, size_t k,
                                     REAL *scratch, size_t cap);

/* magcap: REALs that mag holds (>= c); what is left past c is the
 * bucketed selection's scratch (the partitioning quickselect over all c
 * magnitudes took most of top-K's time at density 0.01 and up). */
static void FN(select_among)(const REAL *x, const uint32_t *cand, size_t c,
                             size_t k, int ties, REAL *mag, size_t magcap,
                             uint32_t *out)
{
  for (size_t j = 0; j < c; j++)
    mag[j] = FABS(x[cand[j]]);
  REAL t = FN(kth_largest_bucketed)(mag, c, k, mag + c, magcap - c);
  size_t g = 0, e = 0;
  for (size_t j = 0; j < c; j++) {   /* mag is reordered, the counts are not */
    g += mag[j] > t;
    e += mag[j] == t;
  }
  size_t q = k - g, skip = ties == GC_TIES_HIGH ? e - q : 0, o = 0, seen = 0;
  for (size_t j = 0; j < c; j++) {
    REAL a = FABS(x[cand[j]]);
    if (a > t) {
      out[o++] = cand[j];
    } else if (a == t) {
      if (seen >= skip && seen < skip + q)
        out[o++] = cand[j];
      seen++;
    }
  }
}

static UKEY FN(key)(REAL v)
{
  UKEY u;
  memcpy(&u, &v, sizeof u);
  return u & ~((UKEY) 1 << (8 * sizeof(UKEY) - 1));   /* |v|, monotone */
}

static REAL FN(kth_largest_bucketed_par)(REAL *a, size_t m, size_t k, REAL *scratch,
                                         size_t cap, int T);

enum { FN(BUCKET_HB) = 11 };

/* hist[b] = how many of a[lo, hi) have key >> (key bits - 1 - HB) == b:
 * four histograms summed, since neighbouring magnitudes share buckets and
 * one counter's increments would wait on each other. */
static void FN(bucket_counts)(const REAL *a, size_t lo, size_t hi, uint32_t *hist)
{
  enum { HB = FN(BUCKET_HB), SH = 8 * (int) sizeof(UKEY) - 1 - HB };
  uint32_t h[4][1 << HB];
  memset(h, 0, sizeof h);
  size_t i = lo;
  for (; i + 4 <= hi; i += 4)
    for (int u = 0; u < 4; u++)
      h[u][FN(key)(a[i + u]) >> SH]++;
  for (; i < hi; i++)
    h[0][FN(key)(a[i]) >> SH]++;
  for (int b = 0; b < 1 << HB; b++)
    hist[b] = h[0][b] + h[1][b] + h[2][b] + h[3][b];
}

/* k-th largest (k in 1..m) of the non-negative a[0..m): a histogram of
 * the top key bits narrows it to one bucket, copied to scratch (cap
 * entries) for the quickselect; a quickselect over all of a (reordered)
 * when the bucket does not fit.  Same value as FN(kth_largest), at about
 * two reads of a instead of several partitioning passes. */
static REAL FN(kth_largest_bucketed)(REAL *a, size_t m, size_t k,
                                     REAL *scratch, size_t cap)
{
  enum { HB = FN(BUCKET_HB), SH = 8 * (int) sizeof(UKEY) - 1 - HB };
  int T = gc__threads_for(m, BUCKETED_PAR_MIN, SCAN_PAR_MAX);
  if (T > 1)
    return FN(kth_largest_bucketed_par)(a, m, k, scratch, cap, T);
  uint32_t hist[1 << HB];
  FN(bucket_counts)(a, 0, m, hist);
  size_t b = (1 << HB) - 1, above = 0;
  for (; above + hist[b] < k; b--)   /* stops: the counts sum to m >= k */
    above += hist[b];
  if (hist[b] > cap)
    return FN(kth_largest)(a, m, k);
  size_t nb = 0;
  for (size_t j = 0; j < m; j++)
    if (FN(key)(a[j]) >> SH == b)
      scratch[nb++] = a[j];
  return FN(kth_largest)(scratch, nb, k - above);
}

/* FN(kth_largest_bucketed) on T threads, each a run of a: a histogram
 * per run, then each run's entries of the chosen bucket copied to scratch
 * after those of the runs before it, the order one thread copies them in
 * (DGC's 250 000 samples took a fifth of a millisecond on one thread). */
static REAL FN(kth_largest_bucketed_par)(REAL *a, size_t m, size_t k, REAL *scratch,
                                         size_t cap, int T)
{
  enum { HB = FN(BUCKET_HB), SH = 8 * (int) sizeof(UKEY) - 1 - HB };
  uint32_t hist[SCAN_PAR_MAX][1 << HB];
  size_t run = (m + (size_t) T - 1) / (size_t) T, at[SCAN_PAR_MAX], above = 0, nb = 0;
  size_t b = (1 << HB) - 1;
  #pragma omp parallel num_threads(T)
  {
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++) {
      size_t lo = (size_t) j * run < m ? (size_t) j * run : m, hi = m - lo < run ? m : lo + run;
      FN(bucket_counts)(a, lo, hi, hist[j]);
    }
    #pragma omp single
    {
      for (;; b--) {   /* stops: the counts sum to m >= k */
        size_t cnt = 0;
        for (int j = 0; j < T; j++)
          cnt += hist[j][b];
        if (above + cnt >= k)
          break;
        above += cnt;
      }
      for (int j = 0; j < T; j++) {
        at[j] = nb;
        nb += hist[j][b];
      }
    }
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++) {
      size_t lo = (size_t) j * run < m ? (size_t) j * run : m, hi = m - lo < run ? m : lo + run;
      for (size_t i = lo, o = at[j]; i < hi && nb <= cap; i++)
        if (FN(key)(a[i]) >> SH == b)
          scratch[o++] = a[i];
    }
  }
  if (nb > cap)
    return FN(kth_largest)(a, m, k);
  return FN(kth_largest)(scratch, nb, k - above);
}

/* Exact top-K over the whole (finite) vector by an 8-bit radix select on
 * the magnitude bits: no workspace, a few passes.  The fallback when the
 * sampled threshold misleads. */
static void FN(radix_topk)(const REAL *x, size_t n, size_t k, int ties,
                           uint32_t *out)
{
  UKEY prefix = 0, mask = 0;
  size_t need = k, eq = 0;
  for (int sh = 8 * (int) sizeof(UKEY) - 8; sh >= 0; sh -= 8) {
    size_t h[256] = {0};
    for (size_t i = 0; i < n; i++) {
      UKEY u = FN(key)(x[i]);
      if ((u & mask) == prefix)
        h[(u >> sh) & 255]++;
    }
    int b = 255;
    for (; b > 0 && need > h[b]; b--)
      need -= h[b];
    prefix |= (UKEY) b << sh;
    mask |= (UKEY) 255 << sh;
    eq = h[b];
  }
  size_t skip = ties == GC_TIES_HIGH ? eq - need : 0, o = 0, seen = 0;
  for (size_t i = 0; i < n; i++) {
    UKEY u = FN(key)(x[i]);
    if (u > prefix) {
      out[o++] = (uint32_t) i;
    } else if (u == prefix) {
      if (seen >= skip && seen < skip + need)
        out[o++] = (uint32_t) i;
      seen++;
    }
  }
}

/* The top-K candidate threshold: every |x_i| above it is a candidate
 * (-1 when the workspace holds all of x).  With upper, also a magnitude
 * that about K - 4 sigma entries exceed (REAL_MAX when there is none): the
 * K-th magnitude is very likely at most that, which narrows the search. */
static REAL FN(topk_threshold)(sparse_state *s, const REAL *x, size_t k,
                               REAL *upper)
{
  size_t n = s->n;
  if (upper)
    *upper = REAL_MAX;
  if (n <= s->cand_cap)
    return -1;
  /* fixed stride, no RNG: the threshold admits ~1.05K + 4 sigma.  A
   * sample of n/16 (at least TOPK_MIN_SAMPLES) is plenty: its cost, not
   * the scan, would otherwise dominate short vectors. */
  size_t m = n / 16 > TOPK_MIN_SAMPLES ? n / 16 : TOPK_MIN_SAMPLES;
  m = m < s->sample_cap ? m : s->sample_cap;
  m = m < TOPK_SAMPLES ? m : TOPK_SAMPLES;
  REAL *smp = (REAL *) s->sample;
  FN(sample)(x, 0, n / m, 1, m, smp);
  double e = (double) k / (double) n * (double) m;
  double r = ceil(1.05 * e + 4 * sqrt(e) + 4);
  size_t rank = r >= (double) m ? m : (size_t) r;
  /* keep |x| >= that sample */
  REAL t = NEXTDOWN(FN(kth_largest_bucketed)(smp, m, rank, (REAL *) s->mag,
                                             s->cand_cap));
  double ru = floor(e - 4 * sqrt(e) - 4);
  if (upper && ru >= 1)
    *upper = FN(kth_largest_bucketed)(smp, m, (size_t) ru, (REAL *) s->mag,
                                      s->cand_cap);
  return t;
}

/* Top-K of x into s->idx (ascending).  Returns GC_SUCCESS or GC_EDOM. */
static int FN(topk)(sparse_state *s, const REAL *x, size_t k)
{
  size_t n = s->n, bad;
  REAL *mag = (REAL *) s->mag, t = FN(topk_threshold)(s, x, k, NULL);
  size_t c = FN(scan)(x, n, t, s->cand, NULL, s->cand_cap, &bad);
  if (bad != SIZE_MAX)
    return FN(report_bad)(x, bad);
  if (c >= k && c <= s->cand_cap)
    FN(select_among)(x, s->cand, c, k, s->p.ties, mag,
                     s->cand_cap * (sizeof *s->mag / sizeof(REAL)), s->idx);
  else
    FN(radix_topk)(x, n, k, s->p.ties, s->idx);
  return GC_SUCCESS;
}

/* Words [w, nw) of random-K's bitmap, cleared, into the message as the
 * walk state says, one entry at a time. */
static void FN(walk_codes)(uint64_t *bits, size_t w, size_t nw, const REAL *x,
                           walk_state *ws)
{
  for (; w < nw; w++) {
    for (uint64_t b = bits[w]; b; b &= b - 1) {
      uint32_t i = (uint32_t) (64 * w) + (uint32_t) __builtin_ctzll(b);
      REAL v = x[i];
      if (ws->codes)
        ws->pos = leb_put(ws->codes, ws->pos, i - ws->last - 1);
      ws->last = i;
      memcpy(ws->vals + ws->c++ * sizeof(REAL), &v, sizeof v);
      ws->nz += v != 0;
      if (!(FABS(v) <= REAL_MAX) && ws->bad == SIZE_MAX)
        ws->bad = i;
    }
    bits[w] = 0;
  }
}

/* Words [w0, w1) of the bitmap into the message, the values ending at
 * cend (FN(walk_codes) on the chosen instruction set). */
static void FN(walk_piece)(uint64_t *bits, size_t w0, size_t w1, size_t n, const REAL *x,
                           size_t cend, walk_state *ws)
{
#ifdef WALK_CODES_ISA
  WALK_CODES_ISA(bits, w0, w1, n, x, cend, ws);
#else
  (void) n; (void) cend;
  FN(walk_codes)(bits, w0, w1, x, ws);
#endif
}

/* Random-K's message for dense draws (K >= n/16) from the bitmap of
 * floyd(s, step, NULL), in one pass over it and x in index order: the
 * coding is worked out from the bitmap first (bitmap_delta_bytes), so the
 * walk writes the delta codes and the values where they belong (the
 * bitmap coding is the bitmap's bytes).  On T threads the words go in T
 * pieces, each starting where bitmap_delta_bytes and a count of the marked
 * entries before it say, and stopping its full-width stores short of the
 * next piece's start.  Returns 0, doing nothing, where the message would
 * not fit in cap; else 1, the bitmap cleared, *len and *nnz set and *bad
 * the lowest index with a non-finite value (SIZE_MAX: none), as the
 * encoder would have named it. */
static int FN(randk_dense)(sparse_state *s, const REAL *x, uint8_t *buf, size_t cap,
                           size_t *len, size_t *nnz, size_t *bad)
{
  size_t n = s->n, k = s->k, nw = (n + 63) / 64, isec;
  int T = gc__threads_for(n, SCAN_PAR_MIN, SCAN_PAR_MAX);
  size_t per = (nw + (size_t) T - 1) / (size_t) T;
  walk_state at[SCAN_PAR_MAX];
  int coding = gc__wire_pick(n, k, bitmap_delta_bytes(s->bits, n, k, T, per, at), &isec);
  size_t total = GC__WIRE_HDR + isec + k * sizeof(REAL);
  if (total > cap || coding == GC__IDX_RAW)   /* raw: never for K >= n/16 */
    return 0;
  gc__wire_put_header(buf, s->wire, sizeof(REAL), coding, k);
  if (coding == GC__IDX_BITMAP)   /* little-endian words: the same bytes */
    memcpy(buf + GC__WIRE_HDR, s->bits, isec);
  uint8_t *codes = coding == GC__IDX_DELTA ? buf + GC__WIRE_HDR : NULL;
  at[0] = (walk_state) { codes, 0, isec, UINT32_MAX, buf + GC__WIRE_HDR + isec, 0, 0, SIZE_MAX };
  if (T > 1) {
    size_t cnt[SCAN_PAR_MAX];
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T - 1; j++)
      cnt[j] = bitmap_count(s->bits, (size_t) j * per, min_words((size_t) (j + 1) * per, nw));
    for (int j = 1; j < T; j++) {
      size_t c = at[j - 1].c + cnt[j - 1];
      at[j] = (walk_state) { codes, c + at[j].pos, isec, at[j].last, at[0].vals, c, 0, SIZE_MAX };
      at[j - 1].limit = at[j].pos;
    }
  }
  if (T == 1) {   /* no parallel region at all: small messages are many */
    FN(walk_piece)(s->bits, 0, nw, n, x, k, &at[0]);
  } else {
    size_t cend[SCAN_PAR_MAX];   /* apart: the pieces' states move as they walk */
    for (int j = 0; j < T; j++)
      cend[j] = j + 1 < T ? at[j + 1].c : k;
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T; j++)
      FN(walk_piece)(s->bits, min_words((size_t) j * per, nw),
                     min_words((size_t) (j + 1) * per, nw), n, x, cend[j], &at[j]);
  }
  *len = total;
  *nnz = 0;
  *bad = SIZE_MAX;
  for (int j = 0; j < T; j++) {
    *nnz += at[j].nz;
    if (*bad == SIZE_MAX)
      *bad = at[j].bad;
  }
  return 1;
}

/* How many draws behind Floyd's loop FN(floyd_values) reads x: the line
 * asked for at the draw has come from memory by then (64: 12.4 ms, 128:
 * 11.5, 256: 11.7 at K = 2.5e6, n = 2.5e7). */
enum { FN(GATHER_LAG) = 128 };

/* out (unaligned) = x[i] * factor; returns whether x[i] is nonzero
 * (put_vals' arithmetic and count). */
static inline size_t FN(put_value)(const REAL *x, uint32_t i, REAL factor, uint8_t *out)
{
  REAL xi = x[i], y = xi * factor;
  memcpy(out, &y, sizeof y);
  return xi != 0;
}

/* floyd(s, step, s->idx) with random-K-unbiased's values: out[c] (bytes,
 * unaligned) = x[v_c] * factor; returns the nonzero x[v_c] (put_vals'
 * count and arithmetic, so the bytes are the gather's).  Run one after the
 * other, Floyd's bitmap tests and the gather of x each waited on their own
 * misses (4 and 7 ms at K = 2.5e6, n = 2.5e7); in one loop, a line of x
 * asked for at each draw, they overlap.  The draws go one at a time:
 * in floyd_avx512's blocks, with the lines of x asked for a block at a
 * time, it took 15 ms. */
static size_t FN(floyd_values)(sparse_state *s, uint32_t step, const REAL *x, REAL factor,
                               uint8_t *out)
{
  enum { LAG = FN(GATHER_LAG) };
  size_t n = s->n, k = s->k, nz = 0, c = 0;
  uint32_t *order = s->idx, *t = s->tmp;
  uint64_t *bits = s->bits;
  floyd_warm_bits(s);
  /* the targets a stretch at a time, as floyd() makes random-K's; the
   * values LAG draws behind, and after the last draw the last LAG */
  for (size_t c0 = 0; c0 < k; c0 += FLOYD_STRETCH) {
    size_t m = k - c0 < FLOYD_STRETCH ? k - c0 : FLOYD_STRETCH;
    floyd_targets_at(s, step, c0, m, t);
    for (size_t i = 0; i < m; i++, c++) {
      if (i + FLOYD_AHEAD < m)
        __builtin_prefetch(bits + (t[i + FLOYD_AHEAD] >> 6), 1);
      uint32_t v = floyd_one(bits, t[i], (uint32_t) (n - k + c));
      order[c] = v;
      __builtin_prefetch(x + v);
      if (c >= LAG)
        nz += FN(put_value)(x, order[c - LAG], factor, out + (c - LAG) * sizeof(REAL));
    }
  }
  for (size_t j = k > LAG ? k - LAG : 0; j < k; j++)
    nz += FN(put_value)(x, order[j], factor, out + j * sizeof(REAL));
  return nz;
}

/* Random-K refuses NaN or Inf anywhere in x, naming the first, as every
 * compressor does (docs/design.md), though it sends only K entries: one
 * read of x (the scan, vectorised and on threads), which at small
 * densities is most of random-K's time -- the price of one rule. */
static int FN(check_finite)(const REAL *x, size_t n)
{
  size_t bad;
  FN(scan)(x, n, REAL_MAX, NULL, NULL, 0, &bad);
  return bad == SIZE_MAX ? GC_SUCCESS : FN(report_bad)(x, bad);
}

/* Gaussian-k sums of one block x[lo,hi) (hi - lo <= GAUSS_BLOCK) of the
 * run of blocks that starts at entry `from` (*c counts the run's
 * candidates): 16 REAL lanes of shifted sums, lane j taking the entries
 * lo + 16q + j and lane 0
 * the tail, folded into double in lane order.  The same pass appends the
 * indices with !(|x_i| <= t0) to cand and their values to cval (up to
 * cap; *c counts them all), so that the threshold evaluations rarely have
 * to read x again.  This order is the definition the GPU twin reproduces;
 * GAUSS_GROUPS, where a precision has one, takes the full groups of 16. */
static void FN(gauss_block_sums)(const REAL *x, size_t from, size_t lo, size_t hi,
                                 REAL c0, REAL t0, double *p1, double *p2,
                                 uint32_t *cand, REAL *cval, size_t cap, size_t *c)
{
  REAL a1[16] = {0}, a2[16] = {0};
  size_t i = lo;
#ifdef GAUSS_GROUPS
  i = GAUSS_GROUPS(x, from, lo, hi, c0, t0, a1, a2, cand, cval, cap, c);
#else
  (void) from;
#endif
  for (; i + 16 <= hi; i += 16) {
    int any = 0;
    for (int j = 0; j < 16; j++) {
      REAL d = x[i + j] - c0;
      a1[j] += d;
      a2[j] += d * d;
      any |= !(FABS(x[i + j]) <= t0);
    }
    if (any)
      for (int j = 0; j < 16; j++)
        if (!(FABS(x[i + j]) <= t0) && (*c)++ < cap) {
          cand[*c - 1] = (uint32_t) (i + j);
          cval[*c - 1] = x[i + j];
        }
  }
  for (; i < hi; i++) {
    REAL d = x[i] - c0;
    a1[0] += d;
    a2[0] += d * d;
    if (!(FABS(x[i]) <= t0) && (*c)++ < cap) {
      cand[*c - 1] = (uint32_t) i;
      cval[*c - 1] = x[i];
    }
  }
  double s1 = 0, s2 = 0;
  for (int j = 0; j < 16; j++) {
    s1 += (double) a1[j];
    s2 += (double) a2[j];
  }
  *p1 = s1;
  *p2 = s2;
}

/* Gaussian-k's sums pass on the OpenMP threads, as scan_pieces_f32 runs a
 * scan: T runs of whole blocks, each block's two sums into s->block_sums
 * and its candidates into the run's share cand_cap / T, then the sums
 * pushed in block order (the pairwise tree of one thread).  The shares
 * stay where they are, described by *L (float32's filter and the
 * encoder read them there; for float64 FN(join_pieces) moves them
 * together).  Returns -1 where it does not run
 * (one thread, a short vector: the caller's loop does the pass), 1 with
 * the list complete as the one-thread pass leaves it, 0 when a run
 * outgrew its share (the candidates crowd into part of x): the sums and
 * *nc hold, the list does not, and the threshold evaluations scan x
 * instead, with the same result. */
static int FN(gauss_sums_par)(sparse_state *s, const REAL *x, REAL c0, REAL t0,
                              REAL *cval, gc__pairwise *sum1, gc__pairwise *sum2,
                              size_t *nc, scan_layout *L)
{
#ifdef _OPENMP
  size_t n = s->n, nb = (n + GAUSS_BLOCK - 1) / GAUSS_BLOCK;
  int T = s->block_sums ? gc__threads_for(n, SCAN_PAR_MIN, SCAN_PAR_MAX) : 1;
  if (T <= 1)
    return -1;
  size_t share = s->cand_cap / (size_t) T, run = (nb + (size_t) T - 1) / (size_t) T;
  size_t cnt[SCAN_PAR_MAX];
  double *bs = s->block_sums;
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++) {
    size_t b1 = ((size_t) j + 1) * run < nb ? ((size_t) j + 1) * run : nb, c = 0;
    for (size_t b = (size_t) j * run; b < b1; b++) {
      size_t lo = b * GAUSS_BLOCK, hi = n - lo < GAUSS_BLOCK ? n : lo + GAUSS_BLOCK;
      FN(gauss_block_sums)(x, (size_t) j * run * GAUSS_BLOCK, lo, hi, c0, t0, &bs[2 * b],
                           &bs[2 * b + 1], s->cand + (size_t) j * share,
                           cval + (size_t) j * share, share, &c);
    }
    cnt[j] = c;
  }
  for (size_t b = 0; b < nb; b++) {
    gc__pairwise_push(sum1, bs[2 * b]);
    gc__pairwise_push(sum2, bs[2 * b + 1]);
  }
  size_t total = 0;
  int fits = 1;
  for (int j = 0; j < T; j++) {
    total += cnt[j];
    fits &= cnt[j] <= share;
  }
  *nc = total;
  if (!fits)
    return 0;
  L->T = T;
  L->share = share;
  memcpy(L->cnt, cnt, (size_t) T * sizeof *cnt);
  return 1;
#else
  (void) s; (void) x; (void) c0; (void) t0; (void) cval;
  (void) sum1; (void) sum2; (void) nc; (void) L;
  return -1;
#endif
}

/* The pieces *L describes moved together at the front of cand and, unless
 * it is NULL, cval; *L then describes one piece. */
static void FN(join_pieces)(uint32_t *cand, REAL *cval, scan_layout *L)
{
  size_t at = L->cnt[0];
  for (int j = 1; j < L->T; j++) {
    memmove(cand + at, cand + (size_t) j * L->share, L->cnt[j] * sizeof *cand);
    if (cval)
      memmove(cval + at, cval + (size_t) j * L->share, L->cnt[j] * sizeof *cval);
    at += L->cnt[j];
  }
  L->T = 1;
  L->cnt[0] = at;
}

/* Gaussian-k's threshold mu + |z| sigma (theory.md 2.5) from the shifted
 * sums S1 = sum (x_i - c0), S2 = sum (x_i - c0)^2 into *thr.  Returns 0
 * where the sums may have left the range in which every operation on them
 * scales exactly with x: S2 or S1^2 overflowed, the threshold did, or S2
 * is so small (below n REAL_MIN 2^MANT: the squares' mean within MANT
 * binades of the subnormals) that squares rounded to subnormals or to 0
 * may have changed it.  Inside that range x 2^j gives thr 2^j exactly. */
static int FN(gauss_thr)(REAL c0, double S1, double S2, size_t n, double z, double *thr)
{
  double mu = (double) c0 + S1 / (double) n, sq = S1 * S1;
  double var = n > 1 ? (S2 - sq / (double) n) / (double) (n - 1) : 0.0;
  double sigma = sqrt(var > 0 ? var : 0);
  *thr = mu + z * sigma;
  return isfinite(S2) && isfinite(sq) && isfinite(*thr) &&
         !(S2 < (double) n * ldexp(REAL_MIN, REAL_MANT_DIG));
}

/* x 2^sh in REAL: exact unless it lands among the subnormals. */
static REAL FN(ldexp_real)(REAL v, int sh)
{
  return (REAL) ldexp((double) v, sh);
}

/* The sh that brings max |x_i| (finite x) to [2^E, 2^(E+1)) with
 * E = (REAL_MAX_EXP - 80) / 2 (24 for float32, 472 for float64), or 0
 * for x = 0.  There |x_i - c0| < 2^(E+2), so a lane's 64 squares stay
 * below 2^(2E+10) (float32: 2^58), the sums over n < 2^32 entries below
 * 2^(2E+36) and S1^2 below 2^(2E+68) (float64: 2^1012); a square that
 * underflows is one of a difference 2^87 (float64: 2^983) times below the
 * largest entry, whose own square is in S2 (c0 far from it) or is
 * replaced by others of its size: far below the last bit of S2. */
static int FN(gauss_shift)(const REAL *x, size_t n)
{
  REAL m = 0;
  for (size_t i = 0; i < n; i++)
    m = FABS(x[i]) > m ? FABS(x[i]) : m;
  if (m == 0)
    return 0;
  return (REAL_MAX_EXP - 80) / 2 - ilogb((double) m);
}

/* The shifted sums of x 2^sh exactly as FN(gauss_block_sums) and the
 * pairwise tree form them for that vector (the scalar loop is their
 * definition), without candidates: Gaussian-k's statistics where x's own
 * sums left their range (FN(gauss_thr)).  The caller scales the result
 * back, so that x and x 2^j select the same entries. */
static void FN(gauss_sums_shifted)(const REAL *x, size_t n, int sh, double *S1, double *S2)
{
  REAL c0 = FN(ldexp_real)(x[0], sh);
  gc__pairwise sum1 = {{0}, 0, 0}, sum2 = {{0}, 0, 0};
  for (size_t lo = 0; lo < n; lo += GAUSS_BLOCK) {
    size_t hi = n - lo < GAUSS_BLOCK ? n : lo + GAUSS_BLOCK, i = lo;
    REAL a1[16] = {0}, a2[16] = {0};
    for (; i + 16 <= hi; i += 16)
      for (int j = 0; j < 16; j++) {
        REAL d = FN(ldexp_real)(x[i + j], sh) - c0;
        a1[j] += d;
        a2[j] += d * d;
      }
    for (; i < hi; i++) {
      REAL d = FN(ldexp_real)(x[i], sh) - c0;
      a1[0] += d;
      a2[0] += d * d;
    }
    double s1 = 0, s2 = 0;
    for (int j = 0; j < 16; j++) {
      s1 += (double) a1[j];
      s2 += (double) a2[j];
    }
    gc__pairwise_push(&sum1, s1);
    gc__pairwise_push(&sum2, s2);
  }
  *S1 = gc__pairwise_total(&sum1);
  *S2 = gc__pairwise_total(&sum2);
}

/* Gaussian-k (theory.md 2.5): selected indices into s->idx, and their
 * values into *val (room entries) unless it is or becomes NULL
 * (FN(scan_staged)); or, where sel->P > 0 (float32), both as the pieces
 * *sel in s->cand and s->mag, their indices already coded where
 * sel->coded says so. */
static int FN(gaussk)(sparse_state *s, const REAL *x, REAL **val, size_t room,
                      size_t *count, unsigned *evals, sparse_pieces *sel)
{
  sel->P = 0;
  size_t n = s->n, k = s->k, bad;
  /* A pre-threshold t0 a little below the expected threshold, from a
   * strided sample; t0 = REAL_MAX collects only non-finite entries. */
  REAL t0 = REAL_MAX;
  if (n >= 4 * TOPK_SAMPLES) {
    size_t m = TOPK_SAMPLES, stride = n / m;
    double m1 = 0, m2 = 0, s0 = (double) x[0];
    for (size_t j = 0; j < m; j++) {
      if (j + SAMPLE_AHEAD < m)   /* as in FN(sample_run): lines well ahead */
        __builtin_prefetch(x + (j + SAMPLE_AHEAD) * stride);
      double v = (double) x[j * stride] - s0;
      m1 += v;
      m2 += v * v;
    }
    double est_var = (m2 - m1 * m1 / (double) m) / (double) (m - 1);
    double est = s0 + m1 / (double) m + s->gauss_z * sqrt(fmax(est_var, 0));
    if (est > 0 && isfinite(est))
      t0 = FN(strict_t)(GAUSS_MARGIN * est);
  }
  REAL c0 = x[0], *cval = (REAL *) s->mag;
  gc__pairwise sum1 = {{0}, 0, 0}, sum2 = {{0}, 0, 0};
  size_t nc = 0;
  /* the candidate list is complete when nc <= cand_cap and this holds */
  scan_layout L = { .T = 1 };
  int listed = FN(gauss_sums_par)(s, x, c0, t0, cval, &sum1, &sum2, &nc, &L), summed = 0;
  if (listed < 0 && s->block_sums) {
    /* one thread, the threads' way: every block's sums first, pushed
     * after, so that a block's fold into double (two chains of sixteen
     * dependent adds) overlaps the next block's pass instead of holding
     * it up (0.3 ms at n = 2.5e7, in the push right after each) */
    double *bs = s->block_sums;
    size_t nb = (n + GAUSS_BLOCK - 1) / GAUSS_BLOCK;
    for (size_t b = 0; b < nb; b++) {
      size_t lo = b * GAUSS_BLOCK, hi = n - lo < GAUSS_BLOCK ? n : lo + GAUSS_BLOCK;
      FN(gauss_block_sums)(x, 0, lo, hi, c0, t0, &bs[2 * b], &bs[2 * b + 1], s->cand, cval,
                           s->cand_cap, &nc);
    }
    for (size_t b = 0; b < nb; b++) {
      gc__pairwise_push(&sum1, bs[2 * b]);
      gc__pairwise_push(&sum2, bs[2 * b + 1]);
    }
    summed = 1;
  }
  for (size_t lo = 0; listed < 0 && !summed && lo < n; lo += GAUSS_BLOCK) {
    size_t hi = n - lo < GAUSS_BLOCK ? n : lo + GAUSS_BLOCK;
    double p1, p2;
    FN(gauss_block_sums)(x, 0, lo, hi, c0, t0, &p1, &p2, s->cand, cval, s->cand_cap, &nc);
    gc__pairwise_push(&sum1, p1);
    gc__pairwise_push(&sum2, p2);
  }
  if (listed < 0)
    L.cnt[0] = nc;
  double S1 = gc__pairwise_total(&sum1), S2 = gc__pairwise_total(&sum2);
  if (!isfinite(S1) || !isfinite(S2)) {
    FN(scan)(x, n, REAL_MAX, NULL, NULL, 0, &bad);
    if (bad != SIZE_MAX)
      return FN(report_bad)(x, bad);
  }
  /* x is finite from here on: a NaN or Inf in x makes S2, a sum of
   * squares, Inf or NaN, and then the scan above has returned GC_EDOM.  So
   * the scans below need no check.  The threshold is thr * 2^-sh: sh is 0
   * unless the sums left their range, and then they are those of x 2^sh. */
  double thr;
  int sh = 0;
  if (!FN(gauss_thr)(c0, S1, S2, n, s->gauss_z, &thr) &&
      (sh = FN(gauss_shift)(x, n)) != 0) {
    FN(gauss_sums_shifted)(x, n, sh, &S1, &S2);
    FN(gauss_thr)(FN(ldexp_real)(c0, sh), S1, S2, n, s->gauss_z, &thr);
  }
  size_t c = 0;
  unsigned ev = 0;
  REAL *stage = *val, *v = stage;
  while (ev < s->p.gauss_loops) {
    REAL t = FN(strict_t)(ldexp(thr, -sh));
    v = stage;
    sel->P = 0;
    sel->coded = 0;
    /* every |x_i| > t >= t0 is among the candidates: a branch-free filter
     * of their values (about one in six fails at density 0.1) */
    int listed_ok = listed != 0 && nc <= s->cand_cap && t >= t0, in_place = 0;
#ifdef GAUSS_FILTER_PIECES
    in_place = t >= 0;
#endif
    if (listed_ok && in_place) {
      /* in place, each thread's piece where it lies, and the encoder takes
       * the pieces (out of place the filter paid a read for ownership of
       * all it wrote, and on threads a count pass too).  What is left
       * holds every |x_i| > t: from now on it serves the thresholds t and
       * up, and the scan the others. */
#ifdef GAUSS_FILTER_PIECES
      c = nc = GAUSS_FILTER_PIECES(s->cand, cval, &L, t, sel);
#endif
      t0 = t;
      v = NULL;
    } else if (listed_ok) {
      c = 0;
      if (L.T > 1)
        FN(join_pieces)(s->cand, cval, &L);
      if (v && room >= nc) {
        for (size_t j = 0; j < nc; j++) {
          s->idx[c] = s->cand[j];
          v[c] = cval[j];
          c += !(FABS(cval[j]) <= t);
        }
      } else {
        v = NULL;
        for (size_t j = 0; j < nc; j++) {
          s->idx[c] = s->cand[j];
          c += !(FABS(cval[j]) <= t);
        }
      }
    } else {
      c = FN(scan_staged)(x, n, t, s->idx, &v, room, n, &bad, NULL);
    }
    ev++;
    if ((double) c >= 2.0 * (double) k / 3.0 && (double) c <= 4.0 * (double) k / 3.0)
      break;
    thr *= (double) c < 2.0 * (double) k / 3.0 ? 0.5 : 1.5;
    if (sel->coded && ev < s->p.gauss_loops) {
      /* the filter left the indices in place: those it kept to the front,
       * as the list the next evaluation filters */
      coded_pieces_to_idx(sel);
      sel->coded = 0;
    }
  }
  *val = v;
  *count = c;
  *evals = ev;
  return GC_SUCCESS;
}

/* DGC sampled threshold (theory.md 2.6, synxlin dgc/compression.py); the
 * values come along in *val as in FN(gaussk), in the threads' pieces
 * where L->T > 1 (FN(scan_staged)). */
static int FN(dgc)(sparse_state *s, const REAL *x, uint32_t step, REAL **val,
                   size_t room, size_t *count, unsigned *evals, scan_layout *L)
{
  size_t n = s->n, ns = s->k, bad, stride = s->dgc_stride, start = 0, m = n;
  if (stride > 1) {
    start = gc_rng_below(gc_rng_u32(s->p.seed, s->p.stream, step, 0),
                         (uint32_t) stride);
    m = (n - start + stride - 1) / stride;
  }
  REAL *smp = (REAL *) s->sample;
  FN(sample)(x, start, stride, 0, m, smp);
  size_t top = (size_t) ceil(s->rho * (double) m);
  if (top < 1)
    top = 1;
  if (top > m)
    top = m;
  REAL thr = FN(kth_largest_bucketed)(smp, m, top, (REAL *) s->mag, s->cand_cap);
  /* only the first ns entries are sent: staged values serve when at least
   * that many fit */
  REAL *stage = room >= ns ? *val : NULL;
  *val = stage;
  size_t c = FN(scan_staged)(x, n, NEXTDOWN(thr), s->idx, val, room, ns, &bad, L);
  unsigned ev = 1;
  if (bad != SIZE_MAX)
    return FN(report_bad)(x, bad);
  if (n > m) {   /* the reference adapts only when it really sampled */
    for (int it = 0; it < 10; it++) {
      if ((double) c > 1.3 * (double) ns) {
        /* I holds every |x_i| >= thr and more than ns of them, so its
         * top-ns is the global top-ns (same tie rule): select among I in
         * place rather than scan x again, unless it outgrows the workspace
         * (or the staged values cut it short) */
        if (L->T == 0 && L->whole) {   /* the scan wrote codes: the indices from its bits */
          bits_to_idx(L->bits, n, c, s->idx);
          L->T = 1;
        } else if (L->T == 0 || (*val && c > room)) {
          c = FN(scan)(x, n, NEXTDOWN(thr), s->idx, NULL, n, &bad);
          L->T = 1;
        }
        if (L->T > 1)   /* the threads' pieces together (rare; they fit, c <= room) */
          FN(join_pieces)(s->idx, NULL, L);
        if (c <= s->cand_cap)
          FN(select_among)(x, s->idx, c, ns, s->p.ties, (REAL *) s->mag,
                           s->cand_cap * (sizeof *s->mag / sizeof(REAL)), s->idx);
        else
          GC_TRY(FN(topk)(s, x, ns));
        *val = NULL;   /* the values are those of I */
        c = ns;
        break;
      } else if (c > ns) {
        break;
      } else if ((double) c < 0.8 * (double) ns) {
        thr = (REAL) (0.8 * thr);
        *val = stage;
        c = FN(scan_staged)(x, n, NEXTDOWN(thr), s->idx, val, room, ns, &bad, L);
        ev++;
      } else {
        break;
      }
    }
  }
  *count = c < ns ? c : ns;   /* the first ns in index order */
  *evals = ev;
  return GC_SUCCESS;
}

/* The message of the first c entries of a scan that wrote their delta
 * codes (L->T == 0), the values staged at staged: where the delta coding
 * is the smallest, the header in front of the codes and the values moved
 * down behind them; else the indices from the scan's bits (or, where it
 * skipped some words, a scan again) and the staged encoder. */
static int FN(encode_codes)(sparse_state *s, const REAL *x, const scan_layout *L,
                            const REAL *staged, size_t c, uint8_t *buf, size_t cap,
                            size_t *len, size_t *nnz)
{
  size_t isec, bad;
  int delta = gc__wire_pick(s->n, c, L->bytes, &isec) == GC__IDX_DELTA;
  if (delta && L->vp <= 1)
    return FN(gc__wire_encode_coded)(s->wire, s->n, c, isec, staged, 1, buf, cap, len, nnz);
  if (!delta && L->whole)
    bits_to_idx(L->bits, s->n, c, s->idx);
  else if (!delta)
    FN(scan)(x, s->n, (REAL) L->t, s->idx, NULL, c, &bad);
  if (L->vp <= 1)
    return FN(gc__wire_encode_staged)(s->wire, s->n, s->idx, c, staged, buf, cap, len, nnz);
  /* the threads' scan (scan_codes_par_f32): the values in its pieces */
  const uint32_t *pi[SCAN_PAR_MAX];
  const REAL *pv[SCAN_PAR_MAX];
  size_t pc[SCAN_PAR_MAX], at = 0;
  for (int j = 0; j < L->vp; j++) {
    pi[j] = s->idx + at;
    pv[j] = staged + (size_t) j * L->share;
    pc[j] = L->cnt[j] < c - at ? L->cnt[j] : c - at;
    at += pc[j];
  }
  if (delta)
    return FN(gc__wire_encode_coded_pieces)(s->wire, s->n, c, isec, L->vp, pv, pc, 1, buf,
                                            cap, len, nnz);
  return FN(gc__wire_encode_staged_pieces)(s->wire, s->n, L->vp, pi, pv, pc, buf, cap, len,
                                           nnz);
}

/* A selection's pieces whose filter may write the delta codes into the
 * message (the float32 filters, keep_codes_isa_f32, where they pay): all
 * of buf past the header is theirs until the encoder writes the values. */
static sparse_pieces FN(pieces_coded_into)(const sparse_state *s, uint8_t *buf, size_t cap)
{
  sparse_pieces sel = { .P = 0, .n = s->n };
  if (cap > GC__WIRE_HDR && codes_pay(s->k, s->n)) {
    sel.codes = buf + GC__WIRE_HDR;
    sel.limit = cap - GC__WIRE_HDR;
  }
  return sel;
}

#if defined(TOPK_VALS) || defined(GAUSS_FILTER_PIECES)
/* The message of a selection whose one piece's filter wrote the delta
 * codes (sel->coded), where that coding is the smallest (*written): the
 * header and the values behind the codes.  Else nothing: the pieces
 * encoder codes them again, as ever. */
static int FN(encode_coded_pieces)(sparse_state *s, const sparse_pieces *sel,
                                   uint8_t *buf, size_t cap, size_t *len, size_t *nnz,
                                   int *written)
{
  size_t isec;
  if (!sel->coded)
    return GC_SUCCESS;
  if (sel->P > 1) {   /* the pieces' codes joined, where delta wins (keep_codes_pieces_f32) */
    size_t c = 0;
    for (int j = 0; j < sel->P; j++)
      c += sel->cnt[j];
    gc__wire_pick(s->n, c, sel->bytes, &isec);
    GC_TRY(FN(gc__wire_encode_coded_pieces)(s->wire, s->n, c, isec, sel->P, sel->val, sel->cnt,
                                            0, buf, cap, len, nnz));
    *written = 1;
    return GC_SUCCESS;
  }
  if (gc__wire_pick(s->n, sel->cnt[0], sel->bytes, &isec) != GC__IDX_DELTA) {
    /* the kept indices from their codes, for the pieces encoder */
    codes_to_idx(sel->codes, sel->cnt[0], s->cand);
    return GC_SUCCESS;
  }
  GC_TRY(FN(gc__wire_encode_coded)(s->wire, s->n, sel->cnt[0], isec, sel->val[0], 0, buf, cap,
                                   len, nnz));
  *written = 1;
  return GC_SUCCESS;
}
#endif

/* The message of the first c entries of a scan left in the threads'
 * pieces (L), the indices in s->idx and the values staged at staged:
 * their pieces where they lie, no move joining them first. */
static int FN(encode_scan_pieces)(const sparse_state *s, const scan_layout *L,
                                  const REAL *staged, size_t c, uint8_t *buf, size_t cap,
                                  size_t *len, size_t *nnz)
{
  const uint32_t *pi[SCAN_PAR_MAX];
  const REAL *pv[SCAN_PAR_MAX];
  size_t pc[SCAN_PAR_MAX];
  for (int j = 0; j < L->T; j++) {
    pi[j] = s->idx + (size_t) j * L->share;
    pv[j] = staged + (size_t) j * L->share;
    pc[j] = L->cnt[j] < c ? L->cnt[j] : c;
    c -= pc[j];
  }
  return FN(gc__wire_encode_staged_pieces)(s->wire, s->n, L->T, pi, pv, pc, buf, cap, len,
                                           nnz);
}

static int FN(sparse_encode)(void *state, const REAL *x, uint32_t step,
                             uint8_t *buf, size_t cap, size_t *len,
                             gc_compress_info *info)
{
  sparse_state *s = state;
  size_t c = s->k;
  unsigned evals = 0;
  REAL factor = 1;
  int implicit = 0;
  /* the message is written already (random-K's dense draws, from the
   * bitmap; random-K-unbiased on one thread, as it draws; the selections
   * whose pieces the encoder takes where they lie) */
  int written = 0;
  /* the selections that scan x gather the values as they go */
  REAL *staged = NULL;
  size_t room = 0;
  if (s->kind == KIND_THRESHOLD || s->kind == KIND_GAUSSK || s->kind == KIND_DGC)
    staged = gc__wire_stage(s->n, s->kind == KIND_DGC ? s->k : s->n, sizeof(REAL), buf, cap,
                            &room);
  /* threshold's and DGC's scans may write the delta codes in place */
  scan_layout L = { .T = 1 };
  /* (threshold's density shows only after its scan: the last one's decides) */
  if (staged && ((s->kind == KIND_THRESHOLD && codes_pay(s->last_count, s->n))
                 || (s->kind == KIND_DGC && codes_pay(s->k, s->n)))) {
    L.codes = buf + GC__WIRE_HDR;
    L.limit = (size_t) ((uint8_t *) staged - L.codes);
    L.bits = s->scan_bits;
  }
  switch (s->kind) {
  case KIND_TOPK: {
#ifdef TOPK_VALS
    sparse_pieces sel = FN(pieces_coded_into)(s, buf, cap);
    GC_TRY(TOPK_VALS(s, x, s->k, &sel));
    GC_TRY(FN(encode_coded_pieces)(s, &sel, buf, cap, len, &info->nnz, &written));
    if (sel.P && !written) {
      GC_TRY(FN(gc__wire_encode_pieces)(s->wire, s->n, sel.P, sel.idx, sel.val, sel.cnt, buf,
                                        cap, len, &info->nnz));
      written = 1;
    }
#else
    GC_TRY(FN(topk)(s, x, s->k));
#endif
    break;
  }
  case KIND_RANDK:
    GC_TRY(FN(check_finite)(x, s->n));
    if (floyd_dense(s)) {   /* the message comes with the walk */
      size_t bad;
      floyd(s, step, NULL);
      written = FN(randk_dense)(s, x, buf, cap, len, &info->nnz, &bad);
      if (written && bad != SIZE_MAX)
        return FN(report_bad)(x, bad);
    } else {
      floyd(s, step, s->idx);
    }
    if (!written)
      floyd_sort(s);
    break;
  case KIND_RANDKU:
    GC_TRY(FN(check_finite)(x, s->n));
    factor = (REAL) ((double) s->n / (double) s->k);
    implicit = 1;
    if (cap >= GC__WIRE_HDR + c * sizeof(REAL) && gc__wire_threads(c) == 1) {
      /* the values come with the draws (FN(floyd_values)); where the
       * encoder gathers them on several threads (put_all_vals, in pieces
       * after the draws) it does that instead: on two threads the draws'
       * gather took 11 ms against 9 at K = 2.5e6, n = 2.5e7 */
      info->nnz = FN(floyd_values)(s, step, x, factor, buf + GC__WIRE_HDR);
      GC_TRY(gc__wire_implicit_head(s->wire, c, sizeof(REAL), buf, cap, len));
      written = 1;
    } else {
      floyd(s, step, s->idx);
    }
    floyd_clear(s);
    break;
  case KIND_THRESHOLD: {
    size_t bad;
    c = FN(scan_staged)(x, s->n, FN(strict_t)(s->p.threshold), s->idx, &staged, room, s->n,
                        &bad, &L);
    if (bad != SIZE_MAX)
      return FN(report_bad)(x, bad);
    s->last_count = c;
    break;
  }
  case KIND_GAUSSK: {
    sparse_pieces sel = FN(pieces_coded_into)(s, buf, cap);
    GC_TRY(FN(gaussk)(s, x, &staged, room, &c, &evals, &sel));
#ifdef GAUSS_FILTER_PIECES
    GC_TRY(FN(encode_coded_pieces)(s, &sel, buf, cap, len, &info->nnz, &written));
    if (sel.P && !written) {
      GC_TRY(FN(gc__wire_encode_pieces)(s->wire, s->n, sel.P, sel.idx, sel.val, sel.cnt, buf,
                                        cap, len, &info->nnz));
      written = 1;
    }
#endif
    break;
  }
  case KIND_DGC:
    GC_TRY(FN(dgc)(s, x, step, &staged, room, &c, &evals, &L));
    break;
  }
  if (L.T > 1) {   /* threshold's and DGC's scans in the threads' pieces */
    GC_TRY(FN(encode_scan_pieces)(s, &L, staged, c, buf, cap, len, &info->nnz));
    written = 1;
  } else if (L.T == 0) {   /* ... or with their codes */
    GC_TRY(FN(encode_codes)(s, x, &L, staged, c, buf, cap, len, &info->nnz));
    written = 1;
  }
  if (!written && staged)
    GC_TRY(FN(gc__wire_encode_staged)(s->wire, s->n, s->idx, c, staged, buf, cap, len,
                                      &info->nnz));
  else if (!written)
    GC_TRY(FN(gc__wire_encode)(s->wire, s->n, s->idx, c, implicit, x, factor,
                               buf, cap, len, &info->nnz));
  /* (random-K-unbiased sends a finite x_i whose x_i n/K passes REAL_MAX
   * as the Inf the scaling makes) */
  info->selected = c;
  info->loops = evals;
  return GC_SUCCESS;
}

static int FN(sparse_decode)(const void *state, const uint8_t *buf, size_t len,
                             uint32_t step, REAL scale, REAL *y)
{
  const sparse_state *s = state;
  if (s->kind != KIND_RANDKU)
    return FN(gc__wire_decode_add)(s->wire, buf, len, s->n, scale, y);
  GC_TRY(gc__wire_check_implicit(s->wire, sizeof(REAL), buf, len, s->k));
  /* the indices are rebuilt in the instance's scratch: one decode at a
   * time per instance (the scratch is not part of the observable state) */
  sparse_state *w = (sparse_state *) state;
  floyd(w, step, w->idx);
  floyd_clear(w);
  const uint8_t *v = buf + GC__WIRE_HDR;
  for (size_t j = 0; j < s->k; j++) {
    REAL val;
    memcpy(&val, v + j * sizeof(REAL), sizeof(REAL));
    y[s->idx[j]] += scale * val;
  }
  return GC_SUCCESS;
}

#undef REAL
#undef SFX
#undef UKEY
#undef FABS
#undef NEXTDOWN
#undef REAL_MAX
#undef REAL_MIN
#undef REAL_MAX_EXP
#undef REAL_MANT_DIG
#undef GAUSS_GROUPS
#undef SCAN_ISA
#undef SCAN_PIECES
#undef TOPK_VALS
#undef WALK_CODES_ISA
#undef GAUSS_FILTER_PIECES
#undef SCAN_CODES
