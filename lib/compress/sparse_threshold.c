/* sparse_threshold.c -- the hard threshold (theory.md 2.4): every entry
 * with |x_i| > v, their count varying with x.  One scan selects them and
 * keeps their values as it goes, staged in the message buffer past the
 * largest index section; at densities of 1/32 and up the float32 scan
 * writes the delta codes itself (the previous message's count decides,
 * the density showing only after the scan).
 *
 * The file is its own precision template, as sparse_topk.c is. */
#ifndef SPARSE_TEMPLATE
#include "gc_sparse_kernels.h"

#define SPARSE_TEMPLATE "sparse_threshold.c"
#include "gc_sparse_twice.h"
#else   /* ---- once per precision ------------------------------------------- */

static int FN(threshold_encode)(void *state, const REAL *x, uint32_t step, uint8_t *buf,
                                size_t cap, size_t *len, gc_compress_info *info)
{
  sparse_state *s = state;
  size_t room, bad;
  (void) step;
  REAL *staged = gc__wire_stage(s->n, s->n, sizeof(REAL), buf, cap, &room);
  scan_layout L = { .T = 1 };
  if (staged && codes_pay(s->last_count, s->n))
    FN(gc__sparse_scan_codes_into)(&L, s, buf, staged);
  size_t c = FN(gc__sparse_scan_staged)(x, s->n, FN(gc__sparse_strict_t)(s->p.threshold),
                                        s->idx, &staged, room, s->n, &bad, &L);
  if (bad != SIZE_MAX)
    return FN(gc__sparse_report_bad)(x, bad);
  s->last_count = c;
  GC_TRY(FN(gc__sparse_encode_scan)(s, x, &L, staged, c, buf, cap, len, &info->nnz));
  info->selected = c;
  info->loops = 0;
  return GC_SUCCESS;
}

#endif   /* once per precision */
#ifndef SPARSE_TEMPLATE

static int threshold_init(void *state, size_t n, const gc_compressor_params *p)
{
  sparse_state *s = state;
  GC_TRY(gc__sparse_init_common(s, GC__WIRE_THRESHOLD, n, p, 0));
  if (!(p->threshold >= 0))
    GC_ERRORF(GC_EINVAL, "threshold v = %g must be >= 0", p->threshold);
  s->idx_cap = n;
  return gc__sparse_init_done(s, gc__sparse_alloc_scan_bits(s));
}

GC__SPARSE_TYPE(threshold, "threshold", "hard threshold: keep |x_i| > v (--threshold V)",
                GC_COMP_BIASED, threshold_init, gc__sparse_max_bytes_n, threshold_encode,
                gc__sparse_decode)
#endif
