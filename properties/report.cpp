#include "properties/report.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "oracles/eager.h"
#include "properties/causes.h"
#include "suts/subject.h"

namespace recheck {

bool CaseResult::has_alarm() const { return first_alarm() != nullptr; }

const PropertyResult* CaseResult::first_alarm() const {
  for (const PropertyResult& r : results) {
    if (is_alarm(r.classification)) return &r;
  }
  return nullptr;
}

CaseResult check_case(const Case& c, CheckpointImplementation& oracle, CheckpointImplementation& sut,
                      const RunOptions& case_options, EagerRun eager_run, const ClaimChoice& claims) {
  // The op index the trace numbers the case's ops by, made once for all its runs.
  RunOptions options = case_options;
  if (options.record_op_trace && !options.trace_index && c.device == "cpu") {
    options.trace_index = std::make_shared<const TraceIndex>(c);
  }
  // A case that passes a call option either variant does not take is refused before anything runs.
  check_call_options(c, oracle);
  check_call_options(c, sut);
  EagerExecution eager;
  // No property reads the eager run's checkpoint bodies' calls (only the oracle's and the sut's),
  // and only memory-eager-floor its memory: it runs without recording calls, and without the
  // probe (unless a CPU budget needs one) where no property applying to the sut reads it, a
  // tenth of a small case's cost.
  RunOptions eager_options = options;
  eager_options.measure_memory = options.measure_memory && reads_eager_memory(sut.name());
  eager_options.record_segment_calls = false;
  std::optional<Observations> eager_observed;
  if (eager_run == EagerRun::always) eager_observed = run_case(c, eager, eager_options);
  // A signature reads the oracle's trace only where the sut holds and the oracle fails (a fix),
  // and a classification rule only where a case has an alarm: the oracle runs without one, and
  // runs again with it for such a case (a third of the trace's cost saved on every other case).
  RunOptions oracle_options = options;
  oracle_options.record_op_trace = false;
  const Observations oracle_observed = run_case(c, oracle, oracle_options);
  const Observations sut_observed = run_case(c, sut, options);
  if (!eager_observed && !agree_for_eager(oracle_observed, sut_observed)) {
    eager_observed = run_case(c, eager, eager_options);
  }
  const auto result_of = [&] {
    CaseResult result;
    result.eager_ran = eager_observed.has_value();
    result.op_executions = oracle_observed.op_executions + sut_observed.op_executions;
    if (eager_observed) result.op_executions += eager_observed->op_executions;
    const Observations* eager_or_none = eager_observed ? &*eager_observed : nullptr;
    for (const Observations* run : {eager_or_none, &oracle_observed, &sut_observed}) {
      if (run && run->error && run->error->error.out_of_memory()) {
        result.skipped = run->implementation + " ran out of memory in iteration " +
                         std::to_string(run->error->iteration) + " " + run->error->phase + ": " +
                         run->error->error.message;
        return result;
      }
    }
    const auto classified = [&](const Observations& oracle_run) {
      return eager_observed ? check_properties(*eager_observed, oracle_run, sut_observed, sut.change_claims(), claims)
                            : check_properties_without_eager(oracle_run, sut_observed, sut.change_claims(), claims);
    };
    result.results = classified(oracle_observed);
    if (options.record_op_trace) {
      std::optional<Observations> oracle_traced;
      if (options.trace_index && (result.has_alarm() || std::any_of(result.results.begin(), result.results.end(), [](const PropertyResult& r) {
            return r.classification != Classification::pass && r.sut.holds && !r.oracle.holds;
          }))) {
        oracle_traced = run_case(c, oracle, options);
      }
      if (oracle_traced && result.has_alarm()) {
        // A rule reads where the oracle's recomputations part from its forward, in its trace
        // (NOTE [ The oracle is no reference ]): an alarm is judged again with it.
        Observations with_trace = oracle_observed;
        with_trace.trace = oracle_traced->trace;
        result.results = classified(with_trace);
      }
      CauseSignatures causes(c, eager_or_none, oracle_traced ? *oracle_traced : oracle_observed, sut_observed);
      for (PropertyResult& r : result.results) {
        if (r.classification != Classification::pass) r.cause = causes.of(r);
      }
    }
    return result;
  };
  CaseResult result = result_of();
  if (!eager_observed && result.has_alarm()) {
    // An alarm is reported as `always` would report it: eager mode may run out of memory (the
    // case is then skipped), and the report lists every property.
    eager_observed = run_case(c, eager, eager_options);
    result = result_of();
  }
  result.logged = take_logged();
  return result;
}

Hunt hunt(CheckpointImplementation& oracle, CheckpointImplementation& mutant, const GenOptions& options,
          uint64_t first_seed, int64_t budget) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Hunt h;
  for (int64_t i = 0; i < budget && !h.killed; ++i) {
    const uint64_t draw_seed = first_seed + static_cast<uint64_t>(i);
    const CaseResult result = check_case(draw_case(options, draw_seed), oracle, mutant);
    h.cases = i + 1;
    if (const PropertyResult* alarm = result.first_alarm()) {
      h.killed = true;
      h.draw_seed = draw_seed;
      h.property = alarm->property;
      h.classification = alarm->classification;
    }
  }
  h.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return h;
}

bool leaf_adopts_returned_gradient(const std::string& variant) {
  at::Tensor leaf = at::randn({8, 8});
  leaf.set_requires_grad(true);
  const void* returned = nullptr;
  leaf.register_hook([&returned](const at::Tensor& grad) { returned = grad.data_ptr(); });
  auto checkpoint = make_checkpoint(variant);
  Values kept;  // the body keeps its input past backward, as a module caching it does
  const RunFunction body = [&kept](const Values& inputs) {
    kept = inputs;
    return Values{at::tanh(as_tensor(inputs.at(0)))};
  };
  const Values outputs = checkpoint->apply(body, CallSettings{}, {leaf});
  as_tensor(outputs.at(0)).sum().backward();
  return leaf.grad().defined() && leaf.grad().data_ptr() == returned;
}

std::string describe_results(const std::vector<PropertyResult>& results) {
  std::ostringstream out;
  for (const PropertyResult& r : results) {
    out << std::left << std::setw(20) << r.property << " " << to_string(r.classification) << "\n";
    if (!r.sut.holds) out << "    sut:    " << r.sut.describe() << "\n";
    if (!r.oracle.holds) out << "    oracle: " << r.oracle.describe() << "\n";
    if (!r.cause.empty()) out << "    cause:  " << r.cause << "\n";
  }
  return out.str();
}

void Summary::add(const CaseResult& result) {
  ++cases_;
  if (!result.skipped.empty()) ++skipped_;
  for (const PropertyResult& r : result.results) ++counts_[r.property][static_cast<size_t>(r.classification)];
  add_logged(logged_, result.logged);
}

std::string logged_summary(const LoggedCounts& logged) {
  if (logged.empty()) return "";
  int64_t total = 0;
  for (const auto& [message, times] : logged) total += times;
  std::ostringstream out;
  out << "logged by the code under test: " << total << (total == 1 ? " message" : " messages")
      << " (counted, not shown as they came)\n";
  for (const auto& [message, times] : logged) out << std::setw(9) << times << "  " << message << "\n";
  return out.str();
}

int64_t Summary::count(Classification c) const {
  int64_t total = 0;
  for (const auto& [property, counts] : counts_) total += counts[static_cast<size_t>(c)];
  return total;
}

bool Summary::listed(const Property& property) const {
  const Subject& subject = sut_.empty() ? default_subject() : subject_for(sut_);
  return subject.applies(property.name);
}

std::string Summary::table() const {
  std::ostringstream out;
  int width = 20;  // the longest name listed, and a space
  for (const Property& p : properties()) {
    if (listed(p)) width = std::max(width, static_cast<int>(std::string(p.name).size()) + 1);
  }
  out << std::left << std::setw(width) << "property";
  for (size_t c = 0; c < kClassificationCount; ++c) {
    out << std::right << std::setw(13) << to_string(static_cast<Classification>(c));
  }
  out << "\n";
  for (const Property& p : properties()) {
    if (!listed(p)) continue;
    auto it = counts_.find(p.name);
    out << std::left << std::setw(width) << p.name;
    if (const auto skip = not_checked_.find(p.name); skip != not_checked_.end()) {
      out << " not checked: " << skip->second << "\n";
      continue;
    }
    for (size_t c = 0; c < kClassificationCount; ++c) {
      out << std::right << std::setw(13) << (it == counts_.end() ? 0 : it->second[c]);
    }
    out << "\n";
  }
  return out.str();
}

nlohmann::json Summary::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const Property& p : properties()) {
    if (!listed(p)) continue;
    auto it = counts_.find(p.name);
    nlohmann::json row = nlohmann::json::object();
    for (size_t c = 0; c < kClassificationCount; ++c) {
      row[to_string(static_cast<Classification>(c))] = it == counts_.end() ? 0 : it->second[c];
    }
    if (const auto skip = not_checked_.find(p.name); skip != not_checked_.end()) row["not_checked"] = skip->second;
    j[p.name] = row;
  }
  return j;
}

std::map<std::string, std::string> properties_not_checked(const CheckpointImplementation& oracle,
                                                         const CheckpointImplementation& sut, const ClaimChoice& claims) {
  std::map<std::string, std::string> reasons;
  const Subject& subject = subject_for(sut.name());
  for (const Property& p : properties()) {
    if (!subject.applies(p.name)) continue;  // not in its subject's suite: nothing to explain
    const CodeChecked code{oracle.code(), sut.code(), sut.name(), oracle.keeps_checkpointing_flag(),
                           sut.keeps_checkpointing_flag()};
    std::string reason = not_checked_because(p, sut.change_claims(), claims, code);
    if (!reason.empty()) reasons[p.name] = std::move(reason);
  }
  return reasons;
}

}  // namespace recheck
