#include <algorithm>
#include <optional>

#include "properties/choices.h"
#include "properties/segment_builder.h"

namespace recheck::case_building {

using namespace choices;

// The checkpoint function's own call options (GenOptions::call_options), drawn once the body
// is built; a value that promises something only of bodies without random draws is drawn only
// for such a body. Nothing is drawn for a function that declares none (Megatron's): its cases
// stay what they were. A default value goes unsaid.
void SegmentBuilder::draw_call_options(Checkpoint& op) {
  if (options_.call_options.empty()) return;
  const bool random = draws_random_numbers(*op.body);
  for (const CallOption& option : options_.call_options) {
    std::vector<std::string> allowed;
    for (const std::string& value : option.values) {
      const auto& excluded = option.only_without_rng;
      if (!random || std::find(excluded.begin(), excluded.end(), value) == excluded.end()) allowed.push_back(value);
    }
    const std::string& value = allowed[choose_in_range(0, static_cast<int>(allowed.size()))];
    if (value != option.values.front()) op.options[option.name] = value;
  }
}

void SegmentBuilder::add_checkpoint() {
  Checkpoint op;
  std::vector<ValueInfo> child_inputs;
  op.distribute = options_.distribute_one_in > 0 && choose_in_range(0, options_.distribute_one_in) == options_.distribute_one_in - 1;
  const int arg_count = choose_in_range(1, 4);
  std::optional<int> handed_off;
  // 0, 1: the hidden states just handed over; 2, 3: a view; 4: any argument.
  const int first_arg = op.distribute ? choose_in_range(0, 5) : 4;
  if (first_arg <= 1) {
    // Megatron distributes the hidden states a layer was just handed: mostly the newest
    // tensor that is not a view, which the caller does not read again. Otherwise a view
    // (Megatron refuses it) or any argument, which the caller may read again and then sees
    // the 1-D chunk: pre-existing findings, both.
    std::vector<int> floats;
    for (int f : float_tensors()) {
      if (!values_[f].captured) floats.push_back(f);
    }
    if (floats.empty()) floats = float_tensors();  // a body whose only float tensor is a captured leaf
    handed_off = floats.back();
    for (auto it = floats.rbegin(); it != floats.rend(); ++it) {
      if (!values_[*it].view && !values_[*it].captured) {
        handed_off = *it;
        break;
      }
    }
    op.args.push_back(Ref{*handed_off});
    child_inputs.push_back(values_[*handed_off]);
  } else if (first_arg <= 3) {
    for (int f : float_tensors()) {
      if (values_[f].view) {
        op.args = {Ref{f}};
        child_inputs = {values_[f]};
      }
    }
  }
  while (static_cast<int>(op.args.size()) < arg_count) op.args.push_back(pick_arg(op.args, child_inputs));
  if (handed_off) values_[*handed_off].handed_off = true;
  SegmentBuilder child(options_, leaves_, depth_ + 1, child_inputs, fork_depth_);
  op.body = child.build(/*is_root=*/false, /*nested_first=*/choose_in_range(0, 4) == 3);
  // A residual connection, `x + layer(x)`: an argument is used again after the checkpoint,
  // so autograd accumulates into it from two places.
  std::optional<std::pair<int, int>> residual;  // (output index, argument value)
  const auto& outs = child.output_infos();
  for (size_t o = 0; o < outs.size() && !residual; ++o) {
    for (const Arg& arg : op.args) {
      const auto* ref = std::get_if<Ref>(&arg);
      if (ref && is_float_tensor(outs[o]) && is_float_tensor(values_[ref->value]) &&
          values_[ref->value].shape == outs[o].shape) {
        residual = std::make_pair(static_cast<int>(o), ref->value);
        break;
      }
    }
  }
  draw_call_options(op);
  segment_.ops.push_back(std::move(op));
  const int first_output = static_cast<int>(values_.size());
  for (const ValueInfo& info : outs) values_.push_back(info);
  // What a layer does with a sub-layer's result: nothing more, add it to its input (a
  // residual connection: autograd then accumulates into the input from two places), or
  // multiply it by one of its own weights (autograd then finishes with that weight before it
  // reaches the sub-layer).
  switch (choose_weighted<int>({{1, 0}, {2, 1}, {2, 2}})) {
    case 1:
      if (residual) {
        const int output = first_output + residual->first;
        // Most often the argument itself; else another input of this segment of that shape
        // (`h + attention(x)`), whose gradient autograd then finishes before the checkpoint's.
        int operand = residual->second;
        std::vector<int> others;
        for (size_t i = 0; i < input_count_; ++i) {
          if (is_float_tensor(values_[i]) && values_[i].shape == values_[output].shape) others.push_back(static_cast<int>(i));
        }
        if (!others.empty() && choose_in_range(0, 2) == 1) operand = pick(others);
        ValueInfo out = values_[output];
        out.requires_grad = out.requires_grad || values_[operand].requires_grad;
        push(Binary{Binary::Fn::add, output, operand}, out);
      }
      break;
    case 2:
      for (size_t o = 0; o < outs.size(); ++o) {
        const ValueInfo& produced = values_[first_output + static_cast<int>(o)];
        if (!is_float_tensor(produced) || produced.shape.size() != 2) continue;
        std::vector<int> weights;
        for (size_t w = 0; w < input_count_; ++w) {
          const ValueInfo& wi = values_[w];
          if (is_float_tensor(wi) && wi.shape.size() == 2 && wi.shape[0] == produced.shape[1]) weights.push_back(static_cast<int>(w));
        }
        if (weights.empty()) continue;
        const int weight = pick(weights);
        ValueInfo out = produced;
        out.shape = {produced.shape[0], values_[weight].shape[1]};
        out.requires_grad = produced.requires_grad || values_[weight].requires_grad;
        push(Matmul{first_output + static_cast<int>(o), weight}, out);
        break;
      }
      break;
    default:
      break;
  }
}

// Megatron's CheckpointWithoutOutput as its layers use it: a body of tensor arguments that
// returns tensors, an output read by a consumer that saves it, then a discard with the
// recomputation on the consumer's gradient. One time in four a chain of two under one hook, the
// second taking the first's consumer as its argument (a manager's sequential checkpoints), the
// hook the second's consumer. One time in fifteen the hook is a tensor that does not require grad
// (the recomputation never runs), the output itself or the checkpoint's argument (autograd reaches
// them after the consumer), each with a consumer that saves nothing: mistakes of a caller the
// function documents, where eager mode tells what a caller expects and nothing reads freed memory.
void SegmentBuilder::add_checkpoint_without_output() {
  const int kind = choose_weighted<int>({{12, 0}, {1, 1}, {1, 2}, {1, 3}});
  const bool chain = kind == 0 && choose_in_range(0, 4) == 3;
  const auto first = add_consumed_checkpoint(std::nullopt, /*saving=*/kind == 0);
  if (!first) return;
  Discard discard;
  discard.checkpoints = {first->first};
  int hook = first->second;
  if (chain) {
    if (const auto second = add_consumed_checkpoint(first->second, /*saving=*/true)) {
      discard.checkpoints.push_back(second->first);
      hook = second->second;
    }
  }
  switch (kind) {
    case 1: {
      std::vector<int> no_grad;
      for (int t : tensors()) {
        if (!values_[t].requires_grad) no_grad.push_back(t);
      }
      if (no_grad.empty()) {
        ValueInfo index;
        index.floating = false;
        push(Argmax{hook}, index);
        no_grad.push_back(static_cast<int>(values_.size()) - 1);
      }
      hook = pick(no_grad);
      break;
    }
    case 2: hook = std::get<Unary>(segment_.ops.back()).x; break;  // what the consumer read
    case 3: hook = std::get<Ref>(std::get<Checkpoint>(segment_.ops[segment_.ops.size() - 2]).args.front()).value; break;
    default: break;
  }
  discard.hook = hook;
  segment_.ops.push_back(std::move(discard));
}

std::optional<std::pair<int, int>> SegmentBuilder::add_consumed_checkpoint(std::optional<int> first_arg, bool saving) {
  Checkpoint op;
  op.without_output = true;
  std::vector<ValueInfo> child_inputs;
  const int arg_count = choose_in_range(1, 4);
  for (int a = 0; a < arg_count; ++a) {
    int ref = 0;
    if (a == 0 && first_arg) {
      ref = *first_arg;
    } else if (a > 0 && options_.without_output_non_tensors && choose_in_range(0, 4) == 0) {
      // Megatron-LM's function since 2026 keeps None and literals apart from the tensors it saves.
      op.args.push_back(non_tensor_arg(choose_in_range(0, 3) == 0, child_inputs));
      continue;
    } else {
      std::vector<int> candidates = choose_in_range(0, 4) == 0 ? tensors() : float_tensors();
      prefer_own_inputs(candidates);
      ref = pick(candidates);
    }
    op.args.push_back(Ref{ref});
    child_inputs.push_back(values_[ref]);
  }
  SegmentBuilder child(options_, leaves_, depth_ + 1, child_inputs, fork_depth_);
  child.tensor_outputs_only_ = true;
  op.body = child.build(/*is_root=*/false);
  const int first_output = static_cast<int>(values_.size());
  segment_.ops.push_back(std::move(op));
  const std::vector<ValueInfo>& outs = child.output_infos();
  for (const ValueInfo& info : outs) values_.push_back(info);
  std::vector<int> floats;
  for (size_t o = 0; o < outs.size(); ++o) {
    if (is_float_tensor(outs[o])) floats.push_back(first_output + static_cast<int>(o));
  }
  // Its outputs are the discard's from here on: no later op reads them.
  for (size_t o = 0; o < outs.size(); ++o) values_[first_output + o].handed_off = true;
  if (floats.empty()) return std::nullopt;  // nothing a consumer would save: left as it is
  const int read = pick(floats);
  ValueInfo consumed = values_[read];
  consumed.handed_off = false;
  if (!saving) {
    push(Unary{Unary::Fn::neg, read}, consumed);
    return std::make_pair(first_output, static_cast<int>(values_.size()) - 1);
  }
  std::vector<int> weights;
  for (size_t w = 0; w < input_count_; ++w) {
    const ValueInfo& wi = values_[w];
    if (consumed.shape.size() == 2 && is_float_tensor(wi) && wi.shape.size() == 2 && wi.shape[0] == consumed.shape[1]) {
      weights.push_back(static_cast<int>(w));
    }
  }
  if (!weights.empty() && choose_in_range(0, 3) != 0) {
    const int weight = pick(weights);
    consumed.shape = {consumed.shape[0], values_[weight].shape[1]};
    consumed.requires_grad = consumed.requires_grad || values_[weight].requires_grad;
    push(Matmul{read, weight}, consumed);
  } else {
    push(Unary{Unary::Fn::square, read}, consumed);
  }
  return std::make_pair(first_output, static_cast<int>(values_.size()) - 1);
}

// A checkpointed layer around a checkpointed sub-layer, the shape of a transformer block
// under full recompute: `ckpt(h, W){ y = ckpt(h){...}; z = y @ W; ... }`. W is read only
// after the sub-layer, so in the layer's backward autograd finishes W's gradient before it
// runs the sub-layer's backward. False when no (h, W) pair fits.
bool SegmentBuilder::add_layer() {
  std::vector<std::pair<int, int>> pairs;
  for (int h : float_tensors()) {
    for (int w : float_tensors()) {
      const ValueInfo& hi = values_[h];
      const ValueInfo& wi = values_[w];
      if (h != w && hi.shape.size() == 2 && wi.shape.size() == 2 && wi.shape[0] == hi.shape[1] && wi.requires_grad) {
        pairs.emplace_back(h, w);
      }
    }
  }
  if (pairs.empty()) return false;
  const auto [h, w] = pick(pairs);
  Checkpoint op;
  op.args = {Ref{h}, Ref{w}};
  std::vector<ValueInfo> inputs = {values_[h], values_[w]};
  // Half the time a buffer too, a float tensor that does not require grad and that the layer
  // updates in place (as batch norm updates its running statistics): recomputation updates
  // it a second time.
  std::vector<int> buffers;
  for (int b : float_tensors()) {
    if (!values_[b].requires_grad) buffers.push_back(b);
  }
  if (!buffers.empty() && choose_in_range(0, 2) == 1) {
    const int buffer = pick(buffers);
    op.args.push_back(Ref{buffer});
    inputs.push_back(values_[buffer]);
  }
  // Megatron's transformer layers distribute their hidden states, args[0], under full recompute.
  op.distribute = !values_[h].view && !values_[h].captured && options_.distribute_one_in > 0 && choose_in_range(0, 3) == 2;
  if (op.distribute) values_[h].handed_off = true;
  SegmentBuilder layer(options_, leaves_, depth_ + 1, inputs, fork_depth_);
  op.body = layer.build_layer_body();
  draw_call_options(op);
  segment_.ops.push_back(std::move(op));
  for (const ValueInfo& info : layer.output_infos()) values_.push_back(info);
  return true;
}

// The body of add_layer: inputs v0 = h, v1 = W, and maybe v2 = a buffer.
Segment SegmentBuilder::build_layer_body() {
  Checkpoint sublayer;
  sublayer.args = {Ref{0}};
  SegmentBuilder child(options_, leaves_, depth_ + 1, {values_[0]}, fork_depth_);
  sublayer.body = child.build(/*is_root=*/false);
  draw_call_options(sublayer);
  segment_.ops.push_back(std::move(sublayer));
  const int first_output = static_cast<int>(values_.size());
  for (const ValueInfo& info : child.output_infos()) values_.push_back(info);
  int y = -1;
  for (size_t o = 0; o < child.output_infos().size() && y < 0; ++o) {
    const ValueInfo& yi = values_[first_output + o];
    if (is_float_tensor(yi) && yi.shape.size() == 2 && yi.shape[1] == values_[1].shape[0]) y = first_output + static_cast<int>(o);
  }
  if (y < 0) y = 0;  // the sub-layer changed the shape: use h itself
  ValueInfo z = values_[y];
  z.shape = {values_[y].shape[0], values_[1].shape[1]};
  z.requires_grad = true;
  push(Matmul{y, 1}, z);
  if (input_count_ == 3) push(InPlace{InPlace::Fn::mul, 0.5, 2}, values_[2]);
  const int more = choose_in_range(0, 3);
  for (int i = 0; i < more; ++i) add_op();
  choose_outputs(/*is_root=*/false);
  return std::move(segment_);
}

// A region under `with tracker.fork(name):`, which may hold checkpoints of its own.
void SegmentBuilder::add_fork() {
  Fork op;
  op.tracker_state = pick_tracker_state();
  std::vector<ValueInfo> child_inputs;
  const std::vector<int> floats = float_tensors();
  const int arg_count = choose_in_range(1, 3);
  for (int i = 0; i < arg_count; ++i) {
    op.args.push_back(pick(floats));
    child_inputs.push_back(values_[op.args.back()]);
  }
  SegmentBuilder child(options_, leaves_, depth_, child_inputs, fork_depth_ + 1);
  op.body = child.build(/*is_root=*/false);
  segment_.ops.push_back(std::move(op));
  for (const ValueInfo& info : child.output_infos()) values_.push_back(info);
}

}  // namespace recheck::case_building
