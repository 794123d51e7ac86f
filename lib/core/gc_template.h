/* gc_template.h -- the precision-template macros (not installed).  The
 * templates (sparse_kernels_source.c, quant_source.c, wire_source.c,
 * lowrank_source.c) are included once per REAL with SFX = f32 or f64;
 * FN(encode) names encode_f32 or encode_f64 there. */
#ifndef GC_TEMPLATE_H
#define GC_TEMPLATE_H

#define GC__CAT2(a, b) a##_##b
#define GC__CAT(a, b) GC__CAT2(a, b)
#define FN(name) GC__CAT(name, SFX)

#endif /* GC_TEMPLATE_H */
