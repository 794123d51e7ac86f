/* gc_isa.h -- the vector instruction set of the dispatched loops (isa.c;
 * gc__ names, not installed).  Every path gives bit-identical results:
 * they differ in speed only. */
#ifndef GC_ISA_H
#define GC_ISA_H
#ifdef __cplusplus
extern "C" {
#endif

/* gc__isa: the best the CPU has, capped by GC_ISA=sse2|avx2|avx512 in the
 * environment (read once); gc__isa_force caps it from now on (at most
 * what the CPU has) and returns the previous choice, for tests and
 * benchmarks; gc__isa_cpu: what the CPU has.  avx512 means F+BW+VL+DQ. */
enum { GC__ISA_SSE2 = 0, GC__ISA_AVX2 = 1, GC__ISA_AVX512 = 2 };
int gc__isa(void);
int gc__isa_cpu(void);
int gc__isa_force(int isa);
int gc__isa_by_name(const char *name);   /* -1 when unknown */
const char *gc__isa_name(int isa);

/* Dense messages (identity, fp16, bf16) of this many bytes or more are
 * written with streaming stores on AVX-512 (quant.c): 32 MiB is the L3
 * of the CPUs measured (a Zen CCD), so such a message cannot stay in
 * cache for whoever reads it next, and the line read of a plain store
 * buys nothing.  Tests size their inputs by it. */
enum { GC__STREAM_MIN_BYTES = 1 << 25 };

/* Random-K's dense walk uses AVX-512 VBMI2 where the CPU has it and this
 * is nonzero (sparse_randk.c); tests clear it to see the plain AVX-512 walk
 * write the same bytes. */
extern int gc__sparse_vbmi2;

#ifdef __cplusplus
}
#endif
#endif /* GC_ISA_H */
