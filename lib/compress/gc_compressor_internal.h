/* gc_compressor_internal.h -- what compressor.c shares with the family
 * files (sparse_*.c, quant.c, lowrank.c) and with the algorithms (gc__
 * names; not installed). */
#ifndef GC_COMPRESSOR_INTERNAL_H
#define GC_COMPRESSOR_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "gc_compressor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* NULL-terminated family lists, one per family file. */
extern const gc_compressor_type *const gc__sparse_types[];
extern const gc_compressor_type *const gc__quant_types[];
extern const gc_compressor_type *const gc__lowrank_types[];

/* k from params: p->k if set, else max(1, floor(density * n)). */
size_t gc__resolve_k(size_t n, const gc_compressor_params *p);

/* Message checks shared by the quantizers and PowerSGD (compressor.c),
 * GC_ECORRUPT with a reason prefixed by `who`: the header (len >= hdr,
 * buf[0] == tag, buf[1] == prec), and the exact length. */
int gc__check_msg(const uint8_t *buf, size_t len, size_t hdr, unsigned tag,
                  unsigned prec, const char *who);
int gc__check_msg_len(size_t len, size_t want, const char *who);

/* gc_compress_f32/f64 and gc_decompress_add_f32/f64 by dtype (GC_F32 or
 * GC_F64): what the algorithms call, written once for both precisions. */
int gc__encode(int dt, gc_compressor *c, const void *x, uint32_t step,
               uint8_t *buf, size_t cap, size_t *len, gc_compress_info *info);
int gc__decode(int dt, const gc_compressor *c, const uint8_t *buf, size_t len,
               uint32_t step, double scale, void *y);

#ifdef __cplusplus
}
#endif
#endif /* GC_COMPRESSOR_INTERNAL_H */
