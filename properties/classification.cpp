// The classification of a pair of verdicts, the claims a run holds, and the rules by which eager
// mode judges a sut that fixes its oracle (NOTE [ The oracle is no reference ]); the properties
// themselves are in properties.cpp.
#include <algorithm>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "properties/properties.h"
#include "properties/body_state.h"
#include "properties/causes.h"
#include "properties/classification_rules.h"
#include "suts/subject.h"

namespace recheck {

const char* to_string(Classification c) {
  switch (c) {
    case Classification::pass: return "pass";
    case Classification::regression: return "regression";
    case Classification::pre_existing: return "pre-existing";
    case Classification::fixed: return "fixed";
    case Classification::divergent: return "divergent";
    case Classification::unreached: return "unreached";
  }
  return "?";
}

std::optional<Classification> classification_named(const std::string& name) {
  for (const Classification c : {Classification::pass, Classification::regression, Classification::pre_existing,
                                 Classification::fixed, Classification::divergent, Classification::unreached}) {
    if (name == to_string(c)) return c;
  }
  return std::nullopt;
}

Classification classify(const Verdict& oracle, const Verdict& sut) {
  if (oracle.holds && sut.holds) return Classification::pass;
  if (oracle.holds) return Classification::regression;
  if (sut.holds) return Classification::fixed;
  if (oracle.excess >= 0 && sut.excess >= 0 && oracle.iteration == sut.iteration) {
    return sut.excess <= oracle.excess ? Classification::pre_existing : Classification::regression;
  }
  return oracle.describe() == sut.describe() ? Classification::pre_existing : Classification::divergent;
}

bool reached(const Verdict& failed, const Observations& run) {
  if (failed.segment_record >= 0) {
    const size_t record = static_cast<size_t>(failed.segment_record);
    if (record >= run.segment_calls.size() || run.segment_calls[record].iteration != failed.iteration) return false;
    const SegmentCall& call = run.segment_calls[record];
    if (failed.reading >= 0) {
      const size_t k = static_cast<size_t>(failed.call);
      return k < call.flag_reads.size() && static_cast<int>(call.flag_reads[k].size()) > failed.reading;
    }
    return static_cast<int>(call.calls.size()) > failed.call;
  }
  if (failed.iteration < 0) return true;
  const size_t i = static_cast<size_t>(failed.iteration);
  if (i >= run.iterations.size()) return false;
  const std::optional<ErrorRecord>& error = run.iterations[i].error;
  // An iteration that raised was not completed; the state its error left is reached by a run
  // that raised in it too.
  if (failed.after_error) return error.has_value();
  if (failed.about_the_error) return true;
  return !error.has_value();
}

namespace {

// A failure in the state an error left (`failed.after_error`), where the other run raised another
// error earlier in that iteration (an earlier phase, or fewer ops completed): the other run's
// state is that of another point, which says nothing about this one.
bool other_raised_earlier(const Verdict& failed, const Observations& failing, const Observations& other) {
  if (!failed.after_error || failed.iteration < 0) return false;
  const size_t i = static_cast<size_t>(failed.iteration);
  if (i >= failing.iterations.size() || i >= other.iterations.size()) return false;
  const std::optional<ErrorRecord>& mine = failing.iterations[i].error;
  const std::optional<ErrorRecord>& theirs = other.iterations[i].error;
  if (!mine || !theirs || mine->error == theirs->error) return false;
  return error_progress(*theirs) < error_progress(*mine);
}

// Both runs raised an error in iteration `i` and eager mode did not.
bool raised_where_eager_did_not(const Observations& eager, const Observations& oracle, const Observations& sut,
                                size_t i) {
  auto raised = [&](const Observations& run) { return i < run.iterations.size() && run.iterations[i].error.has_value(); };
  return raised(oracle) && raised(sut) && i < eager.iterations.size() && !eager.iterations[i].error.has_value();
}

}  // namespace

Classification classify(const Verdict& oracle, const Verdict& sut, const Observations& oracle_run,
                        const Observations& sut_run) {
  // A verdict that holds only because its run stopped before the point the other failed at.
  if (oracle.holds && !sut.holds && !reached(sut, oracle_run)) return Classification::unreached;
  if (sut.holds && !oracle.holds && !reached(oracle, sut_run)) return Classification::unreached;
  if (oracle.holds && !sut.holds && other_raised_earlier(sut, sut_run, oracle_run)) return Classification::unreached;
  if (sut.holds && !oracle.holds && other_raised_earlier(oracle, oracle_run, sut_run)) return Classification::unreached;
  // Both fail, the oracle first: the sut held where the oracle failed and went on, to fail at a
  // point the oracle's run never reached. Nothing there can be compared.
  if (!oracle.holds && !sut.holds && oracle.iteration >= 0 && sut.iteration > oracle.iteration &&
      !reached(sut, oracle_run) && oracle.describe() != sut.describe()) {
    return Classification::unreached;
  }
  return classify(oracle, sut);
}

Classification classify(const Property& property, const Verdict& oracle, const Verdict& sut,
                        const Observations& oracle_run, const Observations& sut_run) {
  if (property.claim_of_change) return sut.holds ? Classification::pass : Classification::regression;
  return classify(oracle, sut, oracle_run, sut_run);
}

namespace {

// The properties that compare the subject with eager mode which the sut holds and the oracle
// fails: where the sut fixes the oracle's function, as eager autograd judges. Their names, joined.
std::string fixed_against_eager(const std::vector<PropertyResult>& results) {
  std::string names;
  for (const PropertyResult& r : results) {
    const Property* p = find_property(r.property);
    if (p == nullptr || !p->reads_eager() || r.classification != Classification::fixed) continue;
    names += (names.empty() ? "" : ", ") + r.property;
  }
  return names;
}

// Where both runs fail a property and eager mode says the sut is the nearer of the two, the pair
// is not compared by the difference of their evidence (NOTE [ The oracle is no reference ]):
//  - errors-match: both raised the same error at the same point, and only the oracle's left the
//    RNG states unrestored: the sut fixed that part, `fixed`.
//  - grads-bitwise: the oracle's gradients are not eager mode's (it fails grads-match-eager), so
//    they are no reference for the sut's bits; grads-match-eager judges the two against eager
//    mode instead, and grads-bitwise is `pre-existing`.
//  - errors-match: both raised errors eager mode did not, different ones, in the same iteration,
//    the sut after more of it than the oracle (a later phase, or more ops completed): the sut
//    got past the oracle's error and raised at a point the oracle never reached, `unreached`.
//    Raised at the same point (the same phase and ops completed), both fail there whatever the
//    message says: `pre-existing`. Raised earlier, the pair stays divergent.
//  - grads-bitwise, grads-match-eager: both runs' outputs or loss already differ from eager mode's
//    the same way (outputs-bitwise pre-existing) in this iteration or before: their gradients are
//    those of another loss than eager mode's, `pre-existing` (a mistake that loses a gradient
//    can otherwise match eager mode's missing one by chance, and its fix look like a regression).
//  - recompute-fidelity: the sut holds the checkpoint call where the oracle first fails and fails
//    a later one: the oracle, judged from that later call on, fails that call too (`pre-existing`:
//    the sut fixed the first and shares the second, whose numbers the oracle's first bug may
//    move) or not (divergent, as ever).
//  - outputs-bitwise, grads-match-eager, rng-restored, no-side-effects: the sut holds the
//    iteration where the oracle first fails and fails a later one: judged from that iteration on
//    (its earlier iterations taken as eager mode's), the oracle fails there too, the same way:
//    `pre-existing` (a fix of the first failure sharing the second, as a run that goes on
//    after errors meets: the flag fixed after an error, the distribute leak shared after it).
//  - errors-match: the oracle first fails in an earlier iteration than the sut (the RNG states an
//    error left, say) and, where the sut fails, raised the same error at the same point:
//    `pre-existing` (the sut fixed the first failure and shares the second; a run going on after
//    an error whose state both leave unlike eager mode's raises again where eager mode cannot).
//  - not a rule: recompute-fidelity failed by the sut where the oracle holds it stays a
//    regression even where the oracle's RNG states are not eager mode's and the sut's are. A
//    recomputation that parts from its own run's forward is that run's bug, whatever the other
//    run drew: Megatron's tracker fix 965cfd316c made forward draw as eager mode does and left
//    the recomputation on the stale state (known cause tracker-name-not-restored, which its
//    parent has not), and its checkpointed gradients differ from its own eager ones.
//  - a property that compares the sut with the oracle (grads-bitwise, stash-kept, stash-grads),
//    failed in the state an error left, in an iteration where both runs raised and eager mode did
//    not: `pre-existing` (both revisions are off eager mode's path there, by a failure they
//    share; what each leaves behind its error, a random draw after it say, has no judge).
//  - stash-kept: at the first stash the two runs keep differently, eager mode's stash is the
//    sut's in the first thing they differ in (requires_grad, the data's shape, its values, ...)
//    and not the oracle's: the sut fixed what the base left the user, `fixed`
//    (stash_fixed_against_eager).
// A property that compares the sut with the oracle, failed in the state an error left, in an
// iteration where both runs raised and eager mode did not (the rule every such property shares).
bool in_a_state_no_one_judges(PropertyResult& r, const RuleContext& context) {
  if (!(find_property(r.property)->compares_with_oracle && r.sut.after_error && r.sut.iteration >= 0 &&
        raised_where_eager_did_not(context.runs.eager, context.oracle, context.sut, static_cast<size_t>(r.sut.iteration)))) {
    return false;
  }
  r.classification = Classification::pre_existing;
  explain(r.sut, "in the state an error left that both runs raise and eager mode does not: a state eager mode never "
                 "has, where nothing says which run's is right");
  return true;
}

// A property that reads eager mode's run, both failing, the sut in a later iteration (the rule
// every such property shares).
bool where_the_oracle_fails_too(PropertyResult& r, const RuleContext& context) {
  const Property* p = find_property(r.property);
  const Runs& runs = context.runs;
  if (!(p->reads_eager() && !r.oracle.holds && !r.sut.holds && r.oracle.iteration >= 0 &&
        r.sut.iteration > r.oracle.iteration && static_cast<size_t>(r.sut.iteration) < runs.eager.iterations.size() &&
        static_cast<size_t>(r.sut.iteration) < context.oracle.iterations.size())) {
    return false;
  }
  // The oracle judged from the sut's failing iteration on: its iterations before it as eager
  // mode's, which hold by construction.
  Observations from_there = context.oracle;
  for (int i = 0; i < r.sut.iteration; ++i) {
    from_there.iterations[static_cast<size_t>(i)] = runs.eager.iterations[static_cast<size_t>(i)];
  }
  const Verdict there = p->check(from_there, runs);
  if (!there.holds && there.iteration == r.sut.iteration && there.describe() == r.sut.describe()) {
    r.classification = Classification::pre_existing;
    explain(r.sut, "where the oracle first fails this run holds, and the oracle fails here too");
  }
  return true;
}

void judge_by_eager_where_the_oracle_is_wrong(std::vector<PropertyResult>& results, const Observations& oracle,
                                              const Observations& sut, const Runs& runs) {
  const RuleContext context{oracle, sut, runs, results};
  for (PropertyResult& r : results) {
    if (r.classification != Classification::divergent && r.classification != Classification::regression) continue;
    if (in_a_state_no_one_judges(r, context)) continue;
    bool applied = false;
    for (const Rule rule : find_property(r.property)->by_eager) {
      if ((applied = rule(r, context))) break;
    }
    if (!applied) (void)where_the_oracle_fails_too(r, context);
  }
}

}  // namespace

namespace {

// Where the oracle recomputes other values than its forward made and the sut, recomputing them
// too, does not (NOTE [ The oracle is no reference ], 3.): recompute-fidelity fixed at a call the
// sut recomputed, or by the runs' traces, wherever in a recomputation (a value the body does not
// return: a random draw it stashes), the oracle parting from its forward at every op the sut
// parts at and more. What it was, or "".
std::string recomputes_otherwise(const std::vector<PropertyResult>& results, const Observations& oracle,
                                 const Observations& sut) {
  for (const PropertyResult& r : results) {
    if (r.property != std::string("recompute-fidelity") || r.classification != Classification::fixed ||
        r.oracle.segment_record < 0) {
      continue;
    }
    const size_t record = static_cast<size_t>(r.oracle.segment_record);
    if (record < sut.segment_calls.size() && record < oracle.segment_calls.size() &&
        sut.segment_calls[record].site == oracle.segment_calls[record].site &&
        sut.segment_calls[record].iteration == oracle.segment_calls[record].iteration &&
        static_cast<int>(sut.segment_calls[record].calls.size()) > r.oracle.call) {
      return "recompute-fidelity: " + r.oracle.where;
    }
  }
  // The traces see tensors only: a sut whose recomputation fails in a way the oracle's does not
  // and no tensor shows (under another autocast state than its forward, another number of
  // outputs) recomputes otherwise too, where the traces cannot say.
  for (const PropertyResult& r : results) {
    if (r.property == std::string("recompute-fidelity") && is_alarm(r.classification) &&
        !(r.sut.difference && r.sut.difference->kind != "autocast")) {
      return "";
    }
  }
  return compare_recomputations(oracle, sut).how == RecomputationsCompared::How::oracle_beyond
             ? "by the traces: ops it recomputes from other values than forward, or drawing other numbers, wherever "
               "this run does and more"
             : "";
}

// What backward computes from a recomputation: gradients (against eager mode's or the oracle's),
// what a body stashes, the recomputed outputs.
bool computed_from_recomputation(const Property& p) {
  if (p.located == Located::at_recomputation) return true;
  return p.located == Located::at_value && (p.compares_with_oracle || (p.eager_reads & kReadsLeafGrads) != 0);
}

// Both runs' recomputations part from their forwards at the same ops (by their traces): what
// backward computed from them has no reference in either, and a pair of such verdicts that both
// fail differently, in or after that iteration, the sut no sooner than the oracle, is
// pre-existing (the numbers a base's own bug moves within a failure both share: an argument the
// body updates in place, recomputed from in both, with other random draws in one).
void both_recompute_otherwise_alike(std::vector<PropertyResult>& results, const Observations& oracle,
                                    const Observations& sut) {
  std::optional<RecomputationsCompared> compared;
  for (PropertyResult& r : results) {
    const Property& p = *find_property(r.property);
    if (r.classification != Classification::divergent || !computed_from_recomputation(p)) continue;
    // A recomputation failing otherwise than by its values (under another autocast state, with
    // other outputs) is a difference the traces do not see.
    if (p.located == Located::at_recomputation &&
        !(r.sut.difference && r.oracle.difference && r.sut.difference->kind == "value" &&
          r.oracle.difference->kind == "value")) {
      continue;
    }
    if (!compared) compared = compare_recomputations(oracle, sut);
    if (compared->how != RecomputationsCompared::How::alike || r.oracle.iteration < compared->first_iteration ||
        r.sut.iteration < r.oracle.iteration) {
      continue;  // a sut failing before the oracle does is nearer to nothing
    }
    r.classification = Classification::pre_existing;
    explain(r.sut, "both runs recompute the same ops from other values than their forwards did (iteration " +
                       std::to_string(compared->first_iteration) +
                       " on): what backward computed from them has no reference in either");
  }
}

// The checks of every property, or of those that do not read the eager run when it is null.
std::vector<PropertyResult> check_all(const Observations* eager, const Observations& oracle, const Observations& sut,
                                      ChangeClaims claims, const ClaimChoice& choice) {
  // Without an eager run, the properties that read it are skipped, never handed this one.
  const Runs runs{eager ? *eager : oracle, oracle};
  std::vector<PropertyResult> results;
  const Subject& subject = subject_for(sut.implementation);
  {
    static std::mutex lock;
    static std::set<std::string> decided;  // each subject checked once, before its first case
    const std::lock_guard<std::mutex> held(lock);
    if (decided.count(subject.name) == 0) {
      require_every_property_decided(subject);
      decided.insert(subject.name);
    }
  }
  for (const Property& p : properties()) {
    if (!subject.applies(p.name)) continue;  // not part of its subject's suite: not reported at all
    const CodeChecked code{oracle.code, sut.code, sut.implementation, oracle.keeps_checkpointing_flag,
                           sut.keeps_checkpointing_flag};
    if (!not_checked_because(p, claims, choice, code).empty()) continue;
    if (p.reads_eager() && !eager) continue;
    PropertyResult r;
    r.property = p.name;
    r.oracle = p.check(oracle, runs);
    r.sut = p.check(sut, runs);
    if (p.claim_of_change && choice.chosen) {
      r.classification = r.sut.holds ? Classification::pass : Classification::regression;
    } else {
      switch (claims) {
        case ChangeClaims::made:
          r.classification = classify(p, r.oracle, r.sut, oracle, sut);
          break;
        case ChangeClaims::like_oracle:
          r.classification = classify(r.oracle, r.sut, oracle, sut);
          break;
        // Another function has no change to regress: what it fails is its own, pre-existing.
        case ChangeClaims::not_applicable:
          r.classification = r.sut.holds ? Classification::pass : Classification::pre_existing;
          break;
      }
    }
    results.push_back(std::move(r));
  }
  if (claims == ChangeClaims::not_applicable) return results;
  // Rules a property has of its own, on what the two runs recorded (flag-in-body judges each
  // reading on its own).
  const RuleContext context{oracle, sut, runs, results};
  for (PropertyResult& r : results) {
    if (r.classification != Classification::divergent && r.classification != Classification::regression) continue;
    for (const Rule rule : find_property(r.property)->by_its_records) {
      if (rule(r, context)) break;
    }
  }
  both_recompute_otherwise_alike(results, oracle, sut);
  if (eager) judge_by_eager_where_the_oracle_is_wrong(results, oracle, sut, runs);
  // NOTE [ The oracle is no reference ] Where the sut fixes the oracle's function, what the
  // oracle computed is no reference for the sut: a property that compares the sut with the
  // oracle (its gradients, memory or allocations) and fails is `fixed`, not a regression.
  //  1. Eager autograd judges the fix: the sut holds a property that compares with eager mode
  //     where the oracle fails it (a pull request fixes a bug of its base).
  //  2. The oracle recomputes under another autocast state than its forward ran in, and the sut
  //     does not (autocast-restored): its backward ran another graph than its forward's.
  //  3. The oracle's recomputation parts from its forward where the sut's, recomputing the same
  //     ops, does not (recompute-fidelity fixed; or by the traces, at every op the sut's parts at
  //     and more: a pre-existing bug both share, and the oracle's own besides): its backward ran
  //     on other values than its forward made, as the run's own forward judges (a fix of where
  //     recomputation draws its numbers).
  // Whichever, where both fail another property, the oracle's evidence is shaped by the bug the
  // sut fixed, and the two cannot be told apart by its difference: a would-be divergent pair is
  // pre-existing.
  // A sut that fails a property that compares with eager mode where the oracle holds it is a
  // regression whatever it fixed: a fix hides nothing eager autograd sees.
  const std::string fixed = eager ? fixed_against_eager(results) : "";
  const bool autocast_unfaithful =
      !recomputes_in_forward_s_autocast_state(oracle) && recomputes_in_forward_s_autocast_state(sut);
  const std::string recomputed_otherwise = fixed.empty() && !autocast_unfaithful ? recomputes_otherwise(results, oracle, sut) : "";
  if (fixed.empty() && !autocast_unfaithful && recomputed_otherwise.empty()) return results;
  const std::string why =
      autocast_unfaithful
          ? "the oracle recomputes under another autocast state than its forward ran in and this run does not: the "
            "oracle is no reference here"
      : !fixed.empty()
          ? "this run holds " + fixed + " where the oracle fails it, as eager mode judges: the oracle is no reference here"
          : "the oracle's recomputation parts from its forward (" + recomputed_otherwise +
                ") and this run's, recomputing it too, does not: the oracle's backward ran on other values than its "
                "forward made, no reference here";
  for (PropertyResult& r : results) {
    if (r.sut.holds) continue;
    const Property* p = find_property(r.property);
    const bool compared = p->compares_with_oracle;
    const bool divergent = r.classification == Classification::divergent;
    if (!compared && !divergent) continue;
    r.classification = compared ? Classification::fixed : Classification::pre_existing;
    explain(r.sut, why);
  }
  return results;
}

}  // namespace

std::vector<PropertyResult> check_properties(const Observations& eager, const Observations& oracle,
                                             const Observations& sut, ChangeClaims claims, const ClaimChoice& choice) {
  return check_all(&eager, oracle, sut, claims, choice);
}

std::vector<PropertyResult> check_properties_without_eager(const Observations& oracle, const Observations& sut,
                                                           ChangeClaims claims, const ClaimChoice& choice) {
  return check_all(nullptr, oracle, sut, claims, choice);
}

// Unchosen, a sut that makes the change's claims holds every one; released code (like_oracle)
// is still checked on them, compared with the oracle, but claims nothing.
bool ClaimChoice::holds_claim(const std::string& claim, ChangeClaims claims) const {
  if (chosen) return held.count(claim) != 0;
  return claims == ChangeClaims::made;
}

bool ClaimChoice::checks(const Property& property, ChangeClaims claims) const {
  if (property.yields_to_claim != nullptr && holds_claim(property.yields_to_claim, claims)) return false;
  if (!property.claim_of_change) return true;
  if (chosen) return held.count(property.name) != 0;
  return claims != ChangeClaims::not_applicable;
}

std::string not_checked_because(const Property& property, ChangeClaims claims, const ClaimChoice& choice,
                                const CodeChecked& code) {
  if (property.yields_to_claim != nullptr && choice.holds_claim(property.yields_to_claim, claims)) {
    return std::string("the run holds the claim ") + property.yields_to_claim + ", which changes what it compares";
  }
  if (!choice.checks(property, claims)) {
    return choice.chosen ? "not a claim this run holds (--claims " + describe_claims(choice) + ")"
                         : "a claim of the change, which " + code.sut_name + " does not make";
  }
  if (property.same_code_only && code.oracle_code != code.sut_code) {
    return "allocations are compared only between runs of the same code: the sut runs " + code.sut_code +
           ", the oracle " + code.oracle_code;
  }
  if (property.reads_checkpointing_flag && !(code.oracle_keeps_flag && code.sut_keeps_flag)) {
    return "the " + std::string(code.sut_keeps_flag ? "oracle's" : "sut's") + " code keeps no is-checkpointing flag";
  }
  return "";
}

std::vector<std::string> claim_names() {
  std::vector<std::string> names;
  for (const Property& p : properties()) {
    if (p.claim_of_change) names.emplace_back(p.name);
  }
  return names;
}

ClaimChoice parse_claims(const std::string& text) {
  ClaimChoice choice;
  choice.chosen = true;
  if (text == "none") return choice;
  const std::vector<std::string> known = claim_names();
  if (text == "clearing") {
    choice.held.insert(known.begin(), known.end());
    return choice;
  }
  std::string listed;
  for (const std::string& name : known) listed += (listed.empty() ? "" : ", ") + name;
  size_t from = 0;
  while (from <= text.size()) {
    const size_t comma = std::min(text.find(',', from), text.size());
    const std::string name = text.substr(from, comma - from);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw std::invalid_argument("--claims: no claim '" + name + "'; expected none, clearing (every claim: " + listed +
                                  "), or some of those names joined by commas");
    }
    choice.held.insert(name);
    from = comma + 1;
  }
  return choice;
}

std::string describe_claims(const ClaimChoice& choice) {
  if (!choice.chosen) return "";
  if (choice.held.empty()) return "none";
  const std::vector<std::string> known = claim_names();
  if (choice.held.size() == known.size()) return "clearing";
  std::string text;
  for (const std::string& name : known) {  // in the properties' order, whatever order they were given in
    if (choice.held.count(name) != 0) text += (text.empty() ? "" : ",") + name;
  }
  return text;
}

}  // namespace recheck
