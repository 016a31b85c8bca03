// Every difference between the libtorch versions recheck builds against (Debian's 1.13 and the
// 2.x of PyTorch wheels), and between builds with and without CUDA, sits here.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/version.h>

#include "core/torch_version.h"

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
#include <string>
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

// Autocast for one device type: whether it is on, and the dtype it casts to. Device-generic
// from libtorch 2.4 (at::autocast::is_autocast_enabled(DeviceType)); per device before (1.13:
// is_cpu_enabled for CPU, is_enabled for CUDA). Setting the flag is all an op needs to autocast:
// every tensor carries its backend's autocast dispatch key, and the flag takes that key out of
// the thread's excluded set.
struct AutocastState {
  bool enabled = false;
  at::ScalarType dtype = at::kBFloat16;
  bool operator==(const AutocastState& o) const { return enabled == o.enabled && dtype == o.dtype; }
};
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline AutocastState autocast_state(at::DeviceType device) {
  return {at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)};
}
inline void set_autocast_state(at::DeviceType device, AutocastState state) {
  at::autocast::set_autocast_enabled(device, state.enabled);
  at::autocast::set_autocast_dtype(device, state.dtype);
}
#else
inline AutocastState autocast_state(at::DeviceType device) {
  if (device == at::kCUDA) return {at::autocast::is_enabled(), at::autocast::get_autocast_gpu_dtype()};
  return {at::autocast::is_cpu_enabled(), at::autocast::get_autocast_cpu_dtype()};
}
inline void set_autocast_state(at::DeviceType device, AutocastState state) {
  if (device == at::kCUDA) {
    at::autocast::set_enabled(state.enabled);
    at::autocast::set_autocast_gpu_dtype(state.dtype);
  } else {
    at::autocast::set_cpu_enabled(state.enabled);
    at::autocast::set_autocast_cpu_dtype(state.dtype);
  }
}
#endif

// The autocast state of both device types recheck runs on: what a run leaves behind is compared
// with eager mode's (no-side-effects), and what a checkpoint records for its recomputation.
struct AutocastStates {
  AutocastState cpu;
  AutocastState cuda;
  bool operator==(const AutocastStates& o) const { return cpu == o.cpu && cuda == o.cuda; }
  bool operator!=(const AutocastStates& o) const { return !(*this == o); }
};
inline AutocastStates autocast_states() { return {autocast_state(at::kCPU), autocast_state(at::kCUDA)}; }
inline void set_autocast_states(const AutocastStates& states) {
  set_autocast_state(at::kCPU, states.cpu);
  set_autocast_state(at::kCUDA, states.cuda);
}
// What a thread starts with: off on both, bfloat16 on CPU, float16 on CUDA (each device type's
// default autocast dtype, the one Python's torch.autocast uses when no dtype is given).
inline AutocastStates default_autocast_states() { return {{false, at::kBFloat16}, {false, at::kHalf}}; }

// `with torch.autocast(device, dtype=..., enabled=...)`: sets the state for the scope, counts the
// nesting, and on leaving clears the cast cache when the outermost region ends and puts the
// previous state back, as Python's autocast.__exit__ does.
class AutocastGuard {
 public:
  AutocastGuard(at::DeviceType device, AutocastState state) : device_(device), previous_(autocast_state(device)) {
    set_autocast_state(device, state);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_autocast_state(device_, previous_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  at::DeviceType device_;
  AutocastState previous_;
};

// Turns autocast's cast cache on or off for the scope, and puts the previous setting back.
class AutocastCacheGuard {
 public:
  explicit AutocastCacheGuard(bool enabled) : previous_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(enabled);
  }
  ~AutocastCacheGuard() { at::autocast::set_autocast_cache_enabled(previous_); }
  AutocastCacheGuard(const AutocastCacheGuard&) = delete;
  AutocastCacheGuard& operator=(const AutocastCacheGuard&) = delete;

 private:
  bool previous_;
};

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

// Holds this process's CUDA caching allocator to `fraction` of the current device's memory:
// beyond it an allocation raises the out-of-memory error a full device raises. For worker
// processes sharing one GPU (run --jobs N). The same call in libtorch 1.13 and 2.x.
inline void cuda_limit_memory_fraction(double fraction) {
#if defined(RECHECK_WITH_CUDA)
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, c10::cuda::current_device());
#else
  (void)fraction;
  throw std::runtime_error("this build of recheck has no CUDA support (configure with a CUDA-enabled libtorch)");
#endif
}

// Calls `on_event` for every block the CUDA caching allocator hands out (allocated = true) and
// every block given back to it (false), from now on, on any device, with the block's address and
// the size that was asked for (not the rounded block size); false where this libtorch cannot
// (then nothing is attached). The callback runs under the allocator's lock: it must not call
// into libtorch.
inline bool cuda_trace_allocations(std::function<void(bool allocated, uintptr_t address, int64_t bytes)> on_event) {
#if RECHECK_CUDA_ALLOCATION_TRACE
  // Attaching needs the caching allocator set up: one allocation does that in every version.
  (void)at::empty({1}, at::TensorOptions().device(at::kCUDA));
  c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker([on_event](const auto& entry) {
    using Entry = std::decay_t<decltype(entry)>;
    const bool allocated = entry.action_ == Entry::Action::ALLOC;
    if (!allocated && entry.action_ != Entry::Action::FREE_REQUESTED) return;
    on_event(allocated, static_cast<uintptr_t>(entry.addr_), static_cast<int64_t>(entry.size_));
  });
  return true;
#else
  (void)on_event;
  return false;
#endif
}

}  // namespace recheck::compat
