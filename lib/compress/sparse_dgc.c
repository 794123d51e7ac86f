/* sparse_dgc.c -- DGC's sampled-threshold top-k (Lin et al.; theory.md
 * 2.6): the threshold from a strided sample of |x| (sample_ratio of n,
 * at least 2/rho entries), every entry above it in index order,
 * truncated to K.  The scan keeps the values as it goes, staged in the
 * message buffer, and at densities of 1/32 and up the float32 scan writes
 * the delta codes itself.
 *
 * The file is its own precision template, as sparse_topk.c is. */
#ifndef SPARSE_TEMPLATE
#include "gc_sparse_kernels.h"

#define SPARSE_TEMPLATE "sparse_dgc.c"
#include "gc_sparse_twice.h"
#else   /* ---- once per precision ------------------------------------------- */

/* DGC sampled threshold (theory.md 2.6, synxlin dgc/compression.py); the
 * values come along in *val as in FN(gaussk), in the threads' pieces
 * where L->T > 1 (FN(gc__sparse_scan_staged)). */
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
  FN(gc__sparse_sample)(x, start, stride, 0, m, smp);
  size_t top = (size_t) ceil(s->rho * (double) m);
  if (top < 1)
    top = 1;
  if (top > m)
    top = m;
  REAL thr = FN(gc__sparse_kth_largest_bucketed)(smp, m, top, (REAL *) s->mag, s->cand_cap);
  /* only the first ns entries are sent: staged values serve when at least
   * that many fit */
  REAL *stage = room >= ns ? *val : NULL;
  *val = stage;
  size_t c = FN(gc__sparse_scan_staged)(x, n, NEXTDOWN(thr), s->idx, val, room, ns, &bad, L);
  unsigned ev = 1;
  if (bad != SIZE_MAX)
    return FN(gc__sparse_report_bad)(x, bad);
  if (n > m) {   /* the reference adapts only when it really sampled */
    for (int it = 0; it < 10; it++) {
      if ((double) c > 1.3 * (double) ns) {
        /* I holds every |x_i| >= thr and more than ns of them, so its
         * top-ns is the global top-ns (same tie rule): select among I in
         * place rather than scan x again, unless it outgrows the workspace
         * (or the staged values cut it short) */
        if (L->T == 0 && L->whole) {   /* the scan wrote codes: the indices from its bits */
          gc__sparse_bits_to_idx(L->bits, n, c, s->idx);
          L->T = 1;
        } else if (L->T == 0 || (*val && c > room)) {
          c = FN(gc__sparse_scan)(x, n, NEXTDOWN(thr), s->idx, NULL, n, &bad);
          L->T = 1;
        }
        if (L->T > 1)   /* the threads' pieces together (rare; they fit, c <= room) */
          FN(gc__sparse_join_pieces)(s->idx, NULL, L);
        if (c <= s->cand_cap)
          FN(gc__sparse_select_among)(x, s->idx, c, ns, s->p.ties, (REAL *) s->mag,
                                      s->cand_cap * (sizeof *s->mag / sizeof(REAL)), s->idx);
        else
          GC_TRY(FN(gc__sparse_topk)(s, x, ns));
        *val = NULL;   /* the values are those of I */
        c = ns;
        break;
      } else if (c > ns) {
        break;
      } else if ((double) c < 0.8 * (double) ns) {
        thr = (REAL) (0.8 * thr);
        *val = stage;
        c = FN(gc__sparse_scan_staged)(x, n, NEXTDOWN(thr), s->idx, val, room, ns, &bad, L);
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

static int FN(dgc_encode)(void *state, const REAL *x, uint32_t step, uint8_t *buf,
                          size_t cap, size_t *len, gc_compress_info *info)
{
  sparse_state *s = state;
  size_t room, c = s->k;
  unsigned evals = 0;
  REAL *staged = gc__wire_stage(s->n, s->k, sizeof(REAL), buf, cap, &room);
  scan_layout L = { .T = 1 };
  if (staged && codes_pay(s->k, s->n))
    FN(gc__sparse_scan_codes_into)(&L, s, buf, staged);
  GC_TRY(FN(dgc)(s, x, step, &staged, room, &c, &evals, &L));
  GC_TRY(FN(gc__sparse_encode_scan)(s, x, &L, staged, c, buf, cap, len, &info->nnz));
  info->selected = c;
  info->loops = evals;
  return GC_SUCCESS;
}

#endif   /* once per precision */
#ifndef SPARSE_TEMPLATE

static int dgc_init(void *state, size_t n, const gc_compressor_params *p)
{
  sparse_state *s = state;
  GC_TRY(gc__sparse_init_common(s, GC__WIRE_DGC, n, p, 1));
  if (!(p->sample_ratio > 0 && p->sample_ratio <= 1))
    GC_ERRORF(GC_EINVAL, "DGC sample ratio %g is outside (0,1]", p->sample_ratio);
  s->idx_cap = n;
  s->sample_cap = min_size(n, TOPK_SAMPLES);
  /* m0 samples asked for (theory.md 2.6) */
  double m0 = fmax(ceil(p->sample_ratio * (double) n), ceil(2.0 / s->rho));
  s->dgc_stride = m0 < (double) n ? n / (size_t) m0 : 1;
  size_t need = m0 >= (double) n ? n : min_size(n, 2 * (size_t) m0 + 2);
  if (need > s->sample_cap)
    s->sample_cap = need;
  int ok = gc__sparse_alloc_cand(s, min_size(n, 2 * s->k + TOPK_SLACK));
  s->sample = malloc(s->sample_cap * sizeof *s->sample);
  ok &= s->sample != NULL;
  ok &= gc__sparse_alloc_scan_bits(s);
  return gc__sparse_init_done(s, ok);
}

GC__SPARSE_TYPE(dgc, "dgc",
                "DGC sampled-threshold top-k (Lin et al.), truncated to k in index order",
                GC_COMP_BIASED | GC_COMP_RANDOM | GC_COMP_KEEPS_K | GC_COMP_COUNT_VARIES,
                dgc_init, gc__sparse_max_bytes_k, dgc_encode, gc__sparse_decode)
#endif
