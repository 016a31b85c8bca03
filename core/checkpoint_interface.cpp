#include "core/checkpoint_interface.h"

#include <map>
#include <stdexcept>

#include "core/rng.h"

namespace recheck {

namespace {

bool g_is_checkpointing = false;

}  // namespace

bool is_checkpointing() { return g_is_checkpointing; }
void set_checkpointing(bool value) { g_is_checkpointing = value; }

bool CheckpointImplementation::checkpointing_flag() const { return is_checkpointing(); }
void CheckpointImplementation::reset_checkpointing_flag() { set_checkpointing(false); }

void check_ready_to_run(bool on_cuda, const CheckpointImplementation& oracle, const CheckpointImplementation& sut) {
  const rng::Device device = on_cuda ? rng::Device::cuda : rng::Device::cpu;
  rng::check_device_available(device);
  // The variants before the probe: a Python variant names the cause of a CUDA broken by a fork
  // (torch.cuda knows it), where the probe can only report CUDA's error.
  oracle.check_process_ready(on_cuda);
  sut.check_process_ready(on_cuda);
  rng::check_device_works(device);
}

namespace {

std::map<std::string, CheckpointFactory>& factories() {
  static std::map<std::string, CheckpointFactory> all;
  return all;
}

std::map<std::string, std::string>& aliases() {
  static std::map<std::string, std::string> all;
  return all;
}

}  // namespace

void register_checkpoint_factory(const std::string& prefix, CheckpointFactory factory) {
  factories()[prefix] = std::move(factory);
}

bool needs_python_bridge(const std::string& name) {
  return name.rfind("python:", 0) == 0 || name.rfind("python-clearing:", 0) == 0 ||
         name.rfind("python-change:", 0) == 0 || name == "megatron-py" ||
         name == "megatron-py-clearing" || name == "torch-py";
}

bool python_bridge_built() { return factories().count("python") != 0; }

void register_checkpoint_alias(const std::string& alias, const std::string& name) { aliases()[alias] = name; }

std::string describe_provenance(const Provenance& provenance) {
  std::string text;
  for (const auto& [name, value] : provenance) text += (text.empty() ? "" : ", ") + name + " " + value;
  return text;
}

std::string resolve_checkpoint_alias(const std::string& name) {
  const auto alias = aliases().find(name);
  return alias == aliases().end() ? name : alias->second;
}

std::unique_ptr<CheckpointImplementation> make_registered_checkpoint(const std::string& variant_name) {
  if (needs_python_bridge(variant_name) && !python_bridge_built()) {
    throw std::invalid_argument("variant '" + variant_name + "' needs the Python bridge, and this recheck was built "
                                "without it (configure with -DRECHECK_PYTHON=ON against a Python torch: see "
                                "docs/python.md, or run ci/python)");
  }
  const std::string name = resolve_checkpoint_alias(variant_name);
  const size_t colon = name.find(':');
  if (colon == std::string::npos) return nullptr;
  const auto factory = factories().find(name.substr(0, colon));
  return factory == factories().end() ? nullptr : factory->second(name);
}

}  // namespace recheck
