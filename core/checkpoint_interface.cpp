#include "core/checkpoint_interface.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "core/case.h"
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
         name.rfind("python-change:", 0) == 0;
}

bool python_bridge_built() { return factories().count("python") != 0; }

void register_checkpoint_alias(const std::string& alias, const std::string& name) { aliases()[alias] = name; }

namespace {

bool passes_options(const Segment& segment) {
  return any_op(segment, [](const Op& op) {
    const auto* checkpoint = std::get_if<Checkpoint>(&op);
    return checkpoint != nullptr && (!checkpoint->options.empty() || checkpoint->without_output);
  });
}

void check_call_options(const Segment& segment, const std::string& path, const CheckpointImplementation& implementation,
                        const std::vector<CallOption>& declared) {
  for (size_t i = 0; i < segment.ops.size(); ++i) {
    const std::string site = path + ".ops[" + std::to_string(i) + "]";
    if (const auto* checkpoint = std::get_if<Checkpoint>(&segment.ops[i])) {
      if (checkpoint->without_output && !implementation.runs_without_output()) {
        throw std::invalid_argument("the checkpoint at " + site + " runs without output (its outputs discarded later), which " +
                                    implementation.name() + " cannot run (Megatron's CheckpointWithoutOutput does: "
                                    "subject megatron-checkpoint-without-output)");
      }
      for (const auto& [name, value] : checkpoint->options) {
        const auto option = std::find_if(declared.begin(), declared.end(), [&](const CallOption& o) { return o.name == name; });
        if (option == declared.end()) {
          throw std::invalid_argument("the checkpoint at " + site + " passes option " + name + ", which " +
                                      implementation.name() + " does not take");
        }
        if (std::find(option->values.begin(), option->values.end(), value) == option->values.end()) {
          throw std::invalid_argument("the checkpoint at " + site + " passes " + name + "=" + value + ", which " +
                                      implementation.name() + " does not take");
        }
      }
    }
    if (const Segment* body = op_body(segment.ops[i])) check_call_options(*body, site + ".body", implementation, declared);
  }
}

}  // namespace

void check_call_options(const Case& c, const CheckpointImplementation& implementation) {
  if (!passes_options(c.root)) return;  // every case of a function that takes none: no strings built
  check_call_options(c.root, "root", implementation, implementation.call_options());
}

std::pair<Values, std::shared_ptr<KeptOutputs>> CheckpointImplementation::apply_without_output(const RunFunction& run_function,
                                                                                              const CallSettings& call,
                                                                                              const Values& args) {
  (void)run_function;
  (void)call;
  (void)args;
  throw std::invalid_argument(name() + " cannot run a checkpoint without output");
}

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
