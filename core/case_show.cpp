// A case as indented text (`recheck show`, repro, minimize): leaves, ops, checkpoint bodies.
#include "core/case.h"

#include <algorithm>
#include <sstream>

#include "core/case_detail.h"

namespace recheck {

using namespace case_detail;

namespace {

// A Python string literal in single quotes, as show writes strings.
std::string python_string_literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string format_double(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

struct OpShow {
  std::string operator()(const Unary& op) const { return std::string(name_of(kUnaryFns, op.fn)) + "(" + v(op.x) + ")"; }
  std::string operator()(const Binary& op) const {
    return std::string(name_of(kBinaryFns, op.fn)) + "(" + v(op.a) + ", " + v(op.b) + ")";
  }
  std::string operator()(const Matmul& op) const { return "matmul(" + v(op.a) + ", " + v(op.b) + ")"; }
  std::string operator()(const View& op) const { return std::string(name_of(kViewFns, op.fn)) + "(" + v(op.x) + ")  # view"; }
  std::string operator()(const InPlace& op) const {
    return v(op.x) + "." + name_of(kInPlaceFns, op.fn) + "_(" + format_double(op.scalar) + ")";
  }
  std::string operator()(const Reduce& op) const { return std::string(name_of(kReduceFns, op.fn)) + "(" + v(op.x) + ")"; }
  std::string operator()(const Argmax& op) const { return "argmax(" + v(op.x) + ")"; }
  std::string operator()(const Random& op) const {
    std::string source = name_of(kSources, op.source);
    if (op.source == RngSource::tracker) source += ":" + op.tracker_state;
    return std::string(name_of(kRandomFns, op.fn)) + "(" + v(op.x) + ", p=" + format_double(op.p) + ", rng=" + source + ")";
  }
  std::string operator()(const Stash& op) const { return "stash(" + v(op.x) + ")"; }
  std::string operator()(const Raise& op) const {
    return "raise_shape_mismatch(" + v(op.x) +
           (op.when == Raise::When::always ? "" : std::string(", when=") + name_of(kRaiseWhens, op.when)) + ")";
  }
  std::string operator()(const Fork& op) const {
    std::string text = "fork(" + python_string_literal(op.tracker_state);
    for (int arg : op.args) text += ", " + v(arg);
    return text + ")";
  }
  std::string operator()(const Autocast& op) const {
    std::string text = "autocast(" + python_string_literal(op.device_type) + ", dtype=" + name_of(kPrecisions, op.dtype) +
                       (op.enabled ? "" : ", enabled=False");
    for (int arg : op.args) text += ", " + v(arg);
    return text + ")";
  }
  std::string operator()(const Checkpoint& op) const {
    std::string args;
    for (const Arg& arg : op.args) args += (args.empty() ? "" : ", ") + show_arg(arg);
    std::string options;
    for (const auto& [name, value] : op.options) options += ", " + name + "=" + value;
    if (op.without_output) return "checkpoint_without_output(" + args + ")";
    return std::string("checkpoint(") + (op.distribute ? "distribute=True" : "distribute=False") + options +
           (args.empty() ? "" : ", ") + args + ")";
  }
  std::string operator()(const Discard& op) const {
    std::string checkpoints;
    for (int ref : op.checkpoints) checkpoints += (checkpoints.empty() ? "" : ", ") + v(ref);
    return "discard_outputs([" + checkpoints + "], recompute_on_grad_of=" + v(op.hook) + ")";
  }
  // The root's leaf, wherever the op sits (in a body, v0.. are the body's inputs).
  std::string operator()(const Capture& op) const { return "capture(leaves[" + std::to_string(op.leaf) + "])"; }
  std::string operator()(const Hook& op) const {
    std::string kind = name_of(kHookKinds, op.kind);
    std::replace(kind.begin(), kind.end(), '-', '_');
    return kind + "_hook(" + v(op.x) +
           (op.scale == 1.0 ? "" : ", scale=" + format_double(op.scale)) + ")";
  }
  std::string operator()(const ModuleState& op) const {
    return "modules[" + std::to_string(op.module) + "]." +
           (op.fn == ModuleState::Fn::running_mean ? "update_running_mean(" : "count_step(") + v(op.x) + ")";
  }
};

void show_segment(const Segment& segment, int input_count, const std::string& indent, std::ostringstream& out) {
  int next = input_count;
  for (const Op& op : segment.ops) {
    const int outputs = op_output_count(op);
    out << indent;
    for (int k = 0; k < outputs; ++k) out << (k ? ", " : "") << v(next + k);
    if (outputs > 0) out << " = ";
    out << std::visit(OpShow{}, op) << "\n";
    if (const Segment* body = op_body(op)) {
      // A checkpoint's body takes every argument, literals included; a region's, what it names.
      const auto* checkpoint = std::get_if<Checkpoint>(&op);
      const int args = static_cast<int>(checkpoint ? checkpoint->args.size() : op_inputs(op).size());
      out << indent << "  | ";
      for (int k = 0; k < args; ++k) out << (k ? ", " : "") << v(k);
      out << (args ? " = inputs\n" : "(no inputs)\n");
      show_segment(*body, args, indent + "  | ", out);
    }
    next += outputs;
  }
  out << indent << "return";
  for (size_t k = 0; k < segment.outputs.size(); ++k) out << (k ? ", " : " ") << v(segment.outputs[k]);
  out << "\n";
}

}  // namespace

std::string show_arg(const Arg& arg) {
  struct Visit {
    std::string operator()(const Ref& r) const { return v(r.value); }
    std::string operator()(None) const { return "None"; }
    std::string operator()(int64_t value) const { return std::to_string(value); }
    std::string operator()(double value) const {
      std::string text = format_double(value);
      return text.find_first_of(".e") == std::string::npos ? text + ".0" : text;
    }
    std::string operator()(bool value) const { return value ? "True" : "False"; }
    std::string operator()(const std::string& value) const { return python_string_literal(value); }
  };
  return std::visit(Visit{}, arg);
}

std::string show(const Case& c) {
  std::ostringstream out;
  out << "case: seed " << c.seed << ", " << to_string(c.dtype) << " on " << c.device << ", "
      << c.iterations << (c.iterations == 1 ? " iteration" : " iterations")
      << (c.continue_after_error ? ", going on after errors" : "") << "\n";
  if (!c.backward.is_default()) {
    out << "  differentiated by " << (c.backward.call == Backward::Call::grad ? "torch.autograd.grad" : "backward");
    if (!c.backward.inputs.empty()) {
      out << ", inputs=[";
      for (size_t k = 0; k < c.backward.inputs.size(); ++k) out << (k ? ", " : "") << v(c.backward.inputs[k]);
      out << "]";
    }
    out << (c.backward.twice ? ", twice (the graph retained)" : "") << "\n";
  }
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    const Leaf& leaf = c.leaves[i];
    out << "  " << v(static_cast<int>(i)) << " = leaf [";
    for (size_t d = 0; d < leaf.shape.size(); ++d) out << (d ? ", " : "") << leaf.shape[d];
    out << "] " << to_string(leaf_dtype(c, leaf)) << " " << name_of(kFills, leaf.fill)
        << (leaf.requires_grad ? " requires_grad" : "") << "\n";
  }
  show_segment(c.root, static_cast<int>(c.leaves.size()), "  ", out);
  return out.str();
}

}  // namespace recheck
