// The RNG model of Megatron's checkpointing: three independent kinds of state.
//  - the CPU default generator;
//  - the device generator: CUDA's default generator when a run is on a GPU, and on CPU a second,
//    separate CPU generator standing in for it, so that CPU runs can tell "forgot the device
//    state" from "forgot the CPU state";
//  - the tracker: a port of megatron.core.tensor_parallel.random.CudaRNGStatesTracker, named
//    device-generator states.
// These are process-wide, as Megatron's are module globals.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace recheck::rng {

enum class Device { cpu, cuda };

// Which device the device generator belongs to for the runs that follow.
void use_device(Device device);
Device current_device();
// Throws, naming the cause, when the build or the machine has no such device.
void check_device_available(Device device);
// Runs one small op on `device` and waits for it: throws, naming the cause, when this process
// cannot use it (no device, or CUDA broken in a process forked after CUDA started in its
// parent). A no-op for the CPU.
void check_device_works(Device device);

at::Generator cpu_generator();
at::Generator device_generator();

at::Tensor get_state(const at::Generator& generator);
void set_state(const at::Generator& generator, const at::Tensor& state);
void manual_seed(const at::Generator& generator, uint64_t seed);

// Python dicts are references: get_states() returns a new dict whose entries are the same
// tensors, set_states() adopts the dict it is given. A shared_ptr keeps that aliasing.
using StateMap = std::map<std::string, at::Tensor>;
using StateMapPtr = std::shared_ptr<StateMap>;

class CudaRNGStatesTracker {
 public:
  static constexpr const char* kDefaultStateName = "default-rng";

  CudaRNGStatesTracker() { reset(); }

  bool is_initialized() const { return is_initialized_; }
  void reset();
  StateMapPtr get_states() const;
  void set_states(StateMapPtr states);
  // Puts the tracker back as it was: these states (copied, never shared) and seeds, the default
  // state current. What reset_all uses to repeat a seeding it has already done.
  void restore(const StateMap& states, const std::set<int64_t>& seeds);
  const std::set<int64_t>& seeds() const { return seeds_; }
  void add(const std::string& name, int64_t seed);
  // `with tracker.fork(name): body()`.
  void fork(const std::string& name, const std::function<void()>& body);

  const StateMap& live_states() const { return *states_; }
  // The live map itself, not a copy: only the tracker-by-reference mutant wants this.
  StateMapPtr live_states_ptr() const { return states_; }
  const std::string& current_state_name() const { return current_state_name_; }

 private:
  bool is_initialized_ = false;
  StateMapPtr states_;
  std::set<int64_t> seeds_;
  std::string current_state_name_;
};

extern const char* const kDataParallelRngTrackerName;
extern const char* const kModelParallelRngTrackerName;
extern const char* const kExpertParallelRngTrackerName;

CudaRNGStatesTracker& get_cuda_rng_tracker();

// Megatron's seed arithmetic, for one rank of each parallel group.
void model_parallel_cuda_manual_seed(int64_t seed, int64_t tp_rank = 0, int64_t ep_rank = 0,
                                     int64_t etp_rank = 0);

// _get_all_rng_states / _set_all_rng_states.
struct AllStates {
  at::Tensor cpu;
  at::Tensor device;
  StateMapPtr tracker;
};
AllStates get_all_rng_states();
void set_all_rng_states(const AllStates& states);

// The three states as bytes, for comparing runs.
struct Snapshot {
  std::vector<uint8_t> cpu;
  std::vector<uint8_t> device;
  std::map<std::string, std::vector<uint8_t>> tracker;
  std::string tracker_current;
  // False for a tracker that keeps no current state name (Megatron before 2026-01: its fork
  // has none to report); the name is then compared nowhere.
  bool tracker_current_known = true;
  friend bool operator==(const Snapshot& a, const Snapshot& b) {
    return a.cpu == b.cpu && a.device == b.device && a.tracker == b.tracker &&
           a.tracker_current == b.tracker_current && a.tracker_current_known == b.tracker_current_known;
  }
  friend bool operator!=(const Snapshot& a, const Snapshot& b) { return !(a == b); }
};
Snapshot snapshot();

// Seeds every generator and resets the tracker, so that each run starts alike.
void reset_all(uint64_t seed);

// A generator state tensor as bytes (what snapshots hold).
std::vector<uint8_t> state_bytes(const at::Tensor& state);

// Another tracker in place of recheck's own while a run uses it: a Python variant's Megatron
// CudaRNGStatesTracker. The case's tracker draws and fork ops go through `fork`, snapshots read
// `read` (its states, and its current state name where it keeps one), and reset_all seeds it
// with `seed` (Megatron's model_parallel_cuda_manual_seed).
struct TrackerHooks {
  std::function<void(const std::string& name, const std::function<void()>& body)> fork;
  std::function<void(Snapshot& snapshot)> read;
  std::function<void(uint64_t seed)> seed;
};

// `with tracker.fork(name): body()` on the tracker in use.
void tracker_fork(const std::string& name, const std::function<void()>& body);

// Puts `hooks` in use until it goes out of scope (null: recheck's own tracker).
class UseTracker {
 public:
  explicit UseTracker(const TrackerHooks* hooks);
  ~UseTracker();
  UseTracker(const UseTracker&) = delete;
  UseTracker& operator=(const UseTracker&) = delete;

 private:
  const TrackerHooks* previous_;
};

}  // namespace recheck::rng
