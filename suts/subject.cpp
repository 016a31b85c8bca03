#include "suts/subject.h"

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
  return nullptr;
}

namespace {

std::vector<Subject>& registry() {
  static std::vector<Subject> all = {megatron_checkpoint_function()};
  return all;
}

}  // namespace

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
