#include "properties/causes.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <set>
#include <tuple>

#include "properties/corpus.h"

namespace recheck {

namespace {

bool word_char(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_'; }
bool digit(char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; }

// "[#, #]", "[#]", "[]" (after numbers became '#') as "[…]": a shape or an index list.
std::string collapse_number_lists(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '[') {
      size_t j = i + 1;
      while (j < text.size() && (text[j] == '#' || text[j] == ',' || text[j] == ' ')) ++j;
      if (j < text.size() && text[j] == ']') {
        out += "[…]";
        i = j;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::string construct_name(const Op& op) {
  if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) {
    if (checkpoint->without_output) return "checkpoint without output";
    return checkpoint->distribute ? "checkpoint (distribute)" : "checkpoint";
  }
  if (const auto* autocast = std::get_if<Autocast>(&op)) return autocast->enabled ? "autocast" : "autocast off";
  return op_name(op);
}

std::string op_kind(const Op& op) {
  if (const auto* random = std::get_if<Random>(&op)) return std::string("random (") + to_string(random->source) + ")";
  if (const auto* raise = std::get_if<Raise>(&op)) {
    switch (raise->when) {
      case Raise::When::always: return "raise";
      case Raise::When::recompute: return "raise (when recomputing)";
      case Raise::When::first_iteration: return "raise (in the first iteration)";
    }
  }
  if (const auto* in_place = std::get_if<InPlace>(&op)) {
    return in_place->fn == InPlace::Fn::mul ? "inplace (mul)" : "inplace (add)";
  }
  return construct_name(op);
}

// The first op site named in `text` ("root.ops[1].body.ops[0]"), or "".
std::string first_site_in(const std::string& text) {
  const size_t start = text.find("root.ops[");
  if (start == std::string::npos || (start > 0 && word_char(text[start - 1]))) return "";
  size_t end = start;
  while (end < text.size() && (word_char(text[end]) || text[end] == '.' || text[end] == '[' || text[end] == ']')) ++end;
  while (end > start && text[end - 1] == '.') --end;
  return text.substr(start, end - start);
}

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

// Where, outside every checkpoint's body, an op's output first requires grad otherwise than eager
// mode's (in forward, in iterations up to `last_iteration`), with which way: values that agree
// reach the loss otherwise (an autograd.Function's outputs all require grad when an input does,
// and none does when no input does, whatever its body captured). `symptom`: what the run has
// that eager mode lacks (+1: a gradient or loss eager mode has none of) or lacks (-1), 0 where
// neither: a parting that way is preferred, the first of either way otherwise. "" where none.
std::string requires_grad_parting(const Observations& run, const Observations& eager, const std::vector<OpSite>& sites,
                                  int last_iteration, int symptom) {
  const std::vector<Keyed> theirs = executions(eager, false);
  struct First {
    const OpExecution* at = nullptr;
  } extra, lacking;  // an output requiring grad where eager's does not, and the other way
  for (const Keyed& mine : executions(run, false)) {
    const OpExecution* e = mine.execution;
    if (std::get<0>(mine.key) > last_iteration || e->body || e->ended < 0) continue;
    if (e->op < 0 || static_cast<size_t>(e->op) >= sites.size()) continue;
    const std::vector<const Op*>& around = sites[e->op].enclosing;
    if (std::any_of(around.begin(), around.end(), [](const Op* op) { return std::holds_alternative<Checkpoint>(*op); })) continue;
    const OpExecution* other = counterpart(theirs, mine.key);
    if (other == nullptr || other->ended < 0) continue;
    if ((e->requires_grad & ~other->requires_grad) != 0 && (extra.at == nullptr || e->ended < extra.at->ended)) extra.at = e;
    if ((~e->requires_grad & other->requires_grad) != 0 && (lacking.at == nullptr || e->ended < lacking.at->ended)) lacking.at = e;
  }
  const OpExecution* first = symptom > 0 && extra.at != nullptr     ? extra.at
                             : symptom < 0 && lacking.at != nullptr ? lacking.at
                             : extra.at == nullptr                  ? lacking.at
                             : lacking.at == nullptr                ? extra.at
                             : extra.at->ended < lacking.at->ended  ? extra.at
                                                                    : lacking.at;
  if (first == nullptr) return "";
  const std::string op = describe_op_site(sites[first->op]);
  return "forward parts from eager's in requires_grad at " +
         (op_body(*sites[first->op].op) != nullptr ? "the return of " + op : "what " + op + " made") +
         (first == extra.at ? ": an output requires grad where eager's does not"
                            : ": an output does not require grad where eager's does");
}

// Where a run first parts from eager mode (in forward, before the iteration where their errors
// part, if they do) or from its own forward (in a recomputation), in iterations up to
// `last_iteration`; "" when it does not, or when no trace was recorded.
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

const char* error_phase(const ErrorRecord& error) {
  return error.raised_in_recomputation ? "a recomputation" : error.phase == "forward" ? "forward" : "backward";
}

std::string raised_by(const ErrorRecord& error, const std::vector<OpSite>& sites) {
  if (error.raised_by_op < 0 || static_cast<size_t>(error.raised_by_op) >= sites.size()) {
    return std::string("raised in ") + error_phase(error) + " outside the case's ops";
  }
  return "raised by " + describe_op_site(sites[error.raised_by_op]) + " in " + error_phase(error);
}

// The evidence of a failing verdict, abstracted; `with_difference`: how a tensor differed too.
std::string evidence(const Verdict& v, bool with_difference = true) {
  std::string text = abstract_text(v.where);
  if (v.difference && with_difference) {
    const Difference& d = *v.difference;
    text += ": " + d.kind;
    if (d.kind == "defined" || d.kind == "dtype") text += " " + d.subject + " vs " + d.reference;
  }
  if (!v.detail.empty()) text += (text.empty() ? "" : ": ") + abstract_text(v.detail);
  return text;
}

// errors-match's "error" verdict as whether each run raised, without what.
std::string error_outcome(const Verdict& v, const Observations& run, const Observations* eager) {
  const bool eager_raised = eager ? eager->error.has_value() : v.detail.find("| eager: no error") == std::string::npos;
  std::string text = "error: ";
  if (run.error && !eager_raised) text += "raises where eager mode does not";
  else if (!run.error && eager_raised) text += "raises nothing where eager mode raises";
  else text += "raises another error than eager mode";
  const size_t unrestored = v.detail.find(kRngNotRestored);
  if (unrestored != std::string::npos) text += abstract_text(v.detail.substr(unrestored));
  return text;
}

// "error: X | eager: Y: MESSAGE" as "error: X | eager: another error" where eager mode raised.
std::string eager_error_as_outcome(const std::string& text) {
  const std::string eager = " | eager: ";
  const size_t at = text.find(eager);
  if (at == std::string::npos || text.compare(at + eager.size(), 8, "no error") == 0) return text;
  const size_t unrestored = text.find("; RNG not restored", at);
  return text.substr(0, at) + eager + "another error" + (unrestored == std::string::npos ? "" : text.substr(unrestored));
}

// flag-in-body's verdict as what was read where: "forward: is_checkpointing() read False".
std::string flag_evidence(const Verdict& v) {
  const std::string text = v.describe();
  const char* phase = text.find(", recomputation") != std::string::npos ? "recomputation" : "forward";
  const char* read = text.find("read True") != std::string::npos ? "True" : "False";
  return std::string(phase) + ": is_checkpointing() read " + read + " in a checkpoint's body";
}

const OpSite* site_named(const std::vector<OpSite>& sites, const std::string& path) {
  for (const OpSite& site : sites) {
    if (site.path == path) return &site;
  }
  return nullptr;
}

// flag-in-body: whether the body that read the flag wrong ran a checkpoint of its own before
// the reading ("before SITE.body.ops[N]", or "once SITE returned": after all its ops).
std::string flag_reading(const Verdict& v, const std::vector<OpSite>& sites) {
  const std::string text = v.describe();
  const std::string site = first_site_in(text);
  const OpSite* at = site_named(sites, site);
  const Segment* body = at ? op_body(*at->op) : nullptr;
  if (body == nullptr) return "";
  size_t reading = body->ops.size();
  const std::string before = "before " + site + ".body.ops[";
  if (const size_t found = text.find(before); found != std::string::npos) {
    reading = std::strtoul(text.c_str() + found + before.size(), nullptr, 10);
  }
  const auto is_checkpoint = [](const Op& op) { return std::holds_alternative<Checkpoint>(op); };
  for (size_t i = 0; i < reading && i < body->ops.size(); ++i) {
    const Op& op = body->ops[i];
    const Segment* inner = op_body(op);
    if (is_checkpoint(op) || (inner != nullptr && any_op(*inner, is_checkpoint))) {
      return "a checkpoint ran in the body before the reading";
    }
  }
  return "no checkpoint ran in the body before the reading";
}

// "tracker state 'a', tracker state 'b'" as "tracker state": which of the tracker's states a case
// drew is its shape; that a tracker state differs is the evidence.
std::string tracker_states_as_one(const std::string& text) {
  const std::string name = "tracker state '";
  std::string out;
  size_t from = 0;
  bool after_state = false;
  while (true) {
    const size_t at = text.find(name, from);
    if (at == std::string::npos) break;
    const size_t end = text.find('\'', at + name.size());
    if (end == std::string::npos) break;
    const std::string between = text.substr(from, at - from);
    if (!(after_state && between == ", ")) out += between + "tracker state";
    after_state = true;
    from = end + 1;
  }
  return out + text.substr(from);
}

}  // namespace

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

std::string abstract_text(const std::string& raw) {
  const std::string text = tracker_states_as_one(raw);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const char ch = text[i];
    if (ch == 'r' && text.compare(i, 9, "root.ops[") == 0 && (i == 0 || !word_char(text[i - 1]))) {
      const std::string site = first_site_in(text.substr(i));
      out += '@';
      i += site.empty() ? 4 : site.size();
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t j = i;
      while (j < n && word_char(text[j])) ++j;
      const std::string word = text.substr(i, j - i);
      // "v12", a leaf's name; "x9" right after a number, as in "1x9": a shape.
      const bool leaf = word.size() > 1 && word[0] == 'v' && word.find_first_not_of("0123456789", 1) == std::string::npos;
      const bool after_number = i > 0 && digit(text[i - 1]);
      // A Python type named in a message ("'NoneType' object", "of type int"): the case's
      // non-tensor argument, whichever literal it drew.
      static const std::set<std::string> literal_types = {"NoneType", "int", "float", "bool", "str"};
      const bool quoted = i > 0 && text[i - 1] == '\'' && j < n && text[j] == '\'';
      const bool typed = i >= 8 && text.compare(i - 8, 8, "of type ") == 0;
      if ((quoted || typed) && literal_types.count(word) > 0) {
        out += "<non-tensor>";
        i = j;
        continue;
      }
      if (leaf || after_number) {
        for (size_t k = 0; k < word.size();) {
          if (digit(word[k])) {
            out += '#';
            while (k < word.size() && digit(word[k])) ++k;
          } else {
            out += word[k++];
          }
        }
      } else {
        out += word;
      }
      i = j;
      continue;
    }
    const bool signed_number = (ch == '-' || ch == '+') && i + 1 < n && digit(text[i + 1]) &&
                               (i == 0 || !word_char(text[i - 1]));
    if (digit(ch) || signed_number) {
      size_t j = i + 1;
      while (j < n && digit(text[j])) ++j;
      if (j + 1 < n && text[j] == '.' && digit(text[j + 1])) {
        ++j;
        while (j < n && digit(text[j])) ++j;
      }
      if (j < n && (text[j] == 'e' || text[j] == 'E')) {
        size_t k = j + 1;
        if (k < n && (text[k] == '-' || text[k] == '+')) ++k;
        if (k < n && digit(text[k])) {
          while (k < n && digit(text[k])) ++k;
          j = k;
        }
      }
      out += '#';
      i = j;
      continue;
    }
    out += ch;
    ++i;
  }
  return collapse_number_lists(out);
}

std::string describe_op_site(const OpSite& site) {
  std::string text = op_kind(*site.op);
  if (op_body(*site.op) != nullptr) return text;
  // Autocast changes what an op computes: whether the innermost region around it is on.
  for (auto around = site.enclosing.rbegin(); around != site.enclosing.rend(); ++around) {
    if (const auto* autocast = std::get_if<Autocast>(*around)) {
      if (autocast->enabled) text += " under autocast";
      break;
    }
  }
  return text;
}

std::string crash_signature(const std::string& how_it_ended, bool oracle_too) {
  return std::string(std::string(kCrashProperty) + " " + kCrash + ": ") + abstract_text(how_it_ended) +
         (oracle_too ? " (the oracle alone too)" : "");
}

std::string cause_signature(const PropertyResult& result, const Case& c, const Observations* eager,
                            const Observations& oracle, const Observations& sut) {
  return CauseSignatures(c, eager, oracle, sut).of(result);
}

CauseSignatures::CauseSignatures(const Case& c, const Observations* eager, const Observations& oracle,
                                 const Observations& sut)
    : case_(c), eager_(eager), oracle_(oracle), sut_(sut) {}

const std::vector<OpSite>& CauseSignatures::sites() {
  if (!sites_) sites_ = op_sites(case_);
  return *sites_;
}

const std::string& CauseSignatures::difference(const Observations& run, bool recomputation_only, int last_iteration) {
  // A search up to the run's last iteration is a search of every one (as it is for every verdict
  // but in cases that go on after errors): one answer for all of them.
  const bool every = last_iteration < 0 || static_cast<size_t>(last_iteration) + 1 >= run.iterations.size();
  const auto key = std::make_tuple(&run, recomputation_only, every ? INT_MAX : last_iteration);
  auto found = differences_.find(key);
  if (found == differences_.end()) {
    found = differences_.emplace(key, first_difference(run, eager_, sites(), recomputation_only, std::get<2>(key))).first;
  }
  return found->second;
}

std::string CauseSignatures::of(const PropertyResult& result) {
  const Observations* eager = eager_;
  const Observations& oracle = oracle_;
  const Observations& sut = sut_;
  const bool sut_fails = !result.sut.holds;
  const Verdict& failing = sut_fails ? result.sut : result.oracle;
  const Observations& run = sut_fails ? sut : oracle;
  std::string shown;
  std::string oracle_shown;
  const auto show_evidence = [&] {
    shown = evidence(failing);
    oracle_shown = sut_fails && !result.oracle.holds ? evidence(result.oracle) : shown;
  };
  std::string location;
  const Located located = find_property(result.property)->located;
  if (located != Located::at_flag_reading || failing.about_the_error || (failing.after_error && run.error)) show_evidence();
  if (failing.about_the_error || located == Located::at_error) {
    // An error: where the run first parted from eager mode before it, or else the op that raised
    // it, with its message. Errors one parting leads to are one cause, whichever op then raised.
    // The error of the iteration the verdict names (a run going on after errors has several).
    const size_t from = failing.iteration < 0 ? 0 : static_cast<size_t>(failing.iteration);
    const std::optional<ErrorRecord> own = first_error_from(run, from);
    const std::optional<ErrorRecord> error = own ? own : (eager ? first_error_from(*eager, from) : std::nullopt);
    location = difference(run, false, failing.iteration);
    if (!location.empty() && failing.where == "error") {
      // What the error was is then the parting's symptom: which op met the wrong value first.
      shown = error_outcome(failing, run, eager);
      oracle_shown = result.oracle.holds || !sut_fails ? shown : error_outcome(result.oracle, oracle, eager);
    } else if (location.empty() && error) {
      location = std::string(own ? "" : "eager ") + raised_by(*error, sites());
      // The error this run raised is the cause; which other one eager mode raised is not.
      shown = eager_error_as_outcome(shown);
      oracle_shown = eager_error_as_outcome(oracle_shown);
    }
  } else if (failing.after_error && run.error) {
    location = std::string("after an error in ") + error_phase(*run.error);
  } else if (located == Located::at_flag_reading) {
    shown = flag_evidence(failing);
    oracle_shown = result.oracle.holds || !sut_fails ? shown : flag_evidence(result.oracle);
    location = flag_reading(failing, sites());
  } else if (located == Located::at_value || located == Located::at_recomputation) {
    const bool in_recomputation = located == Located::at_recomputation;
    location = difference(run, in_recomputation, failing.iteration);
    if (!location.empty()) {
      // How the value differs (its shape, its elements) is then the parting's symptom.
      shown = evidence(failing, /*with_difference=*/false);
      oracle_shown = result.oracle.holds || !sut_fails ? shown : evidence(result.oracle, false);
    }
    if (location.empty() && !run.trace.empty() && !in_recomputation && eager != nullptr && !eager->trace.empty()) {
      const Difference* d = failing.difference ? &*failing.difference : nullptr;
      const bool defined = d != nullptr && d->kind == "defined";
      const int symptom = defined && d->reference == "None" ? 1 : defined && d->subject == "None" ? -1 : 0;
      location = requires_grad_parting(run, *eager, sites(), failing.iteration < 0 ? INT_MAX : failing.iteration, symptom);
    }
    if (location.empty() && !run.trace.empty()) {
      location = in_recomputation ? "no op's recomputation differs from its forward"
                                  : "every op agrees with eager's: it arises in backward";
    }
  }
  std::string signature = result.property + " " + to_string(result.classification) + ": " + shown;
  if (oracle_shown != shown) signature += " | oracle: " + oracle_shown;
  if (!location.empty()) signature += " @ " + location;
  return signature;
}

}  // namespace recheck
