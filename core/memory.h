// Memory probes: exact byte counts of what a run allocates, on CPU through a counting allocator
// installed for the duration of a run, on CUDA through the caching allocator's statistics.
#pragma once

#include <cstdint>
#include <vector>

namespace recheck::memory {

// Installs a counting CPU allocator in front of the one in place, for the lifetime of the
// object, and restores the previous one after. At most one is alive at a time. It counts what
// is allocated while it is installed, less what of that is freed; bytes an earlier probe
// counted do not show, even when they are freed during this one.
class CpuProbe {
 public:
  CpuProbe();
  ~CpuProbe();
  CpuProbe(const CpuProbe&) = delete;
  CpuProbe& operator=(const CpuProbe&) = delete;

  int64_t current() const;  // bytes this probe counted and that are not yet freed
  int64_t peak() const;     // the most `current` has been since the last reset_peak
  void reset_peak();

  // Refuses, with c10::OutOfMemoryError, an allocation that would take `current` over
  // `bytes`: a device of that size, emulated on CPU. 0: no budget.
  void set_budget(int64_t bytes);

  // Records `current` after every allocation and free until stop_timeline(), at most `limit`
  // points (later events are dropped).
  void start_timeline(size_t limit = 1 << 20);
  std::vector<int64_t> stop_timeline();
};

// While alive, CPU allocations on this thread are not counted (the harness's own records).
class Uncounted {
 public:
  Uncounted();
  ~Uncounted();
  Uncounted(const Uncounted&) = delete;
  Uncounted& operator=(const Uncounted&) = delete;

 private:
  bool previous_;
};

// The CUDA caching allocator's allocated bytes on the current device: current, and peak since
// the last reset. Throws on a build without CUDA.
int64_t cuda_current();
int64_t cuda_peak();
void cuda_reset_peak();

}  // namespace recheck::memory
