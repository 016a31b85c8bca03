// Eager mode: a checkpoint op runs its body inline, with no recomputation. The reference every
// checkpoint implementation is held to.
#pragma once

#include "core/checkpoint_interface.h"

namespace recheck {

class EagerExecution : public CheckpointImplementation {
 public:
  std::string name() const override { return "eager"; }
  std::string code() const override { return "eager mode"; }
  Values apply(const RunFunction& run_function, const CallSettings& /*call*/, const Values& args) override {
    return run_function(args);
  }
  // A checkpoint without output is any body here, and discarding its outputs frees nothing.
  bool runs_without_output() const override { return true; }
  std::pair<Values, std::shared_ptr<KeptOutputs>> apply_without_output(const RunFunction& run_function,
                                                                       const CallSettings& /*call*/,
                                                                       const Values& args) override {
    return {run_function(args), nullptr};
  }
  // No checkpoint sets the flag here: nothing for a body to read.
  bool keeps_checkpointing_flag() const override { return false; }
};

}  // namespace recheck
