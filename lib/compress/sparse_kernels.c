/* sparse_kernels.c -- the kernels the sparsifiers (theory.md 2.2-2.6; one
 * file each, sparse_topk.c ... sparse_dgc.c) share: the selection scans,
 * keeps, bands and K-th selections, float32 dispatched (isa.c), the
 * precision-generic ones and the coded-message writers in
 * sparse_kernels_source.c (float32 and float64), the shared init, release
 * and decode, and the family's list.  Messages use the layout of wire.c.
 *
 * Design notes (why, not what):
 * - Exact top-K avoids sorting n keys: a fixed strided sample of |x| gives a
 *   threshold that admits about 1.05K + 4 sigma candidates; one branch-light pass checks
 *   finiteness and collects those (in index order, so the output comes out
 *   ascending); histograms of the candidates' magnitude keys find the
 *   K-th magnitude, and ties are shared out by index.  When the sample
 *   misleads (too few or too many candidates) a radix select over the whole
 *   vector gives the same answer with no extra memory.
 * - Non-finite input is detected inside the selection pass: every selection
 *   threshold is clamped to the largest finite value, so NaN and Inf always
 *   land among the candidates and are seen there.
 * - Threshold, Gaussian-k and DGC keep the values of what they select as
 *   they scan, so that encoding does not gather x[idx] afterwards, which at
 *   density 0.1 read most of x's cache lines a second time: threshold and
 *   DGC in the message buffer past the largest index section
 *   (gc__wire_stage), to be moved down; float32 Gaussian-k and top-K with
 *   their candidates, whose pieces (one per thread) the encoder takes
 *   where they lie (gc__wire_encode_pieces), as it takes the threads'
 *   staged pieces of threshold and DGC.
 * - At densities of 1/32 and up, the float32 selections write the
 *   message's delta codes themselves (AVX-512): threshold's and DGC's
 *   scans code each block's word of selected entries and write no
 *   indices (scan_codes_f32; on threads each piece codes itself and a
 *   join fixes the pieces' first gaps), on one thread top-K's and
 *   Gaussian-k's filters code what they keep and leave the indices where
 *   they were (gc__sparse_keep_codes_isa_f32);
 *   the encoder then writes only the header and the values
 *   (gc__wire_encode_coded), and where another coding wins it takes the
 *   indices back from the scan's bits or from the codes.
 * - Each sparsifier's encoder names the writer its selection needs:
 *   gc__sparse_encode_list (indices in s->idx, values staged or from x),
 *   gc__sparse_encode_scan (a scan's layout: pieces, codes or a list) or
 *   gc__sparse_encode_selection_f32 (a filter's pieces or codes).
 * - Workspaces are sized in init; encode and decode never allocate. */
#include "gc_sparse_kernels.h"

/* ---- float32 scans and top-K, dispatched (isa.c) -------------------------
 * The selection scans append, in index order, every i with !(|x_i| <= t)
 * (and, where asked, x_i itself) and stop at the first non-finite entry;
 * the top-K filter keeps the candidates above the K-th magnitude and the
 * tied ones by rank.  These are exact selections: the AVX-512 (compress),
 * AVX2 (permute by a table) and SSE2 (bit loop) paths write the same
 * arrays, which test_sparse checks by forcing each (gc__isa_force). */
/* Entries [i, hi) one at a time: append as above, up to cap stored, *c
 * counting all; returns 1 (with *bad) at a non-finite entry. */
static inline int scan_run_f32(const float *x, size_t i, size_t hi, float t,
                               uint32_t *idx, float *val, size_t cap, size_t *c,
                               size_t *bad, size_t base)
{
  for (; i < hi; i++) {
    float a = fabsf(x[i]);
    if (!(a <= t)) {
      if (!(a <= FLT_MAX)) {
        *bad = i;
        return 1;
      }
      if (*c < cap) {
        idx[*c] = (uint32_t) (base + i);
        if (val)
          val[*c] = x[i];
      }
      (*c)++;
    }
  }
  return 0;
}

/* SSE2 (any x86-64; elsewhere plain C): a mask per 16 entries, its set
 * bits appended in order. */
/* The vector scans compare magnitude keys (the bit pattern without the
 * sign) as signed integers: key > scan_key(t) <=> !(|x| <= t), NaN and Inf
 * included (their keys are above every finite one); every key passes a
 * negative t. */
static int32_t scan_key_f32(float t)
{
  if (t < 0)
    return -1;
  int32_t k;
  memcpy(&k, &t, sizeof k);
  return k;
}

/* Whether x[0, m) is finite (a block with a selected entry is checked
 * before the vector append). */
static int scan_finite_f32(const float *x, size_t m)
{
  unsigned bad = 0;
  for (size_t j = 0; j < m; j++) {
    uint32_t b;
    memcpy(&b, x + j, sizeof b);
    bad |= (b & 0x7f800000u) == 0x7f800000u;
  }
  return !bad;
}

static size_t scan_sse2_f32(const float *x, size_t n, float t, uint32_t *idx,
                            float *val, size_t cap, size_t *bad, size_t base)
{
  size_t c = 0, i = 0;
#if defined(__SSE2__)
  const __m128i limit = _mm_set1_epi32(scan_key_f32(t)), absmask = _mm_set1_epi32(0x7fffffff);
  for (; i + 16 <= n; i += 16) {
    unsigned over = 0;
    for (int v = 0; v < 4; v++) {
      __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *) (x + i + 4 * v)), absmask);
      over |= (unsigned) _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(a, limit))) << (4 * v);
    }
    if (!over)
      continue;
    if (c + 16 > cap || !scan_finite_f32(x + i, 16)) {
      if (scan_run_f32(x, i, i + 16, t, idx, val, cap, &c, bad, base))
        return c;
      continue;
    }
    for (; over; over &= over - 1) {
      size_t j = i + (size_t) __builtin_ctz(over);
      idx[c] = (uint32_t) (base + j);
      if (val)
        val[c] = x[j];
      c++;
    }
  }
#endif
  if (scan_run_f32(x, i, n, t, idx, val, cap, &c, bad, base))
    return c;
  *bad = SIZE_MAX;
  return c;
}

#ifdef HAVE_SCAN_PATHS
/* Lane numbers of the set bits of an 8-bit mask, in order, a nibble each:
 * the permutation that packs the selected lanes to the front (AVX2 has no
 * compress instruction). */
static const uint32_t pack_lanes[256] = {
  0x00000000, 0x00000000, 0x00000001, 0x00000010, 0x00000002, 0x00000020,
  0x00000021, 0x00000210, 0x00000003, 0x00000030, 0x00000031, 0x00000310,
  0x00000032, 0x00000320, 0x00000321, 0x00003210, 0x00000004, 0x00000040,
  0x00000041, 0x00000410, 0x00000042, 0x00000420, 0x00000421, 0x00004210,
  0x00000043, 0x00000430, 0x00000431, 0x00004310, 0x00000432, 0x00004320,
  0x00004321, 0x00043210, 0x00000005, 0x00000050, 0x00000051, 0x00000510,
  0x00000052, 0x00000520, 0x00000521, 0x00005210, 0x00000053, 0x00000530,
  0x00000531, 0x00005310, 0x00000532, 0x00005320, 0x00005321, 0x00053210,
  0x00000054, 0x00000540, 0x00000541, 0x00005410, 0x00000542, 0x00005420,
  0x00005421, 0x00054210, 0x00000543, 0x00005430, 0x00005431, 0x00054310,
  0x00005432, 0x00054320, 0x00054321, 0x00543210, 0x00000006, 0x00000060,
  0x00000061, 0x00000610, 0x00000062, 0x00000620, 0x00000621, 0x00006210,
  0x00000063, 0x00000630, 0x00000631, 0x00006310, 0x00000632, 0x00006320,
  0x00006321, 0x00063210, 0x00000064, 0x00000640, 0x00000641, 0x00006410,
  0x00000642, 0x00006420, 0x00006421, 0x00064210, 0x00000643, 0x00006430,
  0x00006431, 0x00064310, 0x00006432, 0x00064320, 0x00064321, 0x00643210,
  0x00000065, 0x00000650, 0x00000651, 0x00006510, 0x00000652, 0x00006520,
  0x00006521, 0x00065210, 0x00000653, 0x00006530, 0x00006531, 0x00065310,
  0x00006532, 0x00065320, 0x00065321, 0x00653210, 0x00000654, 0x00006540,
  0x00006541, 0x00065410, 0x00006542, 0x00065420, 0x00065421, 0x00654210,
  0x00006543, 0x00065430, 0x00065431, 0x00654310, 0x00065432, 0x00654320,
  0x00654321, 0x06543210, 0x00000007, 0x00000070, 0x00000071, 0x00000710,
  0x00000072, 0x00000720, 0x00000721, 0x00007210, 0x00000073, 0x00000730,
  0x00000731, 0x00007310, 0x00000732, 0x00007320, 0x00007321, 0x00073210,
  0x00000074, 0x00000740, 0x00000741, 0x00007410, 0x00000742, 0x00007420,
  0x00007421, 0x00074210, 0x00000743, 0x00007430, 0x00007431, 0x00074310,
  0x00007432, 0x00074320, 0x00074321, 0x00743210, 0x00000075, 0x00000750,
  0x00000751, 0x00007510, 0x00000752, 0x00007520, 0x00007521, 0x00075210,
  0x00000753, 0x00007530, 0x00007531, 0x00075310, 0x00007532, 0x00075320,
  0x00075321, 0x00753210, 0x00000754, 0x00007540, 0x00007541, 0x00075410,
  0x00007542, 0x00075420, 0x00075421, 0x00754210, 0x00007543, 0x00075430,
  0x00075431, 0x00754310, 0x00075432, 0x00754320, 0x00754321, 0x07543210,
  0x00000076, 0x00000760, 0x00000761, 0x00007610, 0x00000762, 0x00007620,
  0x00007621, 0x00076210, 0x00000763, 0x00007630, 0x00007631, 0x00076310,
  0x00007632, 0x00076320, 0x00076321, 0x00763210, 0x00000764, 0x00007640,
  0x00007641, 0x00076410, 0x00007642, 0x00076420, 0x00076421, 0x00764210,
  0x00007643, 0x00076430, 0x00076431, 0x00764310, 0x00076432, 0x00764320,
  0x00764321, 0x07643210, 0x00000765, 0x00007650, 0x00007651, 0x00076510,
  0x00007652, 0x00076520, 0x00076521, 0x00765210, 0x00007653, 0x00076530,
  0x00076531, 0x00765310, 0x00076532, 0x00765320, 0x00765321, 0x07653210,
  0x00007654, 0x00076540, 0x00076541, 0x00765410, 0x00076542, 0x00765420,
  0x00765421, 0x07654210, 0x00076543, 0x00765430, 0x00765431, 0x07654310,
  0x00765432, 0x07654320, 0x07654321, 0x76543210,
};

TARGET_AVX2 static size_t scan_f32_avx2(const float *x, size_t n, float t,
                                        uint32_t *idx, float *val, size_t cap,
                                        size_t *bad, size_t base)
{
  const __m256i limit = _mm256_set1_epi32(scan_key_f32(t));
  const __m256i big = _mm256_set1_epi32(0x7f7fffff), absmask = _mm256_set1_epi32(0x7fffffff);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nib = _mm256_set1_epi32(15);
  size_t c = 0, i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i xv[4], a[4];
    unsigned m[4], any = 0;
    for (int v = 0; v < 4; v++) {
      xv[v] = _mm256_loadu_si256((const __m256i *) (x + i + 8 * v));
      a[v] = _mm256_and_si256(xv[v], absmask);
      m[v] = (unsigned) _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a[v], limit)));
      any |= m[v];
    }
    if (!any)
      continue;
    __m256i nonfinite = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpgt_epi32(a[0], big), _mm256_cmpgt_epi32(a[1], big)),
        _mm256_or_si256(_mm256_cmpgt_epi32(a[2], big), _mm256_cmpgt_epi32(a[3], big)));
    if (!_mm256_testz_si256(nonfinite, nonfinite) || c + 32 > cap) {
      if (scan_run_f32(x, i, i + 32, t, idx, val, cap, &c, bad, base))
        return c;
      continue;
    }
    for (int v = 0; v < 4; v++) {
      if (!m[v])
        continue;
      __m256i perm = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32((int) pack_lanes[m[v]]), shifts), nib);
      __m256i iv = _mm256_add_epi32(_mm256_set1_epi32((int) (base + i + 8 * (size_t) v)), perm);
      _mm256_storeu_si256((__m256i *) (idx + c), iv);
      if (val)
        _mm256_storeu_si256((__m256i *) (val + c), _mm256_permutevar8x32_epi32(xv[v], perm));
      c += (size_t) __builtin_popcount(m[v]);
    }
  }
  if (scan_run_f32(x, i, n, t, idx, val, cap, &c, bad, base))
    return c;
  *bad = SIZE_MAX;
  return c;
}

/* x is prefetched 8 KiB ahead: with the stores of indices and values in
 * flight the hardware prefetcher fell behind, and the scan took twice a
 * streaming read of x at density 0.1 (one and a half at 0.01).  4 KiB
 * ahead left top-K at 6.0 ms and threshold at 4.5 at density 0.1, n =
 * 2.5e7 on one thread; 8 KiB took them to 5.1 and 3.9 (16 KiB: no
 * better). */
enum { SCAN_AHEAD = 2048 };
/* The compress instructions write to a register and a full store follows
 * (to memory they are microcoded on some CPUs): 16 entries of room. */
TARGET_AVX512 static size_t scan_f32_avx512(const float *x, size_t n, float t,
                                            uint32_t *idx, float *val, size_t cap,
                                            size_t *bad, size_t base)
{
  const __m512i limit = _mm512_set1_epi32(scan_key_f32(t));
  const __m512i big = _mm512_set1_epi32(0x7f7fffff), absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  size_t c = 0, i = 0;
  /* An empty block of 64 is skipped while they are the rule; where more
   * than a quarter of the blocks of the last 2048 entries held some entry
   * the test is dropped: at a density of 1% it is mispredicted half of
   * the time, which cost more than the appends. */
  unsigned full = 0, dense = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i xv[4], a[4];
    __mmask16 m[4];
    if (i + SCAN_AHEAD + 64 <= n)
      for (int v = 0; v < 4; v++)
        _mm_prefetch((const char *) (x + i + SCAN_AHEAD + 16 * v), _MM_HINT_T0);
    for (int v = 0; v < 4; v++) {
      xv[v] = _mm512_loadu_si512((const void *) (x + i + 16 * v));
      a[v] = _mm512_and_si512(xv[v], absmask);
      m[v] = _mm512_cmpgt_epi32_mask(a[v], limit);
    }
    if ((i & 2047) == 0) {
      dense = full > 8;
      full = 0;
    }
    unsigned any = (m[0] | m[1] | m[2] | m[3]) != 0;
    full += any;
    if (!dense && !any)
      continue;
    __mmask16 nonfinite = _mm512_cmpgt_epi32_mask(_mm512_max_epi32(
        _mm512_max_epi32(a[0], a[1]), _mm512_max_epi32(a[2], a[3])), big);
    if (nonfinite || c + 64 > cap) {
      if (scan_run_f32(x, i, i + 64, t, idx, val, cap, &c, bad, base))
        return c;
      continue;
    }
    for (int v = 0; v < 4; v++) {
      __m512i iv = _mm512_add_epi32(_mm512_set1_epi32((int) (base + i + 16 * (size_t) v)), lane);
      _mm512_storeu_si512((void *) (idx + c), _mm512_maskz_compress_epi32(m[v], iv));
      if (val)
        _mm512_storeu_si512((void *) (val + c), _mm512_maskz_compress_epi32(m[v], xv[v]));
      c += (size_t) __builtin_popcount(m[v]);
    }
  }
  if (scan_run_f32(x, i, n, t, idx, val, cap, &c, bad, base))
    return c;
  *bad = SIZE_MAX;
  return c;
}
#endif
/* The scan of the chosen instruction set over x[0, n), which is entry
 * base of the whole vector (indices and *bad are the whole vector's). */
static size_t scan_isa_f32(const float *x, size_t n, float t, uint32_t *idx,
                           float *val, size_t cap, size_t *bad, size_t base)
{
  size_t c = ISA_KERNEL(scan_f32, scan_sse2_f32)(x, n, t, idx, val, cap, bad, base);
  if (*bad != SIZE_MAX)
    *bad += base;
  return c;
}


size_t gc__sparse_scan_pieces_f32(const float *x, size_t n, float t, uint32_t *idx,
                                  float *val, size_t cap, size_t *bad, scan_layout *L);

static size_t scan_par_f32(const float *x, size_t n, float t, uint32_t *idx,
                           float *val, size_t cap, size_t *bad)
{
  return gc__sparse_scan_pieces_f32(x, n, t, idx, val, cap, bad, NULL);
}

#ifdef _OPENMP
/* bytes from src down to dst (dst < src), by every thread of the team
 * that calls it: in rounds of as many bytes as the distance down, each
 * split among the threads (a round's destination is the source of the
 * rounds before it, which a barrier has closed), or by one thread where
 * the distance is short.  Ends with a barrier. */
enum { MOVE_ROUND_MIN = 1 << 16, MOVE_ROUNDS_MAX = 64 };

static void move_down_team(void *dst, const void *src, size_t bytes)
{
  size_t D = (size_t) ((const char *) src - (char *) dst);
  if (D < MOVE_ROUND_MIN || D < bytes / MOVE_ROUNDS_MAX) {
    #pragma omp single
    memmove(dst, src, bytes);
    return;
  }
  size_t T = (size_t) omp_get_num_threads(), j = (size_t) omp_get_thread_num();
  for (size_t lo = 0; lo < bytes; lo += D) {
    size_t hi = bytes - lo < D ? bytes : lo + D, part = ((hi - lo) / T + 63) & ~(size_t) 63;
    size_t a = lo + j * part < hi ? lo + j * part : hi, b = j + 1 == T || hi - a < part ? hi : a + part;
    memcpy((char *) dst + a, (const char *) src + a, b - a);
    #pragma omp barrier
  }
}
#endif

/* With L, pieces are left where they are (the selections and the
 * encoder read them there); without, they are moved together, on the threads (on one the
 * move took 0.7 ms of threshold's 4 at density 0.1 on two threads). */
size_t gc__sparse_scan_pieces_f32(const float *x, size_t n, float t, uint32_t *idx,
                                  float *val, size_t cap, size_t *bad, scan_layout *L)
{
  if (L)
    L->T = 1;
#ifdef _OPENMP
  int T = gc__threads_for(n, SCAN_PAR_MIN, SCAN_PAR_MAX);
  if (T > 1 && cap / (size_t) T >= 64) {
    size_t cnt[SCAN_PAR_MAX], bads[SCAN_PAR_MAX], share = cap / (size_t) T;
    size_t piece = scan_piece(n, T);
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T; j++) {
      size_t lo = (size_t) j * piece < n ? (size_t) j * piece : n;
      size_t hi = j + 1 == T || n - lo < piece ? n : lo + piece;
      cnt[j] = scan_isa_f32(x + lo, hi - lo, t, idx + (size_t) j * share,
                            val ? val + (size_t) j * share : NULL, share, &bads[j], lo);
    }
    size_t total = 0;
    int fits = 1;
    for (int j = 0; j < T; j++) {
      if (bads[j] != SIZE_MAX) {
        *bad = bads[j];
        return total;
      }
      total += cnt[j];
      fits &= cnt[j] <= share;
    }
    if (fits && L) {
      L->T = T;
      L->share = share;
      memcpy(L->cnt, cnt, (size_t) T * sizeof *cnt);
      *bad = SIZE_MAX;
      return total;
    }
    if (fits) {
      #pragma omp parallel num_threads(T)
      {
        size_t at = cnt[0];
        for (int j = 1; j < T; j++) {
          move_down_team(idx + at, idx + (size_t) j * share, cnt[j] * sizeof *idx);
          if (val)
            move_down_team(val + at, val + (size_t) j * share, cnt[j] * sizeof *val);
          at += cnt[j];
        }
      }
      *bad = SIZE_MAX;
      return total;
    }
  }
#endif
  return scan_isa_f32(x, n, t, idx, val, cap, bad, 0);
}

/* The top-K filter, in place: of c candidates (idx ascending, val = x at
 * idx, all finite), keep those whose magnitude key (the bit pattern without
 * the sign) exceeds tk, and of those equal to tk the ones of rank skip ..
 * skip + q - 1 in index order.  Returns how many it kept.  The output
 * position never passes the input's, so a block is written only where it
 * has been read. */
static size_t keep_run_f32(uint32_t *idx, float *val, size_t j, size_t hi,
                           uint32_t tk, size_t skip, size_t q, size_t *seen,
                           size_t o)
{
  for (; j < hi; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    int keep = key > tk;
    if (key == tk) {
      keep = *seen >= skip && *seen < skip + q;
      (*seen)++;
    }
    if (keep) {
      idx[o] = idx[j];
      val[o++] = val[j];
    }
  }
  return o;
}

static size_t keep_sse2_f32(uint32_t *idx, float *val, size_t c, uint32_t tk,
                            size_t skip, size_t q)
{
  size_t seen = 0;
  return keep_run_f32(idx, val, 0, c, tk, skip, q, &seen, 0);
}

#ifdef HAVE_SCAN_PATHS
TARGET_AVX2 static size_t keep_f32_avx2(uint32_t *idx, float *val, size_t c,
                                        uint32_t tk, size_t skip, size_t q)
{
  /* keys are below 2^31: the signed compare is the unsigned one */
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff), t = _mm256_set1_epi32((int) tk);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nib = _mm256_set1_epi32(15);
  size_t seen = 0, o = 0, j = 0;
  for (; j + 8 <= c; j += 8) {
    __m256i v = _mm256_loadu_si256((const __m256i *) (val + j));
    __m256i key = _mm256_and_si256(v, absmask);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(key, t))) {
      o = keep_run_f32(idx, val, j, j + 8, tk, skip, q, &seen, o);
      continue;
    }
    unsigned m = (unsigned) _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(key, t)));
    __m256i perm = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32((int) pack_lanes[m]), shifts), nib);
    __m256i iv = _mm256_loadu_si256((const __m256i *) (idx + j));
    _mm256_storeu_si256((__m256i *) (idx + o), _mm256_permutevar8x32_epi32(iv, perm));
    _mm256_storeu_si256((__m256i *) (val + o), _mm256_permutevar8x32_epi32(v, perm));
    o += (size_t) __builtin_popcount(m);
  }
  return keep_run_f32(idx, val, j, c, tk, skip, q, &seen, o);
}

TARGET_AVX512 static size_t keep_f32_avx512(uint32_t *idx, float *val, size_t c,
                                            uint32_t tk, size_t skip, size_t q)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), t = _mm512_set1_epi32((int) tk);
  size_t seen = 0, o = 0, j = 0;
  for (; j + 16 <= c; j += 16) {
    __m512i v = _mm512_loadu_si512((const void *) (val + j));
    __m512i key = _mm512_and_si512(v, absmask);
    if (_mm512_cmpeq_epu32_mask(key, t)) {
      o = keep_run_f32(idx, val, j, j + 16, tk, skip, q, &seen, o);
      continue;
    }
    __mmask16 m = _mm512_cmpgt_epu32_mask(key, t);
    __m512i iv = _mm512_loadu_si512((const void *) (idx + j));
    _mm512_storeu_si512((void *) (idx + o), _mm512_maskz_compress_epi32(m, iv));
    _mm512_storeu_si512((void *) (val + o), _mm512_maskz_compress_epi32(m, v));
    o += (size_t) __builtin_popcount(m);
  }
  return keep_run_f32(idx, val, j, c, tk, skip, q, &seen, o);
}
#endif

static size_t keep_isa_f32(uint32_t *idx, float *val, size_t c, uint32_t tk,
                           size_t skip, size_t q)
{
  return ISA_KERNEL(keep_f32, keep_sse2_f32)(idx, val, c, tk, skip, q);
}

/* The filter keep_isa_f32 is, in place, that also writes the delta codes
 * of the kept indices at codes (*bytes of them) and leaves the indices
 * themselves where they were: the encoder writes the header and copies
 * the values behind the codes, or, where another coding wins, takes the
 * indices back from the codes (gc__sparse_codes_to_idx).  Written in place and coded
 * after, the kept indices were stored and read back again (0.55 ms of
 * top-K's 6.3 at density 0.1 on one thread).  limit holds the codes
 * (gc__sparse_keep_codes_isa_f32's bound). */
/* (inlined: called from the AVX-512 loop, it left the vector registers'
 * upper halves dirty, and the encoder's SSE2 copy after it ran at a
 * quarter of its speed) */
static inline __attribute__((always_inline)) size_t
keep_codes_run_f32(const uint32_t *idx, float *val, size_t j, size_t hi, uint32_t tk,
                   size_t skip, size_t q, size_t *seen, size_t o, uint8_t *codes, size_t *pos,
                   uint32_t *last)
{
  for (; j < hi; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    int keep = key > tk;
    if (key == tk) {
      keep = *seen >= skip && *seen < skip + q;
      (*seen)++;
    }
    if (!keep)
      continue;
    *pos = (size_t) (gc__leb_put(codes + *pos, idx[j] - *last - 1) - codes);
    *last = idx[j];
    val[o++] = val[j];
  }
  return o;
}

#ifdef HAVE_SCAN_PATHS
/* keep_f32_avx512's groups of sixteen with the codes: the kept indices'
 * gaps (each against the lane before, lane 0 against the last kept) one
 * byte each where all are below 128; ties, and groups with a longer gap,
 * one entry at a time. */
TARGET_AVX512 static size_t keep_codes_avx512_f32(const uint32_t *idx, float *val, size_t c,
                                                  uint32_t tk, size_t skip, size_t q,
                                                  uint8_t *codes, size_t *bytes,
                                                  uint32_t *lastp)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), t = _mm512_set1_epi32((int) tk);
  const __m512i one = _mm512_set1_epi32(1), small = _mm512_set1_epi32(127);
  const __m512i before = _mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
  size_t seen = 0, o = 0, j = 0, pos = 0;
  uint32_t last = UINT32_MAX;   /* the first gap is the first index */
  for (; j + 16 <= c; j += 16) {
    __m512i v = _mm512_loadu_si512((const void *) (val + j));
    __m512i key = _mm512_and_si512(v, absmask);
    if (_mm512_cmpeq_epu32_mask(key, t)) {
      o = keep_codes_run_f32(idx, val, j, j + 16, tk, skip, q, &seen, o, codes, &pos, &last);
      continue;
    }
    __mmask16 m = _mm512_cmpgt_epu32_mask(key, t);
    unsigned cnt = (unsigned) __builtin_popcount(m);
    uint32_t top = m ? idx[j + 31 - (size_t) __builtin_clz(m)] : last;
    __m512i kept = _mm512_maskz_compress_epi32(m, _mm512_loadu_si512((const void *) (idx + j)));
    _mm512_storeu_si512((void *) (val + o), _mm512_maskz_compress_epi32(m, v));
    __m512i prev = _mm512_mask_permutexvar_epi32(_mm512_set1_epi32((int) last), 0xfffe,
                                                 before, kept);
    __m512i g = _mm512_sub_epi32(_mm512_sub_epi32(kept, prev), one);
    __mmask16 in = (__mmask16) ((1u << cnt) - 1);
    if (!_mm512_mask_cmpgt_epu32_mask(in, g, small)) {
      _mm_storeu_si128((__m128i *) (codes + pos), _mm512_cvtepi32_epi8(g));
      pos += cnt;
    } else {
      uint32_t gs[16];
      _mm512_storeu_si512((void *) gs, g);
      for (unsigned l = 0; l < cnt; l++)
        pos = (size_t) (gc__leb_put(codes + pos, gs[l]) - codes);
    }
    last = top;
    o += cnt;
  }
  o = keep_codes_run_f32(idx, val, j, c, tk, skip, q, &seen, o, codes, &pos, &last);
  *bytes = pos;
  *lastp = last;
  return o;
}
#endif

/* keep_isa_f32, with the codes (and the indices left as they were) where
 * the instruction set has them and limit holds them; else *bytes =
 * SIZE_MAX and the indices kept as keep_isa_f32 keeps them. */
size_t gc__sparse_keep_codes_isa_f32(uint32_t *idx, float *val, size_t c, uint32_t tk, size_t skip,
                                     size_t q, uint8_t *codes, size_t limit, size_t *bytes,
                                 uint32_t *last)
{
#ifdef HAVE_SCAN_PATHS
  /* The indices ascend, so the gaps sum to at most the last, M: a byte
   * a code, one more for each gap of 128 or more (at most M / 128 of
   * them), one more again for each of 2^14 or more..., under c + M / 127
   * bytes in all; and the last vector store's 16. */
  if (codes && (c ? c + idx[c - 1] / 127 : 0) + 16 <= limit && gc__isa() >= GC__ISA_AVX512)
    return keep_codes_avx512_f32(idx, val, c, tk, skip, q, codes, bytes, last);
#endif
  (void) last;
  (void) codes; (void) limit;
  *bytes = SIZE_MAX;
  return keep_isa_f32(idx, val, c, tk, skip, q);
}

/* The filter on T threads, out of place (a piece's output may lie in the
 * input of the piece before it).  First each piece counts its keys above
 * tk and equal to it, so that each knows where its output starts and the
 * rank of its first tie; then each copies its kept entries.  Stores
 * never pass a piece's own end: vector stores while 16 entries of room
 * are left, then one entry at a time (branch-free: the store lands in the
 * room, the count moves on a kept entry).  The entries of keep_isa_f32. */
enum { KEEP_PAR_MIN = 1 << 18, KEEP_PAR_MAX = 16 };
_Static_assert((int) KEEP_PAR_MAX <= (int) GC__WIRE_PIECES_MAX, "keep pieces fit the encoders");

int gc__sparse_keep_threads(size_t c)
{
  return gc__threads_for(c, KEEP_PAR_MIN, KEEP_PAR_MAX);
}

static void keep_count_f32(const float *val, size_t lo, size_t hi, uint32_t tk,
                           size_t *gt, size_t *eq)
{
  size_t g = 0, e = 0;
  for (size_t j = lo; j < hi; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    g += key > tk;
    e += key == tk;
  }
  *gt = g;
  *eq = e;
}

/* Entries [j, hi) into out from o until o reaches end; returns o. */
static size_t keep_tail_f32(const uint32_t *idx, const float *val, size_t j, size_t hi,
                            uint32_t tk, size_t skip, size_t q, size_t seen,
                            uint32_t *oidx, float *oval, size_t o, size_t end)
{
  for (; j < hi && o < end; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    size_t tie = key == tk;
    size_t keep = (key > tk) | (tie & (seen >= skip) & (seen < skip + q));
    seen += tie;
    oidx[o] = idx[j];
    oval[o] = val[j];
    o += keep;
  }
  return o;
}

#ifdef HAVE_SCAN_PATHS
TARGET_AVX512 static void keep_piece_avx512_f32(const uint32_t *idx, const float *val,
                                                size_t lo, size_t hi, uint32_t tk,
                                                size_t skip, size_t q, size_t seen,
                                                uint32_t *oidx, float *oval, size_t o,
                                                size_t end)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), t = _mm512_set1_epi32((int) tk);
  size_t j = lo;
  for (; j + 16 <= hi && end - o >= 16; j += 16) {
    __m512i v = _mm512_loadu_si512((const void *) (val + j));
    __m512i key = _mm512_and_si512(v, absmask);
    __mmask16 e = _mm512_cmpeq_epu32_mask(key, t);
    if (e) {
      o = keep_tail_f32(idx, val, j, j + 16, tk, skip, q, seen, oidx, oval, o, end);
      seen += (size_t) __builtin_popcount(e);
      continue;
    }
    __mmask16 m = _mm512_cmpgt_epu32_mask(key, t);
    __m512i iv = _mm512_loadu_si512((const void *) (idx + j));
    _mm512_storeu_si512((void *) (oidx + o), _mm512_maskz_compress_epi32(m, iv));
    _mm512_storeu_si512((void *) (oval + o), _mm512_maskz_compress_epi32(m, v));
    o += (size_t) __builtin_popcount(m);
  }
  keep_tail_f32(idx, val, j, hi, tk, skip, q, seen, oidx, oval, o, end);
}
#endif

static void keep_piece_f32(const uint32_t *idx, const float *val, size_t lo, size_t hi,
                           uint32_t tk, size_t skip, size_t q, size_t seen,
                           uint32_t *oidx, float *oval, size_t o, size_t end)
{
#ifdef HAVE_SCAN_PATHS
  if (gc__isa() >= GC__ISA_AVX512) {
    keep_piece_avx512_f32(idx, val, lo, hi, tk, skip, q, seen, oidx, oval, o, end);
    return;
  }
#endif
  keep_tail_f32(idx, val, lo, hi, tk, skip, q, seen, oidx, oval, o, end);
}

/* Pieces j < T of pc[j] candidates at pi[j], pv[j], in index order. */
size_t gc__sparse_keep_par_f32(int T, uint32_t *const *pi, float *const *pv, const size_t *pc,
                               uint32_t tk, size_t skip, size_t q, uint32_t *oidx, float *oval)
{
  size_t gt[KEEP_PAR_MAX], eq[KEEP_PAR_MAX], seen[KEEP_PAR_MAX], out[KEEP_PAR_MAX + 1];
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++)
    keep_count_f32(pv[j], 0, pc[j], tk, &gt[j], &eq[j]);
  size_t sn = 0;
  out[0] = 0;
  for (int j = 0; j < T; j++) {
    /* the ties of ranks sn .. sn + eq - 1 that fall in skip .. skip + q - 1 */
    size_t a = sn > skip ? sn : skip, b = sn + eq[j] < skip + q ? sn + eq[j] : skip + q;
    seen[j] = sn;
    out[j + 1] = out[j] + gt[j] + (b > a ? b - a : 0);
    sn += eq[j];
  }
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++)
    keep_piece_f32(pi[j], pv[j], 0, pc[j], tk, skip, q, seen[j], oidx, oval, out[j],
                   out[j + 1]);
  return out[T];
}

/* The magnitude keys of val[0, c) that are at most ku, into out (in
 * order; out may hold c), and in *over how many exceed ku. */
static size_t band_sse2_f32(const float *val, size_t c, uint32_t ku,
                            uint32_t *out, size_t *over)
{
  size_t nb = 0;
  for (size_t j = 0; j < c; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    out[nb] = key;
    nb += key <= ku;
  }
  *over = c - nb;
  return nb;
}

#ifdef HAVE_SCAN_PATHS
TARGET_AVX2 static size_t band_f32_avx2(const float *val, size_t c, uint32_t ku,
                                        uint32_t *out, size_t *over)
{
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff), u = _mm256_set1_epi32((int) ku);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nib = _mm256_set1_epi32(15);
  size_t nb = 0, j = 0;
  for (; j + 8 <= c; j += 8) {
    __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *) (val + j)), absmask);
    unsigned m = 0xffu & ~(unsigned) _mm256_movemask_ps(
                              _mm256_castsi256_ps(_mm256_cmpgt_epi32(key, u)));
    __m256i perm = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32((int) pack_lanes[m]), shifts), nib);
    _mm256_storeu_si256((__m256i *) (out + nb), _mm256_permutevar8x32_epi32(key, perm));
    nb += (size_t) __builtin_popcount(m);
  }
  size_t rest;
  nb += band_sse2_f32(val + j, c - j, ku, out + nb, &rest);
  *over = c - nb;
  return nb;
}

TARGET_AVX512 static size_t band_f32_avx512(const float *val, size_t c, uint32_t ku,
                                            uint32_t *out, size_t *over)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), u = _mm512_set1_epi32((int) ku);
  size_t nb = 0, j = 0;
  for (; j + 16 <= c; j += 16) {
    __m512i key = _mm512_and_si512(_mm512_loadu_si512((const void *) (val + j)), absmask);
    __mmask16 m = _mm512_cmple_epu32_mask(key, u);
    _mm512_storeu_si512((void *) (out + nb), _mm512_maskz_compress_epi32(m, key));
    nb += (size_t) __builtin_popcount(m);
  }
  size_t rest;
  nb += band_sse2_f32(val + j, c - j, ku, out + nb, &rest);
  *over = c - nb;
  return nb;
}
#endif

size_t gc__sparse_band_isa_f32(const float *val, size_t c, uint32_t ku, uint32_t *out,
                               size_t *over)
{
  return ISA_KERNEL(band_f32, band_sse2_f32)(val, c, ku, out, over);
}

#define KEY uint32_t
#define KTH kth_largest_u32
#include "kth_source.c"

/* The largest magnitude key of val[0, m), and the smallest in *lo (m = 0:
 * 0 and UINT32_MAX, which gc__sparse_kth_pieces_f32's empty pieces rely
 * on). */
static inline __attribute__((always_inline)) uint32_t
key_range_body(const float *val, size_t m, uint32_t *lo)
{
  uint32_t l = UINT32_MAX, h = 0;
  for (size_t j = 0; j < m; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    l = key < l ? key : l;
    h = key > h ? key : h;
  }
  *lo = l;
  return h;
}

/* The magnitude keys of val[0, m) in bucket b ((key - base) >> sh == b),
 * in order, into out (which may be val: a store never passes what has
 * been read); returns how many. */
static inline __attribute__((always_inline)) size_t
key_bucket_body(const float *val, size_t j, size_t m, uint32_t base, int sh, uint32_t b,
                uint32_t *out, size_t nb)
{
  for (; j < m; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    out[nb] = key;
    nb += (key - base) >> sh == b;
  }
  return nb;
}

/* The selection's passes over the band took most of its time as scalar
 * loops: the range vectorised for each instruction set, the bucket's keys
 * packed sixteen at a time (AVX-512's compress). */
DISPATCH(uint32_t, key_range_f32, key_range_body, (const float *val, size_t m, uint32_t *lo),
         val, m, lo)

#ifdef HAVE_SCAN_PATHS

TARGET_AVX512 static size_t key_bucket_avx512(const float *val, size_t m, uint32_t base,
                                              int sh, uint32_t b, uint32_t *out)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), vb = _mm512_set1_epi32((int) b);
  const __m512i vbase = _mm512_set1_epi32((int) base), vsh = _mm512_set1_epi32(sh);
  size_t nb = 0, j = 0;
  for (; j + 16 <= m; j += 16) {
    __m512i key = _mm512_and_si512(_mm512_loadu_si512((const void *) (val + j)), absmask);
    __mmask16 in = _mm512_cmpeq_epi32_mask(_mm512_srlv_epi32(_mm512_sub_epi32(key, vbase), vsh), vb);
    _mm512_storeu_si512((void *) (out + nb), _mm512_maskz_compress_epi32(in, key));
    nb += (size_t) __builtin_popcount(in);
  }
  return key_bucket_body(val, j, m, base, sh, b, out, nb);
}
#endif

static size_t key_bucket_f32(const float *val, size_t m, uint32_t base, int sh, uint32_t b,
                             uint32_t *out)
{
#ifdef HAVE_SCAN_PATHS
  if (gc__isa() >= GC__ISA_AVX512)
    return key_bucket_avx512(val, m, base, sh, b, out);
#endif
  return key_bucket_body(val, 0, m, base, sh, b, out, 0);
}

/* The k-th largest magnitude key (k in 1..c) of the float32 values val[0,
 * c), with *above = how many keys exceed it and *equal = how many equal
 * it.  Histograms of HB-bit digits of key - min narrow it down to a bucket
 * small enough for a quickselect; the buckets are copied to scr (c keys;
 * scr may be val itself, since a copy never passes what it has read).
 * An exact answer, so any method would give the same. */
enum { KTH_HB = 11, KTH_SMALL = 2048 };
uint32_t gc__sparse_kth_key_f32(const float *val, size_t c, size_t k, uint32_t *scr,
                                size_t *above, size_t *equal)
{
  uint32_t lo, hi;
  hi = key_range_f32(val, c, &lo);
  size_t m = c, gt = 0;
  const uint32_t *src = NULL;   /* NULL: the keys of val */
  uint32_t base = lo, span = hi - lo;
  while (m > KTH_SMALL && span > 0) {
    int sh = 0;
    while ((span >> sh) >= (1u << KTH_HB))
      sh++;
    /* four histograms: runs of one bucket do not serialise on one count */
    _Static_assert(KTH_HB <= 12, "histograms live on the stack");
    uint32_t h[4][1 << KTH_HB];
    memset(h, 0, sizeof h);
    size_t j = 0;
    if (src) {
      for (; j + 4 <= m; j += 4)
        for (int u = 0; u < 4; u++)
          h[u][(src[j + u] - base) >> sh]++;
      for (; j < m; j++)
        h[0][(src[j] - base) >> sh]++;
    } else {
      for (; j + 4 <= m; j += 4)
        for (int u = 0; u < 4; u++) {
          uint32_t key;
          memcpy(&key, val + j + u, sizeof key);
          h[u][((key & 0x7fffffffu) - base) >> sh]++;
        }
      for (; j < m; j++) {
        uint32_t key;
        memcpy(&key, val + j, sizeof key);
        h[0][((key & 0x7fffffffu) - base) >> sh]++;
      }
    }
    uint32_t b = span >> sh;
    size_t cnt;
    for (;; b--) {   /* stops: the counts sum to m >= k */
      cnt = (size_t) h[0][b] + h[1][b] + h[2][b] + h[3][b];
      if (gt + cnt >= k)
        break;
      gt += cnt;
    }
    /* keep the bucket: keys base + (b << sh) .. + ((b + 1) << sh) - 1 */
    size_t nb = 0;
    if (src) {
      for (j = 0; j < m; j++)
        if ((src[j] - base) >> sh == b)
          scr[nb++] = src[j];
    } else {
      nb = key_bucket_f32(val, m, base, sh, b, scr);
    }
    src = scr;
    m = nb;
    uint32_t top = sh ? (uint32_t) (((uint64_t) 1 << sh) - 1) : 0;
    base += b << sh;
    span = top < span - (b << sh) ? top : span - (b << sh);
  }
  if (!src) {   /* val may be scr itself (a band of keys): no memcpy */
    for (size_t j = 0; j < m; j++) {
      uint32_t key;
      memcpy(&key, val + j, sizeof key);
      scr[j] = key & 0x7fffffffu;
    }
  }
  uint32_t tk = span == 0 ? base : kth_largest_u32(scr, m, k - gt);
  size_t g = 0, e = 0;
  for (size_t j = 0; j < m; j++) {
    g += scr[j] > tk;
    e += scr[j] == tk;
  }
  *above = gt + g;
  *equal = e;
  return tk;
}

#ifdef _OPENMP
/* gc__sparse_kth_key_f32 of the keys in T pieces (bn[j] at bp[j], which it reorders)
 * on the threads: the first histogram level with a histogram per piece,
 * each piece then keeping the keys of the chosen bucket at its front,
 * and those moved together to bp[0] for gc__sparse_kth_key_f32 (piece j's keys stay
 * below bp[j + 1], so the moves in order are safe).  On one thread this
 * selection took half a millisecond of top-K's four at density 0.1. */

uint32_t gc__sparse_kth_pieces_f32(int T, uint32_t *const *bp, const size_t *bn, size_t k,
                                   size_t *above, size_t *equal)
{
  uint32_t lo[SCAN_PAR_MAX], hi[SCAN_PAR_MAX], hist[SCAN_PAR_MAX][1 << KTH_HB];
  uint32_t base = UINT32_MAX, top = 0, b = 0;
  size_t kept[SCAN_PAR_MAX], gt = 0;
  int sh = 0;
  #pragma omp parallel num_threads(T)
  {
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++)
      hi[j] = key_range_f32((const float *) bp[j], bn[j], &lo[j]);
    #pragma omp single
    {
      for (int j = 0; j < T; j++) {
        base = lo[j] < base ? lo[j] : base;
        top = hi[j] > top ? hi[j] : top;
      }
      while (((top - base) >> sh) >= (1u << KTH_HB))
        sh++;
    }
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++) {
      uint32_t h[4][1 << KTH_HB], nbk = ((top - base) >> sh) + 1;   /* as in kth_key_f32 */
      memset(h, 0, sizeof h);
      size_t e = 0;
      for (; e + 4 <= bn[j]; e += 4)
        for (int u = 0; u < 4; u++)
          h[u][(bp[j][e + u] - base) >> sh]++;
      for (; e < bn[j]; e++)
        h[0][(bp[j][e] - base) >> sh]++;
      for (uint32_t q = 0; q < nbk; q++)
        hist[j][q] = h[0][q] + h[1][q] + h[2][q] + h[3][q];
    }
    #pragma omp single
    for (b = (top - base) >> sh;; b--) {   /* stops: the counts sum to >= k */
      size_t cnt = 0;
      for (int j = 0; j < T; j++)
        cnt += hist[j][b];
      if (gt + cnt >= k)
        break;
      gt += cnt;
    }
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++)
      kept[j] = key_bucket_f32((const float *) bp[j], bn[j], base, sh, b, bp[j]);
  }
  size_t m = kept[0];
  for (int j = 1; j < T; j++) {
    memmove(bp[0] + m, bp[j], kept[j] * sizeof *bp[0]);
    m += kept[j];
  }
  uint32_t tk = gc__sparse_kth_key_f32((const float *) bp[0], m, k - gt, bp[0], above, equal);
  *above += gt;
  return tk;
}
#endif

void gc__sparse_codes_to_idx(const uint8_t *codes, size_t c, uint32_t *idx);

/* A piece's codes at src, coded as if alone, its first gap counted from
 * index base: that code's length, and in *gap the gap in the whole
 * message after prev (UINT32_MAX: no index before the piece). */
static size_t first_code(const uint8_t *src, size_t base, uint32_t prev, uint32_t *gap)
{
  uint32_t f;
  size_t len = (size_t) (gc__leb_get(src, &f) - src);
  f += (uint32_t) base;
  *gap = prev == UINT32_MAX ? f : f - prev - 1;
  return len;
}

/* The in-place filter of the P > 1 pieces sel->idx, sel->val, sel->cnt
 * (keep_isa_f32 of each, skip 0: every tie of the pieces kept, q of
 * them), each piece coding what it keeps as if alone where the caller
 * gave room (sel->codes): the piece's codes in its P-th of sel->limit
 * bytes.  Where every piece coded and the delta coding wins, the join
 * writes each piece's true first gap (never longer than the one coded
 * from index 0) and moves the rest of its codes down behind the piece
 * before: sel->coded, sel->bytes for the message (the values copied from
 * the pieces by gc__wire_encode_coded_pieces).  Else the coded pieces'
 * kept indices come back from their codes, to the front of the piece as
 * keep_isa_f32 leaves them.  On two threads the kept indices, written in
 * place and read back twice by the pieces encoder (its sizes and its
 * codes), held top-K and Gaussian-k near one thread's time at density
 * 0.1. */
void gc__sparse_keep_codes_pieces_f32(int P, sparse_pieces *sel, uint32_t tk, size_t q)
{
  size_t bytes[SCAN_PAR_MAX], cshare = sel->codes ? sel->limit / (size_t) P : 0;
  uint32_t last[SCAN_PAR_MAX];
  int all = 1;
  #pragma omp parallel for schedule(static) num_threads(P)
  for (int j = 0; j < P; j++)
    sel->cnt[j] = gc__sparse_keep_codes_isa_f32(
        (uint32_t *) sel->idx[j], (float *) sel->val[j], sel->cnt[j], tk, 0, q,
        sel->codes ? sel->codes + (size_t) j * cshare : NULL, cshare, &bytes[j], &last[j]);
  size_t c = 0, delta = 0, isec;
  uint32_t prev = UINT32_MAX;
  for (int j = 0; j < P; j++) {
    all &= bytes[j] != SIZE_MAX;
    c += sel->cnt[j];
  }
  sel->coded = 0;
  if (all && c) {   /* the message's codes: each piece's first gap shrinks to the true one */
    for (int j = 0; j < P; j++) {
      if (!sel->cnt[j])
        continue;
      uint32_t gap;
      size_t old = first_code(sel->codes + (size_t) j * cshare, 0, prev, &gap);
      delta += bytes[j] - old + gc__leb_len(gap);
      prev = last[j];
    }
    if (gc__wire_pick(sel->n, c, delta, &isec) == GC__IDX_DELTA) {
      size_t pos = 0;
      prev = UINT32_MAX;
      for (int j = 0; j < P; j++) {
        if (!sel->cnt[j])
          continue;
        const uint8_t *src = sel->codes + (size_t) j * cshare;
        uint32_t gap;
        size_t old = first_code(src, 0, prev, &gap);
        uint8_t *dst = gc__leb_put(sel->codes + pos, gap);
        if (dst != src + old)
          memmove(dst, src + old, bytes[j] - old);
        pos = (size_t) (dst - sel->codes) + bytes[j] - old;
        prev = last[j];
      }
      sel->coded = 1;
      sel->bytes = pos;
      return;
    }
  }
  #pragma omp parallel for schedule(static) num_threads(P)
  for (int j = 0; j < P; j++)
    if (bytes[j] != SIZE_MAX)
      gc__sparse_codes_to_idx(sel->codes + (size_t) j * cshare, sel->cnt[j],
                              (uint32_t *) sel->idx[j]);
}

int gc__sparse_vbmi2 = 1;

/* The c indices whose delta codes are at codes, into idx. */
void gc__sparse_codes_to_idx(const uint8_t *codes, size_t c, uint32_t *idx)
{
  uint32_t i = UINT32_MAX;   /* the first gap is the first index */
  for (size_t j = 0; j < c; j++) {
    uint32_t g;
    codes = gc__leb_get(codes, &g);
    i += g + 1;
    idx[j] = i;
  }
}

/* The kept indices of a selection whose pieces' codes lie joined at
 * sel->codes (sel->coded) back into its pieces, each piece's to its
 * front, as the in-place filter leaves them uncoded. */
void gc__sparse_coded_pieces_to_idx(const sparse_pieces *sel)
{
  const uint8_t *p = sel->codes;
  uint32_t i = UINT32_MAX;   /* the first gap is the first index */
  for (int j = 0; j < sel->P; j++) {
    uint32_t *idx = (uint32_t *) sel->idx[j];
    for (size_t e = 0; e < sel->cnt[j]; e++) {
      uint32_t g;
      p = gc__leb_get(p, &g);
      i += g + 1;
      idx[e] = i;
    }
  }
}

/* The indices of the first m entries marked in bits (n bits) into idx, in
 * order. */
void gc__sparse_bits_to_idx(const uint64_t *bits, size_t n, size_t m, uint32_t *idx)
{
  size_t c = 0;
  for (size_t w = 0; w < (n + 63) / 64 && c < m; w++)
    for (uint64_t b = bits[w]; b && c < m; b &= b - 1)
      idx[c++] = (uint32_t) (64 * w + (size_t) __builtin_ctzll(b));
}

#ifdef HAVE_SCAN_PATHS
/* The codes of the marked entries of b (the word of entries w0 ..
 * w0 + 63), one at a time, at codes + *pos while they fit below limit, the
 * first *left entries at most; returns 0 once one did not fit. */
static inline __attribute__((always_inline)) int
put_word_codes(uint8_t *codes, size_t *pos, size_t limit, uint32_t *last, uint64_t b,
               size_t w0, size_t *left)
{
  for (; b && *left; b &= b - 1, --*left) {
    uint32_t i = (uint32_t) w0 + (uint32_t) __builtin_ctzll(b), g = i - *last - 1;
    if (*pos + gc__leb_len(g) > limit)
      return 0;
    *pos = leb_put(codes, *pos, g);
    *last = i;
  }
  return 1;
}

/* Threshold's and DGC's scan on one thread with the message's delta codes
 * (the selection scans' contract, scan_f32_avx512's blocks of 64): each
 * block's word of selected entries gives its codes as random-K's walk
 * makes them (walk_codes_vbmi2_f32), written at L->codes for the first
 * ccap entries while they fit in L->limit bytes, and the values go to
 * val (the first vcap); the word itself goes to L->bits.  No index is
 * written: at density 0.1 the scan's 10 MB of indices, and the encoder's
 * pass reading them back to code them, took a fifth of the time.  Where
 * the codes do not fit, the delta coding is not the smallest (L->limit
 * holds the smaller of raw and bitmap sections for ccap entries), and the
 * encoder takes the indices from the bits.  An empty block is skipped
 * while they are the rule (as scan_f32_avx512 does), its word unwritten
 * (L->whole = 0); elsewhere a block's codes are branch-free whether it is
 * empty or not (a branch on it was mispredicted half of the time at
 * density 0.01). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2,popcnt,"
                      "bmi,lzcnt")))
static size_t scan_codes_vbmi2_f32(const float *x, size_t n, float t, float *val,
                                   size_t vcap, size_t ccap, size_t *bad, scan_layout *L)
{
  const __m512i limit = _mm512_set1_epi32(scan_key_f32(t));
  const __m512i big = _mm512_set1_epi32(0x7f7fffff), absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50,
                                       49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36,
                                       35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22,
                                       21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7,
                                       6, 5, 4, 3, 2, 1, 0);
  const __m512i next = _mm512_add_epi8(iota, _mm512_set1_epi8(1)), one = _mm512_set1_epi8(1);
  uint8_t *codes = L->codes;
  uint64_t *bits = L->bits;
  size_t lim = L->limit, pos = 0, c = 0, i = 0, coded = SIZE_MAX;
  uint32_t last = UINT32_MAX;   /* the first gap is the first index */
  int fits = 1, whole = 1;
  unsigned full = 0, dense = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i xv[4], a[4];
    if (i + SCAN_AHEAD + 64 <= n)
      for (int v = 0; v < 4; v++)
        _mm_prefetch((const char *) (x + i + SCAN_AHEAD + 16 * v), _MM_HINT_T0);
    uint64_t b = 0;
    for (int v = 0; v < 4; v++) {
      xv[v] = _mm512_loadu_si512((const void *) (x + i + 16 * v));
      a[v] = _mm512_and_si512(xv[v], absmask);
      b |= (uint64_t) _mm512_cmpgt_epi32_mask(a[v], limit) << (16 * v);
    }
    if ((i & 2047) == 0) {
      dense = full > 8;
      full = 0;
    }
    full += b != 0;
    if (!dense && !b) {
      whole = 0;
      continue;
    }
    bits[i / 64] = b;
    /* (no test of b first: a non-finite entry is selected, and a branch on
     * b was mispredicted at moderate densities) */
    if (_mm512_cmpgt_epi32_mask(_mm512_max_epi32(_mm512_max_epi32(a[0], a[1]),
                                                 _mm512_max_epi32(a[2], a[3])), big)) {
      for (size_t j = i;; j++)   /* a non-finite entry is selected: the first */
        if (!(fabsf(x[j]) <= FLT_MAX)) {
          *bad = j;
          return c;
        }
    }
    size_t cnt = (size_t) __builtin_popcountll(b);
    size_t o = c;
    if (c + 64 <= vcap) {
      for (int v = 0; v < 4; v++) {
        __mmask16 m = (__mmask16) (b >> (16 * v));
        _mm512_storeu_si512((void *) (val + o), _mm512_maskz_compress_epi32(m, xv[v]));
        o += (size_t) __builtin_popcount(m);
      }
    } else {
      for (uint64_t r = b; r && o < vcap; r &= r - 1)
        val[o++] = x[i + (size_t) __builtin_ctzll(r)];
    }
    if (fits && c + 64 <= ccap && pos + 5 + 64 <= lim) {
      /* the first gap (below 2^14: two bytes, branch-free), then the
       * word's own gaps, each below 64; an empty word moves nothing */
      uint32_t first = (uint32_t) i + (uint32_t) _tzcnt_u64(b), g = first - last - 1;
      size_t len;
      if (__builtin_expect(g >= 1u << 14, 0)) {
        len = b ? (size_t) (gc__leb_put(codes + pos, g) - (codes + pos)) : 0;
      } else {
        uint32_t two = g >= 128;
        uint16_t w2 = (uint16_t) ((g & 0x7f) | two << 7 | (g >> 7) << 8);
        memcpy(codes + pos, &w2, 2);
        len = 1 + two;
      }
      __m512i at = _mm512_maskz_compress_epi8(b, iota);
      __m512i gaps = _mm512_sub_epi8(_mm512_sub_epi8(_mm512_permutexvar_epi8(next, at), at), one);
      _mm512_storeu_si512((void *) (codes + pos + len), gaps);
      pos += b ? len + cnt - 1 : 0;
      last = b ? (uint32_t) i + 63u - (uint32_t) __builtin_clzll(b | 1) : last;
    } else if (fits && c < ccap) {
      size_t left = ccap - c;
      fits = put_word_codes(codes, &pos, lim, &last, b, i, &left);
      coded = fits ? coded : ccap - left;
    }
    c += cnt;
  }
  if (i < n) {   /* the tail, an entry at a time */
    uint64_t b = 0;
    for (size_t j = i; j < n; j++) {
      float a = fabsf(x[j]);
      if (a <= t)
        continue;
      if (!(a <= FLT_MAX)) {
        *bad = j;
        return c;
      }
      b |= (uint64_t) 1 << (j - i);
    }
    bits[i / 64] = b;
    size_t o = c;
    for (uint64_t r = b; r && o < vcap; r &= r - 1)
      val[o++] = x[i + (size_t) __builtin_ctzll(r)];
    if (fits && c < ccap) {
      size_t left = ccap - c;
      fits = put_word_codes(codes, &pos, lim, &last, b, i, &left);
      coded = fits ? coded : ccap - left;
    }
    c += (size_t) __builtin_popcountll(b);
  }
  L->whole = whole;
  L->bytes = fits ? pos : SIZE_MAX;
  L->coded = fits ? (c < ccap ? c : ccap) : coded;
  L->last = last;
  *bad = SIZE_MAX;
  return c;
}

#ifdef _OPENMP
/* The bytes of the first m > 0 of the delta codes at p (bytes of them):
 * codes end at bytes below 0x80, counted a word at a time. */
static size_t codes_skip(const uint8_t *p, size_t bytes, size_t m)
{
  const uint64_t high = 0x8080808080808080ull;
  size_t off = 0;
  for (; off + 8 <= bytes; off += 8) {
    uint64_t w;
    memcpy(&w, p + off, 8);
    size_t e = (size_t) __builtin_popcountll(~w & high);
    if (e >= m)
      break;
    m -= e;
  }
  for (; m; off++)
    m -= !(p[off] & 0x80);
  return off;
}

/* scan_codes_vbmi2_f32 on T threads, the codes of the first need entries
 * (threshold's: all of them; DGC's: its first ns).  Each thread scans its
 * piece of x (a multiple of 64 entries) and codes all of it as if alone,
 * its values at val + j * share (share: a T-th of the room) and its codes
 * in its own T-th of L->limit bytes (from the second on, 4 bytes in: its
 * first gap, coded from the piece's start, grows by up to 4 bytes once
 * the join knows the entry before it).  The join cuts the codes after
 * the first need entries, writes each piece's true first gap and moves
 * the rest of its codes down behind the piece before (a piece never takes
 * more than its T-th, so each lands at or below where it lies).  The
 * values stay in their pieces, for the encoder to move down
 * (gc__wire_encode_coded_pieces).  On two threads the pieces' indices,
 * 10 MB at density 0.1, n = 2.5e7, and the encoder's two passes over them
 * took what one thread's codes had saved.  Returns SIZE_MAX, with nothing
 * else to keep, where a piece's values needed overflow its share, or its
 * codes needed theirs while the delta coding may still win (uneven
 * pieces): the caller scans again the threads' way. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2,popcnt,"
                      "bmi,lzcnt")))
static size_t scan_codes_par_f32(int T, const float *x, size_t n, float t, float *val,
                                 size_t room, size_t need, size_t *bad, scan_layout *L)
{
  enum { RESERVE = 4 };
  size_t piece = scan_piece(n, T), share = room / (size_t) T;
  size_t cshare = L->limit / (size_t) T;
  size_t cnt[SCAN_PAR_MAX], bads[SCAN_PAR_MAX], lo[SCAN_PAR_MAX + 1], keep[SCAN_PAR_MAX];
  scan_layout part[SCAN_PAR_MAX];
  if (cshare <= RESERVE + 64)
    return SIZE_MAX;
  for (int j = 0; j < T; j++)
    lo[j] = (size_t) j * piece < n ? (size_t) j * piece : n;
  lo[T] = n;
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++) {
    size_t off = j ? RESERVE : 0;
    part[j] = (scan_layout) { .codes = L->codes + (size_t) j * cshare + off,
                              .limit = cshare - off, .bits = L->bits + lo[j] / 64 };
    cnt[j] = scan_codes_vbmi2_f32(x + lo[j], lo[j + 1] - lo[j], t, val + (size_t) j * share,
                                  share, lo[j + 1] - lo[j], &bads[j], &part[j]);
  }
  size_t c = 0, low = 0;   /* low: at least the delta coding's bytes */
  int whole = 1, fits = 1, over = 0;
  for (int j = 0; j < T; j++) {
    if (bads[j] != SIZE_MAX) {   /* the first non-finite entry: the first piece's */
      *bad = lo[j] + bads[j];
      return c;
    }
    /* the piece's entries among the first need, and their code bytes */
    size_t m = need > c ? (need - c < cnt[j] ? need - c : cnt[j]) : 0;
    c += cnt[j];
    whole &= part[j].whole;
    fits &= m <= share;
    keep[j] = m;
    if (m && m > part[j].coded) {
      /* they overflowed its room: more than it holds, and a byte each */
      over = 1;
      low += m > part[j].limit ? m : part[j].limit + 1;
    } else if (m) {   /* (the first gap only grows) */
      /* (where later entries overflowed, the first m's codes lie below
       * its limit) */
      size_t has = part[j].bytes != SIZE_MAX ? part[j].bytes : part[j].limit;
      part[j].bytes = m == cnt[j] ? part[j].bytes : codes_skip(part[j].codes, has, m);
      low += part[j].bytes;
    }
  }
  if (!fits || (over && low <= L->limit))
    return SIZE_MAX;
  size_t pos = 0;
  uint32_t last = UINT32_MAX;   /* the entry before the piece's first */
  for (int j = 0; !over && j < T; j++) {
    if (!keep[j])
      continue;
    const uint8_t *src = part[j].codes;
    uint32_t gap;   /* the piece's codes count its first gap from its start */
    size_t old = first_code(src, lo[j], last, &gap);
    uint8_t *q = gc__leb_put(L->codes + pos, gap);
    if (q != src + old)   /* (the first piece's stay) */
      memmove(q, src + old, part[j].bytes - old);
    pos = (size_t) (q - L->codes) + part[j].bytes - old;
    last = (uint32_t) lo[j] + part[j].last;
  }
  L->whole = whole;
  L->bytes = over ? SIZE_MAX : pos;
  L->vp = T;
  L->share = share;
  memcpy(L->cnt, cnt, (size_t) T * sizeof *cnt);
  *bad = SIZE_MAX;
  return c;
}
#endif
#endif

/* The scan with codes where it runs, AVX-512 with VBMI2: on one thread
 * scan_codes_vbmi2_f32 (the values of the first vcap), on several
 * scan_codes_par_f32 (the values in the threads' pieces of the room;
 * L->vp says how many); elsewhere the indices are written and coded
 * after.  SIZE_MAX where it does not run, having done nothing. */
static size_t scan_codes_f32(const float *x, size_t n, float t, float *val, size_t vcap,
                             size_t room, size_t ccap, size_t *bad, scan_layout *L)
{
#ifdef HAVE_SCAN_PATHS
  int T = gc__threads_for(n, SCAN_PAR_MIN, SCAN_PAR_MAX);
  if (L->codes && gc__isa() >= GC__ISA_AVX512 && gc__sparse_vbmi2
      && __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("avx512vbmi")) {
    L->t = (double) t;
    L->vp = 1;
    if (T == 1)
      return scan_codes_vbmi2_f32(x, n, t, val, vcap, ccap, bad, L);
#ifdef _OPENMP
    return scan_codes_par_f32(T, x, n, t, val, room, ccap, bad, L);
#endif
  }
#endif
  (void) x; (void) n; (void) t; (void) val; (void) vcap; (void) room; (void) ccap; (void) bad;
  (void) L;
  return SIZE_MAX;
}

/* ---- the two precisions -------------------------------------------------- */

#define SPARSE_TEMPLATE "sparse_kernels_source.c"
#include "gc_sparse_twice.h"

/* ---- init / release / size, shared by the family ------------------------ */

void gc__sparse_release(void *state)
{
  sparse_state *s = state;
  free(s->idx);
  free(s->cand);
  free(s->mag);
  free(s->sample);
  free(s->bits);
  free(s->tmp);
  free(s->block_sums);
  free(s->scan_bits);
  s->block_sums = NULL;
  s->scan_bits = NULL;
  s->idx = s->cand = s->tmp = NULL;
  s->mag = s->sample = NULL;
  s->bits = NULL;
}

int gc__sparse_init_common(sparse_state *s, uint8_t wire, size_t n,
                           const gc_compressor_params *p, int has_k)
{
  s->wire = wire;
  s->n = n;
  s->p = *p;
  if (p->ties != GC_TIES_LOW && p->ties != GC_TIES_HIGH)
    GC_ERRORF(GC_EINVAL, "ties = %d must be GC_TIES_LOW or GC_TIES_HIGH", p->ties);
  if (!has_k)
    return GC_SUCCESS;
  if (p->k == 0 && !(p->density > 0 && p->density <= 1))
    GC_ERRORF(GC_EINVAL, "density %g is outside (0,1] (and k = 0)", p->density);
  s->k = gc__resolve_k(n, p);
  if (s->k > n)
    GC_ERRORF(GC_EINVAL, "k = %zu exceeds the vector length n = %zu", s->k, n);
  s->rho = (double) s->k / (double) n;
  return GC_SUCCESS;
}

int gc__sparse_alloc_cand(sparse_state *s, size_t cand_cap)
{
  s->cand_cap = cand_cap;
  s->cand = malloc(cand_cap * sizeof *s->cand);
  s->mag = malloc(cand_cap * sizeof *s->mag);
  return s->cand && s->mag;
}

int gc__sparse_alloc_scan_bits(sparse_state *s)
{
  s->scan_bits = malloc(((s->n + 63) / 64 + 1) * sizeof *s->scan_bits);   /* never malloc(0) */
  return s->scan_bits != NULL;
}

int gc__sparse_init_done(sparse_state *s, int ok)
{
  s->idx = malloc((s->idx_cap ? s->idx_cap : 1) * sizeof *s->idx);
  if (!s->idx || !ok) {
    gc__sparse_release(s);
    GC_ERRORF(GC_ENOMEM, "out of memory sizing the workspaces for n = %zu", s->n);
  }
  return GC_SUCCESS;
}

/* Bounds use 8-byte values: one bound serves both precisions.  The
 * longest message, plus, for the selections that stage their values in
 * the buffer (gc__wire_stage), the alignment padding of those values:
 * without it a float64 buffer of the bound held one value too few. */
size_t gc__sparse_max_bytes_k(const void *state)
{
  const sparse_state *s = state;
  return gc__wire_bound(s->n, s->k, 8) + sizeof(double) - 1;
}

size_t gc__sparse_max_bytes_n(const void *state)
{
  const sparse_state *s = state;
  return gc__wire_bound(s->n, s->n, 8) + sizeof(double) - 1;
}

#define GC__SPARSE_ROW(var) &gc__sparse_##var,
const gc_compressor_type *const gc__sparse_types[] = { GC__SPARSE_FAMILY(GC__SPARSE_ROW) NULL };
