// recheck: the command-line tool, a thin layer over the core.
//   recheck run      draw random cases, check every property, print a table of verdicts
//   recheck repro    replay one case file, print each property's verdict and evidence
//   recheck show     print a case file's graph as indented text
//   recheck minimize shrink a failing case (JSON or a fuzzer's crash file) to a small JSON case
//   recheck replay   replay corpus cases and check the expectation each one records
//   recheck fuzz-seeds  write byte inputs for recheck_fuzz_check covering every op and arg kind
//   recheck variants list the checkpoint variants
//   recheck mutants  hunt every mutant variant: killed or survived, by what, after how many cases
//   recheck memory   the PR's memory measurement, reproduced on a synthetic residual-stream model
//   recheck bench    cases/s, op executions/s and the check-to-eager cost ratio, single thread
// Exit codes: 0 no regression, 1 regression or divergence found, 2 bad usage, bad input, an
// output that cannot be written, or a device that cannot run the case (one line on stderr),
// 128 + the signal (130, 143) when Ctrl-C or SIGTERM cut a command short and it found nothing.
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ATen/Parallel.h>

#include "core/case.h"
#include "core/errors.h"
#include "core/interpreter.h"
#include "oracles/eager.h"
#include "properties/export_python.h"
#include "properties/generator.h"
#include "properties/reduce.h"
#include "properties/report.h"
#include "suts/checkpoint.h"
#ifdef RECHECK_WITH_PYTHON
#include "python/bridge.h"
#endif

namespace {

using namespace recheck;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The first line of an error's text, at most 300 characters: recheck's errors are one line.
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

// recheck's own error messages in one line: a control character (a newline in a file name) is
// written escaped, "\n", instead of splitting the message or cutting it at the name.
std::string one_line(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += ch;
    }
  }
  return out;
}

// The one line recheck prints for an error that ends a command, in its own process or in a
// worker (which sends it to its parent as is): recheck's own errors whole, control characters
// escaped; libtorch's and the library's cut to their first line, without libtorch's backtrace.
std::string error_line(const std::exception& error) {
  if (dynamic_cast<const UsageError*>(&error) != nullptr || dynamic_cast<const CaseError*>(&error) != nullptr ||
      dynamic_cast<const OutputError*>(&error) != nullptr) {
    return one_line(error.what());
  }
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) {
    return one_line(first_line(torch_error->what_without_backtrace()));
  }
  return one_line(first_line(error.what()));
}

// `--name value`, `--name=value` and bare flags; positional arguments in order.
class Args {
 public:
  Args(int argc, char** argv, int first, std::set<std::string> flags, std::set<std::string> options)
      : flags_(std::move(flags)), options_(std::move(options)) {
    bool options_ended = false;
    for (int i = first; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--" && !options_ended) {  // what follows is positional, "-x.json" say
        options_ended = true;
        continue;
      }
      if (options_ended || arg.rfind("--", 0) != 0) {
        positional_.push_back(arg);
        continue;
      }
      std::string name = arg.substr(2);
      std::string value;
      bool has_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      // Given twice, an option is refused: which of the two did the user mean?
      if (values_.count(name)) throw UsageError("--" + name + " given twice");
      if (flags_.count(name)) {
        if (has_value) throw UsageError("--" + name + " takes no value");
        values_[name] = "1";
      } else if (options_.count(name)) {
        if (!has_value) {
          if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
          value = argv[++i];
        }
        values_[name] = value;
      } else {
        throw UsageError("unknown option --" + name);
      }
    }
  }
  bool flag(const std::string& name) const { return values_.count(name) != 0; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  int64_t number(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
    if (!has(name)) return fallback;
    const std::string text = get(name, "");
    try {
      size_t used = 0;
      const long long value = std::stoll(text, &used);
      if (used != text.size() || value < min || value > max) throw std::out_of_range(text);
      return value;
    } catch (const std::exception&) {
      throw UsageError("--" + name + ": expected a whole number from " + std::to_string(min) + " to " +
                       std::to_string(max) + ", got '" + text + "'");
    }
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> flags_;
  std::set<std::string> options_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

const char* kMainHelp = R"(recheck: differential tests for activation-checkpoint autograd functions

usage: recheck <command> [options]

commands:
  run        draw random cases, check every property of a variant against the oracle
  repro      replay one case file and print each property's verdict and evidence
  show       print a case file's graph as indented text
  minimize   shrink a failing case (JSON, or a fuzzer's crash file) to a small JSON case
  replay     replay corpus cases (files or folders) and check what each one records it shows
  export-python  write a case as a standalone Python script that asserts a property with torch
             (and megatron-core) alone, for an upstream issue
  fuzz-seeds write a seed corpus for recheck_fuzz_check that reaches every op and argument kind
  variants   list the checkpoint variants
  mutants    run the suite against every mutant variant and print which it kills, how fast
  memory     measure the allocator floor and peak of sut and oracle on a residual-stream model
  bench      measure cases/s, op executions/s and the cost of a check against a plain eager run

`recheck <command> --help` describes each command.
exit codes: 0 no regression, 1 regression or divergence found, 2 bad usage, bad input, or a
device or variant that cannot run in this process (run says which)
)";

const char* kRunHelp = R"(usage: recheck run [options]

Draws random nested checkpoint cases and runs each three ways (eager, oracle, sut), then checks
every property and classifies it: pass, regression, pre-existing, fixed, divergent.

options:
  --sut NAME        variant under test (default: clearing)
  --oracle NAME     reference variant (default: nonclearing)
  --seed N          first draw seed; case i uses seed N+i (default: random, printed)
  --cases N         number of cases to check
  --seconds S       time budget (default 60 when --cases is not given)
  --device D        cpu or cuda (default: cpu)
  --max-depth N     deepest checkpoint nesting (default 4)
  --max-ops N       most ops per segment (default 6)
  --out DIR         folder for failing cases as JSON (default: recheck-findings)
  --json FILE       write a machine-readable report ('-' for standard output)
  --quiet           no progress lines
  --threads N       torch's intra-op threads for the checks (default, or 0: torch's own choice)
  --cpu-memory-budget B  on CPU, refuse allocations beyond B bytes per run, as a device of
                    that size would: such cases are counted as skipped, not failed
  --no-isolate      check cases in this process (for a debugger); by default they run in a
                    worker process, and a case that crashes it (abort, segmentation fault) is
                    reported as a `crash` finding with its case saved, and the run goes on;
                    a worker the kernel's out-of-memory killer ends is a skipped case instead

Ctrl-C or SIGTERM stops the run within a second: the summary so far, a complete --json report
marked interrupted. Exit codes: 0 nothing found; 1 a regression, divergence or crash; 2 bad
usage, or the cases cannot run (the device, a variant); 130 (143 for SIGTERM) interrupted with
nothing found, so that a cancelled CI job does not read green.
)";

const char* kReproHelp = R"(usage: recheck repro CASE [--sut NAME] [--oracle NAME] [--json FILE] [--limits LIST] [--bytes]

Replays one case (eager, oracle, sut) and prints the graph, then each property's verdict with
its evidence. Exit code 1 when a property shows a regression or a divergence.

CASE is a JSON case file, or an input of the fuzz target recheck_fuzz_check (a crash file, a
corpus entry), which is decoded the way the target decodes it. A file named *.json, or whose
text starts with '{', is read as JSON; any other is read as fuzzer bytes; --bytes forces bytes.
--device cpu|cuda is the device a fuzzer input decodes to (default cpu).

--limits name=value,...  raises or lowers the limits a case file is held to; the names and
                         defaults: file_bytes=67108864, ops=100000, depth=64,
                         leaf_elements=16777216, leaf_bytes=1073741824,
                         value_bytes=17179869184, iterations=100
--no-isolate      check in this process (for a debugger); by default the case is checked in a
                  child process, so that a case crashing a variant is reported as
                  runs-to-completion crash (exit code 1), as `recheck run` reports it
)";

const char* kShowHelp = R"(usage: recheck show CASE [--limits LIST] [--bytes] [--json]

Prints the case's graph as indented text: leaves, ops, checkpoint bodies (marked with |), or
with --json the case as JSON (a fuzzer input turned into a case file). CASE, --bytes and
--limits as for `recheck repro`.
)";

const char* kMinimizeHelp = R"(usage: recheck minimize CASE [--sut NAME] [--oracle NAME] [--property NAME] [--out FILE]

Shrinks a failing case while the same property keeps failing the same way (the same
classification: regression or divergent), and writes the smallest case found as JSON, with a
note saying what it shows and the expectations `recheck replay` checks. The reducer drops ops,
inlines checkpoints and forks, drops checkpoint arguments, outputs and unused leaves, shrinks
shapes, and simplifies the dtype, the iteration count and requires_grad flags.

CASE is a JSON case or a fuzzer input (as for `recheck repro`: --bytes, --device, --limits).
--sut NAME        the variant the case fails on (default clearing)
--oracle NAME     reference variant (default nonclearing)
--property NAME   the property to keep failing (default: the first that raises an alarm); with
                  it, a pre-existing finding (the oracle fails too) can be minimized as well
--out FILE        where to write the minimized case (default: CASE's name + .min.json)
--no-isolate      check in this process (for a debugger). By default every check runs in a
                  worker process: a case that crashes it (an abort, a segmentation fault in the
                  variant) is minimized as runs-to-completion crash, and a candidate that crashes
                  it while another alarm is minimized is a candidate that does not show it.
Ctrl-C (or SIGTERM) stops at the candidate in progress and writes the smallest case so far.
Exit codes: 0 minimized and written; 2 bad input, or the case shows no alarm to minimize;
130 (143 for SIGTERM) interrupted, the smallest case so far written.
)";

const char* kFuzzSeedsHelp = R"(usage: recheck fuzz-seeds DIR [--seed N] [--tries N]

Writes a seed corpus for the fuzz target recheck_fuzz_check into DIR: random byte strings (16 to
200 bytes, from --seed, default 1), each kept when the case it decodes to reaches an op kind or a
corner (case_features: argument kinds, RNG sources, nesting, ...) that no kept input reached
before. Stops after --tries inputs (default 20000). A campaign needs seeds when its targets are
built with gcc (no coverage instrumentation) and starts faster with them in any case.
)";

const char* kReplayHelp = R"(usage: recheck replay PATH... [--oracle NAME] [--json FILE] [--limits LIST]

Replays corpus cases: every *.json under each folder given, and each file given, and checks
what each case records under "expect": for each {sut, property, classification} that `property`
is classified `classification` when `sut` is checked against the oracle. Property "*" with
classification "no-alarm" means no property raises an alarm. A case without expectations is
expected to raise no alarm on the correct variant `clearing`. Property "runs-to-completion" with
classification "crash" (a crash finding of `recheck run`) means the variant crashes the process
checking the case: that variant is checked in a child process. Prints one line per expectation;
an expectation this build or machine cannot check (a Python variant without the bridge, a CUDA
case without CUDA, a case too large for its memory) is printed as skipped. --limits as for show.
Exit codes: 0 every expectation holds; 1 one does not; 2 a file is not a valid case.
)";

std::atomic<bool> g_interrupted{false};
// The signal that set g_interrupted: a command it cut short exits 128 + that number (130 for
// Ctrl-C, 143 for SIGTERM) unless it found something (1).
volatile sig_atomic_t g_interrupt_signal = 0;

// Standard output, when `--json -` gives it to the report (std::cout then writes to stderr).
std::unique_ptr<std::ostream> g_report_stream;

// Set once this process checks cases in worker processes: a second Ctrl-C then kills the worker
// in progress, if any, and never recheck itself (which still has a report or a case to write).
volatile sig_atomic_t g_workers_used = 0;

// The worker process of `recheck run`, while one runs: an interrupt is passed on to it.
volatile sig_atomic_t g_worker_pid = 0;

// Ctrl-C (or SIGTERM, which SLURM sends at a job's time limit) ends the loop in progress after
// the current case; the summary so far is printed. A worker still in its case 0.4 s later is
// killed (a case of 40 ops nested 8 deep can take a minute), and so is one at a second Ctrl-C:
// the case in progress is then left out, neither counted nor reported.
void stop_on_interrupt() {
  auto interrupt = [](int signal) {
    const bool again = g_interrupted.exchange(true);
    if (!again) g_interrupt_signal = signal;
    if (g_worker_pid <= 0) {
      // A second one where cases run in this process (--no-isolate) ends recheck at once, as
      // if no handler were set: signal() and raise() are safe in a handler.
      if (again && !g_workers_used) {
        std::signal(signal, SIG_DFL);
        std::raise(signal);
      }
      return;
    }
    if (again) {
      kill(static_cast<pid_t>(g_worker_pid), SIGKILL);
    } else {
      kill(static_cast<pid_t>(g_worker_pid), SIGINT);
      // A plain system call (Linux): safe in a signal handler.
      const itimerval grace{{0, 0}, {0, 400000}};
      setitimer(ITIMER_REAL, &grace, nullptr);
    }
  };
  std::signal(SIGINT, interrupt);
  std::signal(SIGTERM, interrupt);
  std::signal(SIGALRM, [](int) {
    if (g_worker_pid > 0) kill(static_cast<pid_t>(g_worker_pid), SIGKILL);
  });
}


// Text that is not UTF-8 (a file name's bytes in a note or a path) is written with U+FFFD in
// its place: nlohmann::json would throw at the end of the work, losing the report.
void write_json_report(const std::string& where, const json& report) {
  if (where == "-") {
    (g_report_stream ? *g_report_stream : std::cout) << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    write_file_atomically(where, report.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  }
}

// Refuses, before any work, an output file that cannot be put in place: its folder missing or
// not a folder, or a folder where the file should go. A run or a minimization must not end by
// losing what it found. (Permissions are left to the write itself, which names the cause.)
void check_output_file(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  if (path.empty()) throw UsageError(option + ": an empty file name");
  std::error_code error;
  if (fs::is_directory(path, error)) throw UsageError(option + ": " + path + " is a folder, not a file");
  const fs::path folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(folder, error)) {
    throw UsageError(option + ": " + path + ": no folder " + folder.string() + " to write it in");
  }
  if (fs::path(path).filename().string().size() > 255) {
    throw UsageError(option + ": " + path + ": the file name is over 255 bytes");
  }
  if (access(folder.c_str(), W_OK) != 0) {
    throw UsageError(option + ": " + path + ": cannot write in " + folder.string() + ": " + std::strerror(errno));
  }
}

void check_output_files(const Args& args, std::initializer_list<const char*> options) {
  for (const char* option : options) {
    if (args.has(option) && !(std::string(option) == "json" && args.get(option, "") == "-")) {
      check_output_file(args.get(option, ""), std::string("--") + option);
    }
  }
}

// A folder recheck creates when it first writes there: refused now if something other than a
// folder is in its way.
void check_output_folder(const std::string& dir, const std::string& option) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw UsageError(option + ": an empty folder name");
  std::error_code error;
  for (fs::path p = fs::absolute(dir, error); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, error)) {
      if (!fs::is_directory(p, error)) throw UsageError(option + ": " + dir + ": " + p.string() + " is not a folder");
      if (access(p.c_str(), W_OK) != 0) {
        throw UsageError(option + ": " + dir + ": cannot write in " + p.string() + ": " + std::strerror(errno));
      }
      return;
    }
    if (fs::is_symlink(fs::symlink_status(p, error))) {
      throw UsageError(option + ": " + dir + ": " + p.string() + " is a link to nothing (or a loop)");
    }
    if (p == p.parent_path()) return;
  }
}

void make_output_folder(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw OutputError(dir + ": cannot create the folder: " + error.message());
}

// A case on CUDA needs a CUDA device that works in this process (and variants ready for it):
// refused with the cause, naming the file, before anything runs.
void check_can_run(const std::string& device, const std::string& file, const CheckpointImplementation& oracle,
                   const CheckpointImplementation& sut) {
  try {
    check_ready_to_run(device == "cuda", oracle, sut);
  } catch (const std::exception& error) {
    throw CaseError(file + ": cannot run this case here: " + first_line(error.what()));
  }
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    return std::string("was killed by signal ") + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// How many processes the kernel's out-of-memory killer has ended since boot (`oom_kill` in
// /proc/vmstat, Linux 4.13 on), or -1 where that cannot be read. RECHECK_VMSTAT names another
// file to read instead, for the tests: a real out-of-memory kill cannot be caused safely on a
// shared machine.
int64_t oom_kills() {
  const char* path = std::getenv("RECHECK_VMSTAT");
  std::ifstream in(path != nullptr && *path != '\0' ? path : "/proc/vmstat");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return -1;
}

// A worker that ended with `status` was ended by the out-of-memory killer, as far as anyone can
// tell: by SIGKILL (which recheck itself sends only after an interrupt), while the kernel's count
// of such kills went up since `kills_before`. A case too large for the machine's memory is then
// skipped, not a crash: the variant did not crash, the machine ran out.
bool killed_for_memory(int status, int64_t kills_before) {
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && kills_before >= 0 && oom_kills() > kills_before;
}

// The result of a case whose check process the out-of-memory killer ended: skipped, saying so.
CaseResult skipped_for_memory() {
  CaseResult result;
  result.skipped = "the check process was killed by the kernel's out-of-memory killer: the machine ran out of memory";
  return result;
}

// Empty when `device` is available to this build and machine, else why not. CUDA is asked in a
// child process, once: CUDA started in this process could not be used by a worker forked after
// it (replay checks CUDA cases in workers).
std::string device_missing(const std::string& device) {
  auto ask = [&] {
    try {
      rng::check_device_available(device == "cuda" ? rng::Device::cuda : rng::Device::cpu);
      return std::string();
    } catch (const std::exception& error) {
      return first_line(error.what());
    }
  };
  if (device != "cuda") return ask();
  static std::optional<std::string> answer;
  if (answer) return *answer;
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    const std::string why = ask();
    const bool written = write(fds[1], why.data(), why.size()) == static_cast<ssize_t>(why.size());
    std::_Exit(written ? 0 : 1);
  }
  close(fds[1]);
  std::string why;
  char buffer[512];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    why.append(buffer, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) why = "the process that looked for a CUDA device " + describe_status(status);
  answer = why;
  return why;
}

// ---- the worker process of `recheck run` ----

json verdict_to_json(const Verdict& v) { return {{"holds", v.holds}, {"text", v.describe()}}; }

Verdict verdict_from_json(const json& j) {
  Verdict v;
  v.holds = j.at("holds").get<bool>();
  v.detail = j.at("text").get<std::string>();  // describe() gives it back unchanged
  return v;
}

Classification classification_from(const std::string& name) {
  for (size_t c = 0; c < kClassificationCount; ++c) {
    if (name == to_string(static_cast<Classification>(c))) return static_cast<Classification>(c);
  }
  throw std::runtime_error("unknown classification from the worker: " + name);
}

std::string result_line(int64_t index, const CaseResult& result) {
  json properties_json = json::array();
  for (const PropertyResult& r : result.results) {
    properties_json.push_back({{"property", r.property},
                               {"classification", to_string(r.classification)},
                               {"oracle", verdict_to_json(r.oracle)},
                               {"sut", verdict_to_json(r.sut)}});
  }
  return json{{"case", index}, {"op_executions", result.op_executions}, {"skipped", result.skipped},
              {"results", properties_json}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

CaseResult result_from_line(const json& j) {
  CaseResult result;
  result.op_executions = j.at("op_executions").get<int64_t>();
  result.skipped = j.at("skipped").get<std::string>();
  for (const json& r : j.at("results")) {
    result.results.push_back({r.at("property").get<std::string>(), verdict_from_json(r.at("oracle")),
                              verdict_from_json(r.at("sut")),
                              classification_from(r.at("classification").get<std::string>())});
  }
  return result;
}


struct WorkerOutcome {
  bool finished = false;                // the worker stopped by the run's own limits
  bool started = false;                 // it began at least one case
  std::optional<int64_t> crashed_case;  // the case in progress when it died
  bool killed_for_memory = false;       // by the out-of-memory killer, during crashed_case
  std::string status;
  std::string error;  // what it said when it stopped on an exception (prepare's, say)
};

// Writes all of `text` to `fd`, in one write where the pipe has room; false when it cannot
// (EPIPE: SIGPIPE is ignored).
bool write_all(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Ends a worker process, writing "error TEXT" first when it stopped on an exception, TEXT the
// line recheck would print for it without a worker: its parent reports it, with what it knows
// of the worker's end.
[[noreturn]] void end_worker(FILE* out, const std::exception* error) {
  if (error != nullptr) std::fprintf(out, "error %s\n", error_line(*error).c_str());
  std::fflush(out);
  std::_Exit(error != nullptr ? 3 : 0);
}

// Forks a worker that checks cases from `first` on and writes one line per case to a pipe:
// "start N K" before case N (K: the out-of-memory kills so far, oom_kills), its verdicts as
// JSON after it, "done" at the end, or "error TEXT" when it stops on an exception. `prepare`
// runs in the worker before the first case; if it throws, the worker stops before any case,
// saying why.
template <typename Prepare, typename ShouldStop, typename Check, typename Handle>
WorkerOutcome run_worker(int64_t first, const Prepare& prepare, const ShouldStop& should_stop, const Check& check,
                         const Handle& handle) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::cout.flush();
  std::cerr.flush();
  g_workers_used = 1;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // The worker ends with its parent, even one killed outright (no orphan left computing).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) std::_Exit(1);
    close(fds[0]);
    FILE* out = fdopen(fds[1], "w");
    // A case's result is sent with the next "start" (or "done") in one write: to its parent the
    // worker is never between cases, where a kill (the out-of-memory killer's, say) could not be
    // put down to a case. The kernel's count of out-of-memory kills is read here, before each
    // case, as the parent may be busy writing the last case's finding when a kill comes.
    std::string pending;
    try {
      prepare();
      for (int64_t index = first; !should_stop(index); ++index) {
        pending += "start " + std::to_string(index) + " " + std::to_string(oom_kills()) + "\n";
        write_all(fds[1], pending);
        pending = result_line(index, check(index)) + "\n";
      }
      pending += "done\n";
    } catch (const std::exception& error) {
      write_all(fds[1], pending);
      end_worker(out, &error);
    }
    write_all(fds[1], pending);
    end_worker(out, nullptr);
  }
  close(fds[1]);
  g_worker_pid = pid;
  FILE* in = fdopen(fds[0], "r");
  WorkerOutcome outcome;
  char* buffer = nullptr;
  size_t capacity = 0;
  std::optional<int64_t> in_progress;
  int64_t kills_before = -1;  // the out-of-memory kills when the case in progress started
  for (ssize_t n; (n = getline(&buffer, &capacity, in)) > 0;) {
    std::string line(buffer, static_cast<size_t>(n));
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (line == "done") {
      outcome.finished = true;
    } else if (line.rfind("start ", 0) == 0) {
      std::size_t end = 0;
      in_progress = std::stoll(line.substr(6), &end);
      kills_before = std::stoll(line.substr(6 + end));
      outcome.started = true;
    } else if (line.rfind("error ", 0) == 0) {
      outcome.error = line.substr(6);
    } else {
      const json j = json::parse(line);
      handle(j.at("case").get<int64_t>(), result_from_line(j));
      in_progress.reset();
    }
  }
  std::free(buffer);
  std::fclose(in);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_worker_pid = 0;
  outcome.status = describe_status(status);
  if (!outcome.finished) outcome.crashed_case = in_progress;
  outcome.killed_for_memory = outcome.crashed_case && killed_for_memory(status, kills_before);
  return outcome;
}

// What checking one case in a process of its own gave: the result, or how the process died.
struct IsolatedCheck {
  std::optional<CaseResult> result;
  std::string crash;  // "the check process was killed by signal 6 (Aborted)" when it died
};

// The property name and classification a crash is reported and recorded under (no property
// of the suite: the process checking the case died).
constexpr const char* kCrashProperty = "runs-to-completion";
constexpr const char* kCrash = "crash";

// A process of its own that checks the cases sent to it, one at a time, as `run`'s worker does:
// an abort or a segmentation fault inside a variant ends the worker, not recheck, and the next
// case starts a new one. `minimize` sends it every candidate, so a candidate that crashes costs
// a worker and not the minimization so far, and Ctrl-C kills a slow candidate 0.4 s on
// (stop_on_interrupt) instead of waiting for it. The device and variant checks run in it too:
// this process never starts CUDA, which a child forked after it cannot use.
class CaseWorker {
 public:
  // `device`: the device of the cases it will check (the candidates of one minimization share it).
  CaseWorker(const std::string& file, const std::string& device, CheckpointImplementation& oracle,
             CheckpointImplementation& sut, Limits limits)
      : file_(file), device_(device), oracle_(oracle), sut_(sut), limits_(limits) {}
  CaseWorker(const CaseWorker&) = delete;
  CaseWorker& operator=(const CaseWorker&) = delete;
  ~CaseWorker() { stop(); }

  // The result, or how the worker died checking `c`. Throws CaseError when the case cannot run
  // here (no CUDA, a variant that cannot start) or the check stopped on an error. A worker
  // found dead before it was sent the case (killed while idle) is replaced once.
  IsolatedCheck check(const Case& c) {
    const std::string line = to_json(c).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    if (pid_ == 0) start();
    const int64_t kills_before = oom_kills();
    if (!send(line)) {
      stop();
      start();
      send(line);
    }
    char* buffer = nullptr;
    std::size_t capacity = 0;
    const ssize_t n = getline(&buffer, &capacity, from_worker_);
    std::string answer = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
    std::free(buffer);
    IsolatedCheck outcome;
    // No answer, or a part of one (the worker died writing it): the check crashed.
    if (answer.empty() || answer.back() != '\n') {
      const std::string how = stop();
      if (killed_for_memory(status_, kills_before)) {
        outcome.result = skipped_for_memory();
      } else {
        outcome.crash = "the check process " + how;
      }
      return outcome;
    }
    answer.pop_back();
    if (answer.rfind("error ", 0) == 0) {
      stop();
      throw CaseError(answer.substr(6));
    }
    outcome.result = result_from_line(json::parse(answer));
    return outcome;
  }

  // Ends the worker (it stops at the end of its input) and says how it ended; "" if none ran.
  std::string stop() {
    if (pid_ == 0) return "";
    close(to_worker_);
    std::fclose(from_worker_);
    status_ = 0;
    while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    g_worker_pid = 0;
    pid_ = 0;
    return describe_status(status_);
  }

 private:
  // False when the worker is gone (EPIPE: SIGPIPE is ignored).
  bool send(const std::string& line) { return write_all(to_worker_, line); }

  void start() {
    int to[2];
    int from[2];
    if (pipe(to) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    if (pipe(from) != 0) {
      close(to[0]);
      close(to[1]);
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    std::cout.flush();
    std::cerr.flush();
    g_workers_used = 1;
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      for (int fd : {to[0], to[1], from[0], from[1]}) close(fd);
      throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) std::_Exit(1);
      close(to[1]);
      close(from[0]);
      FILE* in = fdopen(to[0], "r");
      FILE* out = fdopen(from[1], "w");
      try {
        check_can_run(device_, file_, oracle_, sut_);
        std::fprintf(out, "ready\n");
        std::fflush(out);
        char* buffer = nullptr;
        std::size_t capacity = 0;
        for (ssize_t n; (n = getline(&buffer, &capacity, in)) > 0;) {
          const Case c = case_from_json(json::parse(std::string(buffer, static_cast<std::size_t>(n))), limits_);
          std::fprintf(out, "%s\n", result_line(0, check_case(c, oracle_, sut_)).c_str());
          std::fflush(out);
        }
      } catch (const std::exception& error) {
        end_worker(out, &error);
      }
      end_worker(out, nullptr);
    }
    close(to[0]);
    close(from[1]);
    pid_ = pid;
    g_worker_pid = pid;
    // An interrupt that came before g_worker_pid was set armed no timer to kill this worker.
    if (g_interrupted) kill(pid, SIGKILL);
    to_worker_ = to[1];
    from_worker_ = fdopen(from[0], "r");
    // "ready" once the device and the variants are checked, or why not.
    char* buffer = nullptr;
    std::size_t capacity = 0;
    const ssize_t n = getline(&buffer, &capacity, from_worker_);
    std::string first = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
    std::free(buffer);
    if (first == "ready\n") return;
    const std::string status = stop();
    if (first.rfind("error ", 0) == 0) throw CaseError(first.substr(6, first.size() - 7));
    throw CaseError(file_ + ": the check process " + status + " before the case");
  }

  std::string file_;
  std::string device_;
  CheckpointImplementation& oracle_;
  CheckpointImplementation& sut_;
  Limits limits_;
  pid_t pid_ = 0;
  int status_ = 0;  // how the last worker ended (waitpid)
  int to_worker_ = -1;
  FILE* from_worker_ = nullptr;
};

// Checks `c` in a process of its own, as `run` does, so that an abort or a segmentation fault
// inside a variant is reported, not suffered: `repro` and `replay` of a crash finding replay the
// crash. Throws CaseError when the case cannot run there.
IsolatedCheck check_isolated(const Case& c, const std::string& file, CheckpointImplementation& oracle,
                             CheckpointImplementation& sut, const Limits& limits = {}) {
  CaseWorker worker(file, c.device, oracle, sut, limits);
  return worker.check(c);
}

int command_run(const Args& args) {
  if (args.flag("help")) {
    std::cout << kRunHelp;
    return 0;
  }
  if (!args.positional().empty()) throw UsageError("run takes no positional argument: '" + args.positional()[0] + "'");
  const std::string sut_name = args.get("sut", "clearing");
  const std::string oracle_name = args.get("oracle", "nonclearing");
  std::unique_ptr<CheckpointImplementation> sut;
  std::unique_ptr<CheckpointImplementation> oracle;
  try {
    sut = make_checkpoint(sut_name);
    oracle = make_checkpoint(oracle_name);
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
  GenOptions gen;
  gen.device = args.get("device", "cpu");
  if (gen.device != "cpu" && gen.device != "cuda") throw UsageError("--device: expected cpu or cuda, got '" + gen.device + "'");
  gen.max_depth = static_cast<int>(args.number("max-depth", gen.max_depth, 0, 16));
  gen.max_ops = static_cast<int>(args.number("max-ops", gen.max_ops, 1, 64));
  gen = options_for(gen, *sut);
  const int64_t cases = args.number("cases", -1, 1, INT64_MAX / 2);
  const int64_t seconds = args.number("seconds", cases < 0 ? 60 : -1, 1, 365LL * 24 * 3600);
  const bool quiet = args.flag("quiet");
  const uint64_t seed = args.has("seed")
                            ? static_cast<uint64_t>(args.number("seed", 0, 0, INT64_MAX / 2))
                            : static_cast<uint64_t>(std::random_device{}() % 1000000000ULL);
  const std::string out_dir = args.get("out", "recheck-findings");
  check_output_folder(out_dir, "--out");
  check_output_files(args, {"json"});
  const int64_t threads = args.number("threads", 0, 0, 1024);
  RunOptions run_options;
  run_options.cpu_memory_budget = args.number("cpu-memory-budget", 0, 0, INT64_MAX / 2);

  std::cerr << "recheck run: sut " << sut->name() << " against oracle " << oracle->name() << ", seed " << seed
            << ", " << (cases > 0 ? std::to_string(cases) + " cases" : "") << (cases > 0 && seconds > 0 ? " or " : "")
            << (seconds > 0 ? std::to_string(seconds) + " s" : "") << ", device " << gen.device << "\n";

  stop_on_interrupt();
  Summary summary;
  json findings = json::array();
  std::map<std::string, int> written_per_kind;
  constexpr int kPreExistingFilesPerProperty = 5;
  int64_t op_executions = 0;
  const auto start = Clock::now();
  auto last_progress = start;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  auto should_stop = [&](int64_t index) {
    return (cases > 0 && index >= cases) || (seconds > 0 && elapsed() >= static_cast<double>(seconds)) ||
           g_interrupted;
  };
  std::string first_skipped;
  auto report_finding = [&](int64_t index, const std::string& property, const std::string& classification,
                            bool alarm, const std::string& sut_text, const std::string& oracle_text) {
    const uint64_t draw_seed = seed + static_cast<uint64_t>(index);
    json finding = {{"case", index},          {"draw_seed", draw_seed},   {"property", property},
                    {"classification", classification}, {"sut", sut_text}, {"oracle", oracle_text}};
    const std::string kind = property + "/" + classification;
    if (alarm || written_per_kind[kind] < kPreExistingFilesPerProperty) {
      ++written_per_kind[kind];
      make_output_folder(out_dir);
      // Named by the run's seed too: runs with other seeds into the same folder keep their files.
      const std::string file = out_dir + "/seed-" + std::to_string(seed) + "-case-" + std::to_string(index) + "-" +
                               property + "-" + classification + ".json";
      Case annotated = draw_case(gen, draw_seed);
      annotated.note = classification + " " + property + " (sut " + sut->name() + ", oracle " + oracle->name() +
                       "): sut: " + sut_text + " | oracle: " + oracle_text;
      // What `recheck replay` checks: the finding still shows (a crash in a process of its own).
      annotated.expect = {Expectation{sut->name(), property, classification}};
      save_case_file(annotated, file);
      finding["file"] = file;
      if (alarm) {
        std::cerr << classification << ": " << property << " in case " << index << " (draw seed " << draw_seed
                  << ")\n    sut: " << sut_text << "\n    oracle: " << oracle_text << "\n    replay: recheck repro "
                  << file << " --sut " << sut->name() << " --oracle " << oracle->name() << "\n";
      }
    }
    findings.push_back(std::move(finding));
  };
  auto handle = [&](int64_t index, const CaseResult& result) {
    summary.add(result);
    op_executions += result.op_executions;
    if (!result.skipped.empty()) {
      // Too large for the memory: counted and named, not a failure.
      findings.push_back({{"case", index}, {"draw_seed", seed + static_cast<uint64_t>(index)},
                          {"classification", "skipped"}, {"reason", result.skipped}});
      if (summary.skipped() == 1) first_skipped = "case " + std::to_string(index) + ": " + result.skipped;
    }
    for (const PropertyResult& r : result.results) {
      if (r.classification == Classification::pass) continue;
      report_finding(index, r.property, to_string(r.classification), is_alarm(r.classification), r.sut.describe(),
                     r.oracle.describe());
    }
    if (!quiet && std::chrono::duration<double>(Clock::now() - last_progress).count() >= 2.0) {
      last_progress = Clock::now();
      std::cerr << "[" << static_cast<int64_t>(elapsed()) << " s] " << summary.cases() << " cases, "
                << summary.count(Classification::regression) << " regression, "
                << summary.count(Classification::divergent) << " divergent, "
                << summary.count(Classification::pre_existing) << " pre-existing\n";
    }
  };
  bool threads_set = false;
  auto check = [&](int64_t index) {
    // Set where the cases run (the worker), so this process keeps clear of torch's thread pools.
    if (threads > 0 && !threads_set) at::set_num_threads(static_cast<int>(threads));
    threads_set = true;
    return check_case(draw_case(gen, seed + static_cast<uint64_t>(index)), *oracle, *sut, run_options);
  };

  // In the process that checks cases (a Python variant on CUDA cannot start torch.cuda in a
  // worker forked after CUDA started here).
  auto prepare = [&] { check_ready_to_run(gen.device == "cuda", *oracle, *sut); };
  int64_t crashes = 0;
  std::string worker_failed;
  if (args.flag("no-isolate")) {
    try {
      prepare();
    } catch (const std::exception& error) {
      worker_failed = error.what();
      std::cerr << "recheck run: " << worker_failed << "\n";
    }
    for (int64_t index = 0; worker_failed.empty() && !should_stop(index); ++index) handle(index, check(index));
  } else {
    // Cases run in a worker process, so that an abort or a segmentation fault inside a variant
    // is a finding with its case saved, and the run goes on with the next case in a new worker.
    // This process runs no torch op itself, so forking it is safe.
    for (int64_t next = 0; !should_stop(next);) {
      const WorkerOutcome outcome = run_worker(next, prepare, should_stop, check, handle);
      if (outcome.finished || g_interrupted) break;  // interrupted: the case in progress is left out
      if (!outcome.crashed_case) {
        worker_failed = std::string(outcome.started ? "the worker stopped between cases" : "the worker could not start") +
                        " (" + outcome.status + ")" + (outcome.error.empty() ? "" : ": " + outcome.error);
        std::cerr << "recheck run: " << worker_failed << "; stopping\n";
        break;
      }
      next = *outcome.crashed_case + 1;
      if (outcome.killed_for_memory) {
        handle(*outcome.crashed_case, skipped_for_memory());
        continue;
      }
      ++crashes;
      report_finding(*outcome.crashed_case, "runs-to-completion", "crash", true, "the worker process " + outcome.status, "");
    }
  }

  const double total_seconds = elapsed();
  std::cout << "\nrecheck run: " << summary.cases() << " cases in " << std::fixed << std::setprecision(1)
            << total_seconds << " s (" << std::setprecision(1)
            << (total_seconds > 0 ? summary.cases() / total_seconds : 0.0) << " cases/s), sut " << sut->name()
            << ", oracle " << oracle->name() << ", seed " << seed << (g_interrupted ? ", interrupted" : "") << "\n\n"
            << summary.table() << "\n";
  if (summary.skipped() > 0) {
    std::cout << "skipped: " << summary.skipped() << " cases too large for the memory (first, " << first_skipped
              << ")\n";
  }
  if (crashes > 0) std::cout << "crashes: " << crashes << " cases crashed the worker process\n";
  if (!worker_failed.empty()) {
    std::cout << "ERROR: " << worker_failed << "\n";
  }
  if (summary.alarms() + crashes > 0) {
    std::cout << "FAIL: " << summary.alarms() << " regression or divergent verdicts, " << crashes
              << " crashes; cases written to " << out_dir << "/\n";
  } else if (worker_failed.empty()) {  // otherwise the error above is the outcome
    std::cout << "OK: no regression, no divergence";
    if (summary.count(Classification::pre_existing) > 0) {
      std::cout << " (" << summary.count(Classification::pre_existing)
                << (sut->change_claims() == ChangeClaims::not_applicable
                        ? " pre-existing findings about " + sut->name() + " itself, which has no change to regress"
                        : std::string(" pre-existing findings about the oracle too"))
                << "; examples in " << out_dir << "/)";
    }
    std::cout << "\n";
  }
  if (args.has("json")) {
    json report = {{"tool", "recheck"},
                   {"command", "run"},
                   {"sut", sut->name()},
                   {"oracle", oracle->name()},
                   {"seed", seed},
                   {"device", gen.device},
                   {"cases", summary.cases()},
                   {"seconds", total_seconds},
                   {"op_executions", op_executions},
                   {"interrupted", g_interrupted.load()},
                   {"crashes", crashes},
                   {"skipped", summary.skipped()},
                   {"error", worker_failed.empty() ? json() : json(worker_failed)},
                   {"summary", summary.to_json()},
                   {"findings", findings}};
    write_json_report(args.get("json", "-"), report);
  }
  if (summary.alarms() + crashes > 0) return 1;
  return worker_failed.empty() ? 0 : 2;
}

// A JSON case file, or an input of recheck_fuzz_check decoded as the target decodes it.
Case load_case_or_fuzz_input(const std::string& path, const Limits& limits, bool force_bytes, const std::string& device) {
  const std::string text = read_case_file_text(path, limits);
  // JSON may start with a UTF-8 byte order mark, which the JSON parser skips.
  const std::size_t bom = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  const auto first = text.find_first_not_of(" \t\r\n", bom);
  const bool json_name = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (!force_bytes && (json_name || (first != std::string::npos && text[first] == '{'))) {
    return parse_case_text(text, path, limits);
  }
  GenOptions options;
  options.device = device;
  Case c = decode_case(reinterpret_cast<const uint8_t*>(text.data()), text.size(), options);
  c.note = "decoded from the fuzzer input " + std::filesystem::path(path).filename().string() + " (" +
           std::to_string(text.size()) + " bytes)";
  // The decoder bounds what it makes by its own budget: --limits applies to its case too.
  try {
    validate(c, limits);
  } catch (const CaseError& error) {
    throw CaseError(path + " (decoded as fuzzer bytes): " + error.what());
  }
  return c;
}

// The limits a command reads cases under: --limits, or the defaults. The interpreter holds the
// values it makes at run time to the same element limit.
Limits limits_of(const Args& args) {
  const Limits limits = args.has("limits") ? parse_limits(args.get("limits", "")) : Limits{};
  set_value_element_limit(limits.leaf_elements);
  return limits;
}

Case load_positional_case(const Args& args, const char* command) {
  if (args.positional().size() != 1) throw UsageError(std::string(command) + " takes one case file");
  const Limits limits = limits_of(args);
  const std::string device = args.get("device", "cpu");
  if (device != "cpu" && device != "cuda") throw UsageError("--device: expected cpu or cuda, got '" + device + "'");
  return load_case_or_fuzz_input(args.positional()[0], limits, args.flag("bytes"), device);
}

std::unique_ptr<CheckpointImplementation> make_variant(const std::string& name) {
  try {
    return make_checkpoint(name);
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
}

int command_repro(const Args& args) {
  if (args.flag("help")) {
    std::cout << kReproHelp;
    return 0;
  }
  check_output_files(args, {"json"});
  const Case c = load_positional_case(args, "repro");
  const auto sut = make_variant(args.get("sut", "clearing"));
  const auto oracle = make_variant(args.get("oracle", "nonclearing"));
  const std::string& file = args.positional()[0];
  // Checked before anything is printed, so that a case that cannot run here is one line.
  std::optional<IsolatedCheck> isolated;
  if (args.flag("no-isolate")) {
    check_can_run(c.device, file, *oracle, *sut);
  } else {
    isolated = check_isolated(c, file, *oracle, *sut, limits_of(args));
  }
  std::cout << show(c);
  if (!c.note.empty()) std::cout << "note: " << c.note << "\n";
  std::cout << "\nsut " << sut->name() << ", oracle " << oracle->name() << ":\n";
  CaseResult result;
  if (!isolated) {
    result = check_case(c, *oracle, *sut);
  } else {
    if (!isolated->result) {
      std::cout << std::left << std::setw(21) << kCrashProperty << kCrash << ": " << isolated->crash << "\n";
      if (args.has("json")) {
        write_json_report(args.get("json", "-"),
                          {{"tool", "recheck"}, {"command", "repro"}, {"case", file}, {"sut", sut->name()},
                           {"oracle", oracle->name()}, {"skipped", nullptr},
                           {"properties", json::array({{{"property", kCrashProperty}, {"classification", kCrash},
                                                        {"sut", isolated->crash}, {"oracle", ""}}})}});
      }
      return 1;
    }
    result = std::move(*isolated->result);
  }
  std::cout << describe_results(result.results);
  // Too large for the memory here: no verdict, said so (exit 0, as `run` counts it skipped).
  if (!result.skipped.empty()) std::cout << "skipped: " << result.skipped << "\n";
  if (args.has("json")) {
    json properties_json = json::array();
    for (const PropertyResult& r : result.results) {
      properties_json.push_back({{"property", r.property},
                                 {"classification", to_string(r.classification)},
                                 {"sut", r.sut.describe()},
                                 {"oracle", r.oracle.describe()}});
    }
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "repro"},
                                              {"case", args.positional()[0]},
                                              {"sut", sut->name()},
                                              {"oracle", oracle->name()},
                                              {"skipped", result.skipped.empty() ? json() : json(result.skipped)},
                                              {"properties", properties_json}});
  }
  return result.has_alarm() ? 1 : 0;
}

int command_show(const Args& args) {
  if (args.flag("help")) {
    std::cout << kShowHelp;
    return 0;
  }
  const Case c = load_positional_case(args, "show");
  if (args.flag("json")) {
    std::cout << to_json(c).dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << show(c);
  }
  return 0;
}

const char* kExportPythonHelp = R"(usage: recheck export-python CASE [options]

Writes CASE (JSON, or a fuzzer's crash file) as a standalone Python script: it rebuilds the case
with torch ops (the same leaf data, seeds and loss weights recheck uses), runs it eagerly and
through a checkpoint function, and asserts a property. Run it with `python3 SCRIPT`: an
AssertionError with the evidence means the property fails. It needs torch, and megatron-core for
Megatron's function or a case that forks its RNG tracker.

options:
  --checkpoint C    megatron, megatron-clearing (recheck's wrapper of the PR's change) or torch
                    (default: from the case's first failing expectation's variant, else megatron)
  --property NAME   the property asserted (default: the case's first failing expectation's);
                    every property but memory-floor, which needs recheck's counting allocator
  --out FILE        write there (atomically) instead of standard output
  --limits, --bytes, --device   as for show
)";

int command_export_python(const Args& args) {
  if (args.flag("help")) {
    std::cout << kExportPythonHelp;
    return 0;
  }
  check_output_files(args, {"out"});
  const Case c = load_positional_case(args, "export-python");
  // The script carries the leaf values and loss weights recheck draws on the case's device.
  if (const std::string missing = device_missing(c.device); !missing.empty()) {
    throw CaseError(args.positional()[0] + ": cannot export this case here: " + missing);
  }
  ExportOptions options;
  const Expectation* failing = nullptr;
  for (const Expectation& e : c.expect) {
    if (e.classification != "pass" && e.classification != "no-alarm" && e.property != "memory-floor" && e.property != "*") {
      failing = &e;
      break;
    }
  }
  if (failing) {
    options.property = failing->property;
    if (failing->sut.find("torch") != std::string::npos) options.checkpoint = "torch";
    else if (failing->sut.find("clearing") != std::string::npos) options.checkpoint = "megatron-clearing";
  } else if (!args.has("property")) {
    throw UsageError("export-python: " + args.positional()[0] + " records no failing property: say which with --property");
  }
  options.property = args.get("property", options.property);
  options.checkpoint = args.get("checkpoint", options.checkpoint);
  std::string script;
  try {
    script = export_python(c, options);
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
  if (args.has("out")) {
    write_file_atomically(args.get("out", ""), script);
    std::cerr << "wrote " << args.get("out", "") << " (" << options.property << ", --checkpoint " << options.checkpoint
              << "): python3 " << args.get("out", "") << "\n";
  } else {
    std::cout << script;
  }
  return 0;
}

int command_minimize(const Args& args) {
  if (args.flag("help")) {
    std::cout << kMinimizeHelp;
    return 0;
  }
  const Case original = load_positional_case(args, "minimize");
  const auto sut = make_variant(args.get("sut", "clearing"));
  const auto oracle = make_variant(args.get("oracle", "nonclearing"));
  const std::string out = args.get("out", args.positional()[0] + ".min.json");
  check_output_file(out, args.has("out") ? "--out" : "the default --out");
  const std::string& file = args.positional()[0];
  const std::string property = args.get("property", "");
  if (!property.empty() && property != kCrashProperty && find_property(property) == nullptr) {
    throw UsageError("--property: no property named '" + property + "'");
  }
  const auto start = Clock::now();
  // Every check, the first one and each candidate's, in a worker process (unless --no-isolate):
  // a candidate that crashes the variant is a candidate that does not show the alarm, not the
  // end of the minimization, and a case that crashes it from the start is minimized as a crash.
  const Limits limits = limits_of(args);
  CaseWorker worker(file, original.device, *oracle, *sut, limits);
  const bool isolate = !args.flag("no-isolate");
  if (!isolate) check_can_run(original.device, file, *oracle, *sut);
  auto check = [&](const Case& c) { return isolate ? worker.check(c) : IsolatedCheck{check_case(c, *oracle, *sut), ""}; };
  const std::optional<CaseResult> first = check(original).result;
  const bool crash = !first && (property.empty() || property == kCrashProperty);
  const std::optional<FailureSignature> signature = first ? find_alarm(*first, property) : std::nullopt;
  if (!crash && !signature) {
    std::cerr << "recheck minimize: " << file
              << (!first                    ? " crashes the check process, and shows no "
                  : first->skipped.empty() ? " shows no "
                                           : " is skipped (" + first->skipped + "), and shows no ")
              << (property.empty() ? "alarm" : "alarm in " + property) << " on " << sut->name() << " against "
              << oracle->name() << ": nothing to minimize\n";
    return 2;
  }
  const std::string shown_property = crash ? kCrashProperty : signature->property;
  const std::string shown_classification = crash ? kCrash : to_string(signature->classification);
  // Ctrl-C (or SIGTERM) ends the minimization at the candidate in progress (its worker is killed
  // 0.4 s on), and the smallest case found so far is written: every case kept showed the alarm.
  stop_on_interrupt();
  std::cout << "minimizing: " << sut->name() << " " << shown_property << " " << shown_classification << std::endl;
  ReduceStats reduce_stats;
  int64_t candidates_checked = 0;
  Case smallest = reduce_case(original, [&](const Case& candidate) {
    if (g_interrupted) return false;
    ++candidates_checked;
    IsolatedCheck checked;
    try {
      checked = check(candidate);
    } catch (const CaseError&) {
      if (g_interrupted) return false;  // a worker killed while it started
      throw;
    }
    // A crash is kept only from a fresh process: what an earlier candidate left behind (a
    // corrupted heap, a sticky CUDA error) must not make a later one crash.
    if (crash && isolate) worker.stop();
    if (g_interrupted) return false;  // a candidate cut short shows nothing
    return crash ? !checked.result : checked.result && shows(*checked.result, *signature);
  }, &reduce_stats, [] { return g_interrupted.load(); }, limits);
  worker.stop();
  const bool interrupted = g_interrupted;
  const CaseStats before = stats(original);
  const CaseStats after = stats(smallest);
  smallest.note = sut->name() + ": " + shown_property + " " + shown_classification + " against " + oracle->name() +
                  " (minimized by recheck minimize from " + std::filesystem::path(file).filename().string() + ", " +
                  std::to_string(before.ops) + " ops" +
                  (interrupted ? "; interrupted after " + std::to_string(candidates_checked) +
                                     " candidates, so a smaller case may show it too"
                               : "") +
                  ")";
  smallest.expect = {Expectation{sut->name(), shown_property, shown_classification}};
  // The correct variant's verdict on the same case, recorded too when it raises no alarm, so
  // that a replay also catches a suite that starts crying wolf on it (not after an interrupt).
  if (sut->name() != "clearing" && !interrupted) {
    const auto clearing = make_variant("clearing");
    std::optional<CaseResult> correct;
    try {
      correct = isolate ? check_isolated(smallest, file, *oracle, *clearing, limits).result
                        : std::optional<CaseResult>(check_case(smallest, *oracle, *clearing));
    } catch (const CaseError&) {
      if (!g_interrupted) throw;
    }
    if (g_interrupted) {
      std::cout << "interrupted: clearing's check of the smallest case was cut short; its expectation is left out\n";
    } else if (correct && correct->skipped.empty() && !correct->has_alarm()) {
      smallest.expect.push_back(Expectation{"clearing", "*", "no-alarm"});
    }
  }
  save_case_file(smallest, out);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << "ops " << before.ops << " -> " << after.ops << ", checkpoints " << before.checkpoints << " -> "
            << after.checkpoints << ", nesting depth " << before.max_depth << " -> " << after.max_depth << ", leaves "
            << original.leaves.size() << " -> " << smallest.leaves.size() << "\n"
            << candidates_checked << " candidates checked, " << reduce_stats.accepted << " kept, "
            << std::fixed << std::setprecision(1) << seconds << " s\n"
            << show(smallest) << "wrote " << out << "\nreplay: recheck repro " << out << " --sut " << sut->name()
            << "\n";
  if (interrupted) std::cout << "interrupted: wrote the smallest case found so far\n";
  return 0;
}

// The labels a seed input is kept for: the op kinds its case holds and its corners.
std::set<std::string> seed_labels(const Case& c) {
  std::set<std::string> labels;
  std::function<void(const Segment&)> walk = [&](const Segment& segment) {
    for (const Op& op : segment.ops) {
      labels.insert(std::string("op: ") + op_name(op));
      if (const Segment* body = op_body(op)) walk(*body);
    }
  };
  walk(c.root);
  for (const std::string& f : case_features(c)) labels.insert(f);
  return labels;
}

int command_fuzz_seeds(const Args& args) {
  if (args.flag("help")) {
    std::cout << kFuzzSeedsHelp;
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError("fuzz-seeds takes one folder");
  const std::string dir = args.positional()[0];
  const auto seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX));
  const int64_t tries = args.number("tries", 20000, 1, 100000000);
  make_output_folder(dir);
  std::mt19937_64 random(seed);
  std::set<std::string> covered;
  int written = 0;
  for (int64_t i = 0; i < tries; ++i) {
    std::string bytes(16 + random() % 185, '\0');
    for (char& b : bytes) b = static_cast<char>(random() & 0xff);
    const Case c = decode_case(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    bool adds = false;
    for (const std::string& label : seed_labels(c)) adds |= covered.insert(label).second;
    if (!adds) continue;
    char name[32];
    std::snprintf(name, sizeof name, "seed-%03d", written++);
    write_file_atomically((std::filesystem::path(dir) / name).string(), bytes);
  }
  std::cout << "wrote " << written << " seed inputs to " << dir << ", reaching " << covered.size()
            << " op kinds and corners:\n";
  for (const std::string& label : covered) std::cout << "  " << label << "\n";
  return 0;
}

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
  if (args.flag("help")) {
    std::cout << kReplayHelp;
    return 0;
  }
  if (args.positional().empty()) throw UsageError("replay takes case files or folders");
  check_output_files(args, {"json"});
  const Limits limits = limits_of(args);
  const auto oracle = make_variant(args.get("oracle", "nonclearing"));
  std::map<std::string, std::unique_ptr<CheckpointImplementation>> suts;
  int held = 0;
  int failed = 0;
  int skipped = 0;
  json lines = json::array();
  for (const std::string& file : corpus_files(args.positional())) {
    const Case c = load_case_file(file, limits);
    // A CUDA case where CUDA is missing cannot run: skipped and said so, like a Python variant
    // without the bridge.
    const bool no_device = !device_missing(c.device).empty();
    std::vector<Expectation> expectations = c.expect;
    if (expectations.empty()) expectations.push_back(Expectation{"clearing", "*", "no-alarm"});
    for (std::size_t i = 0; i < expectations.size(); ++i) {
      const Expectation& e = expectations[i];
      const std::string field = file + ": case.expect[" + std::to_string(i) + "]";
      if (e.property == kCrashProperty) {
        if (e.classification != kCrash) {
          throw CaseError(field + ": property \"" + kCrashProperty + "\" goes with classification \"crash\", and only with it");
        }
      } else if (e.property != "*" && find_property(e.property) == nullptr) {
        throw CaseError(field + ".property: no property named '" + e.property + "'");
      }
      if ((e.property == "*") != (e.classification == "no-alarm")) {
        throw CaseError(field + ": property \"*\" goes with classification \"no-alarm\", and only with it");
      }
      if (!suts.count(e.sut) && !python_bridge_built() && needs_python_bridge(e.sut)) {
        suts[e.sut] = nullptr;  // this build cannot run it: skipped, and said so
      } else if (!suts.count(e.sut)) {
        try {
          suts[e.sut] = make_checkpoint(e.sut);
        } catch (const std::invalid_argument& error) {
          throw CaseError(field + ".sut: " + error.what());
        }
      }
    }
    // A variant the case records crashing is checked in a process of its own, as `run` did.
    std::map<std::string, IsolatedCheck> results;
    for (const Expectation& e : expectations) {
      if (!suts.at(e.sut) || no_device) {
        ++skipped;
        std::cout << "skip  " << file << "  " << e.sut << " " << e.property << " " << e.classification
                  << (no_device ? " (needs a " + c.device + " device)\n" : " (needs the Python bridge: see build-py, ci/python)\n");
        continue;
      }
      if (!results.count(e.sut)) {
        const bool crashes = std::any_of(expectations.begin(), expectations.end(), [&](const Expectation& x) {
          return x.sut == e.sut && x.property == kCrashProperty;
        });
        // A CUDA case too: CUDA started in this process could not be used by a later worker.
        results.emplace(e.sut, crashes || c.device == "cuda" ? check_isolated(c, file, *oracle, *suts[e.sut], limits)
                                                             : IsolatedCheck{check_case(c, *oracle, *suts[e.sut]), ""});
      }
      const IsolatedCheck& isolated = results.at(e.sut);
      static const CaseResult kNone;
      const CaseResult& result = isolated.result ? *isolated.result : kNone;
      if (isolated.result && !result.skipped.empty()) {
        // Too large for this machine's memory: it cannot tell, as `run` counts such a case.
        ++skipped;
        std::cout << "skip  " << file << "  " << e.sut << " " << e.property << " " << e.classification << " ("
                  << result.skipped << ")\n";
        continue;
      }
      std::string got;
      if (!isolated.result) {
        got = kCrash;
      } else if (e.property == kCrashProperty) {
        got = "no crash";
      } else if (e.property == "*") {
        const auto alarm = find_alarm(result);
        got = alarm ? alarm->property + " " + to_string(alarm->classification) : "no-alarm";
      } else {
        for (const PropertyResult& r : result.results) {
          if (r.property == e.property) got = to_string(r.classification);
        }
      }
      const bool ok = got == e.classification;
      (ok ? held : failed) += 1;
      std::cout << (ok ? "ok    " : "FAIL  ") << file << "  " << e.sut << " " << e.property << " "
                << e.classification << (ok ? "" : ", got " + got) << "\n";
      lines.push_back({{"file", file}, {"sut", e.sut}, {"property", e.property}, {"expected", e.classification},
                       {"got", got}, {"ok", ok}});
    }
  }
  if (held + failed + skipped == 0) throw UsageError("no case file (*.json) under the paths given");
  std::cout << held << " expectations hold, " << failed << " do not"
            << (skipped > 0 ? ", " + std::to_string(skipped) + " skipped (they need the Python bridge, a device or more memory)" : "")
            << "\n";
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"}, {"command", "replay"}, {"oracle", oracle->name()},
                                              {"held", held}, {"failed", failed}, {"skipped", skipped}, {"expectations", lines}});
  }
  return failed > 0 ? 1 : 0;
}

int command_variants(const Args& args) {
  if (args.flag("help")) {
    std::cout << "usage: recheck variants\n\nLists the checkpoint variants --sut and --oracle accept.\n";
    return 0;
  }
  for (const Variant& v : variants()) std::cout << v.name << "\t" << v.description << "\n";
#ifdef RECHECK_WITH_PYTHON
  for (const python::Alias& a : python::aliases()) std::cout << a.name << "\t" << a.description << " (" << a.spec << ")\n";
  std::cout << "python:MODULE:ATTR\tany Python checkpoint function (see the README)\n"
            << "python-clearing:MODULE:ATTR\tthe PR's change wrapped around a Megatron-style Function\n";
#else
  std::cout << "(megatron-py, megatron-py-clearing, torch-py and python:MODULE:ATTR need a build with the Python "
               "bridge: ci/python)\n";
#endif
  return 0;
}

const char* kMutantsHelp = R"(usage: recheck mutants [options]

Runs the suite against every mutant variant (a plausible mistake in a checkpoint change, see
`recheck variants`), from several seeds, and prints for each: killed or survived, the property
that killed it, the cases until the first kill from the first seed, the median over all seeds,
and the seconds spent. Control rows check the correct `clearing` variant and each equivalent
rewrite of it (`recheck variants`) on as many cases as the longest hunt, from every hunt's seed:
they must raise no alarm. Exit code 1 when a mutant survives a seed or a control raises an
alarm; 130 (143 for SIGTERM) when interrupted before that was found (the mutants not hunted
yet are left out of the table).

options:
  --seeds N         hunts per mutant, each from its own seed (default 10)
  --budget N        cases per hunt before the mutant counts as survived (default 200)
  --seed N          first seed; hunt r starts at draw seed N + r * 1000003 (default 1)
  --mutant NAMES    only these mutants, comma-separated
  --json FILE       write the table as data ('-' for standard output)
)";

const char* kBenchHelp = R"(usage: recheck bench [--cases N] [--seed N] [--json FILE]

Single thread. For each generated case (draw seeds N, N+1, ...) times one plain eager run, then
a full check (eager, oracle and sut runs with their recomputations, then every property), and
prints cases per second, op executions per second, and the check-to-eager cost ratio, with the
ratio of op executions, which is the floor the harness overhead sits on. Figures, not a test:
compare ratios measured in one run. Interrupted, it prints the figures of the cases done so
far and exits 130 (143 for SIGTERM).
)";

const char* kMemoryHelp = R"(usage: recheck memory [options]

The PR's measurement, reproduced on a synthetic model: a stack of checkpointed layers over
residual streams, each layer stashing its stream inputs the way a module caching its input
does. Runs it with the sut and with the oracle and prints, per iteration, the allocator floor
(bytes held between iterations) and peak of both, the floor freed by the sut, and the
prediction: the .grad bytes of the stashed recomputation inputs. Draws allocated bytes over the
last iteration for both into an SVG (CPU only). Exit code 1 when the sut's floor or peak is
above the oracle's or the freed bytes differ from the prediction.

options:
  --layers N        checkpointed layers (default 2)
  --streams N       residual streams (default 4)
  --seq N           sequence length (default 64; the PR used 8192 on a GPU)
  --hidden N        hidden size (default 32)
  --dtype D         float32, float64 or bfloat16 (default float32)
  --iterations N    iterations (default 2)
  --device D        cpu or cuda (default cpu)
  --sut NAME        variant under test (default clearing)
  --oracle NAME     reference variant (default nonclearing)
  --svg FILE        the picture (default recheck-memory.svg; '' for none)
  --json FILE       the figures as data ('-' for standard output)
)";

std::string memory_svg(const std::vector<int64_t>& sut, const std::vector<int64_t>& oracle, const std::string& sut_name,
                       const std::string& oracle_name, const std::string& title) {
  constexpr double kWidth = 800, kHeight = 320, kLeft = 90, kRight = 20, kTop = 40, kBottom = 40;
  int64_t top = 1;
  for (int64_t b : sut) top = std::max(top, b);
  for (int64_t b : oracle) top = std::max(top, b);
  auto polyline = [&](const std::vector<int64_t>& points, const char* colour) {
    std::ostringstream out;
    out << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < points.size(); ++i) {
      const double x = kLeft + (kWidth - kLeft - kRight) * (points.size() > 1 ? double(i) / double(points.size() - 1) : 0.0);
      const double y = kTop + (kHeight - kTop - kBottom) * (1.0 - double(points[i]) / double(top));
      out << std::fixed << std::setprecision(1) << x << "," << y << " ";
    }
    out << "\"/>\n";
    return out.str();
  };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight << "\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kLeft << "\" y=\"20\" font-family=\"sans-serif\" font-size=\"13\">" << title << "</text>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\"" << kHeight - kBottom
      << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << kHeight - kBottom << "\" x2=\"" << kWidth - kRight << "\" y2=\""
      << kHeight - kBottom << "\" stroke=\"black\"/>\n"
      << "<text x=\"5\" y=\"" << kTop + 5 << "\" font-family=\"sans-serif\" font-size=\"11\">" << top << " B</text>\n"
      << "<text x=\"5\" y=\"" << kHeight - kBottom << "\" font-family=\"sans-serif\" font-size=\"11\">0 B</text>\n"
      << "<text x=\"" << kLeft << "\" y=\"" << kHeight - 12
      << "\" font-family=\"sans-serif\" font-size=\"11\">allocations and frees over the last iteration (each line scaled to its own count)</text>\n"
      << polyline(oracle, "#1f77b4") << polyline(sut, "#d62728")
      << "<text x=\"" << kWidth - 260 << "\" y=\"" << kTop + 12 << "\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#1f77b4\">oracle: "
      << oracle_name << "</text>\n"
      << "<text x=\"" << kWidth - 260 << "\" y=\"" << kTop + 28 << "\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#d62728\">sut: "
      << sut_name << "</text>\n</svg>\n";
  return svg.str();
}

int command_memory(const Args& args) {
  if (args.flag("help")) {
    std::cout << kMemoryHelp;
    return 0;
  }
  ResidualStreamOptions model;
  model.layers = static_cast<int>(args.number("layers", model.layers, 1, 1024));
  model.streams = static_cast<int>(args.number("streams", model.streams, 1, 64));
  model.seq = args.number("seq", model.seq, 1, 1 << 20);
  model.hidden = args.number("hidden", model.hidden, 1, 1 << 16);
  model.iterations = static_cast<int>(args.number("iterations", model.iterations, 1, 100));
  model.device = args.get("device", "cpu");
  if (model.device != "cpu" && model.device != "cuda") throw UsageError("--device: expected cpu or cuda, got '" + model.device + "'");
  const std::string dtype = args.get("dtype", "float32");
  if (dtype == "float32") model.dtype = DType::float32;
  else if (dtype == "float64") model.dtype = DType::float64;
  else if (dtype == "bfloat16") model.dtype = DType::bfloat16;
  else throw UsageError("--dtype: expected float32, float64 or bfloat16, got '" + dtype + "'");
  std::unique_ptr<CheckpointImplementation> sut;
  std::unique_ptr<CheckpointImplementation> oracle;
  try {
    sut = make_checkpoint(args.get("sut", "clearing"));
    oracle = make_checkpoint(args.get("oracle", "nonclearing"));
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
  check_output_files(args, {"json"});
  const std::string svg_path = args.get("svg", "recheck-memory.svg");  // empty: no picture
  if (!svg_path.empty()) check_output_file(svg_path, "--svg");
  const Case c = residual_stream_case(model);
  set_value_element_limit(limits_at_ceilings().leaf_elements);  // the model asked for, as built
  check_can_run(c.device, "--device " + model.device, *oracle, *sut);
  RunOptions options;
  options.record_segment_calls = false;
  options.record_timeline = model.device == "cpu";
  const Observations o = run_case(c, *oracle, options);
  const Observations s = run_case(c, *sut, options);
  for (const Observations* run : {&o, &s}) {
    if (run->error) {
      std::cerr << "recheck memory: " << run->implementation << " raised " << run->error->error.type << ": "
                << run->error->error.message << "\n";
      return 1;
    }
  }
  std::cout << "recheck memory: " << c.note << ", " << dtype << ", " << model.iterations << " iterations, "
            << model.device << "; sut " << sut->name() << ", oracle " << oracle->name() << "\n\n"
            << std::left << std::setw(10) << "iteration" << std::right << std::setw(14) << "floor sut" << std::setw(14)
            << "floor oracle" << std::setw(12) << "freed" << std::setw(12) << "predicted" << std::setw(14) << "peak sut"
            << std::setw(14) << "peak oracle" << std::setw(12) << "peak freed" << "\n";
  bool ok = true;
  json rows = json::array();
  for (size_t i = 0; i < s.iterations.size(); ++i) {
    const MemoryRecord& ms = s.iterations[i].memory;
    const MemoryRecord& mo = o.iterations[i].memory;
    const int64_t freed = mo.floor - ms.floor;
    const int64_t predicted = mo.released_bytes;
    std::cout << std::left << std::setw(10) << i << std::right << std::setw(14) << ms.floor << std::setw(14) << mo.floor
              << std::setw(12) << freed << std::setw(12) << predicted << std::setw(14) << ms.peak << std::setw(14)
              << mo.peak << std::setw(12) << mo.peak - ms.peak << "\n";
    rows.push_back({{"iteration", i}, {"floor_sut", ms.floor}, {"floor_oracle", mo.floor}, {"freed", freed},
                    {"predicted", predicted}, {"peak_sut", ms.peak}, {"peak_oracle", mo.peak},
                    {"peak_freed", mo.peak - ms.peak}});
  }
  // The verdicts of the two memory claims, as `recheck run` gives them.
  const Runs runs{o, o};
  for (const char* name : {"memory-floor", "no-extra-allocations"}) {
    const Property& property = *find_property(name);
    if (property.same_code_only && s.code != o.code) continue;
    const Verdict verdict = property.check(s, runs);
    if (!verdict.holds) std::cout << name << ": " << verdict.describe() << "\n";
    ok = ok && verdict.holds;
  }
  const MemoryRecord& last_s = s.iterations.back().memory;
  const MemoryRecord& last_o = o.iterations.back().memory;
  const double per_layer = double(last_o.floor - last_s.floor) / model.layers;
  const bool adopted = model.device == "cpu" && leaf_adopts_returned_gradient(sut->name());
  std::cout << "\nper checkpointed layer: " << std::fixed << std::setprecision(1) << per_layer
            << " bytes freed at the floor (predicted " << double(last_o.released_bytes) / model.layers
            << ": " << model.streams << " streams x " << model.seq << " x " << model.hidden << " x "
            << at::elementSize(scalar_type(model.dtype)) << " bytes)\n" << std::defaultfloat;
  if (model.device == "cpu") {
    std::cout << "gradient adoption: a leaf passed straight to a " << sut->name()
              << " checkpoint whose body keeps its input "
              << (adopted ? "adopts the returned gradient as its .grad (no copy)" : "gets a copy of the returned gradient")
              << "\n";
  }
  if (!svg_path.empty() && model.device == "cpu") {
    write_file_atomically(svg_path, memory_svg(s.timeline, o.timeline, sut->name(), oracle->name(), c.note));
    std::cout << "picture: " << svg_path << "\n";
  }
  std::cout << (ok ? "OK: the sut's floor and peak are at most the oracle's, it frees exactly the prediction, and it "
                     "allocates nothing the oracle does not\n"
                   : "FAIL: the sut's floor or peak is above the oracle's, what it frees differs from the prediction, or "
                     "it allocates what the oracle does not\n");
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "memory"},
                                              {"model", {{"layers", model.layers}, {"streams", model.streams},
                                                         {"seq", model.seq}, {"hidden", model.hidden},
                                                         {"dtype", dtype}, {"device", model.device}}},
                                              {"sut", sut->name()},
                                              {"oracle", oracle->name()},
                                              {"iterations", rows},
                                              {"freed_per_layer", per_layer},
                                              {"gradient_adopted", model.device == "cpu" ? json(adopted) : json(nullptr)},
                                              {"ok", ok}});
  }
  return ok ? 0 : 1;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int command_mutants(const Args& args) {
  if (args.flag("help")) {
    std::cout << kMutantsHelp;
    return 0;
  }
  check_output_files(args, {"json"});
  const int64_t seeds = args.number("seeds", 10, 1, 1000);
  const int64_t budget = args.number("budget", 200, 1, INT64_MAX / 2);
  const uint64_t first_seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX / 4));
  std::set<std::string> only;
  if (args.has("mutant")) {
    std::stringstream list(args.get("mutant", ""));
    for (std::string name; std::getline(list, name, ',');) {
      const Variant* v = nullptr;
      try {
        v = &find_variant(name);
      } catch (const std::invalid_argument& error) {
        throw UsageError(error.what());
      }
      if (!v->is_mutant) throw UsageError("--mutant: '" + name + "' is not a mutant");
      only.insert(name);
    }
  }
  const GenOptions gen;
  auto oracle = make_checkpoint("nonclearing");
  auto start_of = [&](int64_t r) { return first_seed + static_cast<uint64_t>(r) * 1000003ULL; };

  std::cout << std::left << std::setw(28) << "mutant" << std::setw(10) << "result" << std::setw(36) << "killed by"
            << std::right << std::setw(11) << "first kill" << std::setw(8) << "median" << std::setw(9) << "seconds"
            << "\n";
  json rows = json::array();
  bool all_killed = true;
  int64_t longest_hunt = 0;
  for (const Variant& variant : variants()) {
    if (!variant.is_mutant || (!only.empty() && !only.count(variant.name))) continue;
    MegatronCheckpoint mutant(variant);
    std::vector<Hunt> hunts;
    std::vector<double> cases_to_kill;
    std::map<std::string, int> killers;
    double seconds = 0;
    if (g_interrupted) break;  // the mutants not hunted yet are left out of the table
    for (int64_t r = 0; r < seeds && !g_interrupted; ++r) {
      hunts.push_back(hunt(*oracle, mutant, gen, start_of(r), budget));
      const Hunt& h = hunts.back();
      seconds += h.seconds;
      longest_hunt = std::max(longest_hunt, h.cases);
      // A survived hunt counts as one more than the budget, so the median says "over budget".
      cases_to_kill.push_back(h.killed ? static_cast<double>(h.cases) : static_cast<double>(budget + 1));
      if (h.killed) ++killers[h.property + " " + to_string(h.classification)];
    }
    int killed = 0;
    for (const Hunt& h : hunts) killed += h.killed;
    std::string killer;
    int best = 0;
    for (const auto& [name, count] : killers) {
      if (count > best) best = count, killer = name;
    }
    const double med = median(cases_to_kill);
    if (killed < static_cast<int>(hunts.size())) all_killed = false;
    const std::string killed_of = std::to_string(killed) + "/" + std::to_string(hunts.size());
    std::ostringstream med_text;
    if (med > static_cast<double>(budget)) med_text << ">" << budget;
    else med_text << med;
    std::cout << std::left << std::setw(28) << variant.name << std::setw(10) << (killed == 0 ? "survived" : "killed")
              << std::setw(36) << (killer.empty() ? "-" : killer) << std::right
              << std::setw(11) << (hunts.empty() || !hunts[0].killed ? "-" : std::to_string(hunts[0].cases))
              << std::setw(8) << med_text.str() << std::setw(9) << std::fixed << std::setprecision(1) << seconds
              << std::defaultfloat << "   " << killed_of << "\n";
    json per_seed = json::array();
    for (size_t r = 0; r < hunts.size(); ++r) {
      const Hunt& h = hunts[r];
      json row = {{"first_seed", start_of(static_cast<int64_t>(r))}, {"killed", h.killed}, {"cases", h.cases}, {"seconds", h.seconds}};
      if (h.killed) {
        row["draw_seed"] = h.draw_seed;
        row["property"] = h.property;
        row["classification"] = to_string(h.classification);
      }
      per_seed.push_back(std::move(row));
    }
    rows.push_back({{"mutant", variant.name},
                    {"description", variant.description},
                    {"killed", killed},
                    {"hunts", hunts.size()},
                    {"killed_by", killer},
                    {"median_cases_to_kill", med > static_cast<double>(budget) ? json(nullptr) : json(med)},
                    {"seconds", seconds},
                    {"per_seed", per_seed}});
  }

  // The control: the change and each equivalent rewrite of it over as many cases as the longest
  // hunt, from every hunt's seed. Any alarm on them is a false alarm of recheck.
  const int64_t control_cases = std::max<int64_t>(longest_hunt, 1);
  int64_t control_alarms = 0;
  json control = json::array();
  for (const Variant& variant : variants()) {
    if (variant.name != "clearing" && !variant.is_equivalent) continue;
    MegatronCheckpoint correct(variant);
    int64_t alarms = 0;
    int64_t checked = 0;
    std::string first;
    for (int64_t r = 0; r < seeds && !g_interrupted; ++r) {
      for (int64_t i = 0; i < control_cases && !g_interrupted; ++i) {
        const uint64_t draw_seed = start_of(r) + static_cast<uint64_t>(i);
        const CaseResult result = check_case(draw_case(gen, draw_seed), *oracle, correct);
        ++checked;
        const PropertyResult* alarm = result.first_alarm();
        if (alarm == nullptr) continue;
        ++alarms;
        if (first.empty()) {
          first = alarm->property + " " + to_string(alarm->classification) + " on draw seed " + std::to_string(draw_seed);
        }
      }
    }
    control_alarms += alarms;
    std::cout << "control: " << variant.name << " raised " << alarms << " alarms in " << checked << " cases"
              << (first.empty() ? "" : " (first: " + first + ")") << "\n";
    control.push_back({{"variant", variant.name}, {"cases", checked}, {"alarms", alarms}});
  }
  // Interrupted: what was hunted so far is judged (exit 1 for a survivor, else 130 or 143).
  const bool ok = all_killed && control_alarms == 0;
  std::cout << (!ok           ? "FAIL: a mutant survived a seed, or the control raised an alarm\n"
                : g_interrupted ? "interrupted: every mutant hunted so far was killed from every seed tried\n"
                                : "OK: every mutant was killed from every seed\n");
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "mutants"},
                                              {"seeds", seeds},
                                              {"budget", budget},
                                              {"first_seed", first_seed},
                                              {"mutants", rows},
                                              {"control", control},
                                              {"interrupted", g_interrupted.load()},
                                              {"ok", ok && !g_interrupted}});
  }
  return ok ? 0 : 1;
}

int command_bench(const Args& args) {
  if (args.flag("help")) {
    std::cout << kBenchHelp;
    return 0;
  }
  check_output_files(args, {"json"});
  const int64_t requested = args.number("cases", 500, 1, INT64_MAX / 2);
  const uint64_t seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX / 2));
  at::set_num_threads(1);
  const GenOptions gen;
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  EagerExecution eager;
  double eager_seconds = 0;
  double check_seconds = 0;
  int64_t eager_ops = 0;
  int64_t check_ops = 0;
  int64_t cases = 0;  // checked: fewer than requested when interrupted
  for (; cases < requested && !g_interrupted; ++cases) {
    const int64_t i = cases;
    const Case c = draw_case(gen, seed + static_cast<uint64_t>(i));
    auto t0 = Clock::now();
    eager_ops += run_case(c, eager).op_executions;
    auto t1 = Clock::now();
    check_ops += check_case(c, *oracle, *sut).op_executions;
    auto t2 = Clock::now();
    eager_seconds += std::chrono::duration<double>(t1 - t0).count();
    check_seconds += std::chrono::duration<double>(t2 - t1).count();
  }
  if (cases == 0) {
    // A script waiting for the report gets one that says why it holds no figures.
    std::cout << "recheck bench: interrupted before the first case finished\n";
    if (args.has("json")) {
      write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                                {"command", "bench"},
                                                {"cases", 0},
                                                {"interrupted", true},
                                                {"seed", seed},
                                                {"threads", 1}});
    }
    return 0;
  }
  const double cost_ratio = check_seconds / eager_seconds;
  const double op_ratio = static_cast<double>(check_ops) / static_cast<double>(eager_ops);
  std::cout << std::fixed << std::setprecision(1) << "recheck bench: " << cases << " default cases (draw seeds "
            << seed << ".." << seed + static_cast<uint64_t>(cases) - 1 << "), single thread" << (g_interrupted ? ", interrupted" : "") << "\n"
            << "  full check:      " << cases / check_seconds << " cases/s, " << check_ops / check_seconds
            << " op executions/s\n"
            << "  plain eager run: " << cases / eager_seconds << " cases/s, " << eager_ops / eager_seconds
            << " op executions/s\n"
            << std::setprecision(2) << "  check-to-eager cost ratio: " << cost_ratio << " (op executions ratio "
            << op_ratio << ": the floor; harness overhead is what lies above it)\n";
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "bench"},
                                              {"cases", cases},
                                              {"interrupted", g_interrupted.load()},
                                              {"seed", seed},
                                              {"threads", 1},
                                              {"check_seconds", check_seconds},
                                              {"eager_seconds", eager_seconds},
                                              {"check_op_executions", check_ops},
                                              {"eager_op_executions", eager_ops},
                                              {"cases_per_second", cases / check_seconds},
                                              {"op_executions_per_second", check_ops / check_seconds},
                                              {"check_to_eager_cost_ratio", cost_ratio},
                                              {"op_executions_ratio", op_ratio}});
  }
  return 0;
}

}  // namespace

int run_command(const std::string& command, int argc, char** argv);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kMainHelp;
    return 2;
  }
  if (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::cout << kMainHelp;
    return 0;
  }
  const std::string command = argv[1];
  // Standard output closed or full: the failure is reported at the end, not by a signal.
  std::signal(SIGPIPE, SIG_IGN);
  skip_libtorch_backtraces();
  use_deterministic_algorithms();
#ifdef RECHECK_WITH_PYTHON
  python::register_bridge();
#endif
  // `--json -` gives standard output to the JSON report alone: what the command prints for
  // people goes to standard error instead, so that the report parses.
  std::streambuf* const stdout_buffer = std::cout.rdbuf();
  for (int i = 2; command != "show" && i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--json=-" || (arg == "--json" && i + 1 < argc && std::string(argv[i + 1]) == "-")) {
      g_report_stream = std::make_unique<std::ostream>(stdout_buffer);
      std::cout.rdbuf(std::cerr.rdbuf());
      break;
    }
  }
  int code = run_command(command, argc, argv);
  if (code == 0 && g_interrupted) code = 128 + g_interrupt_signal;
  std::cout.rdbuf(stdout_buffer);
  if (g_report_stream) g_report_stream->flush();
  // A write to standard output that failed (a full disk, a closed stream) is an error, not a
  // quiet exit 0 with the output lost.
  std::cout.flush();
  if (!std::cout || (g_report_stream && !*g_report_stream) || std::fflush(stdout) != 0) {
    std::cerr << "recheck " << command << ": cannot write to standard output\n";
    return 2;
  }
  return code;
}

int run_command(const std::string& command, int argc, char** argv) {
  try {
    if (command == "run") {
      return command_run(Args(argc, argv, 2, {"help", "quiet", "no-isolate"},
                              {"sut", "oracle", "seed", "cases", "seconds", "device", "max-depth", "max-ops", "out", "json",
                               "threads", "cpu-memory-budget"}));
    }
    if (command == "repro") {
      return command_repro(
          Args(argc, argv, 2, {"help", "bytes", "no-isolate"}, {"sut", "oracle", "json", "limits", "device"}));
    }
    if (command == "show") return command_show(Args(argc, argv, 2, {"help", "bytes", "json"}, {"limits", "device"}));
    if (command == "export-python") {
      return command_export_python(
          Args(argc, argv, 2, {"help", "bytes"}, {"checkpoint", "property", "out", "limits", "device"}));
    }
    if (command == "minimize") {
      return command_minimize(Args(argc, argv, 2, {"help", "bytes", "no-isolate"},
                                   {"sut", "oracle", "property", "out", "limits", "device"}));
    }
    if (command == "fuzz-seeds") return command_fuzz_seeds(Args(argc, argv, 2, {"help"}, {"seed", "tries"}));
    if (command == "replay") return command_replay(Args(argc, argv, 2, {"help"}, {"oracle", "json", "limits"}));
    if (command == "variants") return command_variants(Args(argc, argv, 2, {"help"}, {}));
    if (command == "mutants") {
      stop_on_interrupt();
      return command_mutants(Args(argc, argv, 2, {"help"}, {"seeds", "budget", "seed", "mutant", "json"}));
    }
    if (command == "memory") {
      return command_memory(Args(argc, argv, 2, {"help"},
                                 {"layers", "streams", "seq", "hidden", "dtype", "iterations", "device", "sut",
                                  "oracle", "svg", "json"}));
    }
    if (command == "bench") {
      stop_on_interrupt();
      return command_bench(Args(argc, argv, 2, {"help"}, {"cases", "seed", "json"}));
    }
    std::cerr << "recheck: unknown command '" << command << "' (see recheck --help)\n";
    return 2;
  } catch (const UsageError& error) {
    std::cerr << "recheck " << command << ": " << error_line(error) << " (see recheck " << command << " --help)\n";
    return 2;
  } catch (const std::exception& error) {
    // A c10::Error is not expected here (cases run inside the checks, which catch what they
    // raise): one line and exit 2 rather than an abort with a C++ stack.
    std::cerr << "recheck " << command << ": " << error_line(error) << "\n";
    return 2;
  }
}
