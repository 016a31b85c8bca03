// What the bridge runs besides a module given by name: the short names of variants (aliases) and
// the Python modules recheck carries (a subject's variants), registered by each subject's folder.
#include "python/bridge.h"

#include "python/subjects.h"
#include "suts/subject.h"

#include <utility>

namespace recheck::python {

namespace {

std::vector<Alias>& alias_registry() {
  static std::vector<Alias> all = {
      {"megatron-py", "python:megatron.core.tensor_parallel.random:CheckpointFunction",
       "megatron-core's CheckpointFunction as installed (or as PYTHONPATH finds it)"},
      {"megatron-py-clearing", "python-clearing:megatron.core.tensor_parallel.random:CheckpointFunction",
       "the same with the PR's change wrapped around it (recheck's wrapper, not the PR's code)"},
      {"torch-py", "python:torch.utils.checkpoint:checkpoint", "PyTorch's reentrant torch.utils.checkpoint"},
  };
  return all;
}

std::vector<EmbeddedModule>& module_registry() {
  static std::vector<EmbeddedModule> all;
  return all;
}

// How `recheck variants` names a Python variant's kind before its description.
std::string kind_word(VariantKind kind) {
  switch (kind) {
    case VariantKind::change: return "change";
    case VariantKind::oracle: return "released";  // another released form of the function
    case VariantKind::mutant: return "mutant";
    case VariantKind::equivalent: return "equivalent";
    case VariantKind::fix: return "fix";
    case VariantKind::crash: return "crash";
  }
  return "";
}

}  // namespace

const std::vector<Alias>& aliases() { return alias_registry(); }

void add_alias(Alias alias) {
  for (Alias& known : alias_registry()) {
    if (known.name == alias.name) {
      known = std::move(alias);
      return;
    }
  }
  alias_registry().push_back(std::move(alias));
}

const std::vector<EmbeddedModule>& embedded_modules() { return module_registry(); }

void embed_module(EmbeddedModule module) {
  for (EmbeddedModule& known : module_registry()) {
    if (known.name == module.name) {
      known = std::move(module);
      return;
    }
  }
  module_registry().push_back(std::move(module));
}

void register_python_subject(const EmbeddedModule& module, const std::vector<PythonVariant>& variants, Subject subject,
                             const std::string& mutants_made_from) {
  embed_module(module);
  for (const PythonVariant& variant : variants) {
    const bool oracle = variant.name == subject.oracle;
    const std::string description = oracle ? variant.description : kind_word(variant.kind) + ": " + variant.description;
    add_alias({variant.name, variant.spec, description});
    const std::string attr = variant.spec.substr(variant.spec.rfind(':') + 1);
    subject.implementations.push_back({variant.name, description, variant.kind,
                                       variant.kind == VariantKind::mutant ? mutants_made_from : "", "",
                                       oracle ? "" : module.name + "." + attr});
  }
  subject.make = [](const std::string& name) { return make_checkpoint(name); };
  register_subject(std::move(subject));
}

}  // namespace recheck::python
