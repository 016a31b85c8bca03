// `recheck export-python`: a case as a standalone Python script that rebuilds it with torch ops,
// runs it eagerly and through a Python checkpoint (Megatron's CheckpointFunction, recheck's
// wrapper of the PR's change around it, or PyTorch's reentrant checkpoint), and asserts a
// property, so that a finding can be attached to an upstream issue and replayed with nothing but
// torch (and megatron-core) installed.
#pragma once

#include <string>

#include "core/case.h"

namespace recheck {

struct ExportOptions {
  // megatron, megatron-clearing, torch or torch-non-reentrant (a subject's exported_as): the
  // script's default (it takes --checkpoint too).
  std::string checkpoint = "megatron";
  // What grads-bitwise, stash-kept, stash-grads and hooks-bitwise compare the checkpoint with, named as
  // `checkpoint` is: the oracle of the run that found it (a subject's oracle, exported_as).
  std::string oracle = "megatron";
  // The property the script asserts (its --property overrides): one of the properties recheck
  // checks, except memory-floor, which needs recheck's counting allocator.
  std::string property = "outputs-bitwise";
};

// Whether a script can assert `property` with torch alone: every property but the memory ones
// (memory-floor, memory-eager-floor, no-extra-allocations), which need recheck's counting allocator.
bool exportable(const std::string& property);

// Throws std::invalid_argument for an unknown checkpoint or property.
std::string export_python(const Case& c, const ExportOptions& options);

}  // namespace recheck
