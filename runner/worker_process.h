// One worker process: a child forked to do work this process must survive (checking cases: an
// abort or a segmentation fault in a variant ends the worker, not recheck; asking CUDA, which a
// child forked after it started here could not use). The child gets the death signal (it ends
// with its parent, never left computing), the parent talks to it in lines over pipes, and how
// it ended is read once, by `stop`.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace recheck::runner {

// How a case that ran past its time (a hang) is told: "the worker process did not finish the case
// within 300 s ..." (a run's finding), "the check process did not finish ..." (a replay's).
inline constexpr const char* kHangWords = "did not finish the case within";
// How long a case may run before it is taken for a hang, unless a command is told otherwise
// (--case-seconds): a case takes milliseconds on CPU, a real model's seconds on a GPU.
inline constexpr double kCaseSeconds = 300;
inline bool is_hang(const std::string& how) { return how.find(kHangWords) != std::string::npos; }

// "was killed by signal 9 (Killed)", "exited with status 3": how a process ended (waitpid).
std::string describe_status(int status);

// Writes all of `text` to `fd`, in one write where the pipe has room; false when it cannot
// (EPIPE: SIGPIPE is ignored).
bool write_all(int fd, const std::string& text);

// How many processes the kernel's out-of-memory killer has ended since boot (`oom_kill` in
// /proc/vmstat, Linux 4.13 on), or -1 where that cannot be read. RECHECK_VMSTAT names another
// file to read instead, for the tests: a real out-of-memory kill cannot be caused safely on a
// shared machine.
int64_t oom_kills();

// The memory the kernel says is available for new work (`MemAvailable` in /proc/meminfo), in
// bytes, or -1 where that cannot be read. RECHECK_MEMINFO names another file to read instead,
// for the tests.
int64_t memory_available();

// A process that ended with `status` was ended by the out-of-memory killer, as far as anyone can
// tell: by SIGKILL (which recheck itself sends only after an interrupt), while the kernel's count
// of such kills went up since `kills_before`. A case too large for the machine's memory is then
// skipped, not a crash: the variant did not crash, the machine ran out.
bool killed_for_memory(int status, int64_t kills_before);

// What the child runs: it reads lines from `from_parent` (null without an input pipe) and
// writes lines to `to_parent` (a file descriptor: one write_all a message, so that the parent
// never sees half of one but where the child died writing it). The child exits 0 when it
// returns; when it throws, it writes "error TEXT" (TEXT: error_line) and exits 3.
using WorkerBody = std::function<void(FILE* from_parent, int to_parent)>;

// Makes forking this process cheaper, for a process about to fork a child per case: its private
// anonymous memory (the heap, and the mappings Python and torch allocated while importing) is
// moved onto 2 MiB pages where at least half of each 2 MiB is already resident (madvise
// MADV_COLLAPSE, Linux 6.1 on), so that fork() copies one entry per 2 MiB instead of 512 and
// exit tears down as many. A child that writes to such a page still gets its own 4 KiB copy.
// Best effort: a kernel without it, or memory it cannot collapse, is left as it was. Returns the
// bytes it asked for that are on 2 MiB pages now.
int64_t collapse_onto_huge_pages();

class WorkerProcess;

// For a parent watching several running children: waits until one or more has output (or has
// ended) and returns their positions in `children`; none when a signal (an interrupt) cut the
// wait short, or when `timeout_ms` passed first (-1: no limit). Throws std::runtime_error when
// poll fails.
std::vector<size_t> wait_for_output(const std::vector<WorkerProcess*>& children, int timeout_ms = -1);

class WorkerProcess {
 public:
  WorkerProcess() = default;
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  ~WorkerProcess() { stop(); }

  // Forks a child running `body`. `with_input`: a pipe from this process to the child.
  // `takes_interrupts`: an interrupt is passed on to it (runner/interrupts.h), and one that came
  // before it started kills it at once. Throws std::runtime_error when pipe or fork fail.
  void start(const WorkerBody& body, bool with_input, bool takes_interrupts = true);
  bool running() const { return pid_ != 0; }
  pid_t pid() const { return pid_; }

  // False when the child is gone (EPIPE).
  bool send(const std::string& line);
  // The next whole line from the child without its newline; nothing at the end of its output,
  // or for a line cut short (the child died writing it).
  std::optional<std::string> read_line();

  // For a parent that watches several children (poll): the descriptor the child's lines come
  // on, and the whole lines that have come, reading once without waiting when `fd` is
  // readable. Sets `ended` at the end of the child's output (a line cut short is dropped). Not
  // to be mixed with read_line on the same child.
  int output_fd() const;
  std::vector<std::string> read_available(bool& ended);

  // Closes the pipes, waits for the child and says how it ended ("" when none ran); status()
  // keeps the waitpid status.
  std::string stop();
  // As stop, but a child still running `seconds` after its pipes closed (a hang: a deadlock, an
  // endless loop) is killed with SIGKILL, and then said so: "did not end within 300 s and was
  // killed". 0: waits as long as it takes, as stop does.
  std::string stop_within(double seconds);
  int status() const { return status_; }

 private:
  pid_t pid_ = 0;
  int status_ = 0;
  int to_child_ = -1;
  FILE* from_child_ = nullptr;
  std::string pending_;  // read_available's part of a line
  bool takes_interrupts_ = true;

  void close_pipes();
};

}  // namespace recheck::runner
