#include "properties/partings.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include "properties/causes.h"
#include "properties/hook_properties.h"
#include "properties/module_state_properties.h"

namespace recheck {

namespace {

// Where a run first parts from another: an op (or a checkpoint's body call) that read, made, or
// left what it read, other than the execution it is compared with.
struct Parting {
  const OpExecution* execution = nullptr;
  enum class What { read, made, changed } what = What::read;
};

using ExecutionKey = std::tuple<int, int, bool, int>;  // iteration, op, body, occurrence

struct Keyed {
  ExecutionKey key;
  const OpExecution* execution;
};

// A run's forward executions (or its recomputations), each keyed by its iteration, op, whether
// it is a body call, and which occurrence of those it is; sorted by key.
std::vector<Keyed> executions(const Observations& run, bool recomputation) {
  std::vector<Keyed> found;
  found.reserve(run.trace.size());
  for (const OpExecution& e : run.trace) {
    if (e.recomputation == recomputation) found.push_back({{e.iteration, e.op, e.body, 0}, &e});
  }
  const auto without_occurrence = [](const Keyed& k) {
    return std::make_tuple(std::get<0>(k.key), std::get<1>(k.key), std::get<2>(k.key));
  };
  std::stable_sort(found.begin(), found.end(),
                   [&](const Keyed& a, const Keyed& b) { return without_occurrence(a) < without_occurrence(b); });
  for (size_t i = 1; i < found.size(); ++i) {
    if (without_occurrence(found[i]) == without_occurrence(found[i - 1])) {
      std::get<3>(found[i].key) = std::get<3>(found[i - 1].key) + 1;
    }
  }
  return found;
}

const OpExecution* counterpart(const std::vector<Keyed>& counterparts, const ExecutionKey& key) {
  const auto at = std::lower_bound(counterparts.begin(), counterparts.end(), key,
                                   [](const Keyed& k, const ExecutionKey& wanted) { return k.key < wanted; });
  return at != counterparts.end() && at->key == key ? at->execution : nullptr;
}

// The first moment at which an execution of `run` (its forward ones, or its recomputations)
// differs from its counterpart: as it began (what it read), or as it returned (what it made,
// then what it left of what it read). Moments run in one count, so an op's body is searched
// before the op's return is.
std::optional<Parting> first_parting(const Observations& run, bool recomputation,
                                     const std::vector<Keyed>& counterparts, bool against_first_occurrence,
                                     int last_iteration) {
  struct Moment {
    int64_t at;
    const OpExecution* e;
    const OpExecution* other;
    bool start;
  };
  std::vector<Moment> moments;
  for (const Keyed& mine : executions(run, recomputation)) {
    if (std::get<0>(mine.key) > last_iteration) continue;
    ExecutionKey key = mine.key;
    if (against_first_occurrence) std::get<3>(key) = 0;
    const OpExecution* other = counterpart(counterparts, key);
    if (other == nullptr) continue;
    const OpExecution* e = mine.execution;
    moments.push_back({e->started, e, other, true});
    if (e->ended >= 0 && other->ended >= 0) moments.push_back({e->ended, e, other, false});
  }
  std::sort(moments.begin(), moments.end(), [](const Moment& a, const Moment& b) { return a.at < b.at; });
  for (const Moment& m : moments) {
    if (m.start) {
      if (m.e->inputs != m.other->inputs) return Parting{m.e, Parting::What::read};
      continue;
    }
    if (m.e->outputs != m.other->outputs) return Parting{m.e, Parting::What::made};
    if (m.e->inputs_after != m.other->inputs_after) return Parting{m.e, Parting::What::changed};
  }
  return std::nullopt;
}

// The first iteration in which a run and eager mode raise differently (one raises and the other
// does not, or they raise other errors), or -1. What the run does in later iterations follows
// from that error (a step that did not run, a buffer left half-updated), so a parting there is
// not a cause of its own.
int errors_part_at(const Observations& run, const Observations& eager) {
  const size_t common = std::min(run.iterations.size(), eager.iterations.size());
  for (size_t i = 0; i < common; ++i) {
    const std::optional<ErrorRecord>& mine = run.iterations[i].error;
    const std::optional<ErrorRecord>& theirs = eager.iterations[i].error;
    if (mine.has_value() != theirs.has_value() || (mine && !(mine->error == theirs->error))) return static_cast<int>(i);
  }
  return -1;
}

// Searches reach up to iteration `last_iteration`: a verdict about iteration i has its cause in
// iterations 0..i.
std::optional<Parting> forward_parting(const Observations& run, const Observations& eager, int last_iteration) {
  const int parted = errors_part_at(run, eager);
  if (parted >= 0) last_iteration = std::min(last_iteration, parted);
  return first_parting(run, false, executions(eager, false), false, last_iteration);
}

std::optional<Parting> recomputation_parting(const Observations& run, int last_iteration) {
  return first_parting(run, true, executions(run, false), true, last_iteration);
}

std::string describe_parting(const Parting& parting, const std::vector<OpSite>& sites) {
  const OpExecution& e = *parting.execution;
  if (e.op < 0 || static_cast<size_t>(e.op) >= sites.size()) return "";
  const std::string op = describe_op_site(sites[e.op]);
  if (e.body) {
    switch (parting.what) {
      case Parting::What::read: return "the arguments a " + op + "'s body got";
      case Parting::What::made: return "what a " + op + "'s body returned";
      case Parting::What::changed: return "a " + op + "'s body changed its arguments";
    }
  }
  // What an op read differs though every execution before agreed: the value changed between
  // executions (an earlier iteration's backward, say); which op read it first is incidental.
  if (parting.what == Parting::What::read) return "what an op read";
  // A construct whose body agreed: the construct itself (the checkpoint function) made or left
  // its values otherwise, either way one place.
  if (op_body(*sites[e.op].op) != nullptr) return "the return of " + op;
  return parting.what == Parting::What::made ? "what " + op + " made" : op + " changed what it read";
}

}  // namespace

std::string requires_grad_parting(const Observations& run, const Observations& eager, const std::vector<OpSite>& sites,
                                  int last_iteration, int symptom) {
  const std::vector<Keyed> theirs = executions(eager, false);
  const OpExecution* extra = nullptr;    // the first with an output requiring grad where eager's does not
  const OpExecution* lacking = nullptr;  // and the other way
  for (const Keyed& mine : executions(run, false)) {
    const OpExecution* e = mine.execution;
    if (std::get<0>(mine.key) > last_iteration || e->body || e->ended < 0) continue;
    if (e->op < 0 || static_cast<size_t>(e->op) >= sites.size()) continue;
    const std::vector<const Op*>& around = sites[e->op].enclosing;
    if (std::any_of(around.begin(), around.end(), [](const Op* op) { return std::holds_alternative<Checkpoint>(*op); })) continue;
    const OpExecution* other = counterpart(theirs, mine.key);
    if (other == nullptr || other->ended < 0) continue;
    if ((e->requires_grad & ~other->requires_grad) != 0 && (extra == nullptr || e->ended < extra->ended)) extra = e;
    if ((~e->requires_grad & other->requires_grad) != 0 && (lacking == nullptr || e->ended < lacking->ended)) lacking = e;
  }
  const OpExecution* first = symptom > 0 && extra != nullptr     ? extra
                             : symptom < 0 && lacking != nullptr ? lacking
                             : extra == nullptr                  ? lacking
                             : lacking == nullptr                ? extra
                             : extra->ended < lacking->ended     ? extra
                                                                 : lacking;
  if (first == nullptr) return "";
  const std::string op = describe_op_site(sites[first->op]);
  return "forward parts from eager's in requires_grad at " +
         (op_body(*sites[first->op].op) != nullptr ? "the return of " + op : "what " + op + " made") +
         (first == extra ? ": an output requires grad where eager's does not"
                            : ": an output does not require grad where eager's does");
}

std::string first_difference(const Observations& run, const Observations* eager, const std::vector<OpSite>& sites,
                             bool recomputation_only, int last_iteration) {
  if (run.trace.empty()) return "";
  if (!recomputation_only && eager != nullptr && !eager->trace.empty()) {
    if (const auto parting = forward_parting(run, *eager, last_iteration)) {
      return "forward parts from eager's at " + describe_parting(*parting, sites);
    }
  }
  if (const auto parting = recomputation_parting(run, last_iteration)) {
    return "a recomputation parts from its forward at " + describe_parting(*parting, sites);
  }
  return "";
}

namespace {

// How a recomputed execution parts from the forward one it recomputes: by the values it read,
// made or left, or by the numbers a random op drew from its generator (a recomputation must draw
// forward's, whatever values it reads).
enum class PartsBy { values, draw };
using Parted = std::pair<ExecutionKey, PartsBy>;

// Every way `run`'s recomputed executions part from the forward executions they recompute (the
// first occurrence of each); `recomputed` gets every key it recomputed.
std::set<Parted> recomputations_parting(const Observations& run, std::set<ExecutionKey>& recomputed) {
  std::set<Parted> parting;
  const std::vector<Keyed> forward = executions(run, false);
  for (const Keyed& mine : executions(run, true)) {
    ExecutionKey key = mine.key;
    std::get<3>(key) = 0;
    const OpExecution* other = counterpart(forward, key);
    if (other == nullptr) continue;
    recomputed.insert(mine.key);
    const OpExecution& e = *mine.execution;
    const bool both_ended = e.ended >= 0 && other->ended >= 0;
    if (e.inputs != other->inputs || (both_ended && (e.outputs != other->outputs || e.inputs_after != other->inputs_after))) {
      parting.insert({mine.key, PartsBy::values});
    }
    if (both_ended && e.drawn != other->drawn) parting.insert({mine.key, PartsBy::draw});
  }
  return parting;
}

}  // namespace

RecomputationsCompared compare_recomputations(const Observations& oracle, const Observations& sut) {
  RecomputationsCompared compared;
  if (oracle.trace.empty() || sut.trace.empty()) return compared;
  std::set<ExecutionKey> oracle_recomputed;
  std::set<ExecutionKey> sut_recomputed;
  const std::set<Parted> oracle_parts = recomputations_parting(oracle, oracle_recomputed);
  const std::set<Parted> sut_parts = recomputations_parting(sut, sut_recomputed);
  if (oracle_parts.empty()) return compared;
  compared.first_iteration = std::get<0>(oracle_parts.begin()->first);
  for (const Parted& parted : sut_parts) {
    if (oracle_parts.count(parted) == 0) {  // the sut gets one wrong that the oracle does not
      compared.how = RecomputationsCompared::How::other;
      return compared;
    }
  }
  if (sut_parts.size() == oracle_parts.size()) {
    compared.how = RecomputationsCompared::How::alike;
    return compared;
  }
  compared.how = RecomputationsCompared::How::other;  // the oracle's extra ones the sut never ran
  for (const Parted& parted : oracle_parts) {
    if (sut_recomputed.count(parted.first) != 0 && sut_parts.count(parted) == 0) {
      compared.how = RecomputationsCompared::How::oracle_beyond;
    }
  }
  return compared;
}

bool recomputed_from_other_values(const Observations& run, int op, int iteration) {
  const OpExecution* forward = nullptr;
  const OpExecution* recomputed = nullptr;
  for (const OpExecution& e : run.trace) {
    if (e.op != op || e.iteration != iteration || e.body) continue;
    if (!e.recomputation && forward == nullptr) forward = &e;
    if (e.recomputation && (recomputed == nullptr || e.started > recomputed->started)) recomputed = &e;
  }
  return forward != nullptr && recomputed != nullptr && forward->inputs != recomputed->inputs;
}

namespace {

// `check` on the iterations of `run` up to `last_iteration`: the records alone, which is all the
// checks below read of a run.
Verdict check_up_to(Verdict (*check)(const Observations&, const Runs&), const Observations& run, const Observations& eager,
                    int last_iteration) {
  Observations upto;
  const size_t iterations = last_iteration < 0 ? 0 : std::min(run.iterations.size(), static_cast<size_t>(last_iteration) + 1);
  upto.iterations.assign(run.iterations.begin(), run.iterations.begin() + static_cast<std::ptrdiff_t>(iterations));
  return check(upto, Runs{eager, run});
}

}  // namespace

std::string hook_parting(const Observations& run, const Observations& eager, int last_iteration) {
  const Verdict calls = check_up_to(hook_calls_match_eager, run, eager, last_iteration);
  if (calls.holds || calls.detail.rfind("called ", 0) != 0) return "";
  return "a hook is " + abstract_text(calls.detail);
}

std::string module_parting(const Observations& run, const Observations& eager, int last_iteration) {
  const Verdict state = check_up_to(module_state_matches_eager, run, eager, last_iteration);
  if (state.holds || state.detail.rfind("updated ", 0) != 0) return "";
  const size_t colon = state.detail.find(':');  // how often, not the state it came to
  return "a module is " + abstract_text(state.detail.substr(0, colon));
}

}  // namespace recheck
