#include "runner/hunt.h"

#include <nlohmann/json.hpp>

#include "runner/results_json.h"
#include "runner/worker_process.h"

namespace recheck::runner {

using nlohmann::json;

// The line protocol, worker to parent: "start N K" before case N (K: the out-of-memory kills so
// far, oom_kills), the case's result as JSON after it, "done" at the end, or "error TEXT" when it
// stops on an exception.
HuntOutcome hunt_in_worker(int64_t first, const WorkerHunt& hunt) {
  WorkerProcess worker;
  worker.start(
      [&](FILE*, int out) {
        // A case's result is sent with the next "start" (or "done") in one write: to its parent
        // the worker is never between cases, where a kill (the out-of-memory killer's, say) could
        // not be put down to a case. The kernel's count of out-of-memory kills is read here,
        // before each case, as the parent may be busy writing the last case's finding when a
        // kill comes.
        std::string pending;
        try {
          hunt.prepare();
          for (int64_t index = first; !hunt.should_stop(index); ++index) {
            pending += "start " + std::to_string(index) + " " + std::to_string(oom_kills()) + "\n";
            write_all(out, pending);
            pending.clear();  // sent: an exception in this case must not send it again
            json line = to_json(hunt.check(index));
            line["case"] = index;
            pending = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
          }
          pending += "done\n";
        } catch (const std::exception&) {
          write_all(out, pending);
          throw;  // "error TEXT" from WorkerProcess
        }
        write_all(out, pending);
      },
      false);
  HuntOutcome outcome;
  std::optional<int64_t> in_progress;
  int64_t kills_before = -1;  // the out-of-memory kills when the case in progress started
  for (std::optional<std::string> line; (line = worker.read_line());) {
    if (*line == "done") {
      outcome.finished = true;
    } else if (line->rfind("start ", 0) == 0) {
      std::size_t end = 0;
      in_progress = std::stoll(line->substr(6), &end);
      kills_before = std::stoll(line->substr(6 + end));
      outcome.started = true;
    } else if (line->rfind("error ", 0) == 0) {
      outcome.error = line->substr(6);
    } else {
      const json j = json::parse(*line);
      hunt.handle(j.at("case").get<int64_t>(), case_result_from_json(j));
      in_progress.reset();
    }
  }
  outcome.status = worker.stop();
  if (!outcome.finished) outcome.crashed_case = in_progress;
  outcome.killed_for_memory = outcome.crashed_case && killed_for_memory(worker.status(), kills_before);
  return outcome;
}

}  // namespace recheck::runner
