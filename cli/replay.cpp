// recheck replay: replay corpus cases and check the expectations each one records.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"
#include "properties/buckets.h"
#include "properties/causes.h"
#include "properties/corpus.h"
#include "properties/report.h"
#include "runner/case_worker.h"
#include "runner/pool.h"

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

// What replaying one file gave: the lines it prints, the expectations as data, and the counts.
struct FileReplay {
  std::string printed;
  json lines = json::array();
  int held = 0;
  int failed = 0;
  int skipped = 0;

  json to_json() const {
    return {{"printed", printed}, {"lines", lines}, {"held", held}, {"failed", failed}, {"skipped", skipped}};
  }
  static FileReplay from_json(const json& j) {
    FileReplay r;
    r.printed = j.at("printed").get<std::string>();
    r.lines = j.at("lines");
    r.held = j.at("held").get<int>();
    r.failed = j.at("failed").get<int>();
    r.skipped = j.at("skipped").get<int>();
    return r;
  }
};

// The oracle each expectation's sut is checked against: --oracle's where given, else that of the
// subject declaring the sut (megatron-without-output-clearing against megatron-without-output),
// else the default's. Made once each.
class Oracles {
 public:
  Oracles(std::string chosen, bool is_chosen) : default_name_(std::move(chosen)), chosen_(is_chosen) {}
  CheckpointImplementation& for_sut(const std::string& sut) {
    std::string name = default_name_;
    if (!chosen_) {
      const Subject* subject = subject_declaring(sut);
      if (subject != nullptr) name = subject->oracle;
    }
    auto& made = made_[name];
    if (!made) made = make_variant(name);
    return *made;
  }
  const std::string& default_name() const { return default_name_; }

 private:
  std::string default_name_;
  bool chosen_;
  std::map<std::string, std::unique_ptr<CheckpointImplementation>> made_;
};

FileReplay replay_file(const std::string& file, const Limits& limits, Oracles& oracles,
                       std::map<std::string, std::unique_ptr<CheckpointImplementation>>& suts) {
  FileReplay out;
  std::ostringstream print;
  const Case c = load_case_file(file, limits);
  // A CUDA case where CUDA is missing cannot run: skipped and said so, like a Python variant
  // without the bridge.
  const bool no_device = !runner::device_missing(c.device).empty();
  const std::vector<Expectation> expectations = expectations_of(c);
  for (std::size_t i = 0; i < expectations.size(); ++i) {
    const Expectation& e = expectations[i];
    const std::string field = file + ": case.expect[" + std::to_string(i) + "]";
    check_expectation(e, field);
    if (!suts.count(e.sut) && !python_bridge_built() && needs_python_bridge(e.sut)) {
      suts[e.sut] = nullptr;  // this build cannot run it: skipped, and said so
    } else if (!suts.count(e.sut)) {
      try {
        suts[e.sut] = make_checkpoint(e.sut);
      } catch (const std::invalid_argument& error) {
        // A Python subject's variant (megatron-without-output) is registered by the bridge: a
        // build without it does not know the name, and skips it as it skips megatron-py. The
        // bridge's build knows every name, and refuses one it does not know.
        if (python_bridge_built()) throw CaseError(field + ".sut: " + error.what());
        suts[e.sut] = nullptr;
      }
    }
  }
  // A variant the case records crashing is checked in a process of its own, as `run` did.
  std::map<std::string, runner::IsolatedCheck> results;
  for (const Expectation& e : expectations) {
    if (!suts.at(e.sut) || no_device) {
      ++out.skipped;
      print << "skip  " << file << "  " << e.sut << " " << e.property << " " << e.classification
            << (no_device ? " (needs a " + c.device + " device)\n" : " (needs the Python bridge: see build-py, ci/python)\n");
      continue;
    }
    if (!results.count(e.sut)) {
      const bool crashes = std::any_of(expectations.begin(), expectations.end(), [&](const Expectation& x) {
        return x.sut == e.sut && x.property == kCrashProperty;
      });
      // A CUDA case too: CUDA started in this process could not be used by a later worker.
      CheckpointImplementation& oracle = oracles.for_sut(e.sut);
      results.emplace(e.sut, crashes || c.device == "cuda" ? runner::check_isolated(c, file, oracle, *suts[e.sut], limits)
                                                           : runner::IsolatedCheck{check_case(c, oracle, *suts[e.sut]), ""});
    }
    const runner::IsolatedCheck& isolated = results.at(e.sut);
    static const CaseResult kNone;
    const CaseResult& result = isolated.result ? *isolated.result : kNone;
    if (isolated.result && !result.skipped.empty()) {
      // Too large for this machine's memory: it cannot tell, as `run` counts such a case.
      ++out.skipped;
      print << "skip  " << file << "  " << e.sut << " " << e.property << " " << e.classification << " ("
            << result.skipped << ")\n";
      continue;
    }
    const std::string got = observed(e, isolated.result ? &result : nullptr);
    const bool ok = got == e.classification;
    // What a failing expectation now shows, by cause: the property's signature, or how the check
    // ended, or that it passes now.
    std::string cause;
    if (!ok) {
      if (!isolated.result) cause = crash_signature("the worker process " + isolated.crash, false);
      for (const PropertyResult& r : result.results) {
        const bool named = e.property == "*" ? is_alarm(r.classification) : r.property == e.property;
        if (named && cause.empty() && !r.cause.empty()) cause = r.cause;
      }
      if (cause.empty()) cause = e.property + " " + got + " (expected " + e.classification + ")";
    }
    (ok ? out.held : out.failed) += 1;
    print << (ok ? "ok    " : "FAIL  ") << file << "  " << e.sut << " " << e.property << " " << e.classification
          << (ok ? "" : ", got " + got) << "\n";
    out.lines.push_back({{"file", file}, {"sut", e.sut}, {"property", e.property}, {"expected", e.classification},
                         {"got", got}, {"ok", ok}, {"cause", cause}});
  }
  out.printed = print.str();
  return out;
}

int command_replay(const Args& args) {
  if (args.positional().empty()) throw UsageError("replay takes case files or folders");
  check_output_files(args, {"json"});
  const Limits limits = limits_of(args);
  const int jobs = jobs_option(args);
  Oracles oracles(oracle_option(args), args.has("oracle"));
  oracles.for_sut("");  // made now: a bad --oracle is refused before any file
  std::map<std::string, std::unique_ptr<CheckpointImplementation>> suts;
  int held = 0;
  int failed = 0;
  int skipped = 0;
  json lines = json::array();
  auto add = [&](const FileReplay& r) {
    std::cout << r.printed;
    held += r.held;
    failed += r.failed;
    skipped += r.skipped;
    for (const json& line : r.lines) lines.push_back(line);
  };
  const std::vector<std::string> files = corpus_files(args.positional());
  if (jobs <= 1) {
    for (const std::string& file : files) add(replay_file(file, limits, oracles, suts));
  } else {
    // One task per file, in worker processes; printed in the files' order, as with one job.
    const std::vector<runner::TaskAnswer> answers =
        runner::run_tasks(jobs, static_cast<int64_t>(files.size()), [&](int64_t i) {
          return replay_file(files[static_cast<size_t>(i)], limits, oracles, suts).to_json().dump();
        });
    for (size_t i = 0; i < answers.size(); ++i) {
      if (answers[i].text) {
        add(FileReplay::from_json(json::parse(*answers[i].text)));
      } else if (!answers[i].error.empty()) {
        throw CaseError(answers[i].error);  // the file is not a valid case: as with one job
      } else if (!answers[i].died.empty()) {
        throw std::runtime_error(files[i] + ": the process replaying it " + answers[i].died);
      }
    }
  }
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
