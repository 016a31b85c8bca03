#include "runner/mutant_hunts.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include <nlohmann/json.hpp>

#include "properties/corpus.h"
#include "properties/report.h"
#include "runner/interrupts.h"
#include "runner/isolated_check.h"
#include "runner/pool.h"

namespace recheck::runner {

namespace {

using nlohmann::json;

// hunt() with each case checked in a process of its own (Subject::cases_may_crash): a crash the
// oracle makes alone too kills nothing. The answer a hunt task gives.
json isolated_hunt(CheckpointImplementation& oracle, CheckpointImplementation& mutant, const GenOptions& gen,
                   uint64_t first_seed, int64_t budget) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  json answer = {{"killed", false}, {"cases", 0}};
  for (int64_t i = 0; i < budget && !interrupted(); ++i) {
    const uint64_t draw_seed = first_seed + static_cast<uint64_t>(i);
    const OwnProcessVerdict result = first_alarm_in_own_process(draw_case(gen, draw_seed), oracle, mutant);
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

// Tasks 0..count-1 here, one after another (one job: in this process), or in worker processes
// (runner/pool.h); the answers by task index, "" for one not run (interrupted) and "died: HOW"
// for one whose worker died.
std::vector<std::string> answers_of(int jobs, int64_t count, const std::function<std::string(int64_t)>& task) {
  std::vector<std::string> answers(static_cast<size_t>(count));
  if (jobs <= 1) {
    for (int64_t i = 0; i < count && !interrupted(); ++i) answers[static_cast<size_t>(i)] = task(i);
    return answers;
  }
  const std::vector<TaskAnswer> pooled = run_tasks(jobs, count, task);
  for (size_t i = 0; i < pooled.size(); ++i) {
    if (pooled[i].text) answers[i] = *pooled[i].text;
    else if (!pooled[i].died.empty()) answers[i] = "died: " + pooled[i].died;
  }
  return answers;
}

HuntRow row_of(const std::string& answer) {
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
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

std::vector<MutantHunts> hunt_mutants(const MutantHuntPlan& plan, const std::vector<const SubjectImplementation*>& mutants,
                                      CheckpointImplementation& oracle) {
  const Subject& subject = *plan.subject;
  const int64_t seeds = plan.seeds;
  // Every hunt (mutant, seed) is a task.
  const std::vector<std::string> answers =
      answers_of(plan.jobs, static_cast<int64_t>(mutants.size()) * seeds, [&](int64_t task) {
        const auto mutant = subject.make(mutants[static_cast<size_t>(task / seeds)]->name);
        const uint64_t start = plan.start_of(task % seeds);
        if (subject.cases_may_crash) return isolated_hunt(oracle, *mutant, plan.gen, start, plan.budget).dump();
        const Hunt h = hunt(oracle, *mutant, plan.gen, start, plan.budget);
        json answer = {{"killed", h.killed}, {"cases", h.cases}, {"seconds", h.seconds}};
        if (h.killed) {
          answer["draw_seed"] = h.draw_seed;
          answer["killer"] = h.property + " " + to_string(h.classification);
        }
        return answer.dump();
      });
  std::vector<MutantHunts> hunted;
  for (size_t m = 0; m < mutants.size(); ++m) {
    MutantHunts mutant;
    mutant.mutant = mutants[m];
    std::vector<double> cases_to_kill;
    std::map<std::string, int> killers;
    for (int64_t r = 0; r < seeds; ++r) {
      const HuntRow h = row_of(answers[m * static_cast<size_t>(seeds) + static_cast<size_t>(r)]);
      if (!h.done) break;  // interrupted: the hunts not run are left out
      mutant.hunts.push_back(h);
      mutant.seconds += h.seconds;
      mutant.killed += h.killed ? 1 : 0;
      // A survived hunt counts as one more than the budget, so the median says "over budget".
      cases_to_kill.push_back(h.killed ? static_cast<double>(h.cases) : static_cast<double>(plan.budget + 1));
      if (h.killed) ++killers[h.killer];
    }
    if (mutant.hunts.empty()) break;  // the mutants not hunted yet are left out
    int best = 0;
    for (const auto& [name, count] : killers) {
      if (count > best) best = count, mutant.killed_by = name;
    }
    mutant.median_cases = median(cases_to_kill);
    hunted.push_back(std::move(mutant));
  }
  return hunted;
}

std::vector<ControlRow> control_correct(const MutantHuntPlan& plan, const std::vector<const SubjectImplementation*>& correct,
                                        int64_t cases, CheckpointImplementation& oracle) {
  const Subject& subject = *plan.subject;
  const int64_t seeds = plan.seeds;
  // One task per variant and seed.
  const std::vector<std::string> answers = answers_of(
      interrupted() ? 1 : plan.jobs, interrupted() ? 0 : static_cast<int64_t>(correct.size()) * seeds,
      [&](int64_t task) {
        const auto variant = subject.make(correct[static_cast<size_t>(task / seeds)]->name);
        int64_t alarms = 0;
        int64_t checked = 0;
        std::string first;
        for (int64_t i = 0; i < cases && !interrupted(); ++i) {
          const uint64_t draw_seed = plan.start_of(task % seeds) + static_cast<uint64_t>(i);
          const Case c = draw_case(plan.gen, draw_seed);
          ++checked;
          std::string alarm;
          if (subject.cases_may_crash) {
            const OwnProcessVerdict result = first_alarm_in_own_process(c, oracle, *variant);
            if (result.alarm) alarm = result.describe();
          } else if (const PropertyResult* found = check_case(c, oracle, *variant).first_alarm()) {
            alarm = found->property + " " + to_string(found->classification);
          }
          if (alarm.empty()) continue;
          ++alarms;
          if (first.empty()) first = alarm + " on draw seed " + std::to_string(draw_seed);
        }
        return json{{"checked", checked}, {"alarms", alarms}, {"first", first}}.dump();
      });
  std::vector<ControlRow> rows;
  for (size_t v = 0; v < correct.size() && !answers.empty(); ++v) {
    ControlRow row;
    row.variant = correct[v]->name;
    for (int64_t r = 0; r < seeds; ++r) {
      const std::string& answer = answers[v * static_cast<size_t>(seeds) + static_cast<size_t>(r)];
      if (answer.empty()) continue;  // interrupted
      if (answer.rfind("died: ", 0) == 0) {
        ++row.alarms;  // a correct variant crashed its worker: as loud as an alarm
        if (row.first.empty()) row.first = "the worker " + answer.substr(6);
        continue;
      }
      const json j = json::parse(answer);
      row.cases += j.at("checked").get<int64_t>();
      row.alarms += j.at("alarms").get<int64_t>();
      if (row.first.empty()) row.first = j.at("first").get<std::string>();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace recheck::runner
