/* gc_theory.h -- synthetic problems, probes and bounds (placeholder). */
#ifndef GC_THEORY_H
#define GC_THEORY_H
#endif
