// recheck mutants: hunt every mutant variant, and check the correct ones raise no alarm.
#include <algorithm>
#include <chrono>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "properties/generator.h"
#include "runner/interrupts.h"
#include "runner/mutant_hunts.h"
#include "suts/subject.h"

namespace recheck::cli {

namespace {

const char* kMutantsHelp = R"(usage: recheck mutants [options]

Runs the suite against every mutant variant (a plausible mistake in a checkpoint change, see
`recheck variants`), from several seeds, and prints for each: killed or survived, the property
that killed it, the cases until the first kill from the first seed, the median over all seeds,
and the seconds spent. Control rows check the correct `clearing` variant, each equivalent
rewrite of it and each fix of the released function (`recheck variants`) on as many cases as the longest hunt, from every hunt's seed:
they must raise no alarm. Exit code 1 when a mutant survives a seed or a control raises an
alarm; 130 (143 for SIGTERM) when interrupted before that was found (the mutants not hunted
yet are left out of the table). A mutant that no case this build can run on CPU tells from the
oracle (autocast-dtype-lost before libtorch 2.1) is skipped, with a line saying why.

options:
  --seeds N         hunts per mutant, each from its own seed (default 10)
  --budget N        cases per hunt before the mutant counts as survived (default 200)
  --seed N          first seed; hunt r starts at draw seed N + r * 1000003 (default 1)
  --mutant NAMES    only these mutants, comma-separated
  --subject NAME    the checkpoint function whose mutants to hunt, against its oracle (`recheck
                    variants` lists the subjects; default megatron-checkpoint-function)
  --jobs N          run the hunts in N worker processes at once (default 1: in this process;
                    0: one per core); the table is the same for every N, times aside
  --json FILE       write the table as data ('-' for standard output)
)";

int command_mutants(const Args& args) {
  check_output_files(args, {"json"});
  runner::MutantHuntPlan plan;
  plan.seeds = args.number("seeds", 10, 1, 1000);
  plan.budget = args.number("budget", 200, 1, INT64_MAX / 2);
  plan.first_seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX / 4));
  plan.jobs = jobs_option(args);
  const Subject& subject = subject_option(args);
  plan.subject = &subject;
  std::set<std::string> only;
  if (args.has("mutant")) {
    std::stringstream list(args.get("mutant", ""));
    for (std::string name; std::getline(list, name, ',');) {
      const SubjectImplementation* v = subject.find(name);
      if (v == nullptr) throw UsageError("--mutant: " + subject.name + " declares no implementation '" + name + "'");
      if (v->kind != VariantKind::mutant) throw UsageError("--mutant: '" + name + "' is not a mutant");
      only.insert(name);
    }
  }
  auto oracle = subject.make(subject.oracle);
  // Cases its oracle can run: the RNG sources it restores, distributed or not.
  plan.gen = options_for(GenOptions{}, *oracle);

  // A mutant no case this build can run on CPU tells from the oracle is left out, and said so.
  std::vector<const SubjectImplementation*> mutants;
  json skipped = json::array();
  for (const SubjectImplementation* variant : subject.of_kind(VariantKind::mutant)) {
    if (!only.empty() && !only.count(variant->name)) continue;
    if (!variant->cannot_be_killed_on_cpu.empty()) {
      skipped.push_back({{"mutant", variant->name}, {"why", variant->cannot_be_killed_on_cpu}});
      continue;
    }
    mutants.push_back(variant);
  }
  const std::vector<runner::MutantHunts> hunted = runner::hunt_mutants(plan, mutants, *oracle);

  // The name column fits the longest name (Megatron's fit 28; another subject's may not).
  int name_width = 28;
  for (const SubjectImplementation* variant : mutants) {
    name_width = std::max(name_width, static_cast<int>(variant->name.size()) + 2);
  }
  std::cout << std::left << std::setw(name_width) << "mutant" << std::setw(10) << "result" << std::setw(36) << "killed by"
            << std::right << std::setw(11) << "first kill" << std::setw(8) << "median" << std::setw(9) << "seconds"
            << "\n";
  json rows = json::array();
  bool all_killed = true;
  int64_t longest_hunt = 0;
  for (const runner::MutantHunts& mutant : hunted) {
    const std::vector<runner::HuntRow>& hunts = mutant.hunts;
    for (const runner::HuntRow& h : hunts) longest_hunt = std::max(longest_hunt, h.cases);
    if (mutant.killed < static_cast<int>(hunts.size())) all_killed = false;
    const bool over_budget = mutant.median_cases > static_cast<double>(plan.budget);
    std::ostringstream med_text;
    if (over_budget) med_text << ">" << plan.budget;
    else med_text << mutant.median_cases;
    std::cout << std::left << std::setw(name_width) << mutant.mutant->name << std::setw(10)
              << (mutant.killed == 0 ? "survived" : "killed") << std::setw(36)
              << (mutant.killed_by.empty() ? "-" : mutant.killed_by) << std::right << std::setw(11)
              << (!hunts[0].killed ? "-" : std::to_string(hunts[0].cases)) << std::setw(8) << med_text.str()
              << std::setw(9) << std::fixed << std::setprecision(1) << mutant.seconds << std::defaultfloat << "   "
              << mutant.killed << "/" << hunts.size() << "\n";
    json per_seed = json::array();
    for (size_t r = 0; r < hunts.size(); ++r) {
      const runner::HuntRow& h = hunts[r];
      json row = {{"first_seed", plan.start_of(static_cast<int64_t>(r))}, {"killed", h.killed}, {"cases", h.cases},
                  {"seconds", h.seconds}};
      if (h.killed) {
        row["draw_seed"] = h.draw_seed;
        const size_t space = h.killer.find(' ');
        row["property"] = h.killer.substr(0, space);
        row["classification"] = space == std::string::npos ? "" : h.killer.substr(space + 1);
      }
      per_seed.push_back(std::move(row));
    }
    rows.push_back({{"mutant", mutant.mutant->name},
                    {"description", mutant.mutant->description},
                    {"killed", mutant.killed},
                    {"hunts", hunts.size()},
                    {"killed_by", mutant.killed_by},
                    {"median_cases_to_kill", over_budget ? json(nullptr) : json(mutant.median_cases)},
                    {"seconds", mutant.seconds},
                    {"per_seed", per_seed}});
  }

  // The control: the change, each equivalent rewrite of it and each fix (the change plus a fix of
  // the released function, `recheck variants`), over as many cases as the longest hunt, from
  // every hunt's seed. Any alarm on them is a false alarm of recheck.
  std::vector<const SubjectImplementation*> correct_variants;
  for (const SubjectImplementation& variant : subject.implementations) {
    const VariantKind kind = variant.kind;
    if (kind == VariantKind::change || kind == VariantKind::equivalent || kind == VariantKind::fix) {
      correct_variants.push_back(&variant);
    }
  }
  int64_t control_alarms = 0;
  json control = json::array();
  for (const runner::ControlRow& row :
       runner::control_correct(plan, correct_variants, std::max<int64_t>(longest_hunt, 1), *oracle)) {
    control_alarms += row.alarms;
    std::cout << "control: " << row.variant << " raised " << row.alarms << " alarms in " << row.cases << " cases"
              << (row.first.empty() ? "" : " (first: " + row.first + ")") << "\n";
    control.push_back({{"variant", row.variant}, {"cases", row.cases}, {"alarms", row.alarms}});
  }
  for (const json& s : skipped) {
    std::cout << "skipped: " << s.at("mutant").get<std::string>() << ": " << s.at("why").get<std::string>() << "\n";
  }
  // Interrupted: what was hunted so far is judged (exit 1 for a survivor, else 130 or 143).
  const bool ok = all_killed && control_alarms == 0;
  std::cout << (!ok           ? "FAIL: a mutant survived a seed, or the control raised an alarm\n"
                : runner::interrupted() ? "interrupted: every mutant hunted so far was killed from every seed tried\n"
                                : "OK: every mutant was killed from every seed\n");
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "mutants"},
                                              {"seeds", plan.seeds},
                                              {"budget", plan.budget},
                                              {"first_seed", plan.first_seed},
                                              {"mutants", rows},
                                              {"skipped", skipped},
                                              {"control", control},
                                              {"interrupted", runner::interrupted()},
                                              {"ok", ok && !runner::interrupted()}});
  }
  return ok ? 0 : 1;
}

}  // namespace

const Command kMutants{"mutants", "run the suite against every mutant variant and print which it kills, how fast", kMutantsHelp, {}, {"subject", "seeds", "budget", "seed", "mutant", "json", "jobs"}, command_mutants, true};

}  // namespace recheck::cli
