// recheck mutants: hunt every mutant variant, and check the correct ones raise no alarm.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "runner/interrupts.h"
#include "suts/checkpoint.h"

namespace recheck::cli {

namespace {

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

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int command_mutants(const Args& args) {
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
    if (runner::interrupted()) break;  // the mutants not hunted yet are left out of the table
    for (int64_t r = 0; r < seeds && !runner::interrupted(); ++r) {
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
    for (int64_t r = 0; r < seeds && !runner::interrupted(); ++r) {
      for (int64_t i = 0; i < control_cases && !runner::interrupted(); ++i) {
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
                : runner::interrupted() ? "interrupted: every mutant hunted so far was killed from every seed tried\n"
                                : "OK: every mutant was killed from every seed\n");
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "mutants"},
                                              {"seeds", seeds},
                                              {"budget", budget},
                                              {"first_seed", first_seed},
                                              {"mutants", rows},
                                              {"control", control},
                                              {"interrupted", runner::interrupted()},
                                              {"ok", ok && !runner::interrupted()}});
  }
  return ok ? 0 : 1;
}

}  // namespace

const Command kMutants{"mutants", "run the suite against every mutant variant and print which it kills, how fast", kMutantsHelp, {}, {"seeds", "budget", "seed", "mutant", "json"}, command_mutants, true};

}  // namespace recheck::cli
