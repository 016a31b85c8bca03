#include "suts/subject.h"

#include <algorithm>
#include <stdexcept>

#include "suts/megatron_checkpoint_function/checkpoint.h"

namespace recheck {

std::vector<const SubjectImplementation*> Subject::of_kind(VariantKind kind) const {
  std::vector<const SubjectImplementation*> found;
  for (const SubjectImplementation& implementation : implementations) {
    if (implementation.kind == kind) found.push_back(&implementation);
  }
  return found;
}

const SubjectImplementation* Subject::find(const std::string& implementation_name) const {
  for (const SubjectImplementation& implementation : implementations) {
    if (implementation.name == implementation_name) return &implementation;
  }
  // A registered implementation runs under the name its alias stands for.
  const std::string resolved = resolve_checkpoint_alias(implementation_name);
  for (const SubjectImplementation& implementation : implementations) {
    if (resolve_checkpoint_alias(implementation.name) == resolved) return &implementation;
  }
  return nullptr;
}

bool Subject::applies(const std::string& property) const {
  return std::find(properties.begin(), properties.end(), property) != properties.end();
}

void judge_against_eager_and_itself(Subject& subject, const NotJudged& why) {
  subject.properties = {"grads-bitwise", "outputs-bitwise", "recompute-fidelity", "grads-match-eager",
                        "rng-restored",  "errors-match",    "no-side-effects",   "stash-kept",
                        "stash-grads",   "memory-eager-floor", "hooks-match-eager", "hooks-bitwise",
                        "module-state-matches-eager"};
  subject.leaves_out = {{"flag-in-body", why.flag},
                        {"grad-released", why.clearing_claims},
                        {"memory-floor", why.clearing_claims},
                        {"no-extra-allocations", why.clearing_claims},
                        {"discard-own-outputs", why.discard},
                        {"discard-recomputed", why.discard}};
}

namespace {

std::vector<Subject>& registry() {
  static std::vector<Subject> all = {megatron_checkpoint_function()};
  return all;
}

}  // namespace

const Subject* subject_declaring(const std::string& implementation) {
  for (const Subject& subject : registry()) {
    if (subject.find(implementation) != nullptr) return &subject;
  }
  return nullptr;
}

const Subject& subject_for(const std::string& implementation) {
  const Subject* declaring = subject_declaring(implementation);
  return declaring != nullptr ? *declaring : default_subject();
}

const std::vector<Subject>& subjects() { return registry(); }

void register_subject(Subject subject) {
  for (Subject& known : registry()) {
    if (known.name == subject.name) {
      known = std::move(subject);
      return;
    }
  }
  registry().push_back(std::move(subject));
}

const Subject& default_subject() { return registry().front(); }

std::unique_ptr<CheckpointImplementation> make_checkpoint(const std::string& variant_name) {
  if (auto registered = make_registered_checkpoint(variant_name)) return registered;
  try {
    return default_subject().make(resolve_checkpoint_alias(variant_name));
  } catch (const std::invalid_argument& error) {
    if (python_bridge_built()) throw;
    // The Python variants' short names are the bridge's to register.
    throw std::invalid_argument(std::string(error.what()) +
                                "; this recheck was built without the Python bridge, which Python variants "
                                "(megatron-py, torch-py, the Python subjects') need: configure with "
                                "-DRECHECK_PYTHON=ON against a Python torch (docs/python.md), or run ci/python");
  }
}

const Subject& find_subject(const std::string& name) {
  std::string known;
  for (const Subject& subject : registry()) {
    if (subject.name == name) return subject;
    known += (known.empty() ? "" : ", ") + subject.name;
  }
  throw std::invalid_argument("unknown subject '" + name + "' (known: " + known + ")");
}

}  // namespace recheck
