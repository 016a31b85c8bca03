// Every difference between the libtorch versions recheck builds against (Debian's 1.13 and the
// 2.x of PyTorch wheels), and between builds with and without CUDA, sits here.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GeneratorImpl.h>

#if defined(RECHECK_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <stdexcept>

namespace recheck::compat {

inline bool cuda_available() {
#if defined(RECHECK_WITH_CUDA)
  return at::cuda::is_available();
#else
  return false;
#endif
}

inline at::Generator default_cuda_generator() {
#if defined(RECHECK_WITH_CUDA)
  return at::cuda::detail::getDefaultCUDAGenerator();
#else
  throw std::runtime_error("this build of recheck has no CUDA support (configure with a CUDA-enabled libtorch)");
#endif
}

}  // namespace recheck::compat
