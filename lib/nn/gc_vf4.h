/* gc_vf4.h -- four floats as one value (GCC and Clang vector extension),
 * loaded and stored unaligned, for the plain-C loops of nn.c and
 * winograd.c that move or add whole channel vectors 4 floats at a time. */
#ifndef GC_VF4_H
#define GC_VF4_H
#include <string.h>

typedef float gc__vf4 __attribute__((vector_size(16)));

static inline gc__vf4 gc__load4(const float *p)
{
  gc__vf4 v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void gc__store4(float *p, gc__vf4 v)
{
  memcpy(p, &v, sizeof v);
}

#endif /* GC_VF4_H */
