// recheck memory: the PR's memory measurement, reproduced on a synthetic residual-stream model.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli/command.h"
#include "cli/memory_picture.h"
#include "cli/memory_snapshot.h"
#include "core/interpreter.h"
#include "properties/generator.h"
#include "properties/properties.h"
#include "runner/case_worker.h"

namespace recheck::cli {

namespace {

const char* kMemoryHelp = R"(usage: recheck memory [options]

The PR's measurement, reproduced on a synthetic model: a stack of checkpointed layers over
residual streams, each layer stashing its stream inputs the way a module caching its input
does. Runs it with the sut and with the oracle and prints, per iteration, the allocator floor
(bytes held between iterations) and peak of both, the floor freed by the sut, and the
prediction: the .grad bytes of the stashed recomputation inputs. On CPU it draws the bytes
both held over the last iteration (forward, each layer's recomputation and backward marked) into
an SVG, and with --snapshot writes each run's allocations of that iteration in PyTorch's memory
snapshot form, for `python -m torch.cuda._memory_viz trace_plot FILE -o OUT.html`. Exit code 1
when the sut's floor or peak is above the oracle's or the freed bytes differ from the
prediction.

options:
  --layers N        checkpointed layers (default 2)
  --streams N       residual streams (default 4)
  --seq N           sequence length (default 64; the PR used 8192 on a GPU)
  --hidden N        hidden size (default 32)
  --dtype D         float32, float64 or bfloat16 (default float32)
  --iterations N    iterations (default 2)
  --device D        cpu or cuda (default cpu)
  --sut NAME        variant under test (default: the subject's change, clearing)
  --oracle NAME     reference variant (default: the subject's oracle, nonclearing)
  --subject NAME    the checkpoint function under test (`recheck variants` lists the subjects;
                    default: the one declaring --sut, else megatron-checkpoint-function); its
                    change and oracle are the defaults of --sut and --oracle
  --svg FILE        the picture (default recheck-memory.svg; '' for none)
  --snapshot PREFIX PREFIX-sut.pickle and PREFIX-oracle.pickle, the snapshots (CPU only)
  --json FILE       the figures as data ('-' for standard output)
)";

// The model's checkpointed layers are the root's ops, in order: "recompute root.ops[1]" begins
// the second layer's recomputation, and its backward follows it ("layer 2").
std::string phase_label(const std::string& mark) {
  const std::string layer_prefix = "recompute root.ops[";
  if (mark.rfind(layer_prefix, 0) == 0 && mark.back() == ']') {
    try {
      return "layer " + std::to_string(std::stoi(mark.substr(layer_prefix.size())) + 1);
    } catch (const std::exception&) {
    }
  }
  if (mark == "backward") return "loss backward";
  return mark;
}

// The recomputation inputs alive after the last iteration, per run, as data.
json alive_json(const Observations& oracle, const Observations& sut) {
  json out = json::object();
  for (const auto& [role, run] : {std::pair{"oracle", &oracle}, std::pair{"sut", &sut}}) {
    json rows = json::array();
    for (const AliveInput& a : run->iterations.back().alive_inputs) {
      rows.push_back({{"input", a.where}, {"storage_bytes", a.storage_bytes}, {"grad_bytes", a.grad_bytes},
                      {"held_by", a.held_by}});
    }
    out[role] = rows;
  }
  return out;
}

int command_memory(const Args& args) {
  ResidualStreamOptions model;
  model.layers = static_cast<int>(args.number("layers", model.layers, 1, 1024));
  model.streams = static_cast<int>(args.number("streams", model.streams, 1, 64));
  model.seq = args.number("seq", model.seq, 1, 1 << 20);
  model.hidden = args.number("hidden", model.hidden, 1, 1 << 16);
  model.iterations = static_cast<int>(args.number("iterations", model.iterations, 1, 100));
  model.device = device_option(args);
  const std::string dtype = args.get("dtype", "float32");
  if (dtype == "float32") model.dtype = DType::float32;
  else if (dtype == "float64") model.dtype = DType::float64;
  else if (dtype == "bfloat16") model.dtype = DType::bfloat16;
  else throw UsageError("--dtype: expected float32, float64 or bfloat16, got '" + dtype + "'");
  const std::unique_ptr<CheckpointImplementation> sut = make_variant(sut_option(args));
  const std::unique_ptr<CheckpointImplementation> oracle = make_variant(oracle_option(args));
  check_output_files(args, {"json"});
  const std::string svg_path = args.get("svg", "recheck-memory.svg");  // empty: no picture
  if (!svg_path.empty()) check_output_file(svg_path, "--svg");
  const std::string snapshot_prefix = args.get("snapshot", "");
  if (args.has("snapshot")) {
    if (snapshot_prefix.empty()) throw UsageError("--snapshot: expected a path prefix, got ''");
    if (model.device != "cpu") throw UsageError("--snapshot: the snapshots are of the CPU probe's timeline (--device cpu)");
    check_output_file(snapshot_prefix + "-sut.pickle", "--snapshot");
    check_output_file(snapshot_prefix + "-oracle.pickle", "--snapshot");
  }
  const Case c = residual_stream_case(model);
  set_value_element_limit(limits_at_ceilings().leaf_elements);  // the model asked for, as built
  runner::check_can_run(c.device, "--device " + model.device, *oracle, *sut);
  RunOptions options;
  options.record_segment_calls = false;
  options.record_timeline = model.device == "cpu";
  const Observations o = run_case(c, *oracle, options);
  const Observations s = run_case(c, *sut, options);
  for (const Observations* run : {&o, &s}) {
    if (run->error) {
      std::cerr << "recheck memory: " << run->implementation << " raised " << run->error->error.type << ": "
                << run->error->error.message << "\n";
      return 1;
    }
  }
  std::cout << "recheck memory: " << c.note << ", " << dtype << ", " << model.iterations << " iterations, "
            << model.device << "; sut " << sut->name() << ", oracle " << oracle->name() << "\n\n"
            << std::left << std::setw(10) << "iteration" << std::right << std::setw(14) << "floor sut" << std::setw(14)
            << "floor oracle" << std::setw(12) << "freed" << std::setw(12) << "predicted" << std::setw(14) << "peak sut"
            << std::setw(14) << "peak oracle" << std::setw(12) << "peak freed" << "\n";
  bool ok = true;
  json rows = json::array();
  for (size_t i = 0; i < s.iterations.size(); ++i) {
    const MemoryRecord& ms = s.iterations[i].memory;
    const MemoryRecord& mo = o.iterations[i].memory;
    const int64_t freed = mo.floor - ms.floor;
    const int64_t predicted = mo.released_bytes;
    std::cout << std::left << std::setw(10) << i << std::right << std::setw(14) << ms.floor << std::setw(14) << mo.floor
              << std::setw(12) << freed << std::setw(12) << predicted << std::setw(14) << ms.peak << std::setw(14)
              << mo.peak << std::setw(12) << mo.peak - ms.peak << "\n";
    rows.push_back({{"iteration", i}, {"floor_sut", ms.floor}, {"floor_oracle", mo.floor}, {"freed", freed},
                    {"predicted", predicted}, {"peak_sut", ms.peak}, {"peak_oracle", mo.peak},
                    {"peak_freed", mo.peak - ms.peak}});
  }
  // The verdicts of the two memory claims, as `recheck run` gives them.
  const Runs runs{o, o};
  for (const char* name : {"memory-floor", "no-extra-allocations"}) {
    const Property& property = *find_property(name);
    if (property.same_code_only && s.code != o.code) continue;
    const Verdict verdict = property.check(s, runs);
    if (!verdict.holds) std::cout << name << ": " << verdict.describe() << "\n";
    ok = ok && verdict.holds;
  }
  // Who holds the bytes: every recomputation input alive after the last iteration, per run.
  for (const auto& [run, name] : {std::pair{&o, oracle->name()}, std::pair{&s, sut->name()}}) {
    const std::vector<AliveInput>& alive = run->iterations.back().alive_inputs;
    std::cout << "\n" << name << ": " << alive.size() << " recomputation inputs alive after the last iteration"
              << (alive.empty() ? ": nothing retained" : "") << "\n";
    for (const AliveInput& a : alive) std::cout << "  " << a.describe() << "\n";
  }
  const MemoryRecord& last_s = s.iterations.back().memory;
  const MemoryRecord& last_o = o.iterations.back().memory;
  const double per_layer = double(last_o.floor - last_s.floor) / model.layers;
  const bool adopted = model.device == "cpu" && leaf_adopts_returned_gradient(sut->name());
  std::cout << "\nper checkpointed layer: " << std::fixed << std::setprecision(1) << per_layer
            << " bytes freed at the floor (predicted " << double(last_o.released_bytes) / model.layers
            << ": " << model.streams << " streams x " << model.seq << " x " << model.hidden << " x "
            << at::elementSize(scalar_type(model.dtype)) << " bytes)\n" << std::defaultfloat;
  if (model.device == "cpu") {
    std::cout << "gradient adoption: a leaf passed straight to a " << sut->name()
              << " checkpoint whose body keeps its input "
              << (adopted ? "adopts the returned gradient as its .grad (no copy)" : "gets a copy of the returned gradient")
              << "\n";
  }
  if (!svg_path.empty() && model.device == "cpu") {
    const MemoryRecord& fo = o.iterations.back().memory;
    const MemoryRecord& fs = s.iterations.back().memory;
    const std::string picture = memory_picture(
        {PictureSeries{"oracle " + oracle->name(), &o.timeline, fo.floor, fo.peak, "#1f77b4"},
         PictureSeries{"sut " + sut->name(), &s.timeline, fs.floor, fs.peak, "#d62728"}},
        "Bytes held over the last iteration: " + c.note + ", " + dtype,
        "layer N: its recomputation, then its backward", phase_label);
    write_file_atomically(svg_path, picture);
    std::cout << "picture: " << svg_path << "\n";
  }
  if (!snapshot_prefix.empty()) {
    for (const auto& [role, run, name] : {std::tuple{"sut", &s, sut->name()}, std::tuple{"oracle", &o, oracle->name()}}) {
      const std::string path = snapshot_prefix + "-" + role + ".pickle";
      write_file_atomically(path, pickle(memory_snapshot(run->timeline, name, phase_label)));
      std::cout << "snapshot of " << name << ": " << path << " (python -m torch.cuda._memory_viz trace_plot " << path
                << " -o " << snapshot_prefix << "-" << role << ".html)\n";
    }
  }
  std::cout << (ok ? "OK: the sut's floor and peak are at most the oracle's, it frees exactly the prediction, and it "
                     "allocates nothing the oracle does not\n"
                   : "FAIL: the sut's floor or peak is above the oracle's, what it frees differs from the prediction, or "
                     "it allocates what the oracle does not\n");
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "memory"},
                                              {"model", {{"layers", model.layers}, {"streams", model.streams},
                                                         {"seq", model.seq}, {"hidden", model.hidden},
                                                         {"dtype", dtype}, {"device", model.device}}},
                                              {"sut", sut->name()},
                                              {"oracle", oracle->name()},
                                              {"iterations", rows},
                                              {"alive_inputs", alive_json(o, s)},
                                              {"freed_per_layer", per_layer},
                                              {"gradient_adopted", model.device == "cpu" ? json(adopted) : json(nullptr)},
                                              {"ok", ok}});
  }
  return ok ? 0 : 1;
}

}  // namespace

const Command kMemory{"memory", "measure the allocator floor and peak of sut and oracle on a residual-stream model", kMemoryHelp, {}, {"subject", "layers", "streams", "seq", "hidden", "dtype", "iterations", "device", "sut", "oracle", "svg", "snapshot", "json"}, command_memory, false};

}  // namespace recheck::cli
