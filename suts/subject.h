// A subject: one checkpoint function under test, declared in one place. Its implementations
// and the kind of each (the change, the oracle it is compared with, its mutants, equivalent
// rewrites and fixes), the pair `recheck run` checks by default, and how to make each. The
// commands read these from the subject (`--subject NAME`); none names a subject's variants
// itself. docs/adding-a-subject.md says how to add one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint_interface.h"

namespace recheck {

// What an implementation is, for the suite: which verdicts it must get.
enum class VariantKind {
  change,      // the change under review: held to its claims
  oracle,      // the released function: what the change is compared with
  mutant,      // a plausible mistake: the suite must kill it (suts/megatron_checkpoint_function/mutants_test.cpp)
  equivalent,  // a correct rewrite of the change: any alarm on it is a false alarm
  fix,         // the change plus a fix of the released function: `fixed`, never an alarm
  crash,       // crashes on purpose, to test isolation
};

// One implementation a subject declares.
struct SubjectImplementation {
  std::string name;
  std::string description;
  VariantKind kind;
  // For a mutant: the correct implementation its mistake was made in (the change, or a fix),
  // which is what a pull request fixing it would be. Empty for the others.
  std::string made_from = {};
  // A mutant that only cases this build cannot run on CPU tell from the oracle: why (empty for
  // the rest). On CPU, `recheck mutants` and the mutant tests skip it, saying so.
  std::string cannot_be_killed_on_cpu = {};
  // How it differs from what it was made from (a mutant) or from the subject's change (the
  // rest), in the subject's terms: for the C++ port, its decisions taken otherwise.
  std::string differs_by = {};
};

struct Subject {
  std::string name;         // what --subject takes
  std::string description;  // one line, for `recheck variants`
  std::string change;       // the implementation `recheck run` checks by default (--sut)
  std::string oracle;       // and what it is compared with (--oracle)
  std::vector<SubjectImplementation> implementations;
  // The properties that apply to its implementations (properties/properties.h), by name, in any
  // order: a check leaves the others out of its results and its reports. The claims its change
  // makes are those of them marked claim_of_change.
  std::vector<std::string> properties;
  // Every other property, each with why it does not apply (a function that keeps no
  // is-checkpointing flag, a claim its change does not make): with `properties`, every property
  // exactly once, so that a property added later is a decision each subject makes, never one
  // dropped without a word (a check refuses a subject that has not made it; `recheck variants`
  // prints both lists).
  std::vector<std::pair<std::string, std::string>> leaves_out;
  // A function no subject declares, given on the command line and judged against eager mode
  // alone (it is its own oracle): what it fails is a finding about it, and a finding fails a
  // run as an alarm does.
  bool findings_fail = false;
  // Its released function can crash the process on cases a caller gets wrong (reading freed
  // memory): mutant hunts then check each case in a process of its own (runner/isolated_check.h).
  bool cases_may_crash = false;
  // How `recheck export-python --checkpoint` calls the function an implementation of it runs
  // (megatron, megatron-clearing, torch-non-reentrant, ...).
  std::function<std::string(const std::string& implementation)> exported_as;
  // Makes one of `implementations` by name; throws std::invalid_argument otherwise.
  std::function<std::unique_ptr<CheckpointImplementation>(const std::string& name)> make;

  // The implementations of one kind, in declaration order.
  std::vector<const SubjectImplementation*> of_kind(VariantKind kind) const;
  // The implementation called `name` (or an alias of it), or null.
  const SubjectImplementation* find(const std::string& name) const;
  bool applies(const std::string& property) const;
};

// Why a property judging a function against eager mode and itself does not apply, in the
// function's own terms: it keeps no is-checkpointing flag, its change makes none of Megatron's
// clearing claims, it has no discard.
struct NotJudged {
  std::string flag;
  std::string clearing_claims;
  std::string discard;
};
// Sets `subject`'s properties to those that compare a run with eager mode or with itself, and
// its leaves_out to the rest with the reasons `why` gives: PyTorch's non-reentrant checkpoint
// and a function no subject declares are judged so.
void judge_against_eager_and_itself(Subject& subject, const NotJudged& why);

// Every subject: the ones built in (Megatron's CheckpointFunction first: the default), then the
// ones registered (a bridge's).
const std::vector<Subject>& subjects();
void register_subject(Subject subject);
const Subject& default_subject();
// The subject called `name`; throws std::invalid_argument listing the known ones otherwise.
const Subject& find_subject(const std::string& name);
// The subject that declares the implementation called `name` (or an alias of it), or null.
const Subject* subject_declaring(const std::string& implementation);
// The properties that apply to a run of `implementation`: its subject's, or the default
// subject's for an implementation no subject declares (a Python function given by path).
const Subject& subject_for(const std::string& implementation);

// Makes the implementation called `variant_name`: a registered one (a Python variant, by its spec
// or alias: core/checkpoint_interface.h), else one of the built-in subject's; throws
// std::invalid_argument naming the known variants otherwise.
std::unique_ptr<CheckpointImplementation> make_checkpoint(const std::string& variant_name);

}  // namespace recheck
