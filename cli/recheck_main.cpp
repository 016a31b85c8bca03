// recheck: the command-line tool, a thin layer over the core.
//   recheck run      draw random cases, check every property, print a table of verdicts
//   recheck repro    replay one case file, print each property's verdict and evidence
//   recheck show     print a case file's graph as indented text
//   recheck variants list the checkpoint variants
//   recheck mutants  hunt every mutant variant: killed or survived, by what, after how many cases
//   recheck bench    cases/s, op executions/s and the check-to-eager cost ratio, single thread
// Exit codes: 0 no regression, 1 regression or divergence found, 2 bad usage or bad input.
#include <algorithm>
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

#include <ATen/Parallel.h>

#include "core/case.h"
#include "core/interpreter.h"
#include "oracles/eager.h"
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
  mutants    run the suite against every mutant variant and print which it kills, how fast
  bench      measure cases/s, op executions/s and the cost of a check against a plain eager run

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
  --max-depth N     deepest checkpoint nesting (default 4)
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

// Ctrl-C ends the loop in progress after the current case; the summary so far is printed.
void stop_on_interrupt() {
  std::signal(SIGINT, [](int) { g_interrupted = true; });
}

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
  gen.max_depth = static_cast<int>(args.number("max-depth", gen.max_depth, 0, 16));
  gen.max_ops = static_cast<int>(args.number("max-ops", gen.max_ops, 1, 64));
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

  stop_on_interrupt();
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

const char* kMutantsHelp = R"(usage: recheck mutants [options]

Runs the suite against every mutant variant (a plausible mistake in a checkpoint change, see
`recheck variants`), from several seeds, and prints for each: killed or survived, the property
that killed it, the cases until the first kill from the first seed, the median over all seeds,
and the seconds spent. A control row checks the correct `clearing` variant on as many cases as
the longest hunt: it must raise no alarm. Exit code 1 when a mutant survives a seed or the
control raises an alarm.

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
compare ratios measured in one run.
)";

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

  // The control: the correct variant over as many cases as the longest hunt.
  auto clearing = make_checkpoint("clearing");
  int64_t control_alarms = 0;
  const int64_t control_cases = std::max<int64_t>(longest_hunt, 1);
  for (int64_t i = 0; i < control_cases && !g_interrupted; ++i) {
    control_alarms += check_case(draw_case(gen, start_of(0) + static_cast<uint64_t>(i)), *oracle, *clearing).has_alarm();
  }
  std::cout << "control: clearing raised " << control_alarms << " alarms in " << control_cases << " cases\n";
  const bool ok = all_killed && control_alarms == 0 && !g_interrupted;
  std::cout << (ok ? "OK: every mutant was killed from every seed\n"
                   : "FAIL: a mutant survived a seed, or the control raised an alarm\n");
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "mutants"},
                                              {"seeds", seeds},
                                              {"budget", budget},
                                              {"first_seed", first_seed},
                                              {"mutants", rows},
                                              {"control", {{"variant", "clearing"}, {"cases", control_cases}, {"alarms", control_alarms}}},
                                              {"ok", ok}});
  }
  return ok ? 0 : 1;
}

int command_bench(const Args& args) {
  if (args.flag("help")) {
    std::cout << kBenchHelp;
    return 0;
  }
  const int64_t cases = args.number("cases", 500, 1, INT64_MAX / 2);
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
  for (int64_t i = 0; i < cases && !g_interrupted; ++i) {
    const Case c = draw_case(gen, seed + static_cast<uint64_t>(i));
    auto t0 = Clock::now();
    eager_ops += run_case(c, eager).op_executions;
    auto t1 = Clock::now();
    check_ops += check_case(c, *oracle, *sut).op_executions;
    auto t2 = Clock::now();
    eager_seconds += std::chrono::duration<double>(t1 - t0).count();
    check_seconds += std::chrono::duration<double>(t2 - t1).count();
  }
  const double cost_ratio = check_seconds / eager_seconds;
  const double op_ratio = static_cast<double>(check_ops) / static_cast<double>(eager_ops);
  std::cout << std::fixed << std::setprecision(1) << "recheck bench: " << cases << " default cases (draw seeds "
            << seed << ".." << seed + static_cast<uint64_t>(cases) - 1 << "), single thread\n"
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
    if (command == "mutants") {
      stop_on_interrupt();
      return command_mutants(Args(argc, argv, 2, {"help"}, {"seeds", "budget", "seed", "mutant", "json"}));
    }
    if (command == "bench") {
      stop_on_interrupt();
      return command_bench(Args(argc, argv, 2, {"help"}, {"cases", "seed", "json"}));
    }
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
