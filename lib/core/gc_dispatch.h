/* gc_dispatch.h -- the one SIMD dispatch idiom of the hot loops: a body
 * written once (an always-inline function) is compiled for AVX-512, AVX2
 * and the baseline (SSE2 on x86-64), and the entry point picks one by
 * gc__isa() (isa.c, GC_ISA).  The including file defines TARGET_AVX512 and
 * TARGET_AVX2, the target attributes its bodies want, before it uses the
 * macros.  Kernels whose instruction sets differ in substance (AVX-512's
 * compress against AVX2's permute tables, say) stay hand-written twins
 * name_avx512, name_avx2, chosen by ISA_KERNEL. */
#ifndef GC_DISPATCH_H
#define GC_DISPATCH_H

#include "gc_isa.h"
#include "gc_template.h"

#if defined(__GNUC__) && defined(__x86_64__)
/* One entry point `name` (static, of type ret with params) calling
 * body(...) compiled for each instruction set. */
#define DISPATCH(ret, name, body, params, ...)                              \
  TARGET_AVX512 static ret GC__CAT(name, avx512) params                      \
  { return body(__VA_ARGS__); }                                              \
  TARGET_AVX2 static ret GC__CAT(name, avx2) params                          \
  { return body(__VA_ARGS__); }                                              \
  static ret GC__CAT(name, sse2) params { return body(__VA_ARGS__); }        \
  static ret name params                                                     \
  {                                                                          \
    int isa = gc__isa();                                                     \
    if (isa >= GC__ISA_AVX512)                                               \
      return GC__CAT(name, avx512)(__VA_ARGS__);                             \
    if (isa >= GC__ISA_AVX2)                                                 \
      return GC__CAT(name, avx2)(__VA_ARGS__);                               \
    return GC__CAT(name, sse2)(__VA_ARGS__);                                 \
  }
/* DISPATCH whose body takes, last, the helper of its own instruction set:
 * helper_avx512, helper_avx2 or helper_sse2. */
#define DISPATCH_WITH(ret, name, body, helper, params, ...)                 \
  TARGET_AVX512 static ret GC__CAT(name, avx512) params                      \
  { return body(__VA_ARGS__, GC__CAT(helper, avx512)); }                     \
  TARGET_AVX2 static ret GC__CAT(name, avx2) params                          \
  { return body(__VA_ARGS__, GC__CAT(helper, avx2)); }                       \
  static ret GC__CAT(name, sse2) params                                      \
  { return body(__VA_ARGS__, GC__CAT(helper, sse2)); }                       \
  static ret name params                                                     \
  {                                                                          \
    int isa = gc__isa();                                                     \
    if (isa >= GC__ISA_AVX512)                                               \
      return GC__CAT(name, avx512)(__VA_ARGS__);                             \
    if (isa >= GC__ISA_AVX2)                                                 \
      return GC__CAT(name, avx2)(__VA_ARGS__);                               \
    return GC__CAT(name, sse2)(__VA_ARGS__);                                 \
  }
/* The kernel for the instruction set in use among the hand-written
 * name_avx512 and name_avx2 and the generic `plain`. */
#define ISA_KERNEL(name, plain)                                             \
  (gc__isa() >= GC__ISA_AVX512 ? GC__CAT(name, avx512)                      \
   : gc__isa() >= GC__ISA_AVX2 ? GC__CAT(name, avx2) : (plain))
#else
#define DISPATCH(ret, name, body, params, ...)                              \
  static ret name params { return body(__VA_ARGS__); }
#define DISPATCH_WITH(ret, name, body, helper, params, ...)                 \
  static ret name params { return body(__VA_ARGS__, GC__CAT(helper, sse2)); }
#define ISA_KERNEL(name, plain) (plain)
#endif

#endif
