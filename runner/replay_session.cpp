#include "runner/replay_session.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "core/errors.h"
#include "properties/causes.h"
#include "properties/corpus.h"
#include "properties/report.h"
#include "runner/case_worker.h"
#include "runner/pool.h"
#include "suts/subject.h"

namespace recheck::runner {

using nlohmann::json;

json FileReplay::to_json() const {
  return {{"printed", printed}, {"lines", lines}, {"held", held}, {"failed", failed}, {"skipped", skipped}};
}

FileReplay FileReplay::from_json(const json& j) {
  FileReplay r;
  r.printed = j.at("printed").get<std::string>();
  r.lines = j.at("lines");
  r.held = j.at("held").get<int>();
  r.failed = j.at("failed").get<int>();
  r.skipped = j.at("skipped").get<int>();
  return r;
}

CheckpointImplementation& Oracles::for_sut(const std::string& sut) {
  std::string name = default_name_;
  if (!chosen_) {
    const Subject* subject = subject_declaring(sut);
    if (subject != nullptr) name = subject->oracle;
  }
  auto& made = made_[name];
  if (!made) {
    try {
      made = make_checkpoint(name);
    } catch (const std::invalid_argument& error) {
      throw UsageError(error.what());
    }
  }
  return *made;
}

FileReplay replay_file(const std::string& file, const Limits& limits, Oracles& oracles,
                       std::map<std::string, std::unique_ptr<CheckpointImplementation>>& suts) {
  FileReplay out;
  std::ostringstream print;
  const Case c = load_case_file(file, limits);
  // A CUDA case where CUDA is missing cannot run: skipped and said so, like a Python variant
  // without the bridge.
  const bool no_device = !device_missing(c.device).empty();
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
  std::map<std::string, IsolatedCheck> results;
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
      results.emplace(e.sut, crashes || c.device == "cuda" ? check_isolated(c, file, oracle, *suts[e.sut], limits)
                                                           : IsolatedCheck{check_case(c, oracle, *suts[e.sut]), ""});
    }
    const IsolatedCheck& isolated = results.at(e.sut);
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

void replay_files(const std::vector<std::string>& files, const Limits& limits, Oracles& oracles, int jobs,
                  const std::function<void(const FileReplay&)>& replayed) {
  std::map<std::string, std::unique_ptr<CheckpointImplementation>> suts;
  if (jobs <= 1) {
    for (const std::string& file : files) replayed(replay_file(file, limits, oracles, suts));
    return;
  }
  // One task per file, in worker processes; handed on in the files' order, as with one job.
  const std::vector<TaskAnswer> answers = run_tasks(jobs, static_cast<int64_t>(files.size()), [&](int64_t i) {
    return replay_file(files[static_cast<size_t>(i)], limits, oracles, suts).to_json().dump();
  });
  for (size_t i = 0; i < answers.size(); ++i) {
    if (answers[i].text) {
      replayed(FileReplay::from_json(json::parse(*answers[i].text)));
    } else if (!answers[i].error.empty()) {
      throw CaseError(answers[i].error);  // the file is not a valid case: as with one job
    } else if (!answers[i].died.empty()) {
      throw std::runtime_error(files[i] + ": the process replaying it " + answers[i].died);
    }
  }
}

}  // namespace recheck::runner
