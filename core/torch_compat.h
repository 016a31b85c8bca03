// Every difference between the libtorch versions recheck builds against (Debian's 1.13 and the
// 2.x of PyTorch wheels), and between builds with and without CUDA, sits here.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/version.h>

// c10::Allocator: from 2.3, allocate() is no longer const and copy_data() must be defined.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define RECHECK_ALLOCATE_CONST
#define RECHECK_ALLOCATOR_HAS_COPY_DATA 1
#else
#define RECHECK_ALLOCATE_CONST const
#define RECHECK_ALLOCATOR_HAS_COPY_DATA 0
#endif

#if defined(RECHECK_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <type_traits>
#include <utility>

// The CUDA caching allocator's trace tracker (a callback for every block it hands out) came in
// libtorch 2.1.
#if defined(RECHECK_WITH_CUDA) && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))
#define RECHECK_CUDA_ALLOCATION_TRACE 1
#else
#define RECHECK_CUDA_ALLOCATION_TRACE 0
#endif

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

// The caching allocator's allocated bytes on the current device: (current, peak since reset).
// The same call in 1.13 and 2.x. StatType moved namespaces between them (1.13:
// c10::cuda::CUDACachingAllocator, 2.x: c10::CachingAllocator), but AGGREGATE is 0 in both.
inline std::pair<int64_t, int64_t> cuda_allocated_bytes() {
#if defined(RECHECK_WITH_CUDA)
  constexpr size_t kAggregate = 0;
  const auto device = c10::cuda::current_device();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  const auto& bytes = stats.allocated_bytes[kAggregate];
  return {bytes.current, bytes.peak};
#else
  throw std::runtime_error("this build of recheck has no CUDA support (configure with a CUDA-enabled libtorch)");
#endif
}

inline void cuda_reset_peak_allocated_bytes() {
#if defined(RECHECK_WITH_CUDA)
  c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
#else
  throw std::runtime_error("this build of recheck has no CUDA support (configure with a CUDA-enabled libtorch)");
#endif
}

// Calls `on_allocation` with the block size of every allocation the CUDA caching allocator makes
// from now on, on any device; false where this libtorch cannot (then nothing is attached). The
// callback runs under the allocator's lock: it must not allocate through libtorch.
inline bool cuda_trace_allocations(std::function<void(int64_t bytes)> on_allocation) {
#if RECHECK_CUDA_ALLOCATION_TRACE
  c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker([on_allocation](const auto& entry) {
    using Entry = std::decay_t<decltype(entry)>;
    if (entry.action_ == Entry::Action::ALLOC) on_allocation(static_cast<int64_t>(entry.size_));
  });
  return true;
#else
  (void)on_allocation;
  return false;
#endif
}

}  // namespace recheck::compat
