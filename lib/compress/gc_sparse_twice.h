/* gc_sparse_twice.h -- includes the template SPARSE_TEMPLATE (a file
 * name) once per precision, float32 then float64, with REAL, SFX, UKEY
 * (unsigned integer of REAL's width), FABS, NEXTDOWN, REAL_MAX, REAL_MIN,
 * REAL_MAX_EXP, REAL_MANT_DIG and REAL_IS_F32 (1 for float32, whose
 * dispatched kernels the template may call) defined, as GSL's
 * templates_on.h does; undefines them and SPARSE_TEMPLATE afterwards.
 * Not guarded: each sparsifier file includes it once, naming itself. */

#define REAL float
#define SFX f32
#define UKEY uint32_t
#define FABS fabsf
#define NEXTDOWN(t) nextafterf((t), -INFINITY)
#define REAL_MAX FLT_MAX
#define REAL_MIN FLT_MIN
#define REAL_MAX_EXP FLT_MAX_EXP
#define REAL_MANT_DIG FLT_MANT_DIG
#define REAL_IS_F32 1
#include SPARSE_TEMPLATE
#undef REAL
#undef SFX
#undef UKEY
#undef FABS
#undef NEXTDOWN
#undef REAL_MAX
#undef REAL_MIN
#undef REAL_MAX_EXP
#undef REAL_MANT_DIG
#undef REAL_IS_F32

#define REAL double
#define SFX f64
#define UKEY uint64_t
#define FABS fabs
#define NEXTDOWN(t) nextafter((t), -INFINITY)
#define REAL_MAX DBL_MAX
#define REAL_MIN DBL_MIN
#define REAL_MAX_EXP DBL_MAX_EXP
#define REAL_MANT_DIG DBL_MANT_DIG
#define REAL_IS_F32 0
#include SPARSE_TEMPLATE
#undef REAL
#undef SFX
#undef UKEY
#undef FABS
#undef NEXTDOWN
#undef REAL_MAX
#undef REAL_MIN
#undef REAL_MAX_EXP
#undef REAL_MANT_DIG
#undef REAL_IS_F32

#undef SPARSE_TEMPLATE
