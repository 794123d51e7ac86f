/* sparse_kernels_source.c -- the precision-generic half of
 * sparse_kernels.c: the scans, samples and selections of REAL vectors and
 * the writers of the selections' messages, included once per precision
 * by gc_sparse_twice.h.  Never compiled on its own. */

enum { FN(SCAN_BLOCK) = 32 };

/* Count the i with !(|x_i| <= t), i.e. |x_i| > t or x_i NaN, storing the
 * first `cap` of them (ascending) in out, and x_i in val unless it is
 * NULL.  t must be <= REAL_MAX, so every non-finite x_i is counted; the
 * first one stops the scan with *bad = i.  Blocks are tested with a
 * vectorisable OR before the rare scalar append; float32 takes the
 * dispatched scan, scan_par_f32. */
size_t FN(gc__sparse_scan)(const REAL *x, size_t n, REAL t, uint32_t *out,
                           REAL *val, size_t cap, size_t *bad)
{
#if REAL_IS_F32
  return scan_par_f32(x, n, t, out, val, cap, bad);
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
 * (float32, and *val), the threads' pieces may be left where they
 * lie, as L says (L->T > 1), for gc__wire_encode_staged_pieces; with
 * L->codes (float32, and *val holding need), the first need
 * entries' delta codes instead of any index (L->T == 0: FN(encode_codes)
 * writes the message; on threads the values in L->vp pieces of the
 * room). */
size_t FN(gc__sparse_scan_staged)(const REAL *x, size_t n, REAL t, uint32_t *out,
                                  REAL **val, size_t room, size_t need, size_t *bad,
                              scan_layout *L)
{
  size_t cap = *val && room < n ? room : n, c;
  if (L)
    L->T = 1;
#if REAL_IS_F32
  if (L && *val && room >= need) {   /* the codes of the first need, and their values */
    c = scan_codes_f32(x, n, t, *val, need, room, need, bad, L);
    if (c != SIZE_MAX) {
      L->T = 0;
      return c;
    }
  }
#endif
#if REAL_IS_F32
  if (L && *val) {
    c = gc__sparse_scan_pieces_f32(x, n, t, out, *val, cap, bad, L);
    if (L->T > 1)
      return c;
  } else
#endif
    c = FN(gc__sparse_scan)(x, n, t, out, *val, cap, bad);
  if (*val && *bad == SIZE_MAX && c > cap && need > cap) {
    *val = NULL;
    c = FN(gc__sparse_scan)(x, n, t, out, NULL, n, bad);
  }
  return c;
}

/* The REAL t with |x| > t  <=>  |x| > v for every REAL x (v a double),
 * clamped to REAL_MAX so that non-finite values still show up in scans. */
REAL FN(gc__sparse_strict_t)(double v)
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
void FN(gc__sparse_sample)(const REAL *x, size_t start, size_t stride, int jitter, size_t m,
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

int FN(gc__sparse_report_bad)(const REAL *x, size_t i)
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
REAL FN(gc__sparse_kth_largest_bucketed)(REAL *a, size_t m, size_t k,
                                         REAL *scratch, size_t cap);

/* magcap: REALs that mag holds (>= c); what is left past c is the
 * bucketed selection's scratch (the partitioning quickselect over all c
 * magnitudes took most of top-K's time at density 0.01 and up). */
void FN(gc__sparse_select_among)(const REAL *x, const uint32_t *cand, size_t c,
                                 size_t k, int ties, REAL *mag, size_t magcap,
                             uint32_t *out)
{
  for (size_t j = 0; j < c; j++)
    mag[j] = FABS(x[cand[j]]);
  REAL t = FN(gc__sparse_kth_largest_bucketed)(mag, c, k, mag + c, magcap - c);
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
REAL FN(gc__sparse_kth_largest_bucketed)(REAL *a, size_t m, size_t k,
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

/* FN(gc__sparse_kth_largest_bucketed) on T threads, each a run of a: a histogram
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
void FN(gc__sparse_radix_topk)(const REAL *x, size_t n, size_t k, int ties,
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
REAL FN(gc__sparse_topk_threshold)(sparse_state *s, const REAL *x, size_t k,
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
  FN(gc__sparse_sample)(x, 0, n / m, 1, m, smp);
  double e = (double) k / (double) n * (double) m;
  double r = ceil(1.05 * e + 4 * sqrt(e) + 4);
  size_t rank = r >= (double) m ? m : (size_t) r;
  /* keep |x| >= that sample */
  REAL t = NEXTDOWN(FN(gc__sparse_kth_largest_bucketed)(smp, m, rank, (REAL *) s->mag,
                                                        s->cand_cap));
  double ru = floor(e - 4 * sqrt(e) - 4);
  if (upper && ru >= 1)
    *upper = FN(gc__sparse_kth_largest_bucketed)(smp, m, (size_t) ru, (REAL *) s->mag,
                                                 s->cand_cap);
  return t;
}

/* Top-K of x into s->idx (ascending).  Returns GC_SUCCESS or GC_EDOM. */
int FN(gc__sparse_topk)(sparse_state *s, const REAL *x, size_t k)
{
  size_t n = s->n, bad;
  REAL *mag = (REAL *) s->mag, t = FN(gc__sparse_topk_threshold)(s, x, k, NULL);
  size_t c = FN(gc__sparse_scan)(x, n, t, s->cand, NULL, s->cand_cap, &bad);
  if (bad != SIZE_MAX)
    return FN(gc__sparse_report_bad)(x, bad);
  if (c >= k && c <= s->cand_cap)
    FN(gc__sparse_select_among)(x, s->cand, c, k, s->p.ties, mag,
                                s->cand_cap * (sizeof *s->mag / sizeof(REAL)), s->idx);
  else
    FN(gc__sparse_radix_topk)(x, n, k, s->p.ties, s->idx);
  return GC_SUCCESS;
}

/* Random-K refuses NaN or Inf anywhere in x, naming the first, as every
 * compressor does (docs/design.md), though it sends only K entries: one
 * read of x (gc_first_nonfinite's pass, vectorised and on threads), which
 * at small densities is most of random-K's time -- the price of one rule. */
int FN(gc__sparse_check_finite)(const REAL *x, size_t n)
{
  size_t bad = gc__vfirst_nonfinite((int) sizeof(REAL), x, n);   /* dtype: the size */
  return bad == n ? GC_SUCCESS : FN(gc__sparse_report_bad)(x, bad);
}

/* The pieces *L describes moved together at the front of cand and, unless
 * it is NULL, cval; *L then describes one piece. */
void FN(gc__sparse_join_pieces)(uint32_t *cand, REAL *cval, scan_layout *L)
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
    gc__sparse_bits_to_idx(L->bits, s->n, c, s->idx);
  else if (!delta)
    FN(gc__sparse_scan)(x, s->n, (REAL) L->t, s->idx, NULL, c, &bad);
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
 * message (the float32 filters, gc__sparse_keep_codes_isa_f32, where they pay): all
 * of buf past the header is theirs until the encoder writes the values. */
sparse_pieces FN(gc__sparse_pieces_coded_into)(const sparse_state *s, uint8_t *buf, size_t cap)
{
  sparse_pieces sel = { .P = 0, .n = s->n };
  if (cap > GC__WIRE_HDR && codes_pay(s->k, s->n)) {
    sel.codes = buf + GC__WIRE_HDR;
    sel.limit = cap - GC__WIRE_HDR;
  }
  return sel;
}

#if REAL_IS_F32
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
  if (sel->P > 1) {   /* the pieces' codes joined, where delta wins (keep_codes_pieces) */
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
    gc__sparse_codes_to_idx(sel->codes, sel->cnt[0], s->cand);
    return GC_SUCCESS;
  }
  GC_TRY(FN(gc__wire_encode_coded)(s->wire, s->n, sel->cnt[0], isec, sel->val[0], 0, buf, cap,
                                   len, nnz));
  *written = 1;
  return GC_SUCCESS;
}

int gc__sparse_encode_selection_f32(sparse_state *s, const sparse_pieces *sel, uint8_t *buf,
                                    size_t cap, size_t *len, size_t *nnz, int *written)
{
  GC_TRY(encode_coded_pieces_f32(s, sel, buf, cap, len, nnz, written));
  if (sel->P && !*written) {
    GC_TRY(gc__wire_encode_pieces_f32(s->wire, s->n, sel->P, sel->idx, sel->val, sel->cnt, buf,
                                      cap, len, nnz));
    *written = 1;
  }
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

int FN(gc__sparse_encode_list)(const sparse_state *s, const REAL *x, size_t c,
                               const REAL *staged, uint8_t *buf, size_t cap, size_t *len,
                               size_t *nnz)
{
  if (staged)
    return FN(gc__wire_encode_staged)(s->wire, s->n, s->idx, c, staged, buf, cap, len, nnz);
  return FN(gc__wire_encode)(s->wire, s->n, s->idx, c, 0, x, 1, buf, cap, len, nnz);
}

int FN(gc__sparse_encode_scan)(sparse_state *s, const REAL *x, const scan_layout *L,
                               const REAL *staged, size_t c, uint8_t *buf, size_t cap,
                               size_t *len, size_t *nnz)
{
  if (L->T > 1)
    return FN(encode_scan_pieces)(s, L, staged, c, buf, cap, len, nnz);
  if (L->T == 0)
    return FN(encode_codes)(s, x, L, staged, c, buf, cap, len, nnz);
  return FN(gc__sparse_encode_list)(s, x, c, staged, buf, cap, len, nnz);
}

void FN(gc__sparse_scan_codes_into)(scan_layout *L, const sparse_state *s, uint8_t *buf,
                                    const REAL *staged)
{
  L->codes = buf + GC__WIRE_HDR;
  L->limit = (size_t) ((const uint8_t *) staged - L->codes);
  L->bits = s->scan_bits;
}

int FN(gc__sparse_decode)(const void *state, const uint8_t *buf, size_t len, uint32_t step,
                          REAL scale, REAL *y)
{
  const sparse_state *s = state;
  (void) step;
  return FN(gc__wire_decode_add)(s->wire, buf, len, s->n, scale, y);
}
