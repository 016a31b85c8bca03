#include "suts/subject.h"

#include <algorithm>
#include <stdexcept>

#include "suts/checkpoint.h"

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

const Subject& find_subject(const std::string& name) {
  std::string known;
  for (const Subject& subject : registry()) {
    if (subject.name == name) return subject;
    known += (known.empty() ? "" : ", ") + subject.name;
  }
  throw std::invalid_argument("unknown subject '" + name + "' (known: " + known + ")");
}

}  // namespace recheck
