#include "runner/run_session.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <iostream>
#include <utility>

#include "core/torch_compat.h"
#include "properties/corpus.h"
#include "runner/case_worker.h"
#include "runner/hunt.h"
#include "runner/interrupts.h"
#include "runner/isolated_check.h"
#include "runner/ranks.h"
#include "suts/subject.h"

namespace recheck::runner {

using nlohmann::json;

void RunProgress::reached(const Case& c) {
  for (std::string& label : case_features(c)) labels_.insert(std::move(label));
}

void RunProgress::sample(double seconds, int64_t cases, int64_t findings, int64_t alarms, int64_t buckets, bool last) {
  if (!last && seconds < next_) return;
  samples_.push_back({{"seconds", seconds},
                      {"cases", cases},
                      {"findings", findings},
                      {"alarms", alarms},
                      {"buckets", buckets},
                      {"coverage", labels_.size()}});
  next_ = seconds + every_;
  constexpr size_t kMost = 1000;
  if (samples_.size() > kMost) {
    json kept = json::array();
    for (size_t i = 0; i < samples_.size(); i += 2) kept.push_back(samples_[i]);
    if (samples_.size() % 2 == 0) kept.push_back(samples_.back());  // the latest stays
    samples_ = std::move(kept);
    every_ *= 2;
  }
}

namespace {

using Clock = std::chrono::steady_clock;

// The session's state while its cases run; one per run_session call.
class Session {
 public:
  Session(const RunPlan& plan, CheckpointImplementation& oracle, CheckpointImplementation& sut)
      : plan_(plan), oracle_(oracle), sut_(sut), start_(Clock::now()), last_progress_(start_) {
    record_.summary.checks(sut.name());
    for (const auto& [property, reason] : plan.not_checked) record_.summary.not_checked(property, reason);
  }

  RunRecord run() &&;

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  Case case_at(int64_t index) const { return draw_case(plan_.gen, plan_.seed + static_cast<uint64_t>(index)); }
  bool should_stop(int64_t index) const {
    return (plan_.cases > 0 && index >= plan_.cases) ||
           (plan_.seconds > 0 && elapsed() >= static_cast<double>(plan_.seconds)) || interrupted();
  }
  void list_finding(json finding, bool alarm);
  void report_finding(int64_t index, const std::string& property, const std::string& classification, bool alarm,
                      const std::string& sut_text, const std::string& oracle_text, const std::string& cause);
  void sample_progress(bool last);
  void handle(int64_t index, const CaseResult& result);
  void lost(int64_t index, const CaseLost& case_lost);
  CaseResult check_here(int64_t index);
  // In the process that checks cases: the device and the variants ready for it.
  void ready() const { check_ready_to_run(plan_.gen.device == "cuda", oracle_, sut_); }
  // A regression or divergence; for a function judged against eager mode alone, a finding too.
  bool alarm(Classification c) const { return is_alarm(c) || (findings_fail_ && c == Classification::pre_existing); }
  void prepare();

  // Every alarm is listed; the other findings up to kListed, the rest only counted.
  static constexpr size_t kListed = 10000;
  // Findings written to files per property and classification beyond alarms and buckets' first.
  static constexpr int kPreExistingFilesPerProperty = 5;

  const RunPlan& plan_;
  CheckpointImplementation& oracle_;
  CheckpointImplementation& sut_;
  const bool findings_fail_ = subject_for(sut_.name()).findings_fail;
  RunRecord record_;
  std::map<std::string, int> written_per_kind_;
  int64_t alarms_found_ = 0;
  bool threads_set_ = false;
  RankPeers peers_;  // with more than one rank, the other ranks check each case alongside
  const Clock::time_point start_;
  Clock::time_point last_progress_;
};

void Session::list_finding(json finding, bool alarm) {
  if (alarm || record_.findings.size() < kListed) {
    record_.findings.push_back(std::move(finding));
  } else {
    ++record_.findings_not_listed;
  }
}

void Session::report_finding(int64_t index, const std::string& property, const std::string& classification,
                             bool alarm, const std::string& sut_text, const std::string& oracle_text,
                             const std::string& cause) {
  const uint64_t draw_seed = plan_.seed + static_cast<uint64_t>(index);
  json finding = {{"case", index},          {"draw_seed", draw_seed},   {"property", property},
                  {"classification", classification}, {"sut", sut_text}, {"oracle", oracle_text},
                  {"cause", cause}};
  const std::string kind = property + "/" + classification;
  Buckets& buckets = record_.buckets;
  const bool first_of_bucket = !buckets.contains(cause);
  buckets.add(cause, property, classification, alarm, index, draw_seed,
              "sut: " + sut_text + (oracle_text.empty() ? "" : " | oracle: " + oracle_text));
  if (alarm || first_of_bucket || written_per_kind_[kind] < kPreExistingFilesPerProperty) {
    ++written_per_kind_[kind];
    make_output_folder(plan_.out_dir);
    const std::string file =
        save_finding(case_at(index), plan_.out_dir, plan_.seed, index, sut_.name(), property, classification,
                     classification + " " + property + " (sut " + sut_.name() + ", oracle " + oracle_.name() +
                         "): sut: " + sut_text + " | oracle: " + oracle_text + plan_.code_note);
    finding["file"] = file;
    if (first_of_bucket) buckets.at(cause).file = file;
    if (alarm) {
      std::cerr << classification << ": " << property << " in case " << index << " (draw seed " << draw_seed
                << ")\n    sut: " << sut_text << "\n    oracle: " << oracle_text << "\n    replay: "
                << plan_.replay_prefix << " repro " << file << plan_.replay_suffix << "\n";
    }
  }
  list_finding(std::move(finding), alarm || property == kCrashProperty);  // a crash's entry is amended in lost()
}

void Session::sample_progress(bool last) {
  record_.progress.sample(elapsed(), record_.summary.cases(),
                          static_cast<int64_t>(record_.findings.size()) + record_.findings_not_listed, alarms_found_,
                          static_cast<int64_t>(record_.buckets.size()), last);
}

void Session::handle(int64_t index, const CaseResult& result) {
  Summary& summary = record_.summary;
  summary.add(result);
  if (result.skipped.empty() && !result.eager_ran) ++record_.eager_skipped;
  for (const PropertyResult& r : result.results) alarms_found_ += alarm(r.classification) ? 1 : 0;
  record_.op_executions += result.op_executions;
  if (!result.skipped.empty()) {
    // Too large for the memory: counted and named, not a failure.
    list_finding({{"case", index}, {"draw_seed", plan_.seed + static_cast<uint64_t>(index)},
                  {"classification", "skipped"}, {"reason", result.skipped}}, false);
    if (summary.skipped() == 1) record_.first_skipped = "case " + std::to_string(index) + ": " + result.skipped;
  }
  for (const PropertyResult& r : result.results) {
    if (r.classification == Classification::pass) continue;
    report_finding(index, r.property, findings_fail_ && r.classification == Classification::pre_existing ? "finding" : to_string(r.classification),
                   alarm(r.classification), r.sut.describe(),
                   r.oracle.describe(), r.cause);
  }
  if (plan_.track_progress) {
    // Coverage draws each case again here: only when the report keeps the run over time.
    record_.progress.reached(case_at(index));
    sample_progress(false);
  }
  if (!plan_.quiet && std::chrono::duration<double>(Clock::now() - last_progress_).count() >= 2.0) {
    last_progress_ = Clock::now();
    std::cerr << "[" << static_cast<int64_t>(elapsed()) << " s] " << summary.cases() << " cases, "
              << summary.count(Classification::regression) << " regression, "
              << summary.count(Classification::divergent) << " divergent, "
              << summary.count(Classification::pre_existing) << " pre-existing\n";
  }
}

void Session::lost(int64_t index, const CaseLost& case_lost) {
  if (case_lost.killed_for_memory) {
    handle(index, skipped_for_memory());
    return;
  }
  ++record_.crashes;
  // An exception that ended the worker in a case (code the check could not run, a Python
  // variant's module of another version) is not a crash of the variant: it says what it was.
  const std::string how =
      "the worker process " + case_lost.status + (case_lost.error.empty() ? "" : ": " + case_lost.error);
  const Crash crash = case_lost.error.empty() ? classify_crash(case_at(index), how, oracle_, [this] { ready(); },
                                                               plan_.run_options, plan_.eager_run, plan_.claims,
                                                               plan_.case_seconds)
                                              : Crash{how, ""};
  if (crash.pre_existing()) ++record_.pre_existing_crashes;
  report_finding(index, kCrashProperty, kCrash, !crash.pre_existing(), crash.how, crash.oracle_end, crash.signature());
  if (crash.pre_existing()) record_.findings.back()["pre_existing"] = true;
}

CaseResult Session::check_here(int64_t index) {
  // Set where the cases run (the worker), so that the parent keeps clear of torch's thread pools.
  if (plan_.threads > 0 && !threads_set_) at::set_num_threads(static_cast<int>(plan_.threads));
  threads_set_ = true;
  return check_case(case_at(index), oracle_, sut_, plan_.run_options, plan_.eager_run, plan_.claims);
}

void Session::prepare() {
  // The other ranks are forked from the process that checks cases, before it starts the device
  // (a Python variant on CUDA cannot start torch.cuda in a process forked after CUDA started).
  peers_.start([this] { ready(); }, [this](const std::string& line) { (void)check_here(std::stoll(line)); });
  ready();
  // Workers sharing one GPU: each its share of the device's memory, a case too large for it
  // skipped as one too large for the device is.
  if (plan_.jobs > 1 && plan_.gen.device == "cuda") compat::cuda_limit_memory_fraction(1.0 / plan_.jobs);
}

RunRecord Session::run() && {
  auto check = [this](int64_t index) {
    if (peers_.active()) peers_.send(std::to_string(index));
    CaseResult result = check_here(index);
    if (peers_.active()) peers_.wait();
    return result;
  };
  if (!plan_.isolate) {
    try {
      prepare();
    } catch (const std::exception& error) {
      record_.failed = error.what();
      std::cerr << "recheck run: " << record_.failed << "\n";
    }
    for (int64_t index = 0; record_.failed.empty() && !should_stop(index); ++index) handle(index, check(index));
  } else {
    // Cases run in worker processes, so that an abort or a segmentation fault inside a variant
    // is a finding with its case saved, and the run goes on with the next case in a new worker.
    // This process runs no torch op itself, so forking it is safe.
    WorkerHunt hunt{[this] { prepare(); }, [this](int64_t index) { return should_stop(index); }, check,
                    [this](int64_t index, const CaseResult& result) { handle(index, result); },
                    [this](int64_t index, const CaseLost& case_lost) { lost(index, case_lost); }};
    hunt.fresh_process_per_case = plan_.fresh_process;
    hunt.case_seconds = plan_.case_seconds;
    const HuntOutcome outcome = hunt_in_workers(plan_.jobs, hunt);
    if (!outcome.failed.empty()) {
      record_.failed = outcome.failed;
      std::cerr << "recheck run: " << record_.failed << "; stopping\n";
    }
  }
  record_.seconds = elapsed();
  if (plan_.track_progress) sample_progress(true);
  return std::move(record_);
}

}  // namespace

RunRecord run_session(const RunPlan& plan, CheckpointImplementation& oracle, CheckpointImplementation& sut) {
  return Session(plan, oracle, sut).run();
}

}  // namespace recheck::runner
