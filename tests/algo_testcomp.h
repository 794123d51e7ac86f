/* algo_testcomp.h -- test-only compressors for the algo suites, so that
 * they do not wait for the library's family files: an exact top-K (lower
 * index wins ties) and the identity, with a plain wire format
 * (u32 count, then count (u32 index, value) pairs).  Header-only. */
#ifndef ALGO_TESTCOMP_H
#define ALGO_TESTCOMP_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gc_compressor.h"
#include "gc_errno.h"

typedef struct tc_state {
  size_t n, k;
  double *mag;   /* workspace: |x| */
  uint8_t *mark;
} tc_state;

static int tc_init(void *st, size_t n, const gc_compressor_params *p)
{
  tc_state *s = st;
  s->n = n;
  s->k = p->k ? p->k : (size_t) (p->density * (double) n);
  if (s->k == 0) s->k = 1;
  if (s->k > n) return GC_EINVAL;
  s->mag = malloc(n * sizeof *s->mag);
  s->mark = malloc(n);
  return (s->mag && s->mark) ? GC_SUCCESS : GC_ENOMEM;
}
static int tc_ident_init(void *st, size_t n, const gc_compressor_params *p)
{
  gc_compressor_params q = *p;
  q.k = n;
  return tc_init(st, n, &q);
}
static void tc_release(void *st) { tc_state *s = st; free(s->mag); free(s->mark); }
static size_t tc_max(const void *st) { const tc_state *s = st; return 4 + s->k * 12; }

/* mark the K largest |x| (lower index wins ties): O(nK), fine for tests */
static void tc_select(tc_state *s)
{
  memset(s->mark, 0, s->n);
  for (size_t j = 0; j < s->k; j++) {
    size_t best = s->n;
    for (size_t i = 0; i < s->n; i++)
      if (!s->mark[i] && (best == s->n || s->mag[i] > s->mag[best])) best = i;
    s->mark[best] = 1;
  }
}

#define TC_CODEC(SUF, T)                                                       \
  static int tc_enc_##SUF(void *st, const T *x, uint32_t step, uint8_t *buf,   \
                          size_t cap, size_t *len, gc_compress_info *info)     \
  {                                                                            \
    (void) step;                                                               \
    tc_state *s = st;                                                          \
    if (cap < 4 + s->k * (4 + sizeof(T))) return GC_ENOSPACE;                  \
    for (size_t i = 0; i < s->n; i++) {                                        \
      if (x[i] != x[i] || x[i] - x[i] != 0) return GC_EDOM;                    \
      s->mag[i] = x[i] < 0 ? -(double) x[i] : (double) x[i];                   \
    }                                                                          \
    tc_select(s);                                                              \
    uint32_t c = (uint32_t) s->k;                                              \
    memcpy(buf, &c, 4);                                                        \
    size_t o = 4, nnz = 0;                                                     \
    for (uint32_t i = 0; i < s->n; i++)                                        \
      if (s->mark[i]) {                                                        \
        memcpy(buf + o, &i, 4);                                                \
        memcpy(buf + o + 4, &x[i], sizeof(T));                                 \
        o += 4 + sizeof(T);                                                    \
        nnz += x[i] != 0;                                                      \
      }                                                                        \
    *len = o;                                                                  \
    if (info) { info->nnz = nnz; info->selected = s->k; info->loops = 0; }     \
    return GC_SUCCESS;                                                         \
  }                                                                            \
  static int tc_dec_##SUF(const void *st, const uint8_t *buf, size_t len,      \
                          uint32_t step, T scale, T *y)                        \
  {                                                                            \
    (void) step;                                                               \
    const tc_state *s = st;                                                    \
    uint32_t c;                                                                \
    if (len < 4) return GC_ECORRUPT;                                           \
    memcpy(&c, buf, 4);                                                        \
    if (len != 4 + (size_t) c * (4 + sizeof(T))) return GC_ECORRUPT;           \
    for (size_t j = 0; j < c; j++) {                                           \
      uint32_t i;                                                              \
      T v;                                                                     \
      memcpy(&i, buf + 4 + j * (4 + sizeof(T)), 4);                            \
      memcpy(&v, buf + 8 + j * (4 + sizeof(T)), sizeof(T));                    \
      if (i >= s->n) return GC_ECORRUPT;                                       \
      y[i] += scale * v;                                                       \
    }                                                                          \
    return GC_SUCCESS;                                                         \
  }
TC_CODEC(f32, float)
TC_CODEC(f64, double)

static const gc_compressor_type tc_topk_type = {
  "test-topk", "exact top-K (test only)",
  GC_COMP_BIASED | GC_COMP_SPARSE | GC_COMP_CONTRACTIVE, sizeof(tc_state),
  tc_init, tc_release, tc_max, tc_enc_f32, tc_enc_f64, tc_dec_f32, tc_dec_f64,
  NULL, NULL, NULL };
static const gc_compressor_type tc_ident_type = {
  "test-identity", "identity (test only)", GC_COMP_CONTRACTIVE,
  sizeof(tc_state), tc_ident_init, tc_release, tc_max, tc_enc_f32,
  tc_enc_f64, tc_dec_f32, tc_dec_f64, NULL, NULL, NULL };

/* The registry's topk when present, else the test one. */
static inline const gc_compressor_type *tc_topk(void)
{
  const gc_compressor_type *t = gc_compressor_type_by_name("topk");
  return t ? t : &tc_topk_type;
}
static inline const gc_compressor_type *tc_identity(void)
{
  const gc_compressor_type *t = gc_compressor_type_by_name("identity");
  return t ? t : &tc_ident_type;
}
#endif /* ALGO_TESTCOMP_H */
