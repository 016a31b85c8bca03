// What every command of the command line shares: the command table's entry, the parsed
// arguments, and the checks and loaders that turn arguments into cases, variants and files.
// One file per command (cli/run.cpp, cli/repro.cpp, ...) defines its entry; cli/main.cpp
// dispatches to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/checkpoint_interface.h"
#include "core/errors.h"
#include "properties/properties.h"
#include "suts/subject.h"

namespace recheck::cli {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

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

// A command: its name, the line `recheck --help` gives it, its help page, and its options,
// declared once here: the parser accepts these and no others (and --help, which prints `help`),
// and a test holds the help page to describing each of them (tests/cli/cli_test.cpp).
struct Command {
  const char* name;
  const char* summary;
  const char* help;
  std::vector<std::string> flags;    // options without a value
  std::vector<std::string> options;  // options with one
  int (*run)(const Args& args);
  // Ctrl-C and SIGTERM stop it at the next case (runner/interrupts.h) from the start; the others
  // install the handlers where their loop begins, or not at all.
  bool stops_on_interrupt;
};

extern const Command kRun, kRepro, kShow, kMinimize, kReplay, kTriage, kPage, kExportPython, kFuzzSeeds, kVariants, kMutants,
    kMemory, kBench;
// In the order `recheck --help` lists them.
const std::vector<const Command*>& commands();

// Standard output, when `--json -` gives it to the JSON report (std::cout then writes to stderr).
extern std::unique_ptr<std::ostream> g_report_stream;

// Writes `report` to the file `where` atomically, or to standard output for "-". Text that is
// not UTF-8 (a file name's bytes in a note or a path) is written with U+FFFD in its place.
void write_json_report(const std::string& where, const json& report);
// Refuses, before any work, an output file that cannot be put in place: its folder missing or
// not a folder, or a folder where the file should go. A run or a minimization must not end by
// losing what it found. (Permissions are left to the write itself, which names the cause.)
void check_output_file(const std::string& path, const std::string& option);
// check_output_file for each of these options given (--json - excepted).
void check_output_files(const Args& args, std::initializer_list<const char*> options);
// A folder recheck creates when it first writes there (make_output_folder, properties/corpus.h):
// refused now if something other than a folder is in its way.
void check_output_folder(const std::string& dir, const std::string& option);

// --device: cpu or cuda (default cpu), refused otherwise.
std::string device_option(const Args& args, const char* option = "device");
// --case-seconds: how long a case may run before it is taken for a hang (runner::kCaseSeconds
// when not given; 0: no limit).
double case_seconds_option(const Args& args);

// --world-size N (default 1): the tensor-parallel group the cases run in, set for this process
// (core/tensor_parallel.h). More than one rank is refused unless both variants are Megatron's
// Python code on the CPU: recheck's C++ port keeps one rank, and the Python variants distribute
// only there.
int world_size_option(const Args& args, const CheckpointImplementation& sut, const CheckpointImplementation& oracle,
                      const std::string& device);
// --jobs N (default 1; 0: one per core, as the machine reports them): worker processes checking
// cases at once.
int jobs_option(const Args& args);
// " --world-size N" for a replay line when the run had more than one rank; "".
std::string world_size_argument();
// The start of a replay line, so that it runs as printed: what a replay needs in the environment
// ("PYTHONPATH=... ", the variants' replay_environment), then the program as it was started
// (argv[0]: "build-py/recheck", or "recheck" when it was found on PATH).
std::string replay_command(const CheckpointImplementation& sut, const CheckpointImplementation& oracle);
void set_program_name(const std::string& argv0);
// --claims (properties/properties.h ClaimChoice): unchosen when not given; a usage error naming
// what is wrong otherwise.
ClaimChoice claims_option(const Args& args);
// " --claims X" for a replay line when the run chose its claims; "".
std::string claims_argument(const ClaimChoice& claims);
// The variant called `name` (a C++ variant, an alias, or a Python one); a usage error naming the
// known ones otherwise.
std::unique_ptr<CheckpointImplementation> make_variant(const std::string& name);
// The subject a command checks: --subject NAME; without it, the subject that declares --sut;
// otherwise the default subject (suts/subject.h). A usage error naming the known ones for an
// unknown name.
const Subject& subject_option(const Args& args);
// --sut and --oracle, defaulting to the subject's change and oracle. With --subject, a Python
// function no subject declares (python:FILE.py:ATTR) is judged by that subject's properties: it
// joins the subject, for this process, as its change or its oracle.
std::string sut_option(const Args& args);
std::string oracle_option(const Args& args);
// " --subject NAME" for a replay line when the command was given one; "".
std::string subject_argument(const Args& args);
// The limits a command reads cases under: --limits, or the defaults. The interpreter holds the
// values it makes at run time to the same element limit.
Limits limits_of(const Args& args);
// A JSON case file, or an input of recheck_fuzz_check decoded as the target decodes it.
Case load_case_or_fuzz_input(const std::string& path, const Limits& limits, bool force_bytes, const std::string& device);
// The command's one positional argument, a case file (--limits, --bytes, --device).
Case load_positional_case(const Args& args, const char* command);

}  // namespace recheck::cli
