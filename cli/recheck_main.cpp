// recheck: the command-line tool, a thin layer over the core.
//   recheck run      draw random cases, check every property, print a table of verdicts
//   recheck repro    replay one case file, print each property's verdict and evidence
//   recheck show     print a case file's graph as indented text
//   recheck variants list the checkpoint variants
// Exit codes: 0 no regression, 1 regression or divergence found, 2 bad usage or bad input.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "suts/checkpoint.h"

namespace {

using namespace recheck;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `--name value`, `--name=value` and bare flags; positional arguments in order.
class Args {
 public:
  Args(int argc, char** argv, int first, std::set<std::string> flags, std::set<std::string> options)
      : flags_(std::move(flags)), options_(std::move(options)) {
    for (int i = first; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0 || arg == "--") {
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
  variants   list the checkpoint variants

`recheck <command> --help` describes each command.
exit codes: 0 no regression, 1 regression or divergence found, 2 bad usage or bad input
)";

const char* kRunHelp = R"(usage: recheck run [options]

Draws random nested checkpoint cases and runs each three ways (eager, oracle, sut), then checks
every property and classifies it: pass, regression, pre-existing, fixed, divergent.

options:
  --sut NAME        variant under test (default: clearing)
  --oracle NAME     reference variant (default: nonclearing)
  --seed N          first draw seed; case i uses seed N+i (default: from the clock, printed)
  --cases N         number of cases to check
  --seconds S       time budget (default 60 when --cases is not given)
  --device D        cpu or cuda (default: cpu)
  --max-depth N     deepest checkpoint nesting (default 3)
  --max-ops N       most ops per segment (default 6)
  --out DIR         folder for failing cases as JSON (default: recheck-findings)
  --json FILE       write a machine-readable report ('-' for standard output)
  --quiet           no progress lines
)";

const char* kReproHelp = R"(usage: recheck repro CASE.json [--sut NAME] [--oracle NAME] [--json FILE]

Replays one case (eager, oracle, sut) and prints the graph, then each property's verdict with
its evidence. Exit code 1 when a property shows a regression or a divergence.
)";

const char* kShowHelp = R"(usage: recheck show CASE.json

Prints the case's graph as indented text: leaves, ops, checkpoint bodies (marked with |).
)";

std::atomic<bool> g_interrupted{false};

std::string finding_file_name(int64_t index, const std::string& property, Classification c) {
  return "case-" + std::to_string(index) + "-" + property + "-" + to_string(c) + ".json";
}

void write_json_report(const std::string& where, const json& report) {
  if (where == "-") {
    std::cout << report.dump(2) << "\n";
  } else {
    write_file_atomically(where, report.dump(2) + "\n");
  }
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
  gen.max_depth = static_cast<int>(args.number("max-depth", 3, 0, 16));
  gen.max_ops = static_cast<int>(args.number("max-ops", 6, 1, 64));
  const int64_t cases = args.number("cases", -1, 1, INT64_MAX / 2);
  const int64_t seconds = args.number("seconds", cases < 0 ? 60 : -1, 1, 365LL * 24 * 3600);
  const bool quiet = args.flag("quiet");
  const uint64_t seed = args.has("seed")
                            ? static_cast<uint64_t>(args.number("seed", 0, 0, INT64_MAX / 2))
                            : static_cast<uint64_t>(std::random_device{}() % 1000000000ULL);
  const std::string out_dir = args.get("out", "recheck-findings");

  std::cerr << "recheck run: sut " << sut->name() << " against oracle " << oracle->name() << ", seed " << seed
            << ", " << (cases > 0 ? std::to_string(cases) + " cases" : "") << (cases > 0 && seconds > 0 ? " or " : "")
            << (seconds > 0 ? std::to_string(seconds) + " s" : "") << ", device " << gen.device << "\n";

  std::signal(SIGINT, [](int) { g_interrupted = true; });
  Summary summary;
  json findings = json::array();
  std::map<std::string, int> written_per_kind;
  constexpr int kPreExistingFilesPerProperty = 5;
  int64_t op_executions = 0;
  const auto start = Clock::now();
  auto last_progress = start;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  for (int64_t index = 0;; ++index) {
    if (cases > 0 && index >= cases) break;
    if (seconds > 0 && elapsed() >= static_cast<double>(seconds)) break;
    if (g_interrupted) break;
    const uint64_t draw_seed = seed + static_cast<uint64_t>(index);
    Case c = draw_case(gen, draw_seed);
    CaseResult result = check_case(c, *oracle, *sut);
    summary.add(result);
    op_executions += result.op_executions;
    for (const PropertyResult& r : result.results) {
      if (r.classification == Classification::pass) continue;
      json finding = {{"case", index},
                      {"draw_seed", draw_seed},
                      {"property", r.property},
                      {"classification", to_string(r.classification)},
                      {"sut", r.sut.describe()},
                      {"oracle", r.oracle.describe()}};
      const std::string kind = r.property + "/" + to_string(r.classification);
      const bool alarm = is_alarm(r.classification);
      if (alarm || written_per_kind[kind] < kPreExistingFilesPerProperty) {
        ++written_per_kind[kind];
        std::filesystem::create_directories(out_dir);
        const std::string file = out_dir + "/" + finding_file_name(index, r.property, r.classification);
        Case annotated = c;
        annotated.note = std::string(to_string(r.classification)) + " " + r.property + " (sut " + sut->name() +
                         ", oracle " + oracle->name() + "): sut: " + r.sut.describe() + " | oracle: " +
                         r.oracle.describe();
        save_case_file(annotated, file);
        finding["file"] = file;
        if (alarm) {
          std::cerr << to_string(r.classification) << ": " << r.property << " in case " << index << " (draw seed "
                    << draw_seed << ")\n    sut: " << r.sut.describe() << "\n    oracle: " << r.oracle.describe()
                    << "\n    replay: recheck repro " << file << " --sut " << sut->name() << " --oracle "
                    << oracle->name() << "\n";
        }
      }
      findings.push_back(std::move(finding));
    }
    if (!quiet && std::chrono::duration<double>(Clock::now() - last_progress).count() >= 2.0) {
      last_progress = Clock::now();
      std::cerr << "[" << static_cast<int64_t>(elapsed()) << " s] " << summary.cases() << " cases, "
                << summary.count(Classification::regression) << " regression, "
                << summary.count(Classification::divergent) << " divergent, "
                << summary.count(Classification::pre_existing) << " pre-existing\n";
    }
  }

  const double total_seconds = elapsed();
  std::cout << "\nrecheck run: " << summary.cases() << " cases in " << std::fixed << std::setprecision(1)
            << total_seconds << " s (" << std::setprecision(1)
            << (total_seconds > 0 ? summary.cases() / total_seconds : 0.0) << " cases/s), sut " << sut->name()
            << ", oracle " << oracle->name() << ", seed " << seed << (g_interrupted ? ", interrupted" : "") << "\n\n"
            << summary.table() << "\n";
  if (summary.alarms() > 0) {
    std::cout << "FAIL: " << summary.alarms() << " regression or divergent verdicts; cases written to " << out_dir
              << "/\n";
  } else {
    std::cout << "OK: no regression, no divergence";
    if (summary.count(Classification::pre_existing) > 0) {
      std::cout << " (" << summary.count(Classification::pre_existing)
                << " pre-existing findings about the oracle too; examples in " << out_dir << "/)";
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
                   {"summary", summary.to_json()},
                   {"findings", findings}};
    write_json_report(args.get("json", "-"), report);
  }
  return summary.alarms() > 0 ? 1 : 0;
}

Case load_positional_case(const Args& args, const char* command) {
  if (args.positional().size() != 1) throw UsageError(std::string(command) + " takes one case file");
  return load_case_file(args.positional()[0]);
}

int command_repro(const Args& args) {
  if (args.flag("help")) {
    std::cout << kReproHelp;
    return 0;
  }
  const Case c = load_positional_case(args, "repro");
  std::unique_ptr<CheckpointImplementation> sut;
  std::unique_ptr<CheckpointImplementation> oracle;
  try {
    sut = make_checkpoint(args.get("sut", "clearing"));
    oracle = make_checkpoint(args.get("oracle", "nonclearing"));
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
  std::cout << show(c);
  if (!c.note.empty()) std::cout << "note: " << c.note << "\n";
  std::cout << "\nsut " << sut->name() << ", oracle " << oracle->name() << ":\n";
  const CaseResult result = check_case(c, *oracle, *sut);
  std::cout << describe_results(result.results);
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
                                              {"properties", properties_json}});
  }
  return result.has_alarm() ? 1 : 0;
}

int command_show(const Args& args) {
  if (args.flag("help")) {
    std::cout << kShowHelp;
    return 0;
  }
  std::cout << show(load_positional_case(args, "show"));
  return 0;
}

int command_variants(const Args& args) {
  if (args.flag("help")) {
    std::cout << "usage: recheck variants\n\nLists the checkpoint variants --sut and --oracle accept.\n";
    return 0;
  }
  for (const Variant& v : variants()) std::cout << v.name << "\t" << v.description << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::cout << kMainHelp;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  try {
    if (command == "run") {
      return command_run(Args(argc, argv, 2, {"help", "quiet"},
                              {"sut", "oracle", "seed", "cases", "seconds", "device", "max-depth", "max-ops", "out", "json"}));
    }
    if (command == "repro") return command_repro(Args(argc, argv, 2, {"help"}, {"sut", "oracle", "json"}));
    if (command == "show") return command_show(Args(argc, argv, 2, {"help"}, {}));
    if (command == "variants") return command_variants(Args(argc, argv, 2, {"help"}, {}));
    std::cerr << "recheck: unknown command '" << command << "'\n\n" << kMainHelp;
    return 2;
  } catch (const UsageError& error) {
    std::cerr << "recheck " << command << ": " << error.what() << " (see recheck " << command << " --help)\n";
    return 2;
  } catch (const CaseError& error) {
    std::cerr << "recheck " << command << ": " << error.what() << "\n";
    return 2;
  }
}
