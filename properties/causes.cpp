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
  if (const auto* state = std::get_if<ModuleState>(&op)) return std::string("state (") + to_string(state->fn) + ")";
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
    if (location.empty() && !in_recomputation && eager != nullptr) {
      location = hook_parting(run, *eager, failing.iteration < 0 ? INT_MAX : failing.iteration);
    }
    if (location.empty() && !in_recomputation && eager != nullptr) {
      location = module_parting(run, *eager, failing.iteration < 0 ? INT_MAX : failing.iteration);
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
