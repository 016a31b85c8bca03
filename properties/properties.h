// The properties: each has a stable name, reads Observations, and returns a Verdict with
// evidence. Each is checked for the sut and for the oracle, and the pair is classified.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/interpreter.h"
#include "oracles/compare.h"

namespace recheck {

struct Subject;  // suts/subject.h

struct Verdict {
  bool holds = true;
  std::string where;                     // e.g. "iteration 1, leaf v2 .grad"
  std::optional<Difference> difference;  // what differed there, when a tensor did
  std::string detail;                    // anything else (errors, RNG state names)
  // The iteration whose records showed the failure; -1 when it is about the whole run (an
  // error). What classification asks: did the other run complete that iteration?
  int iteration = -1;
  // For a failure in a checkpoint body's calls: the record (Observations::segment_calls) and the
  // call in it; the other run reached it when it made that call too.
  int segment_record = -1;
  int call = -1;
  // For a failure at a reading of the is-checkpointing flag in that call (flag-in-body; a call
  // that raised included): the other run reached it when it made that reading.
  int reading = -1;
  // A failure in the state an error left in `iteration`: the other run reached it when it
  // raised in that iteration too.
  bool after_error = false;
  // A failure about the error raised (or not) in `iteration`: the other run reached it when it
  // ran that iteration, completing it or raising in it (errors-match).
  bool about_the_error = false;
  // A failure by an amount over a bound (memory-eager-floor: bytes above eager mode's floor), or
  // -1. Where both runs fail so at the same iteration, a sut no further over than the oracle is
  // pre-existing (a change that frees part of what the released function keeps), further over a
  // regression.
  int64_t excess = -1;

  static Verdict pass() { return {}; }
  static Verdict fail(std::string where, std::optional<Difference> difference, std::string detail = "");
  // A failure seen in the records of iteration `i`.
  static Verdict fail_in(size_t i, std::string where, std::optional<Difference> difference, std::string detail = "");
  std::string describe() const;  // one line; empty when the property holds
};

// unreached: one run failed the property in an iteration that the other run never completed (it
// stopped at an error in that iteration or before), so the other's "holds" says nothing and the
// pair is not judged by comparison; errors-match judges the error itself. Also when both fail,
// the oracle first, and the sut (which held there) fails later at a point the oracle never
// reached. Not an alarm.
enum class Classification { pass, regression, pre_existing, fixed, divergent, unreached };
const char* to_string(Classification c);
// The classification to_string names `name`; nothing for any other name.
std::optional<Classification> classification_named(const std::string& name);
// oracle holds, sut fails: regression; both fail the same way: pre-existing; and so on.
Classification classify(const Verdict& oracle, const Verdict& sut);
// Whether `run` reached the point where `failed` failed in the other run: it completed that
// iteration (or, for a body's call, made the same call). A failure about the whole run is
// always reached.
bool reached(const Verdict& failed, const Observations& run);
// classify(oracle, sut), knowing the two runs: a failure at a point the other run never reached
// is unreached, not a regression (nor fixed).
Classification classify(const Verdict& oracle, const Verdict& sut, const Observations& oracle_run,
                        const Observations& sut_run);

// The runs of one case. Properties compare a subject (the oracle's run or the sut's) with the
// eager run, or with the oracle's run where the property says so.
struct Runs {
  const Observations& eager;
  const Observations& oracle;
};

// What a property that compares a run with eager mode's reads of that run, besides how many
// iterations ran and which of them raised (every one reads those). agree_for_eager compares
// exactly the union over the properties that apply: a property that reads something new of a
// run says so in its declaration, or the shortcut would let two runs it tells apart through as
// alike (tests/properties/properties_test.cpp holds every property to its declaration).
enum EagerRead : unsigned {
  kReadsOutputs = 1u << 0,        // each iteration's outputs
  kReadsLoss = 1u << 1,           // and its loss
  kReadsLeafGrads = 1u << 2,      // the leaves' .grad after it
  kReadsLeafData = 1u << 3,       // the leaves' data after it
  kReadsRng = 1u << 4,            // the RNG states after it
  kReadsTrackerSeeded = 1u << 5,  // the tracker states the run's own seeding made
  kReadsFlag = 1u << 6,           // the is-checkpointing flag after it
  kReadsAutocast = 1u << 7,       // the autocast state after it
  kReadsErrors = 1u << 8,         // each error: where, what, and the RNG states it left
  kReadsFloor = 1u << 9,          // what it held after each iteration, and whether a stash keeps a graph
  kReadsHookCalls = 1u << 10,     // the calls of the hooks the case's hook ops hung, in each iteration
  kReadsModuleState = 1u << 11,   // the state of the modules the case's state ops name, after it
};

// Where a cause signature (properties/causes.h) locates a failure of the property in its case.
enum class Located {
  by_evidence_alone,  // nowhere: the evidence is the cause (memory, allocations, discards, claims)
  at_error,           // where the run parted from eager mode before its error, else the op that raised it
  at_value,           // the first op whose value parts from eager mode's; "in backward" where none does
  at_recomputation,   // the first op whose recomputation parts from its own forward
  at_flag_reading,    // whether a checkpoint ran in the body before the reading
};

struct PropertyResult;
struct RuleContext;  // properties/classification_rules.h
// A classification rule of one property: where the plain comparison of a pair misleads, it
// reclassifies the result (with why, in the sut's evidence). Returns whether it applied: the
// property's later rules are then not tried.
using Rule = bool (*)(PropertyResult& result, const RuleContext& context);

// A property, declared once (properties.cpp, `properties()`): every consumer (classification,
// cause signatures, the eager shortcut, export-python, the claims, the subjects' lists) reads
// these fields, never its name. docs/adding-a-property.md.
struct Property {
  const char* name;
  const char* description;
  Verdict (*check)(const Observations& subject, const Runs& runs);
  // What it reads of a run it compares with eager mode's run (EagerRead bits); 0: it does not
  // read eager mode's run. Such a property judges the sut and the oracle by the same function
  // of their own observations, so when those agree (agree_for_eager) its two verdicts are
  // equal: pass or pre-existing, never an alarm.
  unsigned eager_reads = 0;
  bool reads_eager() const { return eager_reads != 0; }
  // A claim of the change under test (grad-released, memory-floor): the oracle does not make
  // it, so only the sut's verdict is classified: pass, or regression. The oracle's verdict is
  // still computed and reported, for information.
  bool claim_of_change = false;
  // Compares what the oracle's and the subject's code do inside (their allocations): only
  // meaningful between runs of the same code (CheckpointImplementation::code), and left out of
  // the results otherwise (a Python function against the C++ oracle).
  bool same_code_only = false;
  // Compares the subject with the oracle's run (its gradients, memory or allocations). Where the
  // oracle recomputes under another autocast state than its forward ran in and the subject does
  // not (the subject fixes the released function there), a failure is classified fixed: the
  // oracle's backward ran another graph than its forward's.
  bool compares_with_oracle = false;
  // Reads the is-checkpointing flag as checkpoint bodies saw it: not checked where either run's
  // implementation keeps no such flag (CheckpointImplementation::keeps_checkpointing_flag).
  bool reads_checkpointing_flag = false;
  // A claim of the change that, held, leaves this property unchecked: it compares what the claim
  // changes (stash-grads compares the .grad that grad-released clears).
  const char* yields_to_claim = nullptr;
  // Where a failure is located (cause signatures).
  Located located = Located::by_evidence_alone;
  // export-python writes a script that asserts it with torch alone; its twin there is
  // check(name) in properties/export_checks.py (tests/python/export_agreement_test.cpp holds the two
  // to the same verdicts). The memory properties are not: they need recheck's counting allocator.
  bool exported = false;
  // Its own classification rules, tried in order on an alarm (regression or divergent):
  // `by_its_records` on every check (the two runs' records decide), `by_eager` where eager mode
  // ran (NOTE [ The oracle is no reference ], properties/classification.cpp).
  std::vector<Rule> by_its_records;
  std::vector<Rule> by_eager;
};

// classify(oracle, sut, ...), except for a claim of the change: pass or regression by the sut
// alone.
Classification classify(const Property& property, const Verdict& oracle, const Verdict& sut,
                        const Observations& oracle_run, const Observations& sut_run);

const std::vector<Property>& properties();
const Property* find_property(const std::string& name);
// Throws std::logic_error unless `subject` lists every property exactly once, as one it holds
// (Subject::properties) or one it leaves out with why (Subject::leaves_out), and no other name.
void require_every_property_decided(const Subject& subject);

struct PropertyResult {
  std::string property;
  Verdict oracle;
  Verdict sut;
  Classification classification = Classification::pass;
  // Where it is not a pass: its cause signature (properties/causes.h), the key of its bucket.
  std::string cause;
};

// Which of the change's claims (the properties marked claim_of_change) a run holds the sut to.
// Unchosen, the sut's own ChangeClaims say (the clearing change and its C++ variants: every
// claim; released Megatron code: as the oracle fares; another function: none). Chosen (recheck
// run --claims), the claims named are held, each judged on the sut alone (pass or regression),
// and the others are not checked at all: a pull request that makes no claim about memory is held
// to no worse than the base and eager mode, nothing beyond.
struct ClaimChoice {
  bool chosen = false;
  std::set<std::string> held;
  // Whether the property named is checked under this choice and claims.
  bool checks(const Property& property, ChangeClaims claims) const;
  // Whether the sut is held to the claim named under this choice and claims: chosen, when named;
  // unchosen, when the sut makes the change's claims (ChangeClaims::made).
  bool holds_claim(const std::string& claim, ChangeClaims claims) const;
};
// Why a run of the sut `sut_name` against the oracle (the code each runs) under these claims does
// not check `property` whatever its cases: a claim not held, or allocations between different
// code; "" when it checks it. check_properties leaves such a property out, and the report says why.
struct CodeChecked {
  std::string oracle_code;  // CheckpointImplementation::code of each run
  std::string sut_code;
  std::string sut_name;
  bool oracle_keeps_flag = true;  // CheckpointImplementation::keeps_checkpointing_flag
  bool sut_keeps_flag = true;
};
std::string not_checked_because(const Property& property, ChangeClaims claims, const ClaimChoice& choice,
                                const CodeChecked& code);
// The claims every property marked claim_of_change makes, in the properties' order.
std::vector<std::string> claim_names();
// "none", "clearing" (the clearing change's claims: every claim), or claim names joined by
// commas; throws std::invalid_argument naming the claim it does not know and the ones it does.
ClaimChoice parse_claims(const std::string& text);
// The choice as --claims takes it back: "none", "clearing", or the names; "" when unchosen.
std::string describe_claims(const ClaimChoice& choice);

// `claims` says how the change's claims apply to the sut (core/checkpoint_interface.h); not applicable,
// they are left out of the results, and so are those `choice` does not hold.
std::vector<PropertyResult> check_properties(const Observations& eager, const Observations& oracle,
                                             const Observations& sut, ChangeClaims claims = ChangeClaims::made,
                                             const ClaimChoice& choice = {});

// Whether two runs observed the same in everything a property compares with the eager run: the
// iterations completed, the outputs and the loss, the leaves' .grad and data, the RNG states,
// the is-checkpointing flag, the autocast state and the error (bitwise, and the same error at the same point).
// What is compared is what the properties applying to either run read (subject_for).
bool agree_for_eager(const Observations& a, const Observations& b);
// Whether a property that applies to a run of `implementation` reads eager mode's memory: its
// eager run must then measure it (RunOptions::measure_memory).
bool reads_eager_memory(const std::string& implementation);

// check_properties without the eager run, for an oracle and a sut that agree_for_eager: the
// properties that read it are left out of the results (each would be pass or pre-existing).
std::vector<PropertyResult> check_properties_without_eager(const Observations& oracle, const Observations& sut,
                                                           ChangeClaims claims = ChangeClaims::made,
                                                           const ClaimChoice& choice = {});

// Whether every recomputation in `run` started in the autocast state its forward call started in.
bool recomputes_in_forward_s_autocast_state(const Observations& run);

// The first error a run raised in iteration `from` or later (the run's first, without records).
std::optional<ErrorRecord> first_error_from(const Observations& run, size_t from);
// What errors-match adds to an error that left the RNG states other than backward found them.
extern const char* const kRngNotRestored;

// True when a result should fail a CI gate.
inline bool is_alarm(Classification c) {
  return c == Classification::regression || c == Classification::divergent;
}

}  // namespace recheck
