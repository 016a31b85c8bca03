// Independent tasks in worker processes: tasks 0..count-1, worker j of `jobs` running tasks j,
// j + jobs, ... in a child of its own, each task's answer a line of text. The answers come back
// by task index, so that what is made of them does not depend on the number of jobs. `recheck
// mutants --jobs N` hunts its mutants so.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace recheck::runner {

struct TaskAnswer {
  std::optional<std::string> text;  // the task's answer; none when its worker died in it
  std::string died;                 // then how ("was killed by signal 6 (Aborted)")
  std::string error;                // and what it said, when an exception ended it
};

// Runs `task` for 0..count-1 in `jobs` worker processes (their answers must not hold a
// newline) and returns every answer by task index. A task that ends its worker (a crash, an
// exception) is answered by how the worker died and what it said, and a new worker goes on from
// the next. Tasks not run because of an
// interrupt (runner/interrupts.h: it reaches every worker) have neither text nor `died`.
std::vector<TaskAnswer> run_tasks(int jobs, int64_t count, const std::function<std::string(int64_t index)>& task);

}  // namespace recheck::runner
