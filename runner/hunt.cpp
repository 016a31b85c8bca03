#include "runner/hunt.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/interrupts.h"
#include "runner/results_json.h"
#include "runner/worker_process.h"

namespace recheck::runner {

using nlohmann::json;

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// How a fork of this worker ended, made this worker's: killed by a signal, it ends this process by
// the same one (the parent reports the case lost, or skipped where the out-of-memory killer sent
// it); an exception in it ("error TEXT") is thrown here. Returns its one line.
std::string line_of_fork(WorkerProcess& fork, const std::optional<std::string>& line, const std::string& what) {
  const std::string ended = fork.stop();
  if (WIFSIGNALED(fork.status())) {
    signal(WTERMSIG(fork.status()), SIG_DFL);
    raise(WTERMSIG(fork.status()));
  }
  if (line && line->rfind("error ", 0) == 0) throw std::runtime_error(line->substr(6));
  if (!line || fork.status() != 0) throw std::runtime_error("the process " + what + " " + ended);
  return *line;
}

// A fresh process for each case: a fork of this worker (which imported the code under test and
// called none of it) that prepares (the tensor-parallel group's threads, which a fork would not
// have, start there), is handed one case, checks it and ends. The next case's fork is made and
// prepares while this one's checks: preparing waits on sockets more than it computes.
class FreshForks {
 public:
  explicit FreshForks(const WorkerHunt& hunt) : hunt_(hunt) {
    // Tried once in a fork of its own, so that cases that cannot run here stop the hunt with the
    // reason, as they do without forks.
    WorkerProcess trial;
    trial.start([&](FILE*, int out) { hunt_.prepare(); write_all(out, "ready\n"); }, /*with_input=*/false);
    const std::optional<std::string> line = trial.read_line();
    (void)line_of_fork(trial, line, "preparing the cases");
    next_ = start();
  }

  json check(int64_t index) {
    std::unique_ptr<WorkerProcess> fork = std::move(next_);
    (void)fork->send(std::to_string(index) + "\n");  // a fork that died preparing says so below
    next_ = start();
    const std::optional<std::string> line = fork->read_line();
    return json::parse(line_of_fork(*fork, line, "checking case " + std::to_string(index)));
  }

 private:
  std::unique_ptr<WorkerProcess> start() {
    auto fork = std::make_unique<WorkerProcess>();
    fork->start(
        [&](FILE* in, int out) {
          hunt_.prepare();
          char text[32];
          if (std::fgets(text, sizeof text, in) == nullptr) std::_Exit(0);  // no case came: the worker ended
          const int64_t index = std::stoll(text);
          write_all(out, to_json(hunt_.check(index)).dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
        },
        /*with_input=*/true);
    return fork;
  }

  const WorkerHunt& hunt_;
  std::unique_ptr<WorkerProcess> next_;
};

// One worker's line protocol, worker to parent: "start N K" before case N (K: the out-of-memory
// kills so far, oom_kills), the case's result as JSON after it, "done" at the end, or "error
// TEXT" when it stops on an exception.
void worker_body(int64_t first, int64_t stride, const WorkerHunt& hunt, int out) {
  // A case's result is sent with the next "start" (or "done") in one write: to its parent the
  // worker is never between cases, where a kill (the out-of-memory killer's, say) could not be
  // put down to a case. The kernel's count of out-of-memory kills is read here, before each
  // case, as the parent may be busy writing the last case's finding when a kill comes.
  std::string pending;
  try {
    std::optional<FreshForks> forks;
    if (hunt.fresh_process_per_case) {
      forks.emplace(hunt);
    } else {
      hunt.prepare();
    }
    for (int64_t index = first; !hunt.should_stop(index); index += stride) {
      pending += "start " + std::to_string(index) + " " + std::to_string(oom_kills()) + "\n";
      write_all(out, pending);
      pending.clear();  // sent: an exception in this case must not send it again
      json line = forks ? forks->check(index) : to_json(hunt.check(index));
      line["case"] = index;
      pending = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    }
    pending += "done\n";
  } catch (const std::exception&) {
    write_all(out, pending);
    throw;  // "error TEXT" from WorkerProcess
  }
  write_all(out, pending);
}

// A worker and where it is: cases `next`, `next` + stride, ... are still to come from it.
struct Worker {
  WorkerProcess process;
  int64_t next = 0;
  std::optional<int64_t> in_progress;
  int64_t kills_before = -1;  // the out-of-memory kills when the case in progress started
  bool started = false;       // it began a case
  bool finished = false;      // it said "done"
  bool hung = false;          // killed for running past the case's time
  std::chrono::steady_clock::time_point since;  // when the case in progress started
  std::string error;
};

using Event = std::variant<CaseResult, CaseLost>;

}  // namespace

HuntOutcome hunt_in_workers(int jobs, const WorkerHunt& hunt) {
  const int64_t stride = jobs < 1 ? 1 : jobs;
  std::vector<std::unique_ptr<Worker>> workers;
  HuntOutcome outcome;
  auto start = [&](Worker& w) {
    w.in_progress.reset();
    w.started = w.finished = w.hung = false;
    w.error.clear();
    const int64_t first = w.next;
    w.process.start([&, first](FILE*, int out) { worker_body(first, stride, hunt, out); }, false);
  };
  // A fork per case costs most of a case where the process that forks holds hundreds of MB
  // (Python with torch imported): on 2 MiB pages, before the workers fork from here and share
  // them, a fork copies 512 times fewer page table entries. RECHECK_FORK_HUGE_PAGES=0 leaves
  // the memory as it is (to measure the difference).
  const char* huge = std::getenv("RECHECK_FORK_HUGE_PAGES");
  if (hunt.fresh_process_per_case && !(huge != nullptr && std::string(huge) == "0")) (void)collapse_onto_huge_pages();
  for (int64_t j = 0; j < stride; ++j) {
    workers.push_back(std::make_unique<Worker>());
    workers.back()->next = j;
    if (!hunt.should_stop(j)) start(*workers.back());
  }

  // Results wait here until every case before them is in (or will never come).
  std::map<int64_t, Event> ready;
  auto release = [&](bool all) {
    int64_t frontier = kNever;  // the first case a worker may still report
    if (!all) {
      for (const auto& w : workers) {
        if (w->process.running()) frontier = std::min(frontier, w->in_progress.value_or(w->next));
      }
    }
    while (!ready.empty() && ready.begin()->first < frontier) {
      const auto& [index, event] = *ready.begin();
      if (const CaseResult* result = std::get_if<CaseResult>(&event)) {
        hunt.handle(index, *result);
      } else {
        hunt.lost(index, std::get<CaseLost>(event));
      }
      ready.erase(ready.begin());
    }
  };
  auto stop_all = [&] {
    for (const auto& w : workers) {
      if (w->process.running()) {
        kill(w->process.pid(), SIGKILL);
        w->process.stop();
      }
    }
  };

  for (;;) {
    std::vector<Worker*> watched;
    std::vector<WorkerProcess*> running;
    for (const auto& w : workers) {
      if (!w->process.running()) continue;
      watched.push_back(w.get());
      running.push_back(&w->process);
    }
    if (running.empty()) break;
    // Waits no longer than the first case in progress may still run.
    int timeout_ms = -1;
    if (hunt.case_seconds > 0) {
      const auto now = std::chrono::steady_clock::now();
      for (const Worker* w : watched) {
        if (!w->in_progress || w->hung) continue;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            w->since + std::chrono::duration<double>(hunt.case_seconds) - now);
        const int ms = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(left.count() + 1, 60000)));
        timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
      }
    }
    std::vector<size_t> has_output;
    try {
      has_output = wait_for_output(running, timeout_ms);  // none after an interrupt or the timeout
    } catch (const std::runtime_error& error) {
      outcome.failed = error.what();
      stop_all();
      break;
    }
    for (const size_t k : has_output) {
      Worker& w = *watched[k];
      bool ended = false;
      for (const std::string& line : w.process.read_available(ended)) {
        if (line == "done") {
          w.finished = true;
        } else if (line.rfind("start ", 0) == 0) {
          std::size_t end = 0;
          w.in_progress = std::stoll(line.substr(6), &end);
          w.kills_before = std::stoll(line.substr(6 + end));
          w.started = true;
          w.since = std::chrono::steady_clock::now();
        } else if (line.rfind("error ", 0) == 0) {
          w.error = line.substr(6);
        } else {
          const json j = json::parse(line);
          const int64_t index = j.at("case").get<int64_t>();
          ready.emplace(index, case_result_from_json(j));
          w.in_progress.reset();
          w.next = index + stride;
        }
      }
      if (!ended) continue;
      const std::string status = w.process.stop();
      if (w.finished || interrupted()) {
        w.in_progress.reset();  // interrupted: the case in progress is left out
        continue;
      }
      if (!w.in_progress) {
        outcome.failed = std::string(w.started ? "the worker stopped between cases" : "the worker could not start") +
                         " (" + status + ")" + (w.error.empty() ? "" : ": " + w.error);
        continue;
      }
      const int64_t index = *w.in_progress;
      if (w.hung) {
        std::ostringstream hung;
        hung << kHangWords << " " << hunt.case_seconds << " s (--case-seconds) and was killed";
        ready.emplace(index, CaseLost{false, true, hung.str(), w.error});
      } else {
        ready.emplace(index, CaseLost{killed_for_memory(w.process.status(), w.kills_before), false, status, w.error});
      }
      w.in_progress.reset();
      w.next = index + stride;
      if (outcome.failed.empty() && !hunt.should_stop(w.next)) start(w);
    }
    if (!outcome.failed.empty()) {
      stop_all();
      break;
    }
    // A case past its time: its worker is killed; its end comes through the loop as any other.
    if (hunt.case_seconds > 0) {
      const auto now = std::chrono::steady_clock::now();
      for (Worker* w : watched) {
        if (!w->process.running() || !w->in_progress || w->hung) continue;
        if (now - w->since < std::chrono::duration<double>(hunt.case_seconds)) continue;
        w->hung = true;
        kill(w->process.pid(), SIGKILL);
      }
    }
    release(false);
  }
  release(true);
  return outcome;
}

}  // namespace recheck::runner
