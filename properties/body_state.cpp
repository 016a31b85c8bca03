#include "properties/body_state.h"

#include <functional>
#include <map>
#include <tuple>
#include <string>
#include <vector>

#include "properties/records.h"

namespace recheck {

// Megatron's is_checkpointing() says whether the code calling it runs inside a checkpoint (its
// CUDA-graph code asks it in a module's forward): wherever a checkpoint's body runs, in forward
// and in the recomputation, it should read set. The first reading that did not.
Verdict flag_in_body(const Observations& subject, const Runs&) {
  for (size_t r = 0; r < subject.segment_calls.size(); ++r) {
    const SegmentCall& call = subject.segment_calls[r];
    for (size_t k = 0; k < call.flag_reads.size(); ++k) {
      const std::vector<bool>& reads = call.flag_reads[k];
      for (size_t n = 0; n < reads.size(); ++n) {
        if (reads[n]) continue;
        const bool raised = k >= call.calls.size();
        // The last reading of a call that returned is taken once its body did.
        const std::string point = n + 1 == reads.size() && !raised
                                      ? "once " + call.site + ".body returned"
                                      : "before " + call.site + ".body.ops[" + std::to_string(n) + "]";
        Verdict v = Verdict::fail_in(static_cast<size_t>(call.iteration),
                                     call.site + " at " + at_iteration(static_cast<size_t>(call.iteration)) + ", " +
                                         (k == 0 ? std::string("forward") : "recomputation " + std::to_string(k)),
                                     std::nullopt, "is_checkpointing() read False " + point);
        v.segment_record = static_cast<int>(r);
        v.call = static_cast<int>(k);
        v.reading = static_cast<int>(n);
        return v;
      }
    }
  }
  return Verdict::pass();
}

namespace {

// A checkpoint call's record by what it is, not by its place in the run's list (two runs that
// raise at different points make their records in other numbers): its iteration, its site, and
// which execution of that site in that iteration it was.
using RecordKey = std::tuple<int, std::string, int>;

std::map<RecordKey, size_t> records_by_key(const Observations& run) {
  std::map<RecordKey, size_t> by_key;
  std::map<std::pair<int, std::string>, int> seen;
  for (size_t r = 0; r < run.segment_calls.size(); ++r) {
    const SegmentCall& call = run.segment_calls[r];
    const int occurrence = seen[{call.iteration, call.site}]++;
    by_key[{call.iteration, call.site, occurrence}] = r;
  }
  return by_key;
}

}  // namespace

FlagReadings compare_flag_readings(const Observations& run, const Observations& reference) {
  const std::map<RecordKey, size_t> theirs = records_by_key(reference);
  std::map<std::pair<int, std::string>, int> seen;
  bool first = true;  // the first reading `run` found unset is still ahead
  FlagReadings result = FlagReadings::alike;
  for (const SegmentCall& call : run.segment_calls) {
    const int occurrence = seen[{call.iteration, call.site}]++;
    const auto found = theirs.find({call.iteration, call.site, occurrence});
    for (size_t k = 0; k < call.flag_reads.size(); ++k) {
      for (size_t n = 0; n < call.flag_reads[k].size(); ++n) {
        if (call.flag_reads[k][n]) continue;
        const std::vector<std::vector<bool>>* same = found == theirs.end() ? nullptr : &reference.segment_calls[found->second].flag_reads;
        const bool made = same != nullptr && k < same->size() && n < (*same)[k].size();
        if (made && (*same)[k][n]) return FlagReadings::differ;
        if (first && !made) result = FlagReadings::alike_first_unread;
        first = false;
      }
    }
  }
  return result;
}

namespace {

const StashRecord* find_stash(const IterationRecord& r, const std::string& site) {
  for (const StashRecord& s : r.stashed) {
    if (s.site == site) return &s;
  }
  return nullptr;
}

std::string yes_no(bool b) { return b ? "True" : "False"; }

// How one run's stash differs from the other's: what of it (" data", or "" for the stash
// itself), the tensors' difference, and anything else.
struct StashDifference {
  std::string what;
  std::optional<Difference> difference;
  std::string detail;
};

// How the subject's stash differs from the oracle's in what the user reads of it besides its
// .grad: what it is, requires_grad, is_leaf, its data and its version. Nothing when alike.
std::optional<StashDifference> kept_difference(const StashRecord& s, const StashRecord& o) {
  if (s.tensor != o.tensor || s.value != o.value) {
    return StashDifference{"", std::nullopt, "keeps " + (s.tensor ? std::string("a tensor") : s.value) +
                                                 ", the oracle's " + (o.tensor ? std::string("a tensor") : o.value)};
  }
  if (!s.tensor) return std::nullopt;
  if (s.requires_grad != o.requires_grad) {
    return StashDifference{"", std::nullopt,
                           "requires_grad " + yes_no(s.requires_grad) + ", the oracle's " + yes_no(o.requires_grad)};
  }
  if (s.is_leaf != o.is_leaf) {
    return StashDifference{"", std::nullopt, "is_leaf " + yes_no(s.is_leaf) + ", the oracle's " + yes_no(o.is_leaf)};
  }
  if (auto d = bitwise_difference(s.data, o.data)) return StashDifference{" data", d, ""};
  if (s.version != o.version) {
    return StashDifference{"", std::nullopt,
                           "_version " + std::to_string(s.version) + ", the oracle's " + std::to_string(o.version)};
  }
  return std::nullopt;
}

// The stash sites of iteration i of either run, the subject's order first.
std::vector<std::string> stash_sites(const IterationRecord& s, const IterationRecord& o) {
  std::vector<std::string> sites;
  for (const StashRecord& r : s.stashed) sites.push_back(r.site);
  for (const StashRecord& r : o.stashed) {
    if (find_stash(s, r.site) == nullptr) sites.push_back(r.site);
  }
  return sites;
}

// Compares every stash the two runs keep after iteration i (both completed it, or raised the
// same error in it): `differ` says how one differs, or nothing. The first difference.
template <typename Differ>
Verdict compare_stashes(const Observations& subject, const Observations& oracle, Differ differ) {
  for (size_t i = 0; i < common_iterations(subject, oracle); ++i) {
    const IterationRecord& s = subject.iterations[i];
    const IterationRecord& o = oracle.iterations[i];
    if (!comparable(s, o)) continue;
    for (const std::string& site : stash_sites(s, o)) {
      const StashRecord* a = find_stash(s, site);
      const StashRecord* b = find_stash(o, site);
      const std::string where = "after " + at_record(i, s) + ", the stash at " + site;
      if (a == nullptr || b == nullptr) {
        return fail_at(i, s, where, std::nullopt, a == nullptr ? "kept in the oracle's run only" : "kept in this run only");
      }
      if (auto found = differ(*a, *b)) return fail_at(i, s, where + found->what, found->difference, found->detail);
    }
  }
  return Verdict::pass();
}

}  // namespace

// What a body stashes (a module caching its input) is the user's after backward: a change that
// alters the detached inputs it leaves behind (frees them, drops requires_grad) is seen here.
Verdict stash_kept(const Observations& subject, const Runs& runs) {
  return compare_stashes(subject, runs.oracle, kept_difference);
}

Verdict stash_grads(const Observations& subject, const Runs& runs) {
  return compare_stashes(subject, runs.oracle, [](const StashRecord& s, const StashRecord& o) -> std::optional<StashDifference> {
    if (!s.tensor || !o.tensor) return std::nullopt;  // stash-kept tells those apart
    if (auto d = bitwise_difference(s.grad, o.grad)) {
      const bool cleared = !s.grad.defined() && o.grad.defined();
      return StashDifference{" .grad", d, cleared ? "cleared (a change that means to clear it claims grad-released)" : ""};
    }
    return std::nullopt;
  });
}

StashPair stashes_named_by(const Verdict& verdict, const Observations& oracle, const Observations& sut) {
  const std::string marker = "the stash at ";
  const size_t at = verdict.where.find(marker);
  if (at == std::string::npos || verdict.iteration < 0) return {};
  const size_t from = at + marker.size();
  const std::string site = verdict.where.substr(from, verdict.where.find(' ', from) - from);
  const size_t i = static_cast<size_t>(verdict.iteration);
  if (i >= oracle.iterations.size() || i >= sut.iterations.size()) return {};
  return {find_stash(oracle.iterations[i], site), find_stash(sut.iterations[i], site)};
}

std::optional<std::string> stash_fixed_against_eager(const Observations& eager, const Observations& oracle,
                                                     const Observations& sut, size_t i) {
  if (i >= eager.iterations.size() || i >= oracle.iterations.size() || i >= sut.iterations.size()) return std::nullopt;
  const IterationRecord& s = sut.iterations[i];
  const IterationRecord& o = oracle.iterations[i];
  const IterationRecord& e = eager.iterations[i];
  // Eager mode's iteration need not have ended as theirs did: a body that raises only when
  // recomputed stashed in eager mode what forward gave it, which the recomputation must give too.
  if (!comparable(s, o)) return std::nullopt;
  for (const std::string& site : stash_sites(s, o)) {
    const StashRecord* a = find_stash(s, site);
    const StashRecord* b = find_stash(o, site);
    if (a == nullptr || b == nullptr) return std::nullopt;
    if (!kept_difference(*a, *b)) continue;
    // The first stash they keep differently: eager mode's sides with the sut's on the first thing
    // the two differ in (what is kept, requires_grad, is_leaf, the data's dtype and shape, its
    // values, its version), not on everything: a pre-existing difference of the case (its
    // values moved by a distributing checkpoint) leaves that judgement standing.
    const StashRecord* x = find_stash(e, site);
    if (x == nullptr) return std::nullopt;
    using Key = std::function<std::string(const StashRecord&)>;
    const std::vector<Key> keys = {
        [](const StashRecord& r) { return r.tensor ? std::string("a tensor") : r.value; },
        [](const StashRecord& r) { return yes_no(r.requires_grad); },
        [](const StashRecord& r) { return yes_no(r.is_leaf); },
        [](const StashRecord& r) {
          return r.data.defined() ? std::string(c10::toString(r.data.scalar_type())) + " " + c10::str(r.data.sizes()) : "";
        },
    };
    for (const Key& key : keys) {
      if (key(*a) == key(*b)) continue;
      return key(*x) == key(*a) && key(*x) != key(*b) ? std::optional<std::string>(site) : std::nullopt;
    }
    if (bitwise_difference(a->data, b->data)) {
      const bool sides = !bitwise_difference(x->data, a->data) && bitwise_difference(x->data, b->data);
      return sides ? std::optional<std::string>(site) : std::nullopt;
    }
    return x->version == a->version && x->version != b->version ? std::optional<std::string>(site) : std::nullopt;
  }
  return std::nullopt;
}

}  // namespace recheck
