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
#include "properties/report.h"
#include "properties/corpus.h"
#include "runner/interrupts.h"
#include "runner/isolated_check.h"
#include "runner/pool.h"
#include "suts/checkpoint.h"

namespace recheck::cli {

namespace {

// hunt() with each case checked in a process of its own (Subject::cases_may_crash): a crash the
// oracle makes alone too kills nothing. The answer a hunt task gives.
json isolated_hunt(CheckpointImplementation& oracle, CheckpointImplementation& mutant, const GenOptions& gen,
                   uint64_t first_seed, int64_t budget) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  json answer = {{"killed", false}, {"cases", 0}};
  for (int64_t i = 0; i < budget && !runner::interrupted(); ++i) {
    const uint64_t draw_seed = first_seed + static_cast<uint64_t>(i);
    const runner::OwnProcessVerdict result = runner::check_isolated(draw_case(gen, draw_seed), oracle, mutant);
    answer["cases"] = i + 1;
    if (!result.alarm) continue;
    answer["killed"] = true;
    answer["draw_seed"] = draw_seed;
    answer["killer"] = result.describe();
    break;
  }
  answer["seconds"] = std::chrono::duration<double>(Clock::now() - start).count();
  return answer;
}

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

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// One hunt's outcome, as a task answers it (a line of JSON).
struct HuntRow {
  bool done = false;  // false: not run (interrupted)
  bool killed = false;
  int64_t cases = 0;
  double seconds = 0;
  uint64_t draw_seed = 0;
  std::string killer;  // "PROPERTY CLASSIFICATION", or how the worker died
};

// Tasks 0..count-1 here, one after another (one job: as before, in this process), or in worker
// processes (runner/pool.h); the answers by task index, "" for one not run (interrupted) and
// "died: HOW" for one whose worker died.
std::vector<std::string> answers_of(int jobs, int64_t count, const std::function<std::string(int64_t)>& task) {
  std::vector<std::string> answers(static_cast<size_t>(count));
  if (jobs <= 1) {
    for (int64_t i = 0; i < count && !runner::interrupted(); ++i) answers[static_cast<size_t>(i)] = task(i);
    return answers;
  }
  const std::vector<runner::TaskAnswer> pooled = runner::run_tasks(jobs, count, task);
  for (size_t i = 0; i < pooled.size(); ++i) {
    if (pooled[i].text) answers[i] = *pooled[i].text;
    else if (!pooled[i].died.empty()) answers[i] = "died: " + pooled[i].died;
  }
  return answers;
}

int command_mutants(const Args& args) {
  check_output_files(args, {"json"});
  const int64_t seeds = args.number("seeds", 10, 1, 1000);
  const int64_t budget = args.number("budget", 200, 1, INT64_MAX / 2);
  const uint64_t first_seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX / 4));
  const int jobs = jobs_option(args);
  const Subject& subject = subject_option(args);
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
  const GenOptions gen = options_for(GenOptions{}, *oracle);
  auto start_of = [&](int64_t r) { return first_seed + static_cast<uint64_t>(r) * 1000003ULL; };

  // Every hunt (mutant, seed) is a task; with --jobs they run in worker processes at once.
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
  const std::vector<std::string> hunt_answers =
      answers_of(jobs, static_cast<int64_t>(mutants.size()) * seeds, [&](int64_t task) {
        const auto mutant = subject.make(mutants[static_cast<size_t>(task / seeds)]->name);
        if (subject.cases_may_crash) return isolated_hunt(*oracle, *mutant, gen, start_of(task % seeds), budget).dump();
        const Hunt h = hunt(*oracle, *mutant, gen, start_of(task % seeds), budget);
        json answer = {{"killed", h.killed}, {"cases", h.cases}, {"seconds", h.seconds}};
        if (h.killed) {
          answer["draw_seed"] = h.draw_seed;
          answer["killer"] = h.property + " " + to_string(h.classification);
        }
        return answer.dump();
      });
  auto row_of = [&](const std::string& answer) {
    HuntRow row;
    if (answer.empty()) return row;
    row.done = true;
    if (answer.rfind("died: ", 0) == 0) {  // the mutant crashed its worker: a kill, said how
      row.killed = true;
      row.cases = 1;
      row.killer = std::string(kCrashProperty) + " " + kCrash + " (" + answer.substr(6) + ")";
      return row;
    }
    const json j = json::parse(answer);
    row.killed = j.at("killed").get<bool>();
    row.cases = j.at("cases").get<int64_t>();
    row.seconds = j.at("seconds").get<double>();
    if (row.killed) {
      row.draw_seed = j.at("draw_seed").get<uint64_t>();
      row.killer = j.at("killer").get<std::string>();
    }
    return row;
  };

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
  for (size_t m = 0; m < mutants.size(); ++m) {
    const SubjectImplementation& variant = *mutants[m];
    std::vector<HuntRow> hunts;
    std::vector<double> cases_to_kill;
    std::map<std::string, int> killers;
    double seconds = 0;
    for (int64_t r = 0; r < seeds; ++r) {
      const HuntRow h = row_of(hunt_answers[m * static_cast<size_t>(seeds) + static_cast<size_t>(r)]);
      if (!h.done) break;  // interrupted: the hunts not run are left out
      hunts.push_back(h);
      seconds += h.seconds;
      longest_hunt = std::max(longest_hunt, h.cases);
      // A survived hunt counts as one more than the budget, so the median says "over budget".
      cases_to_kill.push_back(h.killed ? static_cast<double>(h.cases) : static_cast<double>(budget + 1));
      if (h.killed) ++killers[h.killer];
    }
    if (hunts.empty()) break;  // the mutants not hunted yet are left out of the table
    int killed = 0;
    for (const HuntRow& h : hunts) killed += h.killed;
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
    std::cout << std::left << std::setw(name_width) << variant.name << std::setw(10) << (killed == 0 ? "survived" : "killed")
              << std::setw(36) << (killer.empty() ? "-" : killer) << std::right
              << std::setw(11) << (!hunts[0].killed ? "-" : std::to_string(hunts[0].cases))
              << std::setw(8) << med_text.str() << std::setw(9) << std::fixed << std::setprecision(1) << seconds
              << std::defaultfloat << "   " << killed_of << "\n";
    json per_seed = json::array();
    for (size_t r = 0; r < hunts.size(); ++r) {
      const HuntRow& h = hunts[r];
      json row = {{"first_seed", start_of(static_cast<int64_t>(r))}, {"killed", h.killed}, {"cases", h.cases}, {"seconds", h.seconds}};
      if (h.killed) {
        row["draw_seed"] = h.draw_seed;
        const size_t space = h.killer.find(' ');
        row["property"] = h.killer.substr(0, space);
        row["classification"] = space == std::string::npos ? "" : h.killer.substr(space + 1);
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

  // The control: the change, each equivalent rewrite of it and each fix (the change plus a fix of
  // the released function, `recheck variants`), over as many cases as the longest hunt, from
  // every hunt's seed. Any alarm on them is a false alarm of recheck. One task per
  // variant and seed.
  const int64_t control_cases = std::max<int64_t>(longest_hunt, 1);
  std::vector<const SubjectImplementation*> correct_variants;
  for (const SubjectImplementation& variant : subject.implementations) {
    const VariantKind kind = variant.kind;
    if (kind == VariantKind::change || kind == VariantKind::equivalent || kind == VariantKind::fix) {
      correct_variants.push_back(&variant);
    }
  }
  const std::vector<std::string> control_answers =
      answers_of(runner::interrupted() ? 1 : jobs, runner::interrupted() ? 0 : static_cast<int64_t>(correct_variants.size()) * seeds,
                 [&](int64_t task) {
                   const auto correct = subject.make(correct_variants[static_cast<size_t>(task / seeds)]->name);
                   int64_t alarms = 0;
                   int64_t checked = 0;
                   std::string first;
                   for (int64_t i = 0; i < control_cases && !runner::interrupted(); ++i) {
                     const uint64_t draw_seed = start_of(task % seeds) + static_cast<uint64_t>(i);
                     const Case c = draw_case(gen, draw_seed);
                     ++checked;
                     std::string alarm;
                     if (subject.cases_may_crash) {
                       const runner::OwnProcessVerdict result = runner::check_isolated(c, *oracle, *correct);
                       if (result.alarm) alarm = result.describe();
                     } else if (const PropertyResult* found = check_case(c, *oracle, *correct).first_alarm()) {
                       alarm = found->property + " " + to_string(found->classification);
                     }
                     if (alarm.empty()) continue;
                     ++alarms;
                     if (first.empty()) first = alarm + " on draw seed " + std::to_string(draw_seed);
                   }
                   return json{{"checked", checked}, {"alarms", alarms}, {"first", first}}.dump();
                 });
  int64_t control_alarms = 0;
  json control = json::array();
  for (size_t v = 0; v < correct_variants.size() && !control_answers.empty(); ++v) {
    int64_t alarms = 0;
    int64_t checked = 0;
    std::string first;
    for (int64_t r = 0; r < seeds; ++r) {
      const std::string& answer = control_answers[v * static_cast<size_t>(seeds) + static_cast<size_t>(r)];
      if (answer.empty()) continue;  // interrupted
      if (answer.rfind("died: ", 0) == 0) {
        ++alarms;  // a correct variant crashed its worker: as loud as an alarm
        if (first.empty()) first = "the worker " + answer.substr(6);
        continue;
      }
      const json j = json::parse(answer);
      checked += j.at("checked").get<int64_t>();
      alarms += j.at("alarms").get<int64_t>();
      if (first.empty()) first = j.at("first").get<std::string>();
    }
    control_alarms += alarms;
    std::cout << "control: " << correct_variants[v]->name << " raised " << alarms << " alarms in " << checked << " cases"
              << (first.empty() ? "" : " (first: " + first + ")") << "\n";
    control.push_back({{"variant", correct_variants[v]->name}, {"cases", checked}, {"alarms", alarms}});
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
                                              {"seeds", seeds},
                                              {"budget", budget},
                                              {"first_seed", first_seed},
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
