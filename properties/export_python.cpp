#include "properties/export_python.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/interpreter.h"
#include "oracles/compare.h"
#include "embedded/export_megatron_py.h"
#include "embedded/exported_checkpoints.h"
#include "embedded/export_checks_py.h"
#include "embedded/export_runtime_py.h"
#include "embedded/pr_wrapper_py.h"
#include "properties/properties.h"
#include "oracles/eager.h"
#include "suts/subject.h"

namespace recheck {

namespace {

bool one_of(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// "a, b, c or d" (joint ", ", last " or "), "a|b|c|d" (both "|").
std::string listed_with(const std::vector<std::string>& names, const std::string& joint, const std::string& last_joint) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? last_joint : joint;
    text += names[i];
  }
  return text;
}

// The properties a script can assert (Property::exported), in the properties' order.
std::vector<const char*> exported_properties() {
  std::vector<const char*> names;
  for (const Property& p : properties()) {
    if (p.exported) names.push_back(p.name);
  }
  return names;
}

bool without_output(const Op& op) {
  const auto* checkpoint = std::get_if<Checkpoint>(&op);
  return checkpoint != nullptr && checkpoint->without_output;
}

std::string py_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '\\' || ch == '"') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20 || ch == 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", ch);
      out += buffer;
    } else {
      out += static_cast<char>(ch);  // UTF-8 passes through: the script is UTF-8
    }
  }
  return out + "\"";
}

// Text for the script's docstring: a case's note and `str` arguments are the case author's, and
// must not end the docstring (a note holding three quotes and code ran that code) or make the
// script invalid (a backslash escape, bytes that are not UTF-8). Quotes, backslashes, control
// characters and bytes over 0x7f are escaped; newlines stay.
std::string py_docstring_text(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch == '\\' || ch == '"') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if ((ch < 0x20 && ch != '\n') || ch >= 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", ch);
      out += buffer;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string py_float(double x) {
  if (std::isnan(x)) return "float(\"nan\")";
  if (std::isinf(x)) return x > 0 ? "float(\"inf\")" : "float(\"-inf\")";
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", x);
  std::string s = buffer;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string py_shape(at::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

// A tensor's values, flat, as a Python list (floating values in double precision, exactly).
std::string py_values(const at::Tensor& t) {
  const at::Tensor flat = t.detach().to(at::kCPU).contiguous().reshape({-1});
  std::string out = "[";
  if (flat.scalar_type() == at::kBool) {
    const auto* p = flat.data_ptr<bool>();
    for (int64_t i = 0; i < flat.numel(); ++i) out += std::string(i ? ", " : "") + (p[i] ? "True" : "False");
  } else if (flat.scalar_type() == at::kLong) {
    const auto* p = flat.data_ptr<int64_t>();
    for (int64_t i = 0; i < flat.numel(); ++i) out += (i ? ", " : "") + std::to_string(p[i]);
  } else {
    const at::Tensor d = flat.to(at::kDouble);
    const auto* p = d.data_ptr<double>();
    for (int64_t i = 0; i < d.numel(); ++i) out += (i ? ", " : "") + py_float(p[i]);
  }
  return out + "]";
}

std::string py_arg(const Arg& arg) {
  struct Visit {
    std::string operator()(const Ref& r) const { return "v.value(" + std::to_string(r.value) + ")"; }
    std::string operator()(None) const { return "None"; }
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const { return py_float(x); }
    std::string operator()(bool x) const { return x ? "True" : "False"; }
    std::string operator()(const std::string& x) const { return py_string(x); }
  };
  return std::visit(Visit{}, arg);
}

// Writes one Python function per segment: seg_0 is the root.
class SegmentWriter {
 public:
  std::string functions;

  // A checkpoint's body reads the is-checkpointing flag before each of its ops and once they
  // returned, as recheck's interpreter does (flag-in-body).
  // `inputs`: how many values the segment starts with (its leaves or arguments).
  int write(const Segment& segment, const std::string& site, int inputs, bool checkpoint_body = false) {
    const int id = next_++;
    std::ostringstream body;
    body << "def seg_" << id << "(run, *inputs):\n";
    body << "    v = Values(inputs)\n";
    // This segment's checkpoints without output, by their first output's value number.
    if (std::any_of(segment.ops.begin(), segment.ops.end(), without_output)) body << "    kept = {}\n";
    int values = inputs;
    for (size_t i = 0; i < segment.ops.size(); ++i) {
      const std::string op_site = site + ".ops[" + std::to_string(i) + "]";
      if (checkpoint_body) body << "    run.read_flag()\n";
      body << "    " << line(segment.ops[i], op_site, values) << "\n";
      values += op_output_count(segment.ops[i]);
    }
    if (checkpoint_body) body << "    run.read_flag()\n";
    body << "    return (";
    for (int o : segment.outputs) body << "v.value(" << o << "), ";
    body << ")\n\n\n";
    functions += body.str();
    return id;
  }

 private:
  // `value`: the number of the op's first output in its segment.
  std::string line(const Op& op, const std::string& site, int value) { return std::visit(Line{*this, site, value}, op); }

  // The line of Python each op becomes: one overload per op, no catch-all, so that a new op does
  // not build until it says how it is exported. An op's operand: `v[i]` raises where the
  // tensor's storage holds none of its elements (a discarded output not recomputed yet), as
  // recheck's ops do; values handed on as they are (arguments, stashes, hooks, outputs) are read
  // with v.value(i).
  struct Line {
    SegmentWriter& writer;
    const std::string& site;
    int value;

    static std::string x(int i) { return "v[" + std::to_string(i) + "]"; }
    static std::string held(int i) { return "v.value(" + std::to_string(i) + ")"; }
    static std::string held_all(const std::vector<int>& args) {
      std::string out;
      for (int a : args) out += held(a) + ", ";
      return out;
    }

    std::string operator()(const Unary& o) const {
      switch (o.fn) {
        case Unary::Fn::tanh: return "v.append(torch.tanh(" + x(o.x) + "))";
        case Unary::Fn::sigmoid: return "v.append(torch.sigmoid(" + x(o.x) + "))";
        case Unary::Fn::neg: return "v.append(torch.neg(" + x(o.x) + "))";
        case Unary::Fn::square: return "v.append(torch.mul(" + x(o.x) + ", " + x(o.x) + "))";
        case Unary::Fn::relu: return "v.append(torch.relu(" + x(o.x) + "))";
      }
      throw std::logic_error("export-python: a unary function without its line");
    }
    std::string operator()(const Binary& o) const {
      const char* fn = o.fn == Binary::Fn::add ? "add" : o.fn == Binary::Fn::sub ? "sub" : "mul";
      return std::string("v.append(torch.") + fn + "(" + x(o.a) + ", " + x(o.b) + "))";
    }
    std::string operator()(const Matmul& o) const { return "v.append(torch.matmul(" + x(o.a) + ", " + x(o.b) + "))"; }
    std::string operator()(const View& o) const {
      const std::string t = x(o.x);
      switch (o.fn) {
        case View::Fn::transpose:
          return "v.append(" + t + ".transpose(-2, -1) if " + t + ".dim() >= 2 else " + t + ".view(" + t + ".shape))";
        case View::Fn::narrow:
          return "v.append(" + t + ".narrow(0, 0, max(1, " + t + ".shape[0] // 2)) if " + t + ".dim() >= 1 else " + t +
                 ".view(" + t + ".shape))";
        case View::Fn::flatten: return "v.append(" + t + ".reshape(-1))";
      }
      throw std::logic_error("export-python: a view without its line");
    }
    std::string operator()(const InPlace& o) const {
      return "v.append(" + x(o.x) + (o.fn == InPlace::Fn::mul ? ".mul_(" : ".add_(") + py_float(o.scalar) + "))";
    }
    std::string operator()(const Reduce& o) const {
      return "v.append(" + x(o.x) + (o.fn == Reduce::Fn::sum ? ".sum())" : ".mean())");
    }
    std::string operator()(const Argmax& o) const { return "v.append(torch.argmax(" + x(o.x) + "))"; }
    std::string operator()(const Random& o) const {
      return "v.append(run.random(" + x(o.x) + ", " + py_string(to_string(o.fn)) +
             ", " + py_string(to_string(o.source)) + ", " +
             (o.source == RngSource::tracker ? py_string(o.tracker_state) : std::string("None")) + ", " +
             py_float(o.p) + "))";
    }
    std::string operator()(const Stash& o) const { return "run.stash[" + py_string(site) + "] = " + held(o.x); }
    std::string operator()(const Raise& o) const {
      const char* when = o.when == Raise::When::recompute         ? "recompute"
                         : o.when == Raise::When::first_iteration ? "first-iteration"
                                                                  : "always";
      return "v.append(run.raise_op(" + x(o.x) + ", " + py_string(when) + "))";
    }
    std::string operator()(const Fork& o) const {
      const int body = writer.write(*o.body, site + ".body", static_cast<int>(o.args.size()));
      return "with tracker().fork(" + py_string(o.tracker_state) + "):\n        v.extend(seg_" + std::to_string(body) +
             "(run, " + held_all(o.args) + "))";
    }
    std::string operator()(const Autocast& o) const {
      const int body = writer.write(*o.body, site + ".body", static_cast<int>(o.args.size()));
      return "with torch.autocast(" + py_string(o.device_type) + ", dtype=torch." +
             (o.dtype == Autocast::Precision::float16 ? "float16" : "bfloat16") +
             ", enabled=" + (o.enabled ? "True" : "False") + "):\n        v.extend(seg_" + std::to_string(body) +
             "(run, " + held_all(o.args) + "))";
    }
    std::string operator()(const Capture& o) const { return "v.append(run.leaves[" + std::to_string(o.leaf) + "])"; }
    std::string operator()(const Hook& o) const {
      return "v.append(run.hook(" + py_string(site) + ", " + held(o.x) + ", " + py_string(to_string(o.kind)) + ", " +
             py_float(o.scale) + "))";
    }
    std::string operator()(const ModuleState& o) const {
      return "v.append(run.state(" + std::to_string(o.module) + ", " + held(o.x) + ", " + py_string(to_string(o.fn)) + "))";
    }
    std::string operator()(const Discard& o) const {
      std::string named;
      for (int k : o.checkpoints) named += "kept[" + std::to_string(k) + "], ";
      return "run.discard(" + py_string(site) + ", [" + named + "], " + held(o.hook) + ", v)";
    }
    std::string operator()(const Checkpoint& c) const {
      // Megatron's CheckpointWithoutOutput sets no is-checkpointing flag: its body reads none.
      const int body =
          writer.write(*c.body, site + ".body", static_cast<int>(c.args.size()), /*checkpoint_body=*/!c.without_output);
      std::string args;
      for (const Arg& a : c.args) args += py_arg(a) + ", ";
      if (c.without_output) {
        return "v.extend(run.call_without_output(" + py_string(site) + ", seg_" + std::to_string(body) + ", [" + args +
               "], kept, " + std::to_string(value) + "))";
      }
      std::string options;
      for (const auto& [name, option] : c.options) options += (options.empty() ? "" : ", ") + py_string(name) + ": " + py_string(option);
      return "v.extend(run.call_checkpoint(" + py_string(site) + ", seg_" + std::to_string(body) + ", " +
             (c.distribute ? "True" : "False") + ", [" + args + "]" + (options.empty() ? "" : ", {" + options + "}") + "))";
    }
  };

  int next_ = 0;
};

bool uses_tracker(const Segment& segment) {
  return any_op(segment, [](const Op& op) {
    const auto* r = std::get_if<Random>(&op);
    return std::holds_alternative<Fork>(op) || (r != nullptr && r->source == RngSource::tracker);
  });
}

}  // namespace

bool exportable(const std::string& property) {
  const Property* p = find_property(property);
  return p != nullptr && p->exported;
}

std::string export_python(const Case& c, const ExportOptions& options) {
  const bool has_without_output = any_op(c.root, without_output);
  // What --checkpoint and --oracle take: the names the subjects' export.py files declare.
  const std::vector<std::string>& checkpoints = embedded::kExportedCheckpoints;
  const std::vector<std::string>& without_output_ones = embedded::kExportedWithoutOutput;
  for (const auto& [option, name] : {std::pair{"--checkpoint", &options.checkpoint}, std::pair{"--oracle", &options.oracle}}) {
    if (!one_of(checkpoints, *name)) {
      throw std::invalid_argument(std::string(option) + ": expected " + listed_with(checkpoints, ", ", " or ") + ", got '" + *name + "'");
    }
    if (has_without_output && !one_of(without_output_ones, *name)) {
      throw std::invalid_argument(std::string(option) + " " + *name +
                                  ": the case holds checkpoints without output (Megatron's CheckpointWithoutOutput), which " +
                                  *name + " has not: use " + listed_with(without_output_ones, ", ", " or "));
    }
  }
  std::string names;
  for (const char* p : exported_properties()) names += (names.empty() ? "" : ", ") + std::string(p);
  // Every comma-separated name known, an empty one too ("grads-bitwise," is refused: the
  // script's own split would keep the empty name and refuse it only when run).
  bool known = true;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = options.property.find(',', begin);
    const std::string name = options.property.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    known = known && exportable(name);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (!known) {
    throw std::invalid_argument("--property: expected one of " + names + " (the memory properties need recheck's counting allocator), got '" +
                                options.property + "'");
  }

  // The data recheck's run starts from: the leaves, and the loss weights of the outputs its
  // eager run made.
  const std::vector<at::Tensor> leaves = make_leaves(c);
  EagerExecution eager;
  RunOptions run_options;
  run_options.measure_memory = false;
  const Observations eager_run = run_case(c, eager, run_options);

  std::ostringstream out;
  out << "#!/usr/bin/env python3\n\"\"\"A recheck case as a standalone script (written by recheck export-python).\n\n";
  if (!c.note.empty()) out << py_docstring_text(c.note) << "\n\n";
  out << "It rebuilds the case with torch ops, runs it eagerly and through a checkpoint function, and\n"
         "asserts a property: an AssertionError with the evidence means the property fails.\n\n"
         "    python3 THIS_SCRIPT [--checkpoint " << listed_with(checkpoints, "|", "|") << "]\n"
         "                        [--oracle the same choices] [--property NAME]\n\n"
         "megatron needs megatron-core; on CPU, Megatron's CUDA RNG calls go to a stand-in generator.\n"
         "Checkpoints without output are megatron-core's CheckpointWithoutOutput(fp8=None).\n\n"
         "The case, as `recheck show` prints it:\n\n";
  std::istringstream listing(show(c));
  for (std::string line; std::getline(listing, line);) out << "    " << py_docstring_text(line) << "\n";
  out << "\"\"\"\n\n";
  out << "DEVICE = " << py_string(c.device) << "\n";
  out << "CHECKPOINT = " << py_string(options.checkpoint) << "\n";
  out << "ORACLE = " << py_string(options.oracle) << "\n";
  out << "PROPERTY = " << py_string(options.property) << "\n";
  out << "PROPERTIES = [";
  for (const char* p : exported_properties()) out << py_string(p) << ", ";
  out << "]\n";
  out << "ITERATIONS = " << c.iterations << "\n";
  out << "CONTINUE_AFTER_ERROR = " << (c.continue_after_error ? "True" : "False") << "\n";
  out << "BACKWARD = {\"call\": " << py_string(to_string(c.backward.call)) << ", \"inputs\": [";
  for (int n : c.backward.inputs) out << n << ", ";
  out << "], \"twice\": " << (c.backward.twice ? "True" : "False") << "}\n";
  out << "WITHOUT_OUTPUT = " << (has_without_output ? "True" : "False") << "\n";
  out << "USES_TRACKER = " << (uses_tracker(c.root) ? "True" : "False") << "\n";
  const bool distributes = any_op(c.root, [](const Op& op) {
    const auto* checkpoint = std::get_if<Checkpoint>(&op);
    return checkpoint != nullptr && checkpoint->distribute;
  });
  out << "DISTRIBUTES = " << (distributes ? "True" : "False") << "\n";
  out << "CPU_SEED = " << (c.seed ^ 0x9E3779B97F4A7C15ULL) << "\n";
  out << "TRACKER_SEED = " << static_cast<int64_t>(c.seed) << "\n";
  out << "GRAD_ULP_BOUND = " << grad_ulp_bound(scalar_type(c.dtype)) << "\n";
  out << "LEAVES = [  # shape, dtype, requires_grad, values\n";
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    out << "    (" << py_shape(leaves[i].sizes()) << ", " << py_string(to_string(leaf_dtype(c, c.leaves[i]))) << ", "
        << (c.leaves[i].requires_grad ? "True" : "False") << ", " << py_values(leaves[i]) << "),\n";
  }
  out << "]\n";
  // recheck weighs each output by its shape: eager mode's, and, where a checkpoint distributes its
  // saved activations, the shapes Megatron's function leaves (its first argument flattened after
  // forward, and an output that is that argument with it), as recheck's port of it gives them:
  // whatever --checkpoint the script is written for, since it takes another when run.
  std::map<size_t, std::vector<at::Tensor>> weights;
  auto weigh = [&](const Observations& run) {
    for (const IterationRecord& iteration : run.iterations) {
      for (size_t i = 0; i < iteration.outputs.size(); ++i) {
        const at::Tensor& output = iteration.outputs[i];
        if (!output.defined() || !at::isFloatingType(output.scalar_type())) continue;
        std::vector<at::Tensor>& of = weights[i];
        if (std::none_of(of.begin(), of.end(), [&](const at::Tensor& w) { return w.sizes() == output.sizes(); })) {
          of.push_back(loss_weight(c, i, output).to(at::kDouble));
        }
      }
    }
  };
  weigh(eager_run);
  if (distributes) {
    auto port = make_checkpoint(default_subject().oracle);
    weigh(run_case(c, *port, run_options));
  }
  out << "LOSS_WEIGHTS = {  # output: [(shape, values), ...], recheck's weights for each shape it takes\n";
  for (const auto& [i, of] : weights) {
    out << "    " << i << ": [";
    for (const at::Tensor& weight : of) out << "(" << py_shape(weight.sizes()) << ", " << py_values(weight) << "), ";
    out << "],\n";
  }
  out << "}\n";
  // What every exported script runs (properties/export_runtime.py: the RNG set-up and the runner;
  // properties/export_checks.py: the property checks; each subject's export.py: how its functions are called;
  // properties/export_megatron.py: megatron-core, imported where the case needs it) and the PR's
  // change as a wrapper (python/pr_wrapper.py, which the bridge's python-clearing variants run
  // too); the case itself comes after them.
  out << "\n" << embedded::kExportRuntimePy << "\n\n" << embedded::kExportChecksPy << "\n\n";
  for (const std::string& code : embedded::kExportedCheckpointCode) out << "\n" << code << "\n\n";
  out << "\n" << embedded::kExportMegatronPy << "\n\n\n" << embedded::kPrWrapperPy << "\n\n";
  SegmentWriter writer;
  writer.write(c.root, "root", static_cast<int>(c.leaves.size()));
  out << writer.functions;
  out << "if __name__ == \"__main__\":\n    main()\n";
  return out.str();
}

}  // namespace recheck
