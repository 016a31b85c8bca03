#include "runner/pool.h"

#include <memory>

#include "runner/interrupts.h"
#include "runner/worker_process.h"

namespace recheck::runner {

namespace {

struct PoolWorker {
  WorkerProcess process;
  int64_t next = 0;
  std::optional<int64_t> in_progress;
};

}  // namespace

std::vector<TaskAnswer> run_tasks(int jobs, int64_t count, const std::function<std::string(int64_t index)>& task) {
  const int64_t stride = jobs < 1 ? 1 : jobs;
  std::vector<TaskAnswer> answers(static_cast<size_t>(count));
  std::vector<std::unique_ptr<PoolWorker>> workers;
  // The line protocol, worker to parent: "start I" before task I, "answer I TEXT" after it.
  auto start = [&](PoolWorker& w) {
    w.in_progress.reset();
    const int64_t first = w.next;
    w.process.start(
        [&, first](FILE*, int out) {
          for (int64_t index = first; index < count && !interrupted(); index += stride) {
            write_all(out, "start " + std::to_string(index) + "\n");
            write_all(out, "answer " + std::to_string(index) + " " + task(index) + "\n");
          }
        },
        false);
  };
  for (int64_t j = 0; j < stride && j < count; ++j) {
    workers.push_back(std::make_unique<PoolWorker>());
    workers.back()->next = j;
    start(*workers.back());
  }
  for (;;) {
    std::vector<PoolWorker*> watched;
    std::vector<WorkerProcess*> running;
    for (const auto& w : workers) {
      if (!w->process.running()) continue;
      watched.push_back(w.get());
      running.push_back(&w->process);
    }
    if (running.empty()) break;
    for (const size_t k : wait_for_output(running)) {  // none after an interrupt
      PoolWorker& w = *watched[k];
      bool ended = false;
      for (const std::string& line : w.process.read_available(ended)) {
        if (line.rfind("start ", 0) == 0) {
          w.in_progress = std::stoll(line.substr(6));
        } else if (line.rfind("answer ", 0) == 0) {
          std::size_t end = 0;
          const int64_t index = std::stoll(line.substr(7), &end);
          answers[static_cast<size_t>(index)].text = line.substr(7 + end + 1);
          w.in_progress.reset();
          w.next = index + stride;
        } else if (line.rfind("error ", 0) == 0 && w.in_progress) {
          answers[static_cast<size_t>(*w.in_progress)].error = line.substr(6);
        }
      }
      if (!ended) continue;
      const std::string how = w.process.stop();
      if (!w.in_progress || interrupted()) continue;  // done, or interrupted: left out
      answers[static_cast<size_t>(*w.in_progress)].died = how;
      w.next = *w.in_progress + stride;
      if (w.next < count) start(w);
    }
  }
  return answers;
}

}  // namespace recheck::runner
