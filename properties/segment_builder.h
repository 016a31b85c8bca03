// The segment builder behind the case builder (properties/case_builder.h): what it knows of each
// value, and its steps. Plain ops, outputs and the case around them are drawn in case_builder.cpp;
// checkpoints, layers, forks and checkpoints without output in checkpoint_builder.cpp.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "properties/choices.h"
#include "properties/generator.h"

namespace recheck::case_building {

// GenOptions::max_ops by default: the op mix is tuned for segments of up to this many ops.
constexpr int kDefaultMaxOps = 6;

// What the generator knows of a value while it builds a segment, to pick fitting operands.
struct ValueInfo {
  enum class Kind { tensor, none, literal };
  Kind kind = Kind::tensor;
  std::vector<int64_t> shape;
  bool floating = true;
  bool requires_grad = false;
  // Handed to a checkpoint that distributes it: its data is now a 1-D chunk, so the caller,
  // as Megatron's callers do, does not read it again.
  bool handed_off = false;
  bool view = false;  // made by a view op (Megatron refuses to distribute a view)
  // The segment's input, or a view of it or the same tensor changed in place: the caller's storage.
  bool of_input = false;
  // A root leaf a capture op handed the segment (a layer's weight), a view of it or it changed in
  // place: never a segment's output or the argument a checkpoint distributes, which would hand
  // the leaf itself on.
  bool captured = false;
};

inline bool is_float_tensor(const ValueInfo& v) {
  return v.kind == ValueInfo::Kind::tensor && v.floating && !v.handed_off;
}

// Whether a segment draws random numbers, in itself or in anything it nests.
inline bool draws_random_numbers(const Segment& segment) {
  return any_op(segment, [](const Op& op) { return std::holds_alternative<Random>(op); });
}

class SegmentBuilder {
 public:
  // `leaves`: what is known of the case's leaves, which a capture op reads at any depth.
  SegmentBuilder(const GenOptions& options, const std::vector<ValueInfo>& leaves, int depth, std::vector<ValueInfo> inputs,
                 int fork_depth = 0)
      : options_(options),
        leaves_(leaves),
        depth_(depth),
        fork_depth_(fork_depth),
        values_(std::move(inputs)),
        input_count_(values_.size()) {
    for (ValueInfo& input : values_) input.of_input = true;
  }

  // `nested_first`: the body starts with a checkpoint of its own, as a layer that checkpoints a
  // sub-layer and then uses its own weights and inputs on the result.
  Segment build(bool is_root, bool nested_first = false);

  const std::vector<ValueInfo>& output_infos() const { return output_infos_; }

 private:
  enum OpKind : size_t {
    kUnary, kBinary, kMatmul, kView, kReduce, kArgmax, kRandom, kStash, kCheckpoint, kFork, kRaise, kInPlaceInput, kCapture
  };

  std::vector<int> float_tensors() const {
    std::vector<int> out;
    for (size_t i = 0; i < values_.size(); ++i) {
      if (is_float_tensor(values_[i])) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  std::vector<int> tensors() const {
    std::vector<int> out;
    for (size_t i = 0; i < values_.size(); ++i) {
      if (values_[i].kind == ValueInfo::Kind::tensor && !values_[i].handed_off) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  // Half the time keeps only the segment's own inputs among `candidates`, when there are any:
  // a layer reads its parameters and its input again after a nested checkpoint.
  void prefer_own_inputs(std::vector<int>& candidates) const {
    std::vector<int> own;
    for (int c : candidates) {
      if (static_cast<size_t>(c) < input_count_) own.push_back(c);
    }
    if (!own.empty() && choices::choose_in_range(0, 2) == 0) candidates = own;
  }

  void push(Op op, ValueInfo info) {
    // An in-place op yields its input itself, and so does a raise where it does not raise.
    const bool itself = std::holds_alternative<InPlace>(op) || std::holds_alternative<Raise>(op);
    if (!itself) info.view = std::holds_alternative<View>(op);
    const bool same_storage = itself || std::holds_alternative<View>(op);
    info.of_input = std::holds_alternative<Capture>(op) ||
                    (same_storage && values_.at(static_cast<size_t>(op_inputs(op).front())).of_input);
    // A view of a captured leaf, or the leaf itself (changed in place, or passed through a raise),
    // is the leaf's storage still.
    info.captured = std::holds_alternative<Capture>(op) ||
                    (same_storage && values_.at(static_cast<size_t>(op_inputs(op).front())).captured);
    segment_.ops.push_back(std::move(op));
    values_.push_back(std::move(info));
  }

  void add_op();

  // A root leaf captured by the body, as a layer's weight, and used at once: the right operand
  // of a matmul, or of an elementwise op with a value of its shape. A frozen one is sometimes a
  // buffer the layer updates in place as it reads it (running statistics).
  void add_capture(int x);

  static std::string pick_tracker_state();

  Arg pick_arg(const std::vector<Arg>& earlier, std::vector<ValueInfo>& child_inputs);
  // None (`none`), or a literal: an int, a float, a bool or a string.
  Arg non_tensor_arg(bool none, std::vector<ValueInfo>& child_inputs);

  // The checkpoint function's own call options (GenOptions::call_options), drawn once the body
  // is built; a value that promises something only of bodies without random draws is drawn only
  // for such a body. Nothing is drawn for a function that declares none (Megatron's): its cases
  // stay what they were. A default value goes unsaid.
  void draw_call_options(Checkpoint& op);

  void add_checkpoint();

  // Megatron's CheckpointWithoutOutput as its layers use it, a consumer of its output and a
  // discard (checkpoint_builder.cpp says which hooks and chains it draws).
  void add_checkpoint_without_output();
  // One checkpoint without output and the consumer of one of its outputs; `first_arg`: its first
  // argument (the consumer of the one before it, in a chain). The consumer saves what it reads
  // (a matmul with a weight, or a square) unless `saving` is false (a negation). Its first output
  // and the consumer's value; nothing where the body returned no float tensor.
  std::optional<std::pair<int, int>> add_consumed_checkpoint(std::optional<int> first_arg, bool saving);

  // A checkpointed layer around a checkpointed sub-layer, the shape of a transformer block
  // under full recompute: `ckpt(h, W){ y = ckpt(h){...}; z = y @ W; ... }`. W is read only
  // after the sub-layer, so in the layer's backward autograd finishes W's gradient before it
  // runs the sub-layer's backward. False when no (h, W) pair fits.
  bool add_layer();

  // The body of add_layer: inputs v0 = h, v1 = W, and maybe v2 = a buffer.
  Segment build_layer_body();

  // A region under `with tracker.fork(name):`, which may hold checkpoints of its own.
  void add_fork();

  void choose_outputs(bool is_root);

  bool tensor_outputs_only_ = false;  // a body whose outputs a discard frees: tensors only
  const GenOptions& options_;
  const std::vector<ValueInfo>& leaves_;
  int depth_;
  int fork_depth_;
  std::vector<ValueInfo> values_;
  size_t input_count_;
  Segment segment_;
  std::vector<ValueInfo> output_infos_;
};

}  // namespace recheck::case_building
