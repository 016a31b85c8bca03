// Memory probes: exact byte counts of what a run allocates and frees, on CPU through a counting
// allocator, on CUDA through the caching allocator's statistics and its trace of allocations.
//
// The promise: a probe's count moves by exactly the bytes of every counted allocation made, and
// of every counted block of the current run freed, while the probe is open, whatever in the run
// made the block and whenever: the state the run starts from included. A run that replaces a
// tensor with one of equal size holds as much as before, and its count says so. Blocks an
// earlier run left behind are not the run's: libtorch's engine keeps the pending gradients of a
// backward that raised until a later backward pops them, and crediting those would make a verdict
// depend on the case checked before it (docs/memory.md, "What the probes count").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recheck::memory {

// Begins a run: blocks made from here on are its own. The first call puts the counting CPU
// allocator in front of libtorch's for the rest of the process (frees of its blocks can come at
// any time, so it is never taken away); blocks made from then on are known by size and by run.
// run_case calls it before it seeds the generators, so that the state a run starts from is
// the run's too. A run that no probe measures (`measured` false: the eager run) is not
// tracked at all: its blocks could never be credited, and tracking costs a lock per allocation.
void begin_run(bool measured = true);

// One event of a CPU timeline: an allocation (bytes > 0) or a free (bytes < 0) of the block at
// `address`, and the probe's count just after it.
struct TimelineEvent {
  uintptr_t address = 0;
  int64_t bytes = 0;
  int64_t held = 0;
};

// A point the caller named while the timeline recorded (mark_timeline): it comes before
// events[event].
struct TimelineMark {
  size_t event = 0;
  std::string label;
};

struct Timeline {
  int64_t start = 0;  // the probe's count when the timeline started
  std::vector<TimelineEvent> events;
  std::vector<TimelineMark> marks;
  bool truncated = false;  // events past the limit were dropped
};

// Names the point the open timeline has reached ("forward", "recompute root.ops[1]"); nothing
// when no timeline records. A caller that builds the label asks timeline_recording() first, so
// that runs without a timeline (all but recheck memory's) build none.
void mark_timeline(std::string label);
bool timeline_recording();

// A window on the counting allocator (installing it if needed): counts what is allocated while
// it is open and credits every free of a block of the current run while it is open, made before
// it opened or not. `current` can go below zero: the run freed more than it made. At most one is open at
// a time.
class CpuProbe {
 public:
  CpuProbe();
  ~CpuProbe();
  CpuProbe(const CpuProbe&) = delete;
  CpuProbe& operator=(const CpuProbe&) = delete;

  int64_t current() const;  // bytes allocated less bytes freed since the probe opened
  int64_t peak() const;     // the most `current` has been since the last reset_peak
  void reset_peak();

  // Refuses, with c10::OutOfMemoryError, an allocation that would take `current` over
  // `bytes`: a device of that size, emulated on CPU. 0: no budget.
  void set_budget(int64_t bytes);

  // Records every counted allocation and credited free, with `current` after it, and the marks
  // made meanwhile, until stop_timeline(): at most `limit` events (later ones are dropped).
  void start_timeline(size_t limit = 1 << 20);
  Timeline stop_timeline();
};

// While alive, CPU allocations on this thread are not counted, and their frees are never
// credited (the harness's own records).
class Uncounted {
 public:
  Uncounted();
  ~Uncounted();
  Uncounted(const Uncounted&) = delete;
  Uncounted& operator=(const Uncounted&) = delete;

 private:
  bool previous_;
};

// One allocation: the bytes asked for, and the scope that was current when it was made
// (set_allocation_scope).
struct Allocation {
  int64_t bytes = 0;
  int scope = 0;
};

// Whether this build can count CUDA bytes block by block (the caching allocator's trace tracker,
// libtorch 2.1 and later): CudaProbe, and the CUDA allocation log.
bool cuda_probe_available();

// A window over the CUDA caching allocator's blocks with CpuProbe's promise, in the bytes each
// allocation asked for (not the allocator's rounded block sizes): what the run made, less what
// of the run's blocks it gave back. Throws where !cuda_probe_available(). At most one is open.
class CudaProbe {
 public:
  CudaProbe();
  ~CudaProbe();
  CudaProbe(const CudaProbe&) = delete;
  CudaProbe& operator=(const CudaProbe&) = delete;

  int64_t current() const;
  int64_t peak() const;
  void reset_peak();
};

// The scope later allocations belong to, from any thread (the CUDA engine's device thread, a
// CPU kernel's worker threads): the caller's numbering, 0 by default.
void set_allocation_scope(int scope);

// Whether allocations on `cuda` (else the CPU) can be logged in this build: on CUDA it needs
// the caching allocator's trace tracker (libtorch 2.1 and later).
bool allocation_log_available(bool cuda);

// Logs every counted allocation on one device while open: on CPU, those the counting allocator
// counts (a CpuProbe must be open); on CUDA, every block the caching allocator hands out, with
// the size asked for.
// At most one is open at a time.
class AllocationLog {
 public:
  explicit AllocationLog(bool cuda, size_t limit = 1 << 20);
  ~AllocationLog();
  AllocationLog(const AllocationLog&) = delete;
  AllocationLog& operator=(const AllocationLog&) = delete;

  // The allocations since the log opened or the last take, in order; at most `limit` (later ones
  // are dropped, and overflowed() says so).
  std::vector<Allocation> take();
  bool overflowed() const;
};

// The CUDA caching allocator's allocated bytes on the current device: current, and peak since
// the last reset (every free in the process counts, an earlier run's too): what a run measures
// where !cuda_probe_available(). Throws on a build without CUDA.
int64_t cuda_current();
int64_t cuda_peak();
void cuda_reset_peak();

}  // namespace recheck::memory
