#include "properties/case_builder.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/rng.h"
#include "properties/case_decorations.h"
#include "properties/choices.h"

namespace recheck {

using namespace choices;

namespace {

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
};

bool is_float_tensor(const ValueInfo& v) {
  return v.kind == ValueInfo::Kind::tensor && v.floating && !v.handed_off;
}

// Whether a segment draws random numbers, in itself or in anything it nests.
bool draws_random_numbers(const Segment& segment) {
  return any_op(segment, [](const Op& op) { return std::holds_alternative<Random>(op); });
}

class SegmentBuilder {
 public:
  SegmentBuilder(const GenOptions& options, int depth, std::vector<ValueInfo> inputs, int fork_depth = 0)
      : options_(options),
        depth_(depth),
        fork_depth_(fork_depth),
        values_(std::move(inputs)),
        input_count_(values_.size()) {}

  // `nested_first`: the body starts with a checkpoint of its own, as a layer that checkpoints a
  // sub-layer and then uses its own weights and inputs on the result.
  Segment build(bool is_root, bool nested_first = false) {
    const int op_count = choose_in_range(1, options_.max_ops + 1);
    int i = 0;
    if (nested_first && depth_ < options_.max_depth && !float_tensors().empty()) {
      add_checkpoint();
      ++i;
    }
    for (; i < op_count; ++i) add_op();
    choose_outputs(is_root);
    return std::move(segment_);
  }

  const std::vector<ValueInfo>& output_infos() const { return output_infos_; }

 private:
  enum OpKind : size_t { kUnary, kBinary, kMatmul, kView, kReduce, kArgmax, kRandom, kStash, kCheckpoint, kFork, kRaise, kInPlaceInput };

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
    if (!own.empty() && choose_in_range(0, 2) == 0) candidates = own;
  }

  void push(Op op, ValueInfo info) {
    if (!std::holds_alternative<InPlace>(op)) info.view = std::holds_alternative<View>(op);
    segment_.ops.push_back(std::move(op));
    values_.push_back(std::move(info));
  }

  void add_op() {
    const std::vector<int> floats = float_tensors();
    if (floats.empty()) return;  // a body whose inputs are all None or literals computes nothing
    const size_t nested = depth_ < options_.max_depth ? 18 : 0;
    const size_t fork = fork_depth_ < 2 && options_.tracker_rng ? 3 : 0;
    // Checkpoints and forks open a segment of their own, and a raise ends the forward (the case
    // never reaches backward). Weighted per op, all three would grow with --max-ops: at 24 ops
    // a segment, each segment opened about four more (trees of thousands of ops, one case over
    // 25 s) and 42 cases of 60 raised in forward (the test variant `aborts` crashed in 1 case of
    // 40). Above the default 6 ops, these three are drawn 6/max_ops times as often per op, so a
    // segment opens and raises about as often as at 6 and only gets longer; at 6 and below the
    // weights, and so the cases drawn, are what they were.
    const size_t scale = options_.max_ops > kDefaultMaxOps ? static_cast<size_t>(options_.max_ops) : 1;
    const size_t per_segment = scale > 1 ? static_cast<size_t>(kDefaultMaxOps) : 1;
    const size_t kind = pick_weighted({{20 * scale, kUnary}, {15 * scale, kBinary}, {6 * scale, kMatmul}, {8 * scale, kView},
                                       {3 * scale, kReduce}, {2 * scale, kArgmax}, {16 * scale, kRandom}, {5 * scale, kStash},
                                       {nested * per_segment, kCheckpoint}, {fork * per_segment, kFork},
                                       {(depth_ > 0 ? 3u : 1u) * per_segment, kRaise},
                                       {(depth_ > 0 ? 4u : 0u) * scale, kInPlaceInput}});
    const int x = pick(floats);
    const ValueInfo& xi = values_[x];
    switch (kind) {
      case kUnary: {
        const auto fn = pick(std::vector<Unary::Fn>{Unary::Fn::tanh, Unary::Fn::neg, Unary::Fn::sigmoid,
                                                    Unary::Fn::square, Unary::Fn::relu});
        push(Unary{fn, x}, xi);
        return;
      }
      case kBinary: {
        std::vector<int> same_shape;
        for (int f : floats) {
          if (values_[f].shape == xi.shape) same_shape.push_back(f);
        }
        prefer_own_inputs(same_shape);
        const int b = pick(same_shape);  // may be x itself: the same tensor twice
        const auto fn = pick(std::vector<Binary::Fn>{Binary::Fn::add, Binary::Fn::mul, Binary::Fn::sub});
        ValueInfo out = xi;
        out.requires_grad = xi.requires_grad || values_[b].requires_grad;
        push(Binary{fn, x, b}, out);
        // In place on an intermediate no op has read yet: add and sub save nothing of their output.
        if (fn != Binary::Fn::mul && choose_in_range(0, 4) == 3) {
          const int target = static_cast<int>(values_.size()) - 1;
          push(InPlace{pick(std::vector<InPlace::Fn>{InPlace::Fn::mul, InPlace::Fn::add}),
                       pick(std::vector<double>{2.0, 0.5, -1.0}), target},
               values_[target]);
        }
        return;
      }
      case kMatmul: {
        std::vector<std::pair<int, int>> pairs;
        for (int a : floats) {
          for (int b : floats) {
            const auto& sa = values_[a].shape;
            const auto& sb = values_[b].shape;
            if (sa.size() == 2 && sb.size() == 2 && sa[1] == sb[0]) pairs.emplace_back(a, b);
          }
        }
        if (pairs.empty()) {
          push(Unary{Unary::Fn::tanh, x}, xi);
          return;
        }
        // Half the time the right operand is one of the segment's inputs, as a layer's weight is.
        std::vector<std::pair<int, int>> with_input;
        for (const auto& pair : pairs) {
          if (static_cast<size_t>(pair.second) < input_count_) with_input.push_back(pair);
        }
        if (!with_input.empty() && choose_in_range(0, 2) == 0) pairs = with_input;
        const auto [a, b] = pick(pairs);
        ValueInfo out = values_[a];
        out.shape = {values_[a].shape[0], values_[b].shape[1]};
        out.requires_grad = values_[a].requires_grad || values_[b].requires_grad;
        push(Matmul{a, b}, out);
        return;
      }
      case kView: {
        ValueInfo out = xi;
        std::vector<View::Fn> fns = {View::Fn::flatten};
        if (xi.shape.size() >= 2) fns.push_back(View::Fn::transpose);
        if (!xi.shape.empty()) fns.push_back(View::Fn::narrow);
        const View::Fn fn = pick(fns);
        if (fn == View::Fn::transpose) std::swap(out.shape[out.shape.size() - 2], out.shape.back());
        if (fn == View::Fn::narrow) out.shape[0] = std::max<int64_t>(1, out.shape[0] / 2);
        if (fn == View::Fn::flatten) {
          int64_t n = 1;
          for (int64_t d : xi.shape) n *= d;
          out.shape = {n};
        }
        push(View{fn, x}, out);
        return;
      }
      case kReduce: {
        ValueInfo out = xi;
        out.shape = {};
        push(Reduce{pick(std::vector<Reduce::Fn>{Reduce::Fn::sum, Reduce::Fn::mean}), x}, out);
        return;
      }
      case kArgmax: {
        ValueInfo out;
        out.shape = {};
        out.floating = false;
        push(Argmax{x}, out);
        return;
      }
      case kRandom: {
        Random op;
        op.fn = pick(std::vector<Random::Fn>{Random::Fn::dropout, Random::Fn::noise});
        op.source = choose_weighted<RngSource>({{1, RngSource::cpu},
                                                {options_.device_rng ? 1u : 0u, RngSource::device},
                                                {options_.tracker_rng ? 2u : 0u, RngSource::tracker}});
        if (op.source == RngSource::tracker) op.tracker_state = pick_tracker_state();
        op.p = op.fn == Random::Fn::dropout ? pick(std::vector<double>{0.5, 0.5, 0.25}) : 0.1;
        op.x = x;
        push(op, xi);
        return;
      }
      case kStash: {
        // Most often an input of the segment: a module that caches its input.
        const std::vector<int> all = tensors();
        std::vector<int> inputs;
        for (int t : all) {
          if (static_cast<size_t>(t) < input_count_) inputs.push_back(t);
        }
        const int target = !inputs.empty() && choose_in_range(0, 3) != 0 ? pick(inputs) : pick(all);
        segment_.ops.push_back(Stash{target});
        return;
      }
      case kCheckpoint:
        if (depth_ + 2 <= options_.max_depth && choose_in_range(0, 3) == 2 && add_layer()) return;
        add_checkpoint();
        return;
      case kFork:
        add_fork();
        return;
      case kRaise: {
        // Raising only in recomputation models a body that is not a pure function of its inputs;
        // it can only happen inside a checkpoint body.
        const Raise::When when = depth_ > 0 && choose_in_range(0, 4) != 0 ? Raise::When::recompute : Raise::When::always;
        push(Raise{x, when}, xi);
        return;
      }
      case kInPlaceInput: {
        // A body that modifies an input that does not require grad in place, as a module that
        // scales a buffer it was given: legal in eager mode, and run again by every recomputation.
        std::vector<int> targets;
        for (int f : floats) {
          if (static_cast<size_t>(f) < input_count_ && !values_[f].requires_grad) targets.push_back(f);
        }
        if (targets.empty()) {
          push(Unary{Unary::Fn::neg, x}, xi);
          return;
        }
        const int target = pick(targets);
        push(InPlace{InPlace::Fn::mul, 0.5, target}, values_[target]);
        return;
      }
    }
  }

  static std::string pick_tracker_state() {
    return choose_weighted<std::string>({{60, rng::kModelParallelRngTrackerName},
                                                   {24, rng::kDataParallelRngTrackerName},
                                                   {16, rng::kExpertParallelRngTrackerName},
                                                   {1, "no-such-rng"}});  // unknown: Megatron's tracker raises
  }

  Arg pick_arg(const std::vector<Arg>& earlier, std::vector<ValueInfo>& child_inputs) {
    const size_t kind = pick_weighted({{30, 0}, {3, 1}, {4, 2}, {1, 3}, {earlier.empty() ? 0u : 3u, 4}});
    if (kind == 4) {  // the same value passed again
      const Arg& again = pick(earlier);
      if (const auto* ref = std::get_if<Ref>(&again)) child_inputs.push_back(values_[ref->value]);
      else if (std::holds_alternative<None>(again)) child_inputs.push_back(ValueInfo{ValueInfo::Kind::none, {}, false, false});
      else child_inputs.push_back(ValueInfo{ValueInfo::Kind::literal, {}, false, false});
      return again;
    }
    if (kind == 0 || kind == 2) {
      std::vector<int> candidates = kind == 0 ? float_tensors() : tensors();
      if (kind == 2) {  // mostly an integer or bool tensor, when there is one
        std::vector<int> other;
        for (int t : candidates) {
          if (!values_[t].floating) other.push_back(t);
        }
        if (!other.empty() && choose_in_range(0, 3) != 0) candidates = other;
      }
      prefer_own_inputs(candidates);
      const int ref = pick(candidates);
      child_inputs.push_back(values_[ref]);
      return Ref{ref};
    }
    if (kind == 1) {
      child_inputs.push_back(ValueInfo{ValueInfo::Kind::none, {}, false, false});
      return None{};
    }
    child_inputs.push_back(ValueInfo{ValueInfo::Kind::literal, {}, false, false});
    switch (choose_in_range(0, 4)) {
      case 0: return int64_t{3};
      case 1: return 0.5;
      case 2: return true;
      default: return std::string("mode");
    }
  }

  // The checkpoint function's own call options (GenOptions::call_options), drawn once the body
  // is built; a value that promises something only of bodies without random draws is drawn only
  // for such a body. Nothing is drawn for a function that declares none (Megatron's): its cases
  // stay what they were. A default value goes unsaid.
  void draw_call_options(Checkpoint& op) {
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

  void add_checkpoint() {
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
      const std::vector<int> floats = float_tensors();
      handed_off = floats.back();
      for (auto it = floats.rbegin(); it != floats.rend(); ++it) {
        if (!values_[*it].view) {
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
    SegmentBuilder child(options_, depth_ + 1, child_inputs, fork_depth_);
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

  // A checkpointed layer around a checkpointed sub-layer, the shape of a transformer block
  // under full recompute: `ckpt(h, W){ y = ckpt(h){...}; z = y @ W; ... }`. W is read only
  // after the sub-layer, so in the layer's backward autograd finishes W's gradient before it
  // runs the sub-layer's backward. False when no (h, W) pair fits.
  bool add_layer() {
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
    op.distribute = !values_[h].view && options_.distribute_one_in > 0 && choose_in_range(0, 3) == 2;
    if (op.distribute) values_[h].handed_off = true;
    SegmentBuilder layer(options_, depth_ + 1, inputs, fork_depth_);
    op.body = layer.build_layer_body();
    draw_call_options(op);
    segment_.ops.push_back(std::move(op));
    for (const ValueInfo& info : layer.output_infos()) values_.push_back(info);
    return true;
  }

  // The body of add_layer: inputs v0 = h, v1 = W, and maybe v2 = a buffer.
  Segment build_layer_body() {
    Checkpoint sublayer;
    sublayer.args = {Ref{0}};
    SegmentBuilder child(options_, depth_ + 1, {values_[0]}, fork_depth_);
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
  void add_fork() {
    Fork op;
    op.tracker_state = pick_tracker_state();
    std::vector<ValueInfo> child_inputs;
    const std::vector<int> floats = float_tensors();
    const int arg_count = choose_in_range(1, 3);
    for (int i = 0; i < arg_count; ++i) {
      op.args.push_back(pick(floats));
      child_inputs.push_back(values_[op.args.back()]);
    }
    SegmentBuilder child(options_, depth_, child_inputs, fork_depth_ + 1);
    op.body = child.build(/*is_root=*/false);
    segment_.ops.push_back(std::move(op));
    for (const ValueInfo& info : child.output_infos()) values_.push_back(info);
  }

  void choose_outputs(bool is_root) {
    if (!is_root && choose_in_range(0, 3) == 2) {
      // An output that does not require grad before the others: a non-tensor, an integer
      // tensor, a tensor computed without grad, or else an argmax made for the purpose.
      std::vector<int> no_grad;
      for (size_t i = 0; i < values_.size(); ++i) {
        if (!values_[i].requires_grad || values_[i].kind != ValueInfo::Kind::tensor) no_grad.push_back(static_cast<int>(i));
      }
      const std::vector<int> floats = float_tensors();
      if (no_grad.empty() && !floats.empty()) {
        ValueInfo out;
        out.floating = false;
        push(Argmax{pick(floats)}, out);
        no_grad.push_back(static_cast<int>(values_.size()) - 1);
      }
      if (!no_grad.empty()) {
        const int ref = pick(no_grad);
        segment_.outputs.push_back(ref);
        output_infos_.push_back(values_[ref]);
      }
    }
    std::vector<int> candidates = is_root ? float_tensors() : tensors();
    if (!is_root) {
      // A body may also return a literal or None it was given.
      for (size_t i = 0; i < values_.size(); ++i) {
        if (values_[i].kind != ValueInfo::Kind::tensor) candidates.push_back(static_cast<int>(i));
      }
    }
    if (candidates.empty()) return;
    // The newest value first, so that shrinking keeps the last computation.
    std::reverse(candidates.begin(), candidates.end());
    // Mostly values no op has read yet: then what the segment computed reaches the loss, and
    // its checkpoints and random draws are recomputed in backward instead of being dead code.
    std::vector<bool> read(values_.size(), false);
    for (const Op& op : segment_.ops) {
      for (int ref : op_inputs(op)) read[static_cast<size_t>(ref)] = true;
    }
    std::vector<int> sinks;
    for (int c : candidates) {
      if (static_cast<size_t>(c) >= input_count_ && !read[static_cast<size_t>(c)]) sinks.push_back(c);
    }
    const int count = choose_in_range(1, std::min<int>(3, static_cast<int>(candidates.size())) + 1);
    for (int i = 0; i < count; ++i) {
      const bool from_sinks = !sinks.empty() && choose_in_range(0, 4) != 3;
      const int ref = pick(from_sinks ? sinks : candidates);
      if (from_sinks) sinks.erase(std::find(sinks.begin(), sinks.end(), ref));
      segment_.outputs.push_back(ref);
      output_infos_.push_back(values_[ref]);
    }
  }

  const GenOptions& options_;
  int depth_;
  int fork_depth_;
  std::vector<ValueInfo> values_;
  size_t input_count_;
  Segment segment_;
  std::vector<ValueInfo> output_infos_;
};

Case build_segments(const GenOptions& options) {
  Case c;
  c.seed = choose_in_range<uint64_t>(0, 1000000);
  c.dtype = choose_weighted<DType>({{6, DType::float32}, {2, DType::float64}, {1, DType::bfloat16}});
  c.device = options.device;
  c.iterations = choose_weighted<int>({{3, 1}, {2, 2}, {1, 3}});
  // One case in eight is large: activations of 4,096 elements or more ([256, 16] to [263, 17]:
  // a float32 gradient of 16 KiB or more) outweigh the fixed costs of a checkpoint (its RNG state
  // copies, 5,056 bytes on CPU), so that the floor and the peak see what happens to each
  // gradient. Tall rather than square: a matmul costs rows x cols^2, and libtorch 1.13's CPU
  // matmul made square [64, 64] cases cost a quarter of all checking time. The rest stay small,
  // where the corners are cheap to reach.
  const bool large = choose_weighted<bool>({{7, false}, {1, true}});
  const int64_t rows = large ? choose_in_range<int64_t>(256, 264) : choose_in_range<int64_t>(1, 7);
  const int64_t cols = large ? choose_in_range<int64_t>(16, 18) : choose_in_range<int64_t>(1, 7);
  // An input, a square parameter, and sometimes a second input.
  c.leaves.push_back(Leaf{{rows, cols}, std::nullopt, choose_weighted<bool>({{1, true}, {1, false}}), Fill::randn});
  c.leaves.push_back(Leaf{{cols, cols}, std::nullopt, true, Fill::randn});
  // Choices are written so that shrinking (towards 0) removes what is optional.
  if (choose_in_range(0, 2) == 1) {
    c.leaves.push_back(Leaf{{rows, cols}, std::nullopt, choose_in_range(0, 2) == 0, Fill::randn});
  }
  // Sometimes an integer or a bool tensor, for arguments that are tensors but not differentiable.
  switch (choose_in_range(0, 5)) {
    case 3: c.leaves.push_back(Leaf{{rows, cols}, DType::int64, false, Fill::randn}); break;
    case 4: c.leaves.push_back(Leaf{{rows}, DType::boolean, false, Fill::randn}); break;
    default: break;
  }
  std::vector<ValueInfo> inputs;
  for (const Leaf& leaf : c.leaves) {
    const bool floating = !leaf.dtype || (*leaf.dtype != DType::int64 && *leaf.dtype != DType::boolean);
    inputs.push_back(ValueInfo{ValueInfo::Kind::tensor, leaf.shape, floating, leaf.requires_grad});
  }
  SegmentBuilder root(options, 0, inputs);
  c.root = root.build(/*is_root=*/true);
  draw_decorations(c);
  return c;
}

}  // namespace

Case build_case(const GenOptions& options, FuzzedDataProvider* bytes) {
  FuzzedDataProvider* const outer = t_bytes;
  t_bytes = bytes;
  struct Restore {
    FuzzedDataProvider* outer;
    ~Restore() { t_bytes = outer; }
  } restore{outer};
  return build_segments(options);
}

}  // namespace recheck
