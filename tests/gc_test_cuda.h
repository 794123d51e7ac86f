/* gc_test_cuda.h -- helpers for the CUDA suites (linked only into them, so
 * the CPU suites never need libcudart). */
#ifndef GC_TEST_CUDA_H
#define GC_TEST_CUDA_H
#include <cuda_runtime_api.h>
#include <criterion/criterion.h>

/* Skip the current test ("no CUDA device visible: <reason>") unless a
 * device is usable.  Call it first in every GPU test, never from a
 * parameter generator (those run in the runner process). */
void gc_test_require_gpu(void);

/* Assert that a CUDA runtime call succeeded, naming the call and error. */
#define GC_TEST_CUDA(call)                                                  \
  do {                                                                      \
    cudaError_t gc_test_e_ = (call);                                        \
    cr_assert(gc_test_e_ == cudaSuccess, "%s: %s", #call,                   \
              cudaGetErrorString(gc_test_e_));                              \
  } while (0)

#endif /* GC_TEST_CUDA_H */
