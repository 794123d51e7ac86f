/* gc_internal.h -- declarations shared between library files (gc__ names,
 * as libuv does); not installed. */
#ifndef GC_INTERNAL_H
#define GC_INTERNAL_H
#include <stddef.h>
#include "gc_compressor.h"

/* NULL-terminated family lists, one per family file. */
extern const gc_compressor_type *const gc__sparse_types[];
extern const gc_compressor_type *const gc__quant_types[];
extern const gc_compressor_type *const gc__lowrank_types[];

/* k from params: p->k if set, else max(1, floor(density * n)). */
size_t gc__resolve_k(size_t n, const gc_compressor_params *p);

#endif /* GC_INTERNAL_H */
