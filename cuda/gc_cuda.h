/* gc_cuda.h -- GPU twins of the compressors (placeholder). */
#ifndef GC_CUDA_H
#define GC_CUDA_H
#endif
