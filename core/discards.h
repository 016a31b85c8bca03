// Checkpoints without output and the discard ops that free their outputs (Checkpoint::without_output
// and Discard in core/case.h): what the interpreter keeps of each such checkpoint while its
// outputs may be discarded, and what it records of each discard for the properties
// (discard-own-outputs, discard-recomputed).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/case.h"
#include "core/checkpoint_interface.h"
#include "core/value.h"

namespace recheck {

// One checkpoint a discard op named, as the iteration left it.
struct DiscardRecord {
  std::string site;        // the discard op, e.g. "root.ops[4]"
  std::string checkpoint;  // the checkpoint whose outputs it discarded, e.g. "root.ops[1]"
  // Whether the implementation freed any of the outputs' storage (eager mode frees none).
  bool freed = false;
  // The caller's tensors the discard changed, besides the checkpoint's outputs and the views of
  // them made after it: "v0: storage 48 -> 0 bytes", "v2: data changed".
  std::vector<std::string> touched;
  int recomputations = 0;  // calls of the checkpoint's body after its forward, by the iteration's end
  // Whether backward computed the hook tensor's gradient (where the recomputation is registered)
  // by the iteration's end: outputs nothing reads are never recomputed, and need not be.
  bool hook_reached = false;
  // Each output as its forward returned it, and as the caller holds it once the iteration ended
  // (undefined where its storage no longer holds its elements); storage sizes in bytes.
  std::vector<at::Tensor> forward;
  std::vector<at::Tensor> after;
  std::vector<int64_t> forward_storage_bytes;
  std::vector<int64_t> after_storage_bytes;
};

// A checkpoint without output, from its forward until its segment returns (or, discarded, until
// the iteration's records are taken).
struct KeptCheckpoint {
  std::string site;
  std::shared_ptr<KeptOutputs> handle;  // what the implementation needs to discard its outputs
  std::shared_ptr<int> calls;           // its body's calls so far, forward's included
  Values outputs;                       // as the caller holds them
  std::vector<at::Tensor> forward;      // their data when forward returned (the harness's copies)
  std::vector<int64_t> forward_storage_bytes;
};

// Whether `t`'s storage holds every element it addresses (a discarded output's does not).
bool data_allocated(const at::Tensor& t);

class Discards {
 public:
  // After a checkpoint without output returned its outputs.
  static std::shared_ptr<KeptCheckpoint> keep(std::string site, std::shared_ptr<KeptOutputs> handle,
                                              std::shared_ptr<int> calls, const Values& outputs);
  // Runs discard op `op` at `site`: `values` are its segment's values so far, `kept` its
  // segment's checkpoints without output by their first output's value number. Records which of
  // the caller's tensors the implementation's discard changed.
  void discard(const Discard& op, const std::string& site, const Values& values,
               const std::map<int, std::shared_ptr<KeptCheckpoint>>& kept, CheckpointImplementation& implementation);
  // The iteration's records, completed (recomputations, the outputs after it); lets go of every
  // tensor it held, so that what the run holds after the iteration is the run's alone.
  std::vector<DiscardRecord> finish();
  // Watches the object (KeptOutputs::watch) of a checkpoint without output run at `site` in
  // `iteration`, for the rest of the run.
  void watch(const std::string& site, int iteration, const KeptOutputs& handle);
  // Every object watched that is still alive, as "root.ops[0] of iteration 0", in the order made.
  std::vector<std::string> alive_objects() const;

 private:
  struct Watched {
    std::string where;
    std::shared_ptr<KeptOutputs::Watch> watch;
  };
  std::vector<Watched> watched_;
  struct Discarded {
    DiscardRecord record;
    std::shared_ptr<KeptCheckpoint> kept;
    std::shared_ptr<int> hook_calls;  // how often backward reached the hook tensor
  };
  std::vector<Discarded> discarded_;
};

}  // namespace recheck
