/* gc_sparse_kernels.h -- internal to the sparsifiers: what the files
 * of the family (sparse_topk.c, sparse_randk.c, sparse_threshold.c,
 * sparse_gaussk.c, sparse_dgc.c) share with their kernels in
 * sparse_kernels.c and sparse_kernels_source.c: the workspace, the
 * layouts the scans leave their selections in, the scans, keeps, bands,
 * selections, the coded-message writers and the shared init, release and
 * decode.  A new sparsifier is one file of its own and a line in
 * GC__SPARSE_FAMILY below. */
#ifndef GC_SPARSE_KERNELS_H
#define GC_SPARSE_KERNELS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <float.h>

#include <gsl/gsl_cdf.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_compressor.h"
#include "gc_compressor_internal.h"
#include "gc_dispatch.h"
#include "gc_errno.h"
#include "gc_isa.h"
#include "gc_pairwise.h"
#include "gc_rng.h"
#include "gc_rng_bulk.h"
#include "gc_template.h"
#include "gc_threads.h"
#include "gc_vec.h"
#include "gc_wire.h"

#if defined(__GNUC__) && !defined(__clang__)
/* The selection scans are plain loops that GCC vectorises at -O3 only. */
#pragma GCC optimize("O3")
#endif

enum { TOPK_SAMPLES = 32768, TOPK_MIN_SAMPLES = 1024, TOPK_SLACK = 16384 };

/* How many samples ahead the strided samplers prefetch: 128 took DGC's
 * 250 000 samples of 2.5e7 entries from 0.8 ms (at 32) to 0.5 ms, 256
 * from 0.33-0.36 to 0.27-0.34 ms on a later machine (512 was slower). */
enum { SAMPLE_AHEAD = 256 };
/* Samples worth the threads (top-K takes 32768, DGC up to 1% of n). */
enum { SAMPLE_PAR_MIN = 8192 };
/* Magnitudes worth the threads in the sampled selections (DGC's). */
enum { BUCKETED_PAR_MIN = 1 << 16 };

typedef struct sparse_state {
  uint8_t wire;            /* message type byte                          */
  size_t n, k;             /* k resolved (0 for threshold)               */
  double rho;              /* k / n                                      */
  gc_compressor_params p;
  uint32_t *idx;           /* selected indices, idx_cap entries          */
  size_t idx_cap;
  uint32_t *cand;          /* top-K candidates, cand_cap entries         */
  double *mag;             /* cand_cap magnitudes (REAL in the template) */
  size_t cand_cap;
  double *sample;          /* sampled magnitudes, sample_cap entries     */
  size_t sample_cap;
  uint64_t *bits;          /* random-K membership, n bits, kept zero     */
  uint32_t *tmp;           /* random-K radix-sort scratch, k entries     */
  double gauss_z;          /* |Phi^{-1}(rho/2)|                          */
  double *block_sums;      /* Gaussian-k on threads: two per block       */
  size_t dgc_stride;       /* DGC sampling stride (1: every entry)       */
  uint64_t *scan_bits;     /* threshold, DGC: the scan's word per 64 entries */
  size_t last_count;       /* threshold: the last message's entries (speed only) */
} sparse_state;

/* Where the selections write their delta codes themselves (one in
 * CODES_MIN_DENSITY of the entries sent, or more): below it the codes
 * are mostly two bytes and the blocks often empty, and the scans' and
 * filters' extra work cost more than the encoder's pass over the indices
 * saves (DGC 3.9 -> 4.9 ms at density 0.01, n = 2.5e7). */
enum { CODES_MIN_DENSITY = 32 };
static inline int codes_pay(size_t c, size_t n) { return c * CODES_MIN_DENSITY >= n; }

/* The float32 kernels' instruction sets (isa.c).  Bodies written once go
 * through DISPATCH (gc_dispatch.h); the scans, keeps, bands and draws are
 * hand-written twins because their sets differ in substance: AVX-512
 * compresses, AVX2 permutes by tables, SSE2 walks mask bits. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_SCAN_PATHS 1
#define TARGET_AVX2 __attribute__((target("avx2,popcnt")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,popcnt")))
#endif

/* The scan over the OpenMP threads (the caller's omp_set_num_threads; one
 * inside a parallel region): T contiguous pieces, each appending to its
 * share cap / T of the arrays, left there or moved together
 * (gc__sparse_scan_pieces_f32).  The result is the single scan's
 * whatever T is: the first non-finite entry is the one of
 * the first piece that met one, and when a piece outgrows its share (the
 * selected entries crowd into part of x) the scan runs again on one
 * thread. */
enum { SCAN_PAR_MIN = 1 << 18, SCAN_PAR_MAX = 16 };

/* The entries of each threaded scan's piece but the last: a T-th of n
 * rounded up to whole blocks of 64 (the scans' words of selected
 * entries, scan_f32_avx512's), so the pieces never end inside a block.
 * The last piece ends at n, and where the pieces would pass n the later
 * ones are empty.  (n / T rounded down would leave the tail past
 * T * piece, up to 64 T - 1 entries, in no piece, and its entries out of
 * the selection.) */
static inline size_t scan_piece(size_t n, int T)
{
  return ((n + (size_t) T - 1) / (size_t) T + 63) & ~(size_t) 63;
}
/* the threads' pieces go to the wire's pieces encoders whole */
_Static_assert((int) SCAN_PAR_MAX <= (int) GC__WIRE_PIECES_MAX, "scan pieces fit the encoders");

/* Where scan_pieces_f32 left the candidates: T == 1, together from 0;
 * else piece j's cnt[j] at j * share.  T == 0: no indices at all, the
 * scan wrote the message's delta codes itself (scan_codes_f32): the
 * caller sets codes, limit and bits, the scan the rest. */
typedef struct {
  int T;
  size_t share, cnt[SCAN_PAR_MAX];
  uint8_t *codes;   /* where the index section starts (buf + header), or NULL */
  size_t limit;     /* bytes the codes may take: up to the staged values */
  uint64_t *bits;   /* a word per 64 entries: the selected ones, where whole */
  int whole;        /* every word of bits written (else the scan skipped some) */
  size_t bytes;     /* code bytes of the entries coded; SIZE_MAX: they overflowed */
  double t;         /* the scan's threshold, for a scan again */
  uint32_t last;    /* the last entry coded (one thread's scan, for the threads' join) */
  size_t coded;     /* the entries coded (fewer than ccap where they overflowed) */
  int vp;           /* T == 0: the values in vp pieces of cnt[j] at j * share (else 1) */
} scan_layout;

/* A selection with its values in P pieces, in index order, where the
 * threads left them (P == 0: none, the indices are in s->idx).  Where the
 * caller gives codes (the message's index section, limit bytes of room)
 * and one piece's filter wrote the delta codes there
 * (keep_codes_isa_f32), coded says so and bytes how many. */
typedef struct {
  int P;
  const uint32_t *idx[SCAN_PAR_MAX];
  const float *val[SCAN_PAR_MAX];
  size_t cnt[SCAN_PAR_MAX];
  uint8_t *codes;   /* in, or NULL */
  size_t limit;
  int coded;        /* out */
  size_t bytes;
  size_t n;         /* in, for several pieces: the vector's length */
} sparse_pieces;



/* The LEB128 code of g at p + pos; returns the new pos. */
static inline size_t leb_put(uint8_t *p, size_t pos, uint32_t g)
{
  return (size_t) (gc__leb_put(p + pos, g) - p);
}

static inline size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* ---- sparse_kernels.c: float32, dispatched ------------------------------ */

size_t gc__sparse_scan_pieces_f32(const float *x, size_t n, float t, uint32_t *idx,
                                  float *val, size_t cap, size_t *bad, scan_layout *L);
int gc__sparse_keep_threads(size_t c);
size_t gc__sparse_keep_codes_isa_f32(uint32_t *idx, float *val, size_t c, uint32_t tk,
                                     size_t skip, size_t q, uint8_t *codes, size_t limit,
                                     size_t *bytes, uint32_t *last);
size_t gc__sparse_keep_par_f32(int T, uint32_t *const *pi, float *const *pv, const size_t *pc,
                               uint32_t tk, size_t skip, size_t q, uint32_t *oidx,
                               float *oval);
void gc__sparse_keep_codes_pieces_f32(int P, sparse_pieces *sel, uint32_t tk, size_t q);
size_t gc__sparse_band_isa_f32(const float *val, size_t c, uint32_t ku, uint32_t *out,
                               size_t *over);
uint32_t gc__sparse_kth_key_f32(const float *val, size_t c, size_t k, uint32_t *scr,
                                size_t *above, size_t *equal);
enum { KTH_PAR_MIN = 1 << 16 };   /* band keys worth the threads */
uint32_t gc__sparse_kth_pieces_f32(int T, uint32_t *const *bp, const size_t *bn, size_t k,
                                   size_t *above, size_t *equal);
void gc__sparse_codes_to_idx(const uint8_t *codes, size_t c, uint32_t *idx);
void gc__sparse_coded_pieces_to_idx(const sparse_pieces *sel);
void gc__sparse_bits_to_idx(const uint64_t *bits, size_t n, size_t m, uint32_t *idx);
/* The message of a float32 selection's pieces (sel->P > 0, else nothing
 * and *written stays 0): the codes its filter wrote where the delta coding
 * wins, else the pieces where they lie. */
int gc__sparse_encode_selection_f32(sparse_state *s, const sparse_pieces *sel, uint8_t *buf,
                                    size_t cap, size_t *len, size_t *nnz, int *written);

/* ---- sparse_kernels_source.c: both precisions --------------------------- */

#define GC__SPARSE_KERNELS(REAL, SFX)                                                  \
  size_t GC__CAT(gc__sparse_scan, SFX)(const REAL *x, size_t n, REAL t, uint32_t *out,       \
                                       REAL *val, size_t cap, size_t *bad);                  \
  size_t GC__CAT(gc__sparse_scan_staged, SFX)(const REAL *x, size_t n, REAL t, uint32_t *out, \
                                              REAL **val, size_t room, size_t need,          \
                                              size_t *bad, scan_layout *L);                  \
  REAL GC__CAT(gc__sparse_strict_t, SFX)(double v);                                          \
  void GC__CAT(gc__sparse_sample, SFX)(const REAL *x, size_t start, size_t stride,           \
                                       int jitter, size_t m, REAL *smp);                     \
  int GC__CAT(gc__sparse_report_bad, SFX)(const REAL *x, size_t i);                          \
  int GC__CAT(gc__sparse_check_finite, SFX)(const REAL *x, size_t n);                        \
  REAL GC__CAT(gc__sparse_kth_largest_bucketed, SFX)(REAL *a, size_t m, size_t k,            \
                                                     REAL *scratch, size_t cap);             \
  void GC__CAT(gc__sparse_select_among, SFX)(const REAL *x, const uint32_t *cand, size_t c,  \
                                             size_t k, int ties, REAL *mag, size_t magcap,   \
                                             uint32_t *out);                                 \
  /* exact top-K of x into s->idx: the sample's threshold, its candidates, \
   * or the radix select (theory.md 2.2; DGC's too) */                                   \
  REAL GC__CAT(gc__sparse_topk_threshold, SFX)(sparse_state *s, const REAL *x, size_t k,   \
                                               REAL *upper);                               \
  void GC__CAT(gc__sparse_radix_topk, SFX)(const REAL *x, size_t n, size_t k, int ties,    \
                                           uint32_t *out);                                 \
  int GC__CAT(gc__sparse_topk, SFX)(sparse_state *s, const REAL *x, size_t k);             \
  void GC__CAT(gc__sparse_join_pieces, SFX)(uint32_t *cand, REAL *cval, scan_layout *L);     \
  sparse_pieces GC__CAT(gc__sparse_pieces_coded_into, SFX)(const sparse_state *s,            \
                                                           uint8_t *buf, size_t cap);        \
  /* where a scan may write its codes: in front of the values staged */                     \
  void GC__CAT(gc__sparse_scan_codes_into, SFX)(scan_layout *L, const sparse_state *s,       \
                                                uint8_t *buf, const REAL *staged);           \
  /* the writers: c entries listed in s->idx, the values staged or from x */                 \
  int GC__CAT(gc__sparse_encode_list, SFX)(const sparse_state *s, const REAL *x, size_t c,   \
                                           const REAL *staged, uint8_t *buf, size_t cap,     \
                                           size_t *len, size_t *nnz);                        \
  /* ... the first c of a scan_staged, as its layout L says */                             \
  int GC__CAT(gc__sparse_encode_scan, SFX)(sparse_state *s, const REAL *x,                   \
                                           const scan_layout *L, const REAL *staged,         \
                                           size_t c, uint8_t *buf, size_t cap, size_t *len,  \
                                           size_t *nnz);                                     \
  int GC__CAT(gc__sparse_decode, SFX)(const void *state, const uint8_t *buf, size_t len,     \
                                      uint32_t step, REAL scale, REAL *y);
GC__SPARSE_KERNELS(float, f32)
GC__SPARSE_KERNELS(double, f64)
#undef GC__SPARSE_KERNELS

/* ---- init, release, size: what every type's init calls ------------------- */

/* The parameters every sparsifier checks, and K (has_k) resolved from
 * k or the density; the type's own checks and workspaces come after. */
int gc__sparse_init_common(sparse_state *s, uint8_t wire, size_t n,
                           const gc_compressor_params *p, int has_k);
/* Candidates with their magnitudes (cand_cap entries each); 0 on failure. */
int gc__sparse_alloc_cand(sparse_state *s, size_t cand_cap);
/* The scans' word per 64 entries (threshold, DGC); 0 on failure. */
int gc__sparse_alloc_scan_bits(sparse_state *s);
/* The last step of every init: s->idx (idx_cap entries), and, where that
 * or the type's workspaces (ok == 0) failed, everything freed and
 * GC_ENOMEM. */
int gc__sparse_init_done(sparse_state *s, int ok);
void gc__sparse_release(void *state);
size_t gc__sparse_max_bytes_k(const void *state);   /* K entries at most */
size_t gc__sparse_max_bytes_n(const void *state);   /* up to n */

/* A type's row: its own init, size bound, encoders and decoders (the
 * _f32 and _f64 of enc and dec), and the public pointer to it. */
#define GC__SPARSE_TYPE(var, nm, sum, fl, init, max_bytes, enc, dec)                       \
  const gc_compressor_type gc__sparse_##var = {                                            \
    nm, sum, (fl) | GC_COMP_SPARSE, sizeof(sparse_state), init, gc__sparse_release,        \
    max_bytes, enc##_f32, enc##_f64, dec##_f32, dec##_f64, NULL, NULL, NULL };             \
  const gc_compressor_type *const gc_compressor_##var = &gc__sparse_##var;

/* The family, in the order of gc__sparse_types (the listings'): a new
 * sparsifier is its file and one entry here. */
#define GC__SPARSE_FAMILY(X) X(topk) X(randk) X(randk_unbiased) X(threshold) X(gaussk) X(dgc)
#define GC__SPARSE_DECLARE(var) extern const gc_compressor_type gc__sparse_##var;
GC__SPARSE_FAMILY(GC__SPARSE_DECLARE)
#undef GC__SPARSE_DECLARE

#endif
