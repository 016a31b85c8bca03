// `recheck replay`'s session: each corpus file's expectations checked, each expectation's sut
// against the oracle of the subject that declares it (or the one chosen), a variant the case
// records crashing in a process of its own; files in worker processes with more than one job,
// handed on in the files' order. The command finds the files and prints the totals.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/checkpoint_interface.h"

namespace recheck::runner {

// What replaying one file gave: the lines it prints, the expectations as data, and the counts.
struct FileReplay {
  std::string printed;
  nlohmann::json lines = nlohmann::json::array();
  int held = 0;
  int failed = 0;
  int skipped = 0;

  nlohmann::json to_json() const;
  static FileReplay from_json(const nlohmann::json& j);
};

// The oracle each expectation's sut is checked against: the chosen one where given, else that of
// the subject declaring the sut (megatron-without-output-clearing against
// megatron-without-output), else the default's. Made once each; a name no variant has is a
// UsageError.
class Oracles {
 public:
  Oracles(std::string chosen, bool is_chosen) : default_name_(std::move(chosen)), chosen_(is_chosen) {}
  CheckpointImplementation& for_sut(const std::string& sut);
  const std::string& default_name() const { return default_name_; }

 private:
  std::string default_name_;
  bool chosen_;
  std::map<std::string, std::unique_ptr<CheckpointImplementation>> made_;
};

// Checks every expectation of `file` (a CaseError when it is not a valid case or names a sut no
// variant has).
FileReplay replay_file(const std::string& file, const Limits& limits, Oracles& oracles,
                       std::map<std::string, std::unique_ptr<CheckpointImplementation>>& suts);

// replay_file for each of `files`, in this process (jobs <= 1) or in `jobs` worker processes,
// handing each file's replay to `replayed` in the files' order.
void replay_files(const std::vector<std::string>& files, const Limits& limits, Oracles& oracles, int jobs,
                  const std::function<void(const FileReplay&)>& replayed);

}  // namespace recheck::runner
