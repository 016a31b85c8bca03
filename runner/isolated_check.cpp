#include "runner/isolated_check.h"

#include <sys/wait.h>

#include <stdexcept>

#include "core/interpreter.h"
#include "properties/causes.h"
#include "properties/corpus.h"
#include "properties/report.h"
#include "runner/worker_process.h"

namespace recheck::runner {

std::string OwnProcessVerdict::describe() const {
  if (!crash.empty()) return std::string(kCrashProperty) + " " + kCrash + " (" + crash + ")";
  return property + " " + to_string(classification);
}

OwnProcessVerdict first_alarm_in_own_process(const Case& c, CheckpointImplementation& oracle,
                                             CheckpointImplementation& sut) {
  OwnProcessVerdict result;
  WorkerProcess check;
  check.start([&](FILE*, int to_parent) {
    const CaseResult checked = check_case(c, oracle, sut);
    const PropertyResult* alarm = checked.first_alarm();
    write_all(to_parent, alarm ? "alarm " + alarm->property + " " + to_string(alarm->classification) + "\n" : "pass\n");
  }, /*with_input=*/false, /*takes_interrupts=*/true);
  const std::optional<std::string> line = check.read_line();
  const std::string ended = check.stop();
  if (line && line->rfind("alarm ", 0) == 0) {
    const size_t space = line->find(' ', 6);
    result.alarm = true;
    result.property = line->substr(6, space - 6);
    result.classification = classification_named(line->substr(space + 1)).value_or(Classification::regression);
    return result;
  }
  if (line && *line == "pass") return result;
  if (line && line->rfind("error ", 0) == 0) throw std::runtime_error(line->substr(6));
  result.crash = "the check's process " + ended;
  result.oracle_crashes = classify_crash(c, result.crash, oracle).pre_existing();
  result.alarm = !result.oracle_crashes;
  return result;
}

std::string oracle_crash(const Case& c, CheckpointImplementation& oracle, const std::function<void()>& ready,
                         RunOptions options, EagerRun eager_run, const ClaimChoice& claims, double case_seconds) {
  WorkerProcess alone;
  alone.start([&](FILE*, int) {
    if (ready) ready();
    RunOptions unmeasured = options;
    unmeasured.measure_memory = false;
    (void)run_case(c, oracle, unmeasured);
  }, /*with_input=*/false, /*takes_interrupts=*/true);
  const std::string alone_ended = alone.stop_within(case_seconds);
  if (WIFSIGNALED(alone.status())) return "the worker process running it alone " + alone_ended;
  for (int attempt = 0; attempt < 3; ++attempt) {
    WorkerProcess itself;
    itself.start([&](FILE*, int) {
      if (ready) ready();
      (void)check_case(c, oracle, oracle, options, eager_run, claims);
    }, /*with_input=*/false, /*takes_interrupts=*/true);
    const std::string itself_ended = itself.stop_within(case_seconds);
    if (WIFSIGNALED(itself.status())) return "the worker process checking it against itself " + itself_ended;
  }
  return "";
}

std::string Crash::signature() const { return crash_signature(how, pre_existing()); }

Crash classify_crash(const Case& c, std::string how, CheckpointImplementation& oracle, const std::function<void()>& ready,
                     RunOptions options, EagerRun eager_run, const ClaimChoice& claims, double case_seconds) {
  std::string oracle_end = oracle_crash(c, oracle, ready, options, eager_run, claims, case_seconds);
  return Crash{std::move(how), std::move(oracle_end)};
}

}  // namespace recheck::runner
