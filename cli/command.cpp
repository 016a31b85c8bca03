#include "cli/command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/interpreter.h"
#include "properties/generator.h"
#include "suts/subject.h"
#include "core/tensor_parallel.h"
#include "runner/worker_process.h"

namespace recheck::cli {

std::unique_ptr<std::ostream> g_report_stream;

const std::vector<const Command*>& commands() {
  static const std::vector<const Command*> all = {&kRun,      &kRepro,    &kShow,    &kMinimize, &kReplay, &kTriage, &kPage, &kExportPython,
                                                  &kFuzzSeeds, &kVariants, &kMutants, &kMemory,   &kBench};
  return all;
}

void write_json_report(const std::string& where, const json& report) {
  if (where == "-") {
    (g_report_stream ? *g_report_stream : std::cout) << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    write_file_atomically(where, report.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  }
}

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

Limits limits_of(const Args& args) {
  const Limits limits = args.has("limits") ? parse_limits(args.get("limits", "")) : Limits{};
  set_value_element_limit(limits.leaf_elements);
  return limits;
}

Case load_positional_case(const Args& args, const char* command) {
  if (args.positional().size() != 1) throw UsageError(std::string(command) + " takes one case file");
  const Limits limits = limits_of(args);
  return load_case_or_fuzz_input(args.positional()[0], limits, args.flag("bytes"), device_option(args));
}

std::unique_ptr<CheckpointImplementation> make_variant(const std::string& name) {
  try {
    return make_checkpoint(name);
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
}

const Subject& subject_option(const Args& args) {
  if (args.has("subject")) {
    try {
      return find_subject(args.get("subject", ""));
    } catch (const std::invalid_argument& error) {
      throw UsageError(std::string("--subject: ") + error.what());
    }
  }
  if (args.has("sut")) {
    const std::string sut = args.get("sut", "");
    for (const Subject& subject : subjects()) {
      if (subject.find(sut) != nullptr) return subject;
    }
  }
  return default_subject();
}

namespace {

// A Python function named on the command line (python:FILE.py:ATTR, python:MODULE:ATTR) that no
// subject declares joins --subject's for this process, as its change (--sut) or its oracle: its
// checks are that subject's properties, not the default subject's.
std::string joined_to_subject(const Args& args, const std::string& name, VariantKind kind) {
  if (!args.has("subject") || name.rfind("python", 0) != 0 || subject_declaring(name) != nullptr) return name;
  Subject subject = subject_option(args);
  subject.implementations.push_back({name, "given on the command line, judged as " + subject.name, kind});
  register_subject(std::move(subject));
  return name;
}

}  // namespace

namespace {

// A Python function no subject declares, named as --sut with no --subject and no other --oracle:
// a subject of its own, judged against eager mode alone. It is its own oracle (as PyTorch's
// functions are theirs), with the properties that compare a run with eager mode or with itself;
// what it fails is a finding, and fails the run (Subject::findings_fail). Registered once, by
// whichever of --sut and --oracle is read first (replay reads only the oracle); subject_option
// then finds it as the subject declaring --sut. Nothing where the command line says otherwise.
void register_own_function(const Args& args) {
  if (args.has("subject") || !args.has("sut")) return;
  const std::string sut = args.get("sut", "");
  if (sut.rfind("python:", 0) != 0 || subject_declaring(sut) != nullptr) return;
  if (args.has("oracle") && args.get("oracle", "") != sut) return;
  Subject subject;
  subject.name = "own-function";
  subject.description = "a Python function no subject declares (" + sut + "), judged against eager mode alone";
  subject.change = sut;
  subject.oracle = sut;
  subject.implementations = {{sut, "given on the command line, judged against eager mode alone", VariantKind::change}};
  judge_against_eager_and_itself(
      subject,
      {"Megatron's is-checkpointing flag, which a function no subject declares is not known to keep",
       "a claim of Megatron's clearing change, which a function no subject declares does not make",
       "CheckpointWithoutOutput's discard, which a function no subject declares is not known to have"});
  subject.findings_fail = true;
  subject.exported_as = default_subject().exported_as;
  subject.make = [](const std::string& name) { return make_checkpoint(name); };
  register_subject(std::move(subject));
}

}  // namespace

std::string sut_option(const Args& args) {
  register_own_function(args);
  return joined_to_subject(args, args.get("sut", subject_option(args).change), VariantKind::change);
}

std::string oracle_option(const Args& args) {
  register_own_function(args);
  return joined_to_subject(args, args.get("oracle", subject_option(args).oracle), VariantKind::oracle);
}

std::string subject_argument(const Args& args) {
  return args.has("subject") ? " --subject " + args.get("subject", "") : "";
}

double case_seconds_option(const Args& args) {
  return static_cast<double>(args.number("case-seconds", static_cast<int64_t>(runner::kCaseSeconds), 0, 7 * 24 * 3600));
}

std::string device_option(const Args& args, const char* option) {
  const std::string device = args.get(option, "cpu");
  if (device != "cpu" && device != "cuda") {
    throw UsageError(std::string("--") + option + ": expected cpu or cuda, got '" + device + "'");
  }
  return device;
}

int world_size_option(const Args& args, const CheckpointImplementation& sut, const CheckpointImplementation& oracle,
                      const std::string& device) {
  const int world_size = static_cast<int>(args.number("world-size", 1, 1, 8));
  if (world_size > 1) {
    for (const CheckpointImplementation* variant : {&sut, &oracle}) {
      if (!needs_python_bridge(resolve_checkpoint_alias(variant->name())) || !variant->distributes(device == "cuda")) {
        throw UsageError("--world-size " + std::to_string(world_size) +
                         ": needs Megatron's Python code as both --sut and --oracle, on the CPU (python:, "
                         "python-clearing: or python-change: of megatron.core.tensor_parallel.random, or a file of it), "
                         "which split and gather through a process group; " + variant->name() +
                         (device == "cuda" ? " on cuda" : "") + " keeps one rank");
      }
    }
  }
  TensorParallelRank rank;
  rank.world_size = world_size;
  set_tensor_parallel_rank(rank);
  return world_size;
}

int jobs_option(const Args& args) {
  const int64_t jobs = args.number("jobs", 1, 0, 256);
  if (jobs > 0) return static_cast<int>(jobs);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? static_cast<int>(std::min<long>(cores, 256)) : 1;
}

namespace {
std::string g_program = "recheck";
}

void set_program_name(const std::string& argv0) {
  // A program found on PATH is named as typed; one started by its path keeps that path.
  if (argv0.find('/') != std::string::npos) g_program = argv0;
}

std::string replay_command(const CheckpointImplementation& sut, const CheckpointImplementation& oracle) {
  std::string environment;
  for (const CheckpointImplementation* variant : {&sut, &oracle}) {
    const std::string needed = variant->replay_environment();
    if (!needed.empty() && environment.find(needed) == std::string::npos) environment += needed + " ";
  }
  return environment + g_program;
}

ClaimChoice claims_option(const Args& args) {
  if (!args.has("claims")) return {};
  try {
    return parse_claims(args.get("claims", ""));
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
}

std::string claims_argument(const ClaimChoice& claims) {
  return claims.chosen ? " --claims " + describe_claims(claims) : "";
}

std::string world_size_argument() {
  const int world_size = tensor_parallel_rank().world_size;
  return world_size > 1 ? " --world-size " + std::to_string(world_size) : "";
}

}  // namespace recheck::cli
