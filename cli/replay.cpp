// recheck replay: replay corpus cases and check the expectations each one records.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "properties/buckets.h"
#include "runner/replay_session.h"

namespace recheck::cli {

namespace {

const char* kReplayHelp = R"(usage: recheck replay PATH... [--oracle NAME] [--json FILE] [--limits LIST]

Replays corpus cases: every *.json under each folder given, and each file given, and checks
what each case records under "expect": for each {sut, property, classification} that `property`
is classified `classification` when `sut` is checked against the oracle (--oracle's, else that
of the subject declaring `sut`, else nonclearing). Property "*" with
classification "no-alarm" means no property raises an alarm. A case without expectations is
expected to raise no alarm on the correct variant `clearing`. Property "runs-to-completion" with
classification "crash" (a crash finding of `recheck run`) means the variant crashes the process
checking the case: that variant is checked in a child process. Prints one line per expectation;
an expectation this build or machine cannot check (a Python variant without the bridge, a CUDA
case without CUDA, a case too large for its memory) is printed as skipped. --limits as for show.
--jobs N replays the files in N worker processes at once (default 1: in this process; 0: one
per core), printing them in the same order.
Exit codes: 0 every expectation holds; 1 one does not; 2 a file is not a valid case.
)";

// Every *.json under the paths given, sorted, so that a replay is the same everywhere.
std::vector<std::string> corpus_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
      std::vector<std::string> found;
      // A link loop or an entry that cannot be read is left out, not an error for the folder.
      for (auto it = std::filesystem::recursive_directory_iterator(path, error);
           !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
        std::error_code status_error;
        if (it->is_regular_file(status_error) && it->path().extension() == ".json") found.push_back(it->path().string());
      }
      if (error) throw UsageError(path + ": cannot read the folder: " + error.message());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (std::filesystem::exists(path, error)) {
      files.push_back(path);
    } else {
      throw UsageError(path + ": no such file or folder");
    }
  }
  return files;
}

int command_replay(const Args& args) {
  if (args.positional().empty()) throw UsageError("replay takes case files or folders");
  check_output_files(args, {"json"});
  const Limits limits = limits_of(args);
  const int jobs = jobs_option(args);
  runner::Oracles oracles(oracle_option(args), args.has("oracle"));
  oracles.for_sut("");  // made now: a bad --oracle is refused before any file
  int held = 0;
  int failed = 0;
  int skipped = 0;
  json lines = json::array();
  auto add = [&](const runner::FileReplay& r) {
    std::cout << r.printed;
    held += r.held;
    failed += r.failed;
    skipped += r.skipped;
    for (const json& line : r.lines) lines.push_back(line);
  };
  runner::replay_files(corpus_files(args.positional()), limits, oracles, jobs, add);
  if (held + failed + skipped == 0) throw UsageError("no case file (*.json) under the paths given");
  // The expectations that do not hold, grouped by what they show now: a few causes, not a list.
  Buckets failing;
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& line = lines[i];
    if (line.at("ok").get<bool>()) continue;
    const std::string cause = line.at("cause").get<std::string>();
    const bool first = !failing.contains(cause);
    failing.add(cause, line.at("property"), line.at("got"), true, static_cast<int64_t>(i), 0,
                line.at("sut").get<std::string>() + " expected " + line.at("expected").get<std::string>());
    if (first) failing.at(cause).found_in = failing.at(cause).file = line.at("file").get<std::string>();
  }
  if (failing.size() > 0) std::cout << "\nexpectations that do not hold, by cause:\n" << failing.describe();
  std::cout << held << " expectations hold, " << failed << " do not"
            << (skipped > 0 ? ", " + std::to_string(skipped) + " skipped (they need the Python bridge, a device or more memory)" : "")
            << "\n";
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"}, {"command", "replay"}, {"oracle", oracles.default_name()},
                                              {"held", held}, {"failed", failed}, {"skipped", skipped}, {"expectations", lines},
                                              {"buckets", failing.to_json()}});
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace

const Command kReplay{"replay", "replay corpus cases (files or folders) and check what each one records it shows", kReplayHelp, {}, {"oracle", "json", "limits", "jobs"}, command_replay, false};

}  // namespace recheck::cli
