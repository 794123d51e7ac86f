/* wire.c -- the sparse message format.
 *
 * Byte layout (all integers little-endian):
 *
 *   offset 0   u8   type       the compressor's tag, GC__WIRE_* of gc_wire.h
 *                              (0x50 a sparse vector, then one per sparsifier)
 *   offset 1   u8   precision  4 (float32 values) or 8 (float64 values)
 *   offset 2   u8   coding     0 raw, 1 delta+varint, 2 bitmap, 3 implicit
 *   offset 3   u32  c          number of (index, value) pairs, c <= n
 *   offset 7   index section   raw:      c u32 indices, strictly increasing
 *                              delta:    c LEB128 varints g_j, where
 *                                        g_0 = i_0, g_j = i_j - i_{j-1} - 1
 *                              bitmap:   ceil(n/8) bytes, bit (i mod 8) of
 *                                        byte i/8 set iff index i is sent;
 *                                        bits >= n are zero
 *                              implicit: nothing (randk-unbiased: both sides
 *                                        draw the indices from (seed, step))
 *   then       c values, b = 4 or 8 bytes each, in index order (implicit:
 *              in draw order)
 *
 * Closed-form sizes, with H = 7, b the value size, L(g) = 1 + floor(log2(g)/7)
 * for g > 0 and L(0) = 1 (LEB128 length):
 *   raw      H + 4c + bc
 *   delta    H + sum_j L(g_j) + bc
 *   bitmap   H + ceil(n/8) + bc
 *   implicit H + bc
 * The encoder picks the smallest of raw, delta and bitmap (ties: raw, then
 * delta, then bitmap), so every explicit message is at most
 * H + min(4c, ceil(n/8)) + bc bytes: gc__wire_bound / gc_sparse_max_bytes.
 *
 * Decoding validates the whole message first (type, precision, coding, c <= n,
 * exact length -- no trailing bytes --, indices in range and strictly
 * increasing, bitmap popcount == c) and only then accumulates, so a rejected
 * message leaves y untouched. */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_isa.h"
#include "gc_template.h"
#include "gc_threads.h"
#include "gc_dtype.h"
#include "gc_wire.h"

#if defined(__GNUC__) && !defined(__clang__)
/* As in sparse_*.c: the length and counting loops vectorise at -O3 only. */
#pragma GCC optimize("O3")
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the wire format is written with memcpy and assumes a little-endian host"
#endif

/* Bytes of the LEB128 gaps of the ascending indices idx[a, b) (a >= 1,
 * each against the one before it): a sum of integers, the same in any
 * order, so the loop is compiled for each instruction set (gc__isa) and
 * vectorised there. */
static inline __attribute__((always_inline)) size_t
gap_bytes_body(const uint32_t *idx, size_t a, size_t b)
{
  size_t s = 0;
  for (size_t j = a; j < b; j++) {
    uint32_t g = idx[j] - idx[j - 1] - 1;
    s += 1u + (g >= 1u << 7) + (g >= 1u << 14) + (g >= 1u << 21) + (g >= 1u << 28);
  }
  return s;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_WIRE_PATHS 1
#define TARGET_AVX2 __attribute__((target("avx2")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
TARGET_AVX512 static size_t gap_bytes_avx512(const uint32_t *idx, size_t a, size_t b)
{ return gap_bytes_body(idx, a, b); }
TARGET_AVX2 static size_t gap_bytes_avx2(const uint32_t *idx, size_t a, size_t b)
{ return gap_bytes_body(idx, a, b); }
#endif

static size_t gap_bytes(const uint32_t *idx, size_t a, size_t b)
{
#ifdef HAVE_WIRE_PATHS
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    return gap_bytes_avx512(idx, a, b);
  if (isa >= GC__ISA_AVX2)
    return gap_bytes_avx2(idx, a, b);
#endif
  return gap_bytes_body(idx, a, b);
}

/* Messages of WIRE_PAR_MIN entries or more are written on the OpenMP
 * threads (the caller's omp_set_num_threads; one inside a parallel
 * region): the gaps in T contiguous pieces, each piece's delta bytes
 * counted first so that every piece knows where its codes start, and the
 * values in pieces.  The bytes are those of one thread. */
enum { WIRE_PAR_MIN = 1 << 18, WIRE_PAR_MAX = GC__WIRE_PIECES_MAX, WIRE_PIECE = 1 << 16 };

/* The staged values' move on threads: rounds of at least STAGE_ROUND_MIN
 * values and at most STAGE_ROUNDS_MAX of them (a barrier each). */
enum { STAGE_ROUND_MIN = 1 << 14, STAGE_ROUNDS_MAX = 64 };

typedef struct {
  int T;                          /* pieces (1: one thread)              */
  size_t at[WIRE_PAR_MAX + 1];    /* piece j: the gaps of [at[j], at[j+1]) */
  size_t bytes[WIRE_PAR_MAX];     /* their delta bytes                   */
} wire_plan;

int gc__wire_threads(size_t c)
{
  return gc__threads_for(c, WIRE_PAR_MIN, WIRE_PAR_MAX);
}

/* Bytes of the delta coding of c ascending indices, piece by piece. */
static size_t delta_plan(const uint32_t *idx, size_t c, wire_plan *pl)
{
  int T = pl->T = gc__wire_threads(c);
  if (!c)
    return 0;
  size_t m = c - 1, piece = (m + (size_t) T - 1) / (size_t) T;
  for (int j = 0; j <= T; j++)
    pl->at[j] = 1 + ((size_t) j * piece < m ? (size_t) j * piece : m);
  if (T == 1) {   /* no parallel region at all: small messages are many */
    pl->bytes[0] = gap_bytes(idx, pl->at[0], pl->at[1]);
  } else {
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T; j++)
      pl->bytes[j] = gap_bytes(idx, pl->at[j], pl->at[j + 1]);
  }
  size_t s = gc__leb_len(idx[0]);
  for (int j = 0; j < T; j++)
    s += pl->bytes[j];
  return s;
}

/* The smallest index coding for c indices whose delta coding takes `delta`
 * bytes (SIZE_MAX: not measured); ties go raw, delta, bitmap. */
int gc__wire_pick(size_t n, size_t c, size_t delta, size_t *index_bytes)
{
  size_t best = 4 * c, bitmap = (n + 7) / 8;
  int coding = GC__IDX_RAW;
  if (c && delta < best) {
    best = delta;
    coding = GC__IDX_DELTA;
  }
  if (bitmap < best) {
    best = bitmap;
    coding = GC__IDX_BITMAP;
  }
  *index_bytes = best;
  return coding;
}

/* Whether c indices of [0, n) need their delta coding measured: it is
 * never smaller than c bytes, so the O(c) walk is skipped where it can
 * neither beat nor tie the bitmap (on a tie delta wins; cuda/compress/wire.cu
 * mirrors this test). */
static int delta_may_win(size_t n, size_t c)
{
  return c && (n + 7) / 8 >= c;
}

/* gc__wire_choose, keeping the delta coding's pieces for put_indices. */
static int choose_plan(size_t n, const uint32_t *idx, size_t c, size_t *index_bytes,
                       wire_plan *pl)
{
  pl->T = 1;
  size_t delta = delta_may_win(n, c) ? delta_plan(idx, c, pl) : SIZE_MAX;
  return gc__wire_pick(n, c, delta, index_bytes);
}

int gc__wire_choose(size_t n, const uint32_t *idx, size_t c, size_t *index_bytes)
{
  wire_plan pl;
  return choose_plan(n, idx, c, index_bytes, &pl);
}

void *gc__wire_stage(size_t n, size_t cmax, size_t vbytes, uint8_t *buf, size_t cap,
                     size_t *room)
{
  size_t bitmap = (n + 7) / 8, raw = 4 * cmax;
  size_t off = GC__WIRE_HDR + (raw < bitmap ? raw : bitmap);
  off += (vbytes - (uintptr_t) (buf + off) % vbytes) % vbytes;
  *room = cap > off ? (cap - off) / vbytes : 0;
  return *room ? buf + off : NULL;
}

size_t gc__wire_bound(size_t n, size_t c, size_t vbytes)
{
  size_t raw = 4 * c, bitmap = (n + 7) / 8;
  return GC__WIRE_HDR + (raw < bitmap ? raw : bitmap) + c * vbytes;
}

/* Every sparse type but random-K-unbiased's, whose indices are implicit. */
static int explicit_type(uint8_t t)
{
  return t >= GC__WIRE_SPARSE && t < GC__WIRE_SPARSE_END && t != GC__WIRE_RANDKU;
}

static uint32_t get_u32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

void gc__wire_put_header(uint8_t *buf, uint8_t type, size_t vbytes, int coding, size_t c)
{
  uint32_t c32 = (uint32_t) c;
  buf[0] = type;
  buf[1] = (uint8_t) vbytes;
  buf[2] = (uint8_t) coding;
  memcpy(buf + 3, &c32, 4);
}

/* The header of a message of c values of vbytes bytes behind an index
 * section of isec bytes, and its length in *len; GC_ENOSPACE where it
 * does not fit in cap. */
static int start_message(uint8_t *buf, size_t cap, uint8_t type, size_t vbytes, int coding,
                         size_t c, size_t isec, size_t *len)
{
  size_t total = GC__WIRE_HDR + isec + c * vbytes;
  if (total > cap)
    GC_ERRORF(GC_ENOSPACE, "message needs %zu bytes, buffer has %zu", total, cap);
  gc__wire_put_header(buf, type, vbytes, coding, c);
  *len = total;
  return GC_SUCCESS;
}

int gc__wire_implicit_head(uint8_t type, size_t c, size_t vbytes, uint8_t *buf, size_t cap,
                           size_t *len)
{
  return start_message(buf, cap, type, vbytes, GC__IDX_IMPLICIT, c, 0, len);
}

/* The LEB128 codes of the gaps of idx[j, hi) (j >= 1) from p; returns
 * the next free byte.  Gaps below 2^14 (one or two bytes) take a branch-
 * free 2-byte store, so something must be written after them: the caller
 * passes hi < c, and the last gap goes through gc__leb_put. */
static uint8_t *put_gaps(uint8_t *p, const uint32_t *idx, size_t j, size_t hi)
{
  for (; j < hi; j++) {
    uint32_t g = idx[j] - idx[j - 1] - 1;
    if (g >= 1u << 14) {
      p = gc__leb_put(p, g);
      continue;
    }
    uint32_t two = g >= 128;   /* below 128 the high byte is 0 */
    uint16_t w = (uint16_t) ((g & 0x7f) | two << 7 | (g >> 7) << 8);
    memcpy(p, &w, 2);
    p += 1 + two;
  }
  return p;
}

#ifdef HAVE_WIRE_PATHS
/* Sixteen gaps at a time: when all are below 128, one byte each.  The
 * gaps of [a, b - 1) (a >= 1, a < b): the caller writes gap b - 1. */
TARGET_AVX512 static uint8_t *put_gaps_avx512(uint8_t *p, const uint32_t *idx,
                                              size_t a, size_t b)
{
  const __m512i one = _mm512_set1_epi32(1), small = _mm512_set1_epi32(127);
  size_t j = a;
  for (; j + 16 < b; j += 16) {
    __m512i g = _mm512_sub_epi32(
        _mm512_sub_epi32(_mm512_loadu_si512((const void *) (idx + j)),
                         _mm512_loadu_si512((const void *) (idx + j - 1))), one);
    if (_mm512_cmpgt_epu32_mask(g, small)) {
      p = put_gaps(p, idx, j, j + 16);
      continue;
    }
    _mm_storeu_si128((__m128i *) p, _mm512_cvtepi32_epi8(g));
    p += 16;
  }
  return put_gaps(p, idx, j, b - 1);
}
#endif

/* The codes of the gaps of idx[a, b) (1 <= a < b), exactly their bytes:
 * the last through gc__leb_put, so nothing is written past them. */
static uint8_t *put_gap_range(uint8_t *p, const uint32_t *idx, size_t a, size_t b)
{
#ifdef HAVE_WIRE_PATHS
  if (gc__isa() >= GC__ISA_AVX512)
    p = put_gaps_avx512(p, idx, a, b);
  else
#endif
    p = put_gaps(p, idx, a, b - 1);
  return gc__leb_put(p, idx[b - 1] - idx[b - 2] - 1);
}

/* The delta coding's bytes on one thread, written at p as they are
 * counted while they fit below limit: chunk by chunk, each counted and
 * then written from L1, so that the indices are read from memory once
 * instead of twice (count, then write).  *written: whether all of them
 * were.  Bytes past the index section the message ends up with are
 * overwritten by its values or lie past its end. */
enum { GAP_CHUNK = 4096 };

static size_t delta_write(uint8_t *p, const uint8_t *limit, const uint32_t *idx,
                          size_t c, int *written)
{
  size_t s = gc__leb_len(idx[0]), room = limit > p ? (size_t) (limit - p) : 0;
  int fits = room >= s;
  if (fits) {
    p = gc__leb_put(p, idx[0]);
    room -= s;
  }
  for (size_t a = 1; a < c; a += GAP_CHUNK) {
    size_t b = c - a < GAP_CHUNK ? c : a + GAP_CHUNK, bytes = gap_bytes(idx, a, b);
    s += bytes;
    fits = fits && room >= bytes;
    if (fits) {
      p = put_gap_range(p, idx, a, b);
      room -= bytes;
    }
  }
  *written = fits;
  return s;
}

/* The bits of indices idx[0, c) set in the bitmap p. */
static void set_bits(uint8_t *p, const uint32_t *idx, size_t c)
{
  for (size_t j = 0; j < c; j++)
    p[idx[j] >> 3] |= (uint8_t) (1u << (idx[j] & 7));
}

/* Index section writers; the caller has chosen the coding (the delta
 * coding with its plan, choose_plan's). */
static void put_indices(uint8_t *p, int coding, size_t n, const uint32_t *idx,
                        size_t c, const wire_plan *pl)
{
  switch (coding) {
  case GC__IDX_RAW:
    memcpy(p, idx, 4 * c);
    break;
  case GC__IDX_DELTA: {
    if (!c)
      break;
    p = gc__leb_put(p, idx[0]);
    if (c < 2)
      break;
    if (pl->T == 1) {
      put_gap_range(p, idx, 1, c);
      break;
    }
    uint8_t *at[WIRE_PAR_MAX];
    at[0] = p;
    for (int j = 1; j < pl->T; j++)
      at[j] = at[j - 1] + pl->bytes[j - 1];
    #pragma omp parallel for schedule(static) num_threads(pl->T)
    for (int j = 0; j < pl->T; j++)
      if (pl->at[j] < pl->at[j + 1])
        put_gap_range(at[j], idx, pl->at[j], pl->at[j + 1]);
    break;
  }
  case GC__IDX_BITMAP:
    memset(p, 0, (n + 7) / 8);
    set_bits(p, idx, c);
    break;
  default:
    break;
  }
}

/* The checks every message header gets: length, type (0: any explicit
 * type) and value size. */
static int check_header(uint8_t type, size_t vbytes, const uint8_t *buf,
                        size_t len)
{
  if (len < GC__WIRE_HDR)
    GC_ERRORF(GC_ECORRUPT, "sparse message truncated: %zu bytes, header needs %d",
              len, GC__WIRE_HDR);
  if (type ? buf[0] != type : !explicit_type(buf[0]))
    GC_ERRORF(GC_ECORRUPT, "message type 0x%02x is not the expected 0x%02x",
              buf[0], type);
  if (buf[1] != vbytes)
    GC_ERRORF(GC_ECORRUPT, "message carries %u-byte values, decoder expects %zu",
              buf[1], vbytes);
  return GC_SUCCESS;
}

/* Validate the header and the index section of an explicit message; on
 * success *c, *coding and *vals (offset of the values) are set. */
static int check_explicit(uint8_t type, size_t vbytes, const uint8_t *buf,
                          size_t len, size_t n, size_t *c_out, int *coding_out,
                          size_t *vals_out)
{
  GC_TRY(check_header(type, vbytes, buf, len));
  size_t c = get_u32(buf + 3);
  if (c > n)
    GC_ERRORF(GC_ECORRUPT, "message count %zu exceeds the vector length %zu", c, n);
  size_t body = len - GC__WIRE_HDR;
  if (body / vbytes < c)
    GC_ERRORF(GC_ECORRUPT, "message truncated: %zu values do not fit in %zu bytes", c, len);
  size_t isec = body - c * vbytes;   /* bytes left for the index section */
  const uint8_t *p = buf + GC__WIRE_HDR;
  switch (buf[2]) {
  case GC__IDX_RAW: {
    if (isec != 4 * c)
      GC_ERRORF(GC_ECORRUPT, "raw-index message has %zu index bytes, expected %zu",
                isec, 4 * c);
    uint64_t prev = 0;
    for (size_t j = 0; j < c; j++) {
      uint64_t i = get_u32(p + 4 * j);
      if (i >= n || (j && i <= prev))
        GC_ERRORF(GC_ECORRUPT, "index %llu at position %zu is out of range or not increasing",
                  (unsigned long long) i, j);
      prev = i;
    }
    break;
  }
  case GC__IDX_DELTA: {
    size_t q = 0;
    uint64_t next = 0;   /* smallest index the next entry may take */
    for (size_t j = 0; j < c; j++) {
      uint64_t g = 0;
      for (int sh = 0;; sh += 7) {
        if (q >= isec || sh > 28)
          GC_ERRORF(GC_ECORRUPT, "delta-coded index %zu is truncated or too long", j);
        uint8_t byte = p[q++];
        g |= (uint64_t) (byte & 0x7f) << sh;
        if (!(byte & 0x80))
          break;
      }
      next += g;
      if (next >= n)
        GC_ERRORF(GC_ECORRUPT, "delta-coded index %zu is out of range (n = %zu)", j, n);
      next++;
    }
    if (q != isec)
      GC_ERRORF(GC_ECORRUPT, "delta-coded indices use %zu bytes, section has %zu", q, isec);
    break;
  }
  case GC__IDX_BITMAP: {
    size_t nb = (n + 7) / 8;
    if (isec != nb)
      GC_ERRORF(GC_ECORRUPT, "bitmap section has %zu bytes, expected %zu", isec, nb);
    size_t pop = 0;
    for (size_t b = 0; b < nb; b++)
      pop += (size_t) __builtin_popcount(p[b]);
    if (n % 8 && (p[nb - 1] >> (n % 8)))
      GC_ERROR("bitmap marks indices beyond the vector length", GC_ECORRUPT);
    if (pop != c)
      GC_ERRORF(GC_ECORRUPT, "bitmap marks %zu indices, header says %zu", pop, c);
    break;
  }
  default:
    GC_ERRORF(GC_ECORRUPT, "unknown index coding %u", buf[2]);
  }
  *c_out = c;
  *coding_out = buf[2];
  *vals_out = GC__WIRE_HDR + isec;
  return GC_SUCCESS;
}

int gc__wire_check_implicit(uint8_t type, size_t vbytes, const uint8_t *buf,
                            size_t len, size_t c)
{
  GC_TRY(check_header(type, vbytes, buf, len));
  if (buf[2] != GC__IDX_IMPLICIT)
    GC_ERRORF(GC_ECORRUPT, "index coding %u where implicit indices are expected", buf[2]);
  if (get_u32(buf + 3) != c)
    GC_ERRORF(GC_ECORRUPT, "message count %u, expected %zu", get_u32(buf + 3), c);
  if (len != GC__WIRE_HDR + c * vbytes)
    GC_ERRORF(GC_ECORRUPT, "message has %zu bytes, expected %zu", len,
              GC__WIRE_HDR + c * vbytes);
  return GC_SUCCESS;
}

size_t gc_sparse_max_bytes(size_t n, size_t nnz, int dtype)
{
  return gc__wire_bound(n, nnz, dtype == GC_F64 ? 8 : 4);
}

/* A message is untrusted input (a peer may send anything): a value that
 * is NaN or Inf is rejected before it reaches the sum. */
#define NONFINITE_CHECK(val, j)                                          \
  do {                                                                   \
    if (!isfinite(val))                                                  \
      GC_ERRORF(GC_ECORRUPT, "message value %zu is %g (not finite)",     \
                (size_t) (j), (double) (val));                           \
  } while (0)

#define REAL float
#define SFX f32
#include "wire_source.c"

#define REAL double
#define SFX f64
#include "wire_source.c"
