/* sparse.c -- sparsifiers (placeholder list until implemented). */
#include <stddef.h>
#include "gc_internal.h"
const gc_compressor_type *const gc__sparse_types[] = { NULL };
