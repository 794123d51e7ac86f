/* gc_dtype.h -- the element types of gradcomp's vectors: a dtype is the
 * element size in bytes, float32 or float64. */
#ifndef GC_DTYPE_H
#define GC_DTYPE_H

enum { GC_F32 = 4, GC_F64 = 8 };   /* dtype == element size in bytes */

#endif /* GC_DTYPE_H */
