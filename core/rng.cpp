#include "core/rng.h"

#include <cstring>
#include <mutex>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>

#include "core/errors.h"
#include "core/torch_compat.h"

namespace recheck::rng {

const char* const kDataParallelRngTrackerName = "data-parallel-rng";
const char* const kModelParallelRngTrackerName = "model-parallel-rng";
const char* const kExpertParallelRngTrackerName = "expert-parallel-rng";

namespace {

Device g_device = Device::cpu;

at::Generator& cpu_device_stand_in() {
  static at::Generator stand_in = at::make_generator<at::CPUGeneratorImpl>(0);
  return stand_in;
}

}  // namespace

void check_device_available(Device device) {
  if (device == Device::cuda && !compat::cuda_available()) {
    throw std::runtime_error("device cuda requested, but no CUDA device is available to this build");
  }
}

void use_device(Device device) {
  check_device_available(device);
  g_device = device;
}

Device current_device() { return g_device; }

void check_device_works(Device device) {
  if (device != Device::cuda) return;
  check_device_available(device);
  try {
    const at::Tensor probe = at::ones({1}, at::TensorOptions().device(at::kCUDA));
    (void)(probe + 1).sum().item<float>();
  } catch (const c10::Error& error) {
    throw std::runtime_error(std::string("CUDA does not work in this process: ") + error.what_without_backtrace() +
                             " (if CUDA started in the process this one was forked from, as recheck run's "
                             "workers are, run with --no-isolate)");
  }
}

at::Generator cpu_generator() { return at::detail::getDefaultCPUGenerator(); }

at::Generator device_generator() {
  if (g_device == Device::cuda) return compat::default_cuda_generator();
  return cpu_device_stand_in();
}

// Generator's mutex() and setters are not const in every libtorch version; a copied handle
// shares the generator it was copied from.
at::Tensor get_state(const at::Generator& generator) {
  at::Generator handle = generator;
  std::lock_guard<std::mutex> lock(handle.mutex());
  return handle.get_state();
}

void set_state(const at::Generator& generator, const at::Tensor& state) {
  at::Generator handle = generator;
  std::lock_guard<std::mutex> lock(handle.mutex());
  handle.set_state(state);
}

void manual_seed(const at::Generator& generator, uint64_t seed) {
  at::Generator handle = generator;
  std::lock_guard<std::mutex> lock(handle.mutex());
  handle.set_current_seed(seed);
}

void CudaRNGStatesTracker::reset() {
  is_initialized_ = false;
  states_ = std::make_shared<StateMap>();
  seeds_.clear();
  current_state_name_ = kDefaultStateName;
}

void CudaRNGStatesTracker::restore(const StateMap& states, const std::set<int64_t>& seeds) {
  auto copy = std::make_shared<StateMap>();
  for (const auto& [name, state] : states) (*copy)[name] = state.clone();
  is_initialized_ = true;
  states_ = std::move(copy);
  seeds_ = seeds;
  current_state_name_ = kDefaultStateName;
}

StateMapPtr CudaRNGStatesTracker::get_states() const {
  return std::make_shared<StateMap>(*states_);
}

void CudaRNGStatesTracker::set_states(StateMapPtr states) {
  is_initialized_ = true;
  states_ = std::move(states);
}

void CudaRNGStatesTracker::add(const std::string& name, int64_t seed) {
  is_initialized_ = true;
  // Megatron records the seed before it checks the name: a refused name still uses up its seed.
  if (seeds_.count(seed) != 0) {
    throw PythonError("Exception", "seed " + std::to_string(seed) + " already exists");
  }
  seeds_.insert(seed);
  if (states_->count(name) != 0) {
    throw PythonError("Exception", "cuda rng state " + name + " already exists");
  }
  at::Generator device = device_generator();
  at::Tensor orig_rng_state = get_state(device);
  manual_seed(device, static_cast<uint64_t>(seed));
  (*states_)[name] = get_state(device);
  set_state(device, orig_rng_state);
}

void CudaRNGStatesTracker::fork(const std::string& name, const std::function<void()>& body) {
  if (states_->count(name) == 0) {
    throw PythonError("Exception", "cuda rng state " + name + " is not added");
  }
  at::Generator device = device_generator();
  at::Tensor orig_cuda_rng_state = get_state(device);
  const std::string orig_state_name = current_state_name_;
  if (orig_state_name != kDefaultStateName) (*states_)[orig_state_name] = orig_cuda_rng_state;
  set_state(device, states_->at(name));
  current_state_name_ = name;
  // Megatron reads the CPU state on the way in and compares it on the way out, only to log a
  // warning; the reads are kept (not the log line): they are allocations the memory claims count.
  const at::Tensor cpu_rng_state = get_state(cpu_generator());
  // Python's `finally:` runs on both paths.
  auto leave = [&] {
    (void)at::all(at::eq(cpu_rng_state, get_state(cpu_generator()))).item<bool>();
    if (current_state_name_ != name) {
      throw PythonError("Exception", "current state name " + current_state_name_ +
                                         " is not the same as the desired state name " + name + ".");
    }
    (*states_)[name] = get_state(device);
    if (orig_state_name != kDefaultStateName) orig_cuda_rng_state = states_->at(orig_state_name);
    set_state(device, orig_cuda_rng_state);
    current_state_name_ = orig_state_name;
  };
  try {
    body();
  } catch (...) {
    leave();
    throw;
  }
  leave();
}

CudaRNGStatesTracker& get_cuda_rng_tracker() {
  static CudaRNGStatesTracker tracker;
  return tracker;
}

namespace {
// a + b on 64-bit seed words, wrapping as the generators read them (a case's seed is any 64-bit
// value; int64_t arithmetic past INT64_MAX is undefined).
int64_t seed_plus(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
}  // namespace

void model_parallel_cuda_manual_seed(int64_t seed, int64_t tp_rank, int64_t ep_rank,
                                     int64_t etp_rank) {
  // 2718 is Megatron's offset: any positive value works, this one makes seeds comparable.
  const int64_t offset = seed_plus(seed, 2718);
  const int64_t tensor_model_parallel_seed = seed_plus(offset, tp_rank);
  const int64_t data_parallel_seed = seed;
  CudaRNGStatesTracker& tracker = get_cuda_rng_tracker();
  tracker.reset();
  manual_seed(device_generator(), static_cast<uint64_t>(data_parallel_seed));
  tracker.add(kDataParallelRngTrackerName, data_parallel_seed);
  tracker.add(kModelParallelRngTrackerName, tensor_model_parallel_seed);
  const int64_t expert_parallel_seed = seed_plus(seed_plus(seed, 1024), seed_plus(100 * ep_rank, etp_rank));
  tracker.add(kExpertParallelRngTrackerName, expert_parallel_seed);
}

AllStates get_all_rng_states() {
  return {get_state(cpu_generator()), get_state(device_generator()),
          get_cuda_rng_tracker().get_states()};
}

void set_all_rng_states(const AllStates& states) {
  set_state(cpu_generator(), states.cpu);
  set_state(device_generator(), states.device);
  get_cuda_rng_tracker().set_states(states.tracker);
}

namespace {
std::vector<uint8_t> bytes_of(const at::Tensor& state) {
  at::Tensor cpu = state.to(at::kCPU).contiguous();
  const auto* begin = static_cast<const uint8_t*>(cpu.data_ptr());
  return {begin, begin + cpu.nbytes()};
}

// A generator's state as bytes. A CPU generator's engine is read in place, which says what
// get_state would serialize (the Mersenne Twister and the cached normal samples) without the
// state tensor get_state allocates: snapshots are taken several times per iteration.
std::vector<uint8_t> generator_bytes(const at::Generator& generator) {
  if (generator.device().is_cpu()) {
    at::Generator handle = generator;
    std::lock_guard<std::mutex> lock(handle.mutex());
    auto* impl = at::check_generator<at::CPUGeneratorImpl>(handle);
    const at::mt19937_data_pod pod = impl->engine().data();
    std::vector<uint8_t> out;
    // Field by field: the struct's padding bytes say nothing.
    auto put = [&out](const auto& field) {
      const auto* p = reinterpret_cast<const uint8_t*>(&field);
      out.insert(out.end(), p, p + sizeof(field));
    };
    put(pod.seed_);
    put(pod.left_);
    put(pod.seeded_);
    put(pod.next_);
    put(pod.state_);
    const auto f = impl->next_float_normal_sample();
    const auto d = impl->next_double_normal_sample();
    put(f.has_value());
    put(f.has_value() ? *f : 0.0f);
    put(d.has_value());
    put(d.has_value() ? *d : 0.0);
    return out;
  }
  return bytes_of(get_state(generator));
}

const TrackerHooks* g_tracker_hooks = nullptr;

}  // namespace

std::vector<uint8_t> state_bytes(const at::Tensor& state) { return bytes_of(state); }

UseTracker::UseTracker(const TrackerHooks* hooks) : previous_(g_tracker_hooks) { g_tracker_hooks = hooks; }
UseTracker::~UseTracker() { g_tracker_hooks = previous_; }

void tracker_fork(const std::string& name, const std::function<void()>& body) {
  if (g_tracker_hooks != nullptr) g_tracker_hooks->fork(name, body);
  else get_cuda_rng_tracker().fork(name, body);
}

Snapshot snapshot() {
  Snapshot s;
  s.cpu = generator_bytes(cpu_generator());
  s.device = generator_bytes(device_generator());
  if (g_tracker_hooks != nullptr) {
    g_tracker_hooks->read(s);
    return s;
  }
  const CudaRNGStatesTracker& tracker = get_cuda_rng_tracker();
  for (const auto& [name, state] : tracker.live_states()) s.tracker[name] = bytes_of(state);
  s.tracker_current = tracker.current_state_name();
  return s;
}

void reset_all(uint64_t seed) {
  // Seeding builds four Mersenne Twister states; every run of a case seeds the same way, so
  // the states seeding left are kept and copied back when the same seed comes again.
  struct Seeded {
    uint64_t seed;
    Device device;
    at::Tensor cpu;
    at::Tensor device_state;
    StateMap tracker;
    std::set<int64_t> tracker_seeds;
  };
  static std::optional<Seeded> last;
  CudaRNGStatesTracker& tracker = get_cuda_rng_tracker();
  if (last && last->seed == seed && last->device == g_device) {
    set_state(cpu_generator(), last->cpu);
    set_state(device_generator(), last->device_state);
    tracker.restore(last->tracker, last->tracker_seeds);
    if (g_tracker_hooks != nullptr) g_tracker_hooks->seed(seed);
    return;
  }
  // A CPU seed apart from the device's, so that the two streams never coincide.
  manual_seed(cpu_generator(), seed ^ 0x9E3779B97F4A7C15ULL);
  model_parallel_cuda_manual_seed(static_cast<int64_t>(seed));
  StateMap states;
  for (const auto& [name, state] : tracker.live_states()) states[name] = state.clone();
  last = Seeded{seed, g_device, get_state(cpu_generator()), get_state(device_generator()), std::move(states),
                tracker.seeds()};
  // Another tracker is seeded the same way, from the device generator's state before seeding.
  if (g_tracker_hooks != nullptr) g_tracker_hooks->seed(seed);
}

}  // namespace recheck::rng
