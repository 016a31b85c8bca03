#include "core/memory.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include <sys/prctl.h>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include "core/torch_compat.h"

namespace recheck::memory {

namespace {

// Above the default CPU allocator's priority (0), so that installing takes effect.
constexpr uint8_t kPriority = 100;

thread_local bool t_uncounted = false;

// Whether this thread is a worker of a gloo process group: recheck's tensor-parallel group for
// Python variants (core/tensor_parallel.h). What a collective allocates there (gloo's flat copy
// of an all-gather's output) is the communication library's, not the checkpoint code's: on a GPU
// NCCL keeps such buffers outside PyTorch's allocator, and recheck's C++ port, whose gather
// writes straight into its output, allocates none. libtorch names these threads.
bool on_collective_thread() {
  thread_local const bool collective = [] {
    char name[17] = {};
    return prctl(PR_GET_NAME, name) == 0 && std::string(name).rfind("pt_gloo", 0) == 0;
  }();
  return collective;
}

std::atomic<int> g_scope{0};
std::atomic<uint64_t> g_run{0};  // begin_run's count: the run every block made now belongs to
std::atomic<bool> g_run_measured{true};  // whether the current run's blocks are worth knowing

// The open allocation log, shared by the CPU allocator and the CUDA trace tracker. Appending
// takes plain heap memory (std::vector), never libtorch's allocators.
struct Log {
  std::mutex mutex;
  bool open = false;
  bool cuda = false;
  size_t limit = 0;
  bool overflowed = false;
  std::vector<Allocation> entries;

  void append(bool on_cuda, int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!open || cuda != on_cuda) return;
    if (entries.size() >= limit) {
      overflowed = true;
      return;
    }
    entries.push_back(Allocation{bytes, g_scope.load(std::memory_order_relaxed)});
  }
};

Log& log() {
  static Log* instance = new Log();  // never destroyed: allocations may come late
  return *instance;
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) RECHECK_ALLOCATE_CONST override {
    const bool open = window_open_.load();
    // A run nothing measures (the eager run) makes blocks no probe will ever credit.
    const bool counted =
        !t_uncounted && !on_collective_thread() && (open || g_run_measured.load(std::memory_order_relaxed));
    if (counted && open && budget_ > 0 && current_.load() + static_cast<int64_t>(n) > budget_) {
      C10_THROW_ERROR(OutOfMemoryError, "recheck: allocating " + std::to_string(n) + " bytes would exceed the CPU memory budget of " +
                                            std::to_string(budget_) + " bytes (" + std::to_string(current_.load()) + " in use)");
    }
    c10::DataPtr inner = previous_.load()->allocate(n);
    // An uncounted block keeps the allocator underneath's own deleter: its free never reaches
    // this allocator, so it is never credited.
    if (!counted || inner.get() == nullptr) return inner;  // nothing to count (0 bytes)
    void* data = inner.get();
    const c10::Device device = inner.device();
    const int64_t bytes = static_cast<int64_t>(n);
    {
      std::lock_guard<std::mutex> lock(blocks_mutex_);
      auto stale = blocks_.find(data);
      if (stale != blocks_.end()) {
        // Not expected (every counted block comes back through free_counted, which drops its
        // entry before the block is freed); were an entry left, its memory is no longer its own.
        (void)stale->second.inner.release_context();
        blocks_.erase(stale);
      }
      blocks_.emplace(data, Block{std::move(inner), bytes, g_run.load()});
    }
    if (open) {
      add(bytes, data);
      log().append(/*on_cuda=*/false, bytes);
    }
    // The context is the address itself, as raw_allocate asserts (libtorch's CPU kernels take
    // scratch memory that way): the block is found again by its address.
    return {data, data, &CountingAllocator::free_counted, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &CountingAllocator::free_counted; }
#if RECHECK_ALLOCATOR_HAS_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif

  void install() {
    std::call_once(installed_, [this] {
      previous_ = c10::GetCPUAllocator();
      c10::SetCPUAllocator(this, kPriority);
    });
  }

  void set_budget(int64_t bytes) { budget_ = bytes; }

  // A probe opens: counts start from zero, with no budget.
  void open_window() {
    budget_ = 0;
    current_.store(0);
    peak_.store(0);
    window_open_.store(true);
  }
  void close_window() {
    window_open_.store(false);
    budget_ = 0;
  }

  int64_t current() const { return current_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(current_.load()); }

  void start_timeline(size_t limit) {
    std::lock_guard<std::mutex> lock(timeline_mutex_);
    timeline_ = Timeline{};
    timeline_.start = current_.load();
    timeline_limit_ = limit;
    recording_ = true;
  }
  Timeline stop_timeline() {
    std::lock_guard<std::mutex> lock(timeline_mutex_);
    recording_ = false;
    return std::move(timeline_);
  }
  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  void mark(std::string label) {
    if (!recording_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(timeline_mutex_);
    if (recording_) timeline_.marks.push_back(TimelineMark{timeline_.events.size(), std::move(label)});
  }

 private:
  struct Block {
    c10::DataPtr inner;  // frees the bytes when the block is dropped
    int64_t bytes;
    uint64_t run;        // the run that made it (begin_run)
  };

  // Every counted block comes back here, whenever it was made: freed while a probe is open, its
  // bytes are credited to that probe (see the promise in memory.h).
  static void free_counted(void* data) {
    CountingAllocator& self = instance();
    std::unique_lock<std::mutex> lock(self.blocks_mutex_);
    auto it = self.blocks_.find(data);
    if (it == self.blocks_.end()) {
      // A raw block this allocator did not count (taken while uncounted): the allocator
      // underneath made it, and frees it.
      lock.unlock();
      c10::Allocator* previous = self.previous_.load();
      if (previous != nullptr && previous->raw_deleter() != nullptr) previous->raw_deleter()(data);
      return;
    }
    Block block = std::move(it->second);
    self.blocks_.erase(it);
    lock.unlock();
    if (self.window_open_.load() && block.run == g_run.load()) self.add(-block.bytes, data);
  }  // the inner block is freed here, after it left the table: its address can come back

  void add(int64_t bytes, void* address) const {
    const int64_t now = current_.fetch_add(bytes) + bytes;
    int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    if (recording_.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(timeline_mutex_);
      if (!recording_) return;
      if (timeline_.events.size() < timeline_limit_) {
        timeline_.events.push_back(TimelineEvent{reinterpret_cast<uintptr_t>(address), bytes, now});
      } else {
        timeline_.truncated = true;
      }
    }
  }

 public:
  static CountingAllocator& instance() {
    static CountingAllocator* allocator = new CountingAllocator();  // never destroyed: frees may come late
    return *allocator;
  }

 private:
  std::once_flag installed_;
  std::atomic<c10::Allocator*> previous_{nullptr};  // read by frees on any thread
  mutable std::mutex blocks_mutex_;
  mutable std::unordered_map<void*, Block> blocks_;  // every counted block alive, by address
  mutable std::atomic<int64_t> current_{0};
  mutable std::atomic<int64_t> peak_{0};
  mutable std::mutex timeline_mutex_;
  mutable Timeline timeline_;
  size_t timeline_limit_ = 0;
  mutable std::atomic<bool> recording_{false};
  std::atomic<bool> window_open_{false};
  int64_t budget_ = 0;
};

bool g_probe_open = false;

// The CUDA caching allocator's blocks, as its trace tracker reports them: the same accounting
// as the CPU allocator's (every block by address, size asked for and run), for CudaProbe.
class CudaBlocks {
 public:
  static CudaBlocks& instance() {
    static CudaBlocks* blocks = new CudaBlocks();  // never destroyed: the tracker outlives main
    return *blocks;
  }

  void on_event(bool allocated, uintptr_t address, int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (allocated) {
      live_[address] = Block{bytes, g_run.load()};
      if (open_) add(bytes);
      log().append(/*on_cuda=*/true, bytes);
      return;
    }
    const auto it = live_.find(address);
    if (it == live_.end()) return;  // handed out before the tracker was attached
    if (open_ && it->second.run == g_run.load()) add(-it->second.bytes);
    live_.erase(it);
  }

  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = 0;
    peak_ = 0;
    open_ = true;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
  }
  int64_t current() {
    std::lock_guard<std::mutex> lock(mutex_);
    return current_;
  }
  int64_t peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = current_;
  }

 private:
  struct Block {
    int64_t bytes;
    uint64_t run;
  };
  void add(int64_t bytes) {
    current_ += bytes;
    peak_ = std::max(peak_, current_);
  }

  std::mutex mutex_;
  std::unordered_map<uintptr_t, Block> live_;
  bool open_ = false;
  int64_t current_ = 0;
  int64_t peak_ = 0;
};

// Attached once, on first use: the tracker cannot be taken away again.
bool cuda_tracker_attached() {
  static const bool attached = compat::cuda_trace_allocations(
      [](bool allocated, uintptr_t address, int64_t bytes) { CudaBlocks::instance().on_event(allocated, address, bytes); });
  return attached;
}

bool g_cuda_probe_open = false;

}  // namespace

void begin_run(bool measured) {
  CountingAllocator::instance().install();
  ++g_run;
  g_run_measured.store(measured);
}

CpuProbe::CpuProbe() {
  if (g_probe_open) throw std::logic_error("recheck::memory::CpuProbe: a probe is already open");
  g_probe_open = true;
  CountingAllocator::instance().install();
  CountingAllocator::instance().open_window();
}

CpuProbe::~CpuProbe() {
  CountingAllocator::instance().close_window();
  g_probe_open = false;
}

int64_t CpuProbe::current() const { return CountingAllocator::instance().current(); }
int64_t CpuProbe::peak() const { return CountingAllocator::instance().peak(); }
void CpuProbe::reset_peak() { CountingAllocator::instance().reset_peak(); }
void CpuProbe::set_budget(int64_t bytes) { CountingAllocator::instance().set_budget(bytes); }
void CpuProbe::start_timeline(size_t limit) { CountingAllocator::instance().start_timeline(limit); }
Timeline CpuProbe::stop_timeline() { return CountingAllocator::instance().stop_timeline(); }
void mark_timeline(std::string label) { CountingAllocator::instance().mark(std::move(label)); }
bool timeline_recording() { return CountingAllocator::instance().recording(); }

Uncounted::Uncounted() : previous_(t_uncounted) { t_uncounted = true; }
Uncounted::~Uncounted() { t_uncounted = previous_; }

void set_allocation_scope(int scope) { g_scope.store(scope, std::memory_order_relaxed); }

bool cuda_probe_available() { return RECHECK_CUDA_ALLOCATION_TRACE; }

CudaProbe::CudaProbe() {
  if (!cuda_tracker_attached()) throw std::logic_error("recheck::memory::CudaProbe: this libtorch cannot trace CUDA allocations");
  if (g_cuda_probe_open) throw std::logic_error("recheck::memory::CudaProbe: a probe is already open");
  g_cuda_probe_open = true;
  CudaBlocks::instance().open();
}

CudaProbe::~CudaProbe() {
  CudaBlocks::instance().close();
  g_cuda_probe_open = false;
}

int64_t CudaProbe::current() const { return CudaBlocks::instance().current(); }
int64_t CudaProbe::peak() const { return CudaBlocks::instance().peak(); }
void CudaProbe::reset_peak() { CudaBlocks::instance().reset_peak(); }

bool allocation_log_available(bool cuda) { return !cuda || cuda_probe_available(); }

AllocationLog::AllocationLog(bool cuda, size_t limit) {
  if (cuda && !cuda_tracker_attached()) {
    throw std::logic_error("recheck::memory::AllocationLog: this libtorch cannot trace CUDA allocations");
  }
  Log& l = log();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (l.open) throw std::logic_error("recheck::memory::AllocationLog: a log is already open");
  l.open = true;
  l.cuda = cuda;
  l.limit = limit;
  l.overflowed = false;
  l.entries.clear();
}

AllocationLog::~AllocationLog() {
  Log& l = log();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.open = false;
  l.entries.clear();
  l.entries.shrink_to_fit();
}

std::vector<Allocation> AllocationLog::take() {
  Log& l = log();
  std::lock_guard<std::mutex> lock(l.mutex);
  return std::exchange(l.entries, {});
}

bool AllocationLog::overflowed() const {
  Log& l = log();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.overflowed;
}

int64_t cuda_current() { return compat::cuda_allocated_bytes().first; }
int64_t cuda_peak() { return compat::cuda_allocated_bytes().second; }
void cuda_reset_peak() { compat::cuda_reset_peak_allocated_bytes(); }

}  // namespace recheck::memory
