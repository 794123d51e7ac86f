/* isa.c -- which vector instruction set the hot loops use.  The CPU is
 * asked once (__builtin_cpu_supports, gcc and clang); GC_ISA=sse2|avx2|
 * avx512 in the environment, or gc__isa_force, caps it, so that a test
 * can run every path on one machine and compare the bytes. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gc_isa.h"

static const char *const names[] = { "sse2", "avx2", "avx512" };

static int cpu_isa(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return GC__ISA_AVX512;
  if (__builtin_cpu_supports("avx2"))
    return GC__ISA_AVX2;
#endif
  return GC__ISA_SSE2;
}

/* -1 until first asked; the value never changes afterwards unless forced. */
static atomic_int chosen = -1;

int gc__isa_by_name(const char *name)
{
  for (int i = 0; i <= GC__ISA_AVX512; i++)
    if (name && !strcmp(name, names[i]))
      return i;
  return -1;
}

const char *gc__isa_name(int isa)
{
  return isa >= 0 && isa <= GC__ISA_AVX512 ? names[isa] : "unknown";
}

int gc__isa_cpu(void)
{
  return cpu_isa();
}

int gc__isa(void)
{
  int isa = atomic_load_explicit(&chosen, memory_order_relaxed);
  if (isa >= 0)
    return isa;
  isa = cpu_isa();
  int want = gc__isa_by_name(getenv("GC_ISA"));   /* unknown names: ignored */
  if (want >= 0 && want < isa)
    isa = want;
  atomic_store_explicit(&chosen, isa, memory_order_relaxed);
  return isa;
}

int gc__isa_force(int isa)
{
  int prev = gc__isa();
  int top = cpu_isa();
  atomic_store_explicit(&chosen, isa < 0 ? 0 : isa > top ? top : isa,
                        memory_order_relaxed);
  return prev;
}
