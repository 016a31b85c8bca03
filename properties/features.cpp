// The corners of checkpointing a case reaches (case_features): what the generator's distribution
// is measured in, and what fuzz-seeds keeps inputs for.
#include "properties/generator.h"

#include <algorithm>
#include <set>

#include "core/analysis.h"

namespace recheck {

namespace {

class FeatureWalker {
 public:
  FeatureWalker(std::set<std::string>& out, std::vector<ValueFacts> leaves) : out_(out), leaves_(std::move(leaves)) {}

  // Returns the facts of the segment's outputs.
  std::vector<ValueFacts> walk(const Segment& segment, std::vector<ValueFacts> values, int depth, bool in_fork) {
    const size_t input_count = values.size();
    std::vector<bool> read(values.size(), false);
    int checkpoints = 0;
    auto mark = [&](int ref) {
      if (static_cast<size_t>(ref) < read.size()) read[ref] = true;
    };
    for (const Op& op : segment.ops) {
      for (int ref : op_inputs(op)) mark(ref);
      std::vector<ValueFacts> produced;
      if (const auto* i = std::get_if<InPlace>(&op)) {
        out_.insert(static_cast<size_t>(i->x) < input_count && depth > 0 ? "in-place on a body input"
                                                                        : "in-place on an intermediate");
      }
      if (const auto* r = std::get_if<Random>(&op)) {
        out_.insert(std::string("random: ") + to_string(r->source));
        if (r->source == RngSource::tracker && depth > 0) out_.insert("tracker draw inside a checkpoint");
      }
      if (const auto* s = std::get_if<Stash>(&op)) {
        out_.insert(static_cast<size_t>(s->x) < input_count && depth > 0 ? "stash of a body input" : "stash");
      }
      if (const auto* capture = std::get_if<Capture>(&op)) {
        const bool parameter = leaves_.at(static_cast<size_t>(capture->leaf)).requires_grad;
        if (!parameter) out_.insert("capture of a frozen leaf");
        if (depth > 0 && parameter) {
          out_.insert("capture of a parameter inside a checkpoint");
          if (!checkpoint_args_grad_.empty() && !checkpoint_args_grad_.back()) {
            out_.insert("capture of a parameter where no checkpoint argument requires grad");
          }
        }
      }
      if (const auto* h = std::get_if<Hook>(&op); h != nullptr && h->kind != Hook::Kind::tensor) {
        out_.insert(depth == 0 ? "accumulator hook on a parameter outside checkpoints"
                               : "accumulator hook on a parameter a checkpoint captures");
        if (h->kind == Hook::Kind::post_accumulate) out_.insert("post-accumulate-grad hook");
      } else if (h != nullptr) {
        out_.insert(depth == 0                                    ? "hook outside checkpoints"
                    : static_cast<size_t>(h->x) < input_count ? "hook on a checkpoint body's argument"
                                                                : "hook inside a checkpoint");
        if (h->scale != 1.0) out_.insert("hook that scales the gradient");
      }
      if (const auto* state = std::get_if<ModuleState>(&op)) {
        const bool read = state->fn == ModuleState::Fn::count;
        out_.insert(std::string(read ? "step counter" : "running statistic") +
                    (depth > 0 ? " inside a checkpoint" : " outside checkpoints"));
      }
      if (const auto* r = std::get_if<Raise>(&op)) {
        out_.insert(r->when == Raise::When::always      ? "raise in forward"
                    : r->when == Raise::When::recompute ? "raise in recomputation"
                                                        : "raise in the first iteration only");
      }
      if (const auto* d = std::get_if<Discard>(&op)) {
        out_.insert(d->checkpoints.size() > 1 ? "discard: several checkpoints under one hook" : "discard");
        if (!values.at(d->hook).requires_grad) out_.insert("discard: hook does not require grad");
        if (depth > 0) out_.insert("discard inside a checkpoint");
      }
      if (const auto* a = std::get_if<Autocast>(&op)) {
        out_.insert(std::string("autocast ") + (a->enabled ? "on" : "off") + (depth > 0 ? " inside a checkpoint" : ""));
        if (a->enabled) out_.insert(std::string("autocast dtype: ") + (a->dtype == Autocast::Precision::float16 ? "float16" : "bfloat16"));
        std::vector<ValueFacts> args;
        for (int ref : a->args) args.push_back(as_body_input(values.at(ref)));
        produced = walk(*a->body, args, depth, in_fork);
      } else if (const auto* f = std::get_if<Fork>(&op)) {
        out_.insert("tracker fork");
        if (depth > 0) out_.insert("tracker fork inside a checkpoint");
        std::vector<ValueFacts> args;
        for (int ref : f->args) args.push_back(as_body_input(values.at(ref)));
        produced = walk(*f->body, args, depth, true);
      } else if (const auto* c = std::get_if<Checkpoint>(&op)) {
        ++checkpoints;
        if (c->without_output) {
          out_.insert(depth > 0 ? "checkpoint without output, nested" : "checkpoint without output");
          if (std::any_of(c->args.begin(), c->args.end(), [](const Arg& a) { return !std::holds_alternative<Ref>(a); })) {
            out_.insert("checkpoint without output, non-tensor argument");
          }
        }
        produced = walk_checkpoint(*c, values, input_count, depth, in_fork);
      } else {
        produced = plain_op_facts(op, values, leaves_);
      }
      for (ValueFacts& f : produced) {
        values.push_back(f);
        read.push_back(false);
      }
    }
    if (checkpoints >= 2) out_.insert("sibling checkpoints");
    std::vector<ValueFacts> outputs;
    for (int ref : segment.outputs) {
      mark(ref);
      outputs.push_back(values.at(ref));
    }
    // A checkpoint output nothing reads: its gradient reaches backward as zeros.
    size_t next = input_count;
    for (const Op& op : segment.ops) {
      const size_t count = static_cast<size_t>(op_output_count(op));
      if (std::holds_alternative<Checkpoint>(op)) {
        for (size_t k = 0; k < count; ++k) {
          if (!read[next + k]) out_.insert("checkpoint output unused");
        }
      }
      next += count;
    }
    return outputs;
  }

 private:
  std::vector<ValueFacts> walk_checkpoint(const Checkpoint& c, const std::vector<ValueFacts>& values, size_t input_count,
                                     int depth, bool in_fork) {
    out_.insert("max checkpoint depth " + std::to_string(depth + 1));
    if (in_fork) out_.insert("checkpoint inside a tracker fork");
    if (c.distribute) out_.insert("distribute_saved_activations");
    for (const auto& [name, value] : c.options) out_.insert("call option " + name + "=" + value);
    std::vector<ValueFacts> args;
    std::set<std::string> seen;
    for (size_t a = 0; a < c.args.size(); ++a) {
      const Arg& arg = c.args[a];
      const std::string key = show_arg(arg);
      if (!seen.insert(key).second) out_.insert("arg: the same value twice");
      const ValueFacts f = arg_facts(arg, values);
      if (const auto* ref = std::get_if<Ref>(&arg)) {
        if (f.kind == ValueFacts::Kind::tensor) {
          if (depth > 0 && static_cast<size_t>(ref->value) >= input_count) {
            out_.insert("checkpoint on a value computed inside a checkpoint");
          }
          if (f.dtype == DType::int64) out_.insert("arg: integer tensor");
          else if (f.dtype == DType::boolean) out_.insert("arg: bool tensor");
          else out_.insert(f.requires_grad ? "arg: tensor requiring grad" : "arg: tensor not requiring grad");
          out_.insert(f.leaf ? "arg: leaf" : "arg: non-leaf");
          if (f.view) out_.insert("arg: view");
          if (!f.contiguous) out_.insert("arg: non-contiguous tensor");
          if (a == 0 && c.distribute && f.view) out_.insert("distribute with args[0] a view");
        } else {
          out_.insert(f.kind == ValueFacts::Kind::none ? "arg: None" : "arg: literal passed on");
        }
      } else if (std::holds_alternative<None>(arg)) {
        out_.insert("arg: None");
      } else {
        if (std::holds_alternative<int64_t>(arg)) out_.insert("arg: int");
        if (std::holds_alternative<double>(arg)) out_.insert("arg: float");
        if (std::holds_alternative<bool>(arg)) out_.insert("arg: bool");
        if (std::holds_alternative<std::string>(arg)) out_.insert("arg: str");
      }
      args.push_back(f);
    }
    std::vector<ValueFacts> inside;
    bool any_requires_grad = false;
    for (const ValueFacts& f : args) {
      inside.push_back(as_body_input(f));
      any_requires_grad = any_requires_grad || (f.kind == ValueFacts::Kind::tensor && f.requires_grad);
    }
    checkpoint_args_grad_.push_back(any_requires_grad);
    const std::vector<ValueFacts> body_outputs = walk(*c.body, inside, depth + 1, false);
    checkpoint_args_grad_.pop_back();
    if (body_outputs.size() >= 2) out_.insert("body: several outputs");
    for (size_t o = 0; o < body_outputs.size(); ++o) {
      const ValueFacts& f = body_outputs[o];
      if (f.kind != ValueFacts::Kind::tensor) out_.insert("body output: non-tensor");
      else if (!f.requires_grad) out_.insert("body output: not requiring grad");
      const int ref = c.body->outputs[o];
      if (ref < static_cast<int>(c.args.size())) out_.insert("body output: an input returned as is");
    }
    return checkpoint_output_facts(args, body_outputs);
  }

  std::set<std::string>& out_;
  const std::vector<ValueFacts> leaves_;
  // For each checkpoint around the segment walked, innermost last: whether a tensor argument of
  // it requires grad (a reentrant checkpoint's outputs require grad only then).
  std::vector<bool> checkpoint_args_grad_;
};

}  // namespace

std::vector<std::string> case_features(const Case& c) {
  std::set<std::string> features;
  features.insert(std::string("dtype: ") + to_string(c.dtype));
  features.insert("iterations: " + std::to_string(c.iterations));
  if (c.continue_after_error) features.insert("going on after errors");
  if (c.backward.call == Backward::Call::grad) features.insert("torch.autograd.grad of some leaves");
  if (c.backward.call == Backward::Call::backward && !c.backward.inputs.empty()) features.insert("backward with inputs=");
  if (c.backward.twice) features.insert("a second backward, the graph retained");
  for (const Leaf& leaf : c.leaves) {
    int64_t elements = 1;
    for (int64_t d : leaf.shape) elements *= d;
    if (elements >= 64 * 64) features.insert("large tensors (4,096 elements or more)");
  }
  const std::vector<ValueFacts> leaves = leaves_facts(c);
  FeatureWalker(features, leaves).walk(c.root, leaves, 0, false);
  // Depth labels say "at least": a case four deep is also three deep.
  int deepest = 0;
  for (const std::string& f : features) {
    if (f.rfind("max checkpoint depth ", 0) == 0) deepest = std::max(deepest, std::stoi(f.substr(21)));
  }
  for (auto it = features.begin(); it != features.end();) {
    it = it->rfind("max checkpoint depth ", 0) == 0 ? features.erase(it) : std::next(it);
  }
  for (int d = 1; d <= deepest; ++d) features.insert("checkpoints nested " + std::to_string(d) + " deep");
  return {features.begin(), features.end()};
}

}  // namespace recheck
