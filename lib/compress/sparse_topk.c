/* sparse_topk.c -- top-K by magnitude (theory.md 2.2): exactly K entries,
 * ties to the lower index (or the higher, ties high).
 *
 * The exact selection (sampled threshold, candidates, radix fallback) is
 * the kernels' gc__sparse_topk, which DGC uses too; float32 here keeps
 * the candidates' values from the scan and filters them in place, in the
 * threads' pieces, writing the delta codes where they pay.
 *
 * The file is its own precision template: its first pass includes the
 * kernels and then, through gc_sparse_twice.h, itself once per precision
 * (SPARSE_TEMPLATE defined: the middle section), and ends with what is
 * float32's or neither's. */
#ifndef SPARSE_TEMPLATE
#include "gc_sparse_kernels.h"

static int topk_vals_f32(sparse_state *s, const float *x, size_t k, sparse_pieces *out);

#define SPARSE_TEMPLATE "sparse_topk.c"
#include "gc_sparse_twice.h"
#else   /* ---- once per precision ------------------------------------------- */

static int FN(topk_encode)(void *state, const REAL *x, uint32_t step, uint8_t *buf,
                           size_t cap, size_t *len, gc_compress_info *info)
{
  sparse_state *s = state;
  int written = 0;
  (void) step;
#if REAL_IS_F32   /* the pieces of the scan where they lie, or the fallback's s->idx */
  sparse_pieces sel = FN(gc__sparse_pieces_coded_into)(s, buf, cap);
  GC_TRY(topk_vals_f32(s, x, s->k, &sel));
  GC_TRY(gc__sparse_encode_selection_f32(s, &sel, buf, cap, len, &info->nnz, &written));
#else
  GC_TRY(FN(gc__sparse_topk)(s, x, s->k));
#endif
  if (!written)
    GC_TRY(FN(gc__sparse_encode_list)(s, x, s->k, NULL, buf, cap, len, &info->nnz));
  info->selected = s->k;
  info->loops = 0;
  return GC_SUCCESS;
}

#endif   /* once per precision */
#ifndef SPARSE_TEMPLATE

/* Top-K of float32 x with the values: the sampled threshold and one scan
 * that collects the candidates' indices and values (no gather from x
 * afterwards), the K-th magnitude by histograms of the candidates' keys,
 * then the filter, in place in s->cand and the first half of s->mag (the
 * second half is the histogram stage's scratch), as the pieces *out (on
 * threads the pieces of the scan, where they lie).  out->P is 0 when the
 * sample misled and the radix fallback wrote s->idx. */
static int topk_vals_f32(sparse_state *s, const float *x, size_t k, sparse_pieces *out)
{
  size_t n = s->n, bad, above, equal;
  float *v = (float *) s->mag, upper, t = gc__sparse_topk_threshold_f32(s, x, k, &upper);
  uint32_t *scr = (uint32_t *) (v + s->cand_cap);
  scan_layout L;
  size_t c = gc__sparse_scan_pieces_f32(x, n, t, s->cand, v, s->cand_cap, &bad, &L);
  if (bad != SIZE_MAX)
    return gc__sparse_report_bad_f32(x, bad);
  if (c < k || c > s->cand_cap) {
    gc__sparse_radix_topk_f32(x, n, k, s->p.ties, s->idx);
    out->P = 0;
    return GC_SUCCESS;
  }
  /* the pieces of the threads' scans where they lie, or one */
  int T = L.T;
  uint32_t *pi[SCAN_PAR_MAX];
  float *pv[SCAN_PAR_MAX];
  size_t pc[SCAN_PAR_MAX];
  if (T == 1) {
    pi[0] = s->cand;
    pv[0] = v;
    pc[0] = c;
  }
  for (int j = 0; T > 1 && j < T; j++) {
    pi[j] = s->cand + (size_t) j * L.share;
    pv[j] = v + (size_t) j * L.share;
    pc[j] = L.cnt[j];
  }
  /* the keys up to the sample's upper bound, when the K-th is among them
   * (else all of them) */
  uint32_t ku;
  memcpy(&ku, &upper, sizeof ku);
  size_t over = 0, nb = 0;   /* T > 1 only with OpenMP */
  uint32_t tk = 0;
  if (T > 1) {   /* each piece's band into its share of scr, the K-th from there */
    size_t bn[SCAN_PAR_MAX], bo[SCAN_PAR_MAX];
    uint32_t *bp[SCAN_PAR_MAX];
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T; j++) {
      bp[j] = scr + (size_t) j * L.share;
      bn[j] = gc__sparse_band_isa_f32(pv[j], pc[j], ku, bp[j], &bo[j]);
    }
    for (int j = 0; j < T; j++) {
      over += bo[j];
      nb += bn[j];
    }
#ifdef _OPENMP
    if (over < k && nb >= KTH_PAR_MIN) {
      tk = gc__sparse_kth_pieces_f32(T, bp, bn, k - over, &above, &equal);
    } else if (over < k) {   /* a short band: together, on one thread */
      size_t at = bn[0];
      for (int j = 1; j < T; j++) {
        memmove(scr + at, bp[j], bn[j] * sizeof *scr);
        at += bn[j];
      }
      tk = gc__sparse_kth_key_f32((const float *) scr, nb, k - over, scr, &above, &equal);
    }
#endif
  } else {
    nb = gc__sparse_band_isa_f32(v, c, ku, scr, &over);
    if (over < k)
      tk = gc__sparse_kth_key_f32((const float *) scr, nb, k - over, scr, &above, &equal);
  }
  if (over < k) {
    above += over;
  } else {
    if (T > 1) {   /* rare (the sample's bound below the K-th): together */
      gc__sparse_join_pieces_f32(s->cand, v, &L);
      T = 1;
      pc[0] = c;
    }
    tk = gc__sparse_kth_key_f32(v, c, k, scr, &above, &equal);
  }
  size_t q = k - above, skip = s->p.ties == GC_TIES_HIGH ? equal - q : 0;
  if (T == 1 && gc__sparse_keep_threads(c) > 1) {   /* one piece split for the threads */
    T = gc__sparse_keep_threads(c);
    size_t piece = (c + (size_t) T - 1) / (size_t) T;
    for (int j = 0; j < T; j++) {
      size_t a = (size_t) j * piece < c ? (size_t) j * piece : c;
      size_t b = a + piece < c ? a + piece : c;
      pi[j] = s->cand + a;
      pv[j] = v + a;
      pc[j] = b - a;
    }
  }
  out->P = 1;
  if (T > 1 && equal == q) {
    /* every tie is kept, so no piece needs the ties before it: each is
     * filtered in place and the encoder takes the pieces where they lie
     * (the count pass, the copy out of place and its read for ownership
     * took a millisecond at density 0.1 on two threads) */
    out->P = T;
    for (int j = 0; j < T; j++) {
      out->idx[j] = pi[j];
      out->val[j] = pv[j];
      out->cnt[j] = pc[j];
    }
    gc__sparse_keep_codes_pieces_f32(T, out, tk, q);
  } else if (T > 1) {   /* into s->idx (k entries) and the scratch (cand_cap) */
    gc__sparse_keep_par_f32(T, pi, pv, pc, tk, skip, q, s->idx, (float *) scr);
    out->idx[0] = s->idx;
    out->val[0] = (const float *) scr;
    out->cnt[0] = k;
  } else {
    uint32_t last;
    out->cnt[0] = gc__sparse_keep_codes_isa_f32(s->cand, v, c, tk, skip, q, out->codes, out->limit,
                                                &out->bytes, &last);
    out->coded = out->bytes != SIZE_MAX;
    out->idx[0] = s->cand;
    out->val[0] = v;
  }
  return GC_SUCCESS;
}

static int topk_init(void *state, size_t n, const gc_compressor_params *p)
{
  sparse_state *s = state;
  GC_TRY(gc__sparse_init_common(s, GC__WIRE_TOPK, n, p, 1));
  s->idx_cap = s->k;
  s->sample_cap = min_size(n, TOPK_SAMPLES);
  int ok = gc__sparse_alloc_cand(s, min_size(n, 2 * s->k + TOPK_SLACK));
  s->sample = malloc(s->sample_cap * sizeof *s->sample);
  return gc__sparse_init_done(s, ok && s->sample);
}

GC__SPARSE_TYPE(topk, "topk",
                "top-K by magnitude: exactly K entries, ties to the lower index (--k/--density)",
                GC_COMP_BIASED | GC_COMP_CONTRACTIVE | GC_COMP_KEEPS_K, topk_init,
                gc__sparse_max_bytes_k, topk_encode, gc__sparse_decode)
#endif
