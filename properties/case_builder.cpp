#include "properties/case_builder.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/case_detail.h"
#include "core/rng.h"
#include "properties/case_decorations.h"
#include "properties/choices.h"
#include "properties/segment_builder.h"

namespace recheck {

using namespace choices;

namespace case_building {

// `nested_first`: the body starts with a checkpoint of its own, as a layer that checkpoints a
// sub-layer and then uses its own weights and inputs on the result.
Segment SegmentBuilder::build(bool is_root, bool nested_first) {
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

void SegmentBuilder::add_op() {
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
  // Every op is drawn: here (a kind and a weight), or in case_decorations.cpp (autocast regions,
  // discards, hooks and module state). A new op fails this until it is drawn in one of them and
  // counted here.
  static_assert(std::variant_size_v<Op> == 17,
                "a new op: give it a kind and a weight here or draw it in case_decorations.cpp, then count it "
                "(docs/adding-an-op.md)");
  const size_t kind = pick_weighted({{20 * scale, kUnary}, {15 * scale, kBinary}, {6 * scale, kMatmul}, {8 * scale, kView},
                                     {3 * scale, kReduce}, {2 * scale, kArgmax}, {16 * scale, kRandom}, {5 * scale, kStash},
                                     {nested * per_segment, kCheckpoint}, {fork * per_segment, kFork},
                                     {(depth_ > 0 ? 3u : 1u) * per_segment, kRaise},
                                     {(depth_ > 0 ? 4u : 0u) * scale, kInPlaceInput},
                                     {(depth_ > 0 ? 3u : 0u) * scale, kCapture}});
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
      // Dropout most, as models hold it most.
      op.fn = choose_weighted<Random::Fn>({{4, Random::Fn::dropout},
                                           {2, Random::Fn::noise},
                                           {2, Random::Fn::rrelu},
                                           {2, Random::Fn::feature_dropout},
                                           {1, Random::Fn::alpha_dropout},
                                           {1, Random::Fn::uniform_noise},
                                           {1, Random::Fn::gumbel},
                                           {1, Random::Fn::bernoulli},
                                           {1, Random::Fn::multinomial},
                                           {1, Random::Fn::randperm}});
      op.source = choose_weighted<RngSource>({{1, RngSource::cpu},
                                              {options_.device_rng ? 1u : 0u, RngSource::device},
                                              {options_.tracker_rng ? 2u : 0u, RngSource::tracker}});
      if (op.source == RngSource::tracker) op.tracker_state = pick_tracker_state();
      op.p = case_detail::random_default_p(op.fn);
      if (op.fn == Random::Fn::dropout) op.p = pick(std::vector<double>{0.5, 0.5, 0.25});
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
      if (options_.without_output && choose_in_range(0, 3) != 0) {
        add_checkpoint_without_output();
        return;
      }
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
    case kCapture:
      add_capture(x);
      return;
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

std::string SegmentBuilder::pick_tracker_state() {
  return choose_weighted<std::string>({{60, rng::kModelParallelRngTrackerName},
                                                 {24, rng::kDataParallelRngTrackerName},
                                                 {16, rng::kExpertParallelRngTrackerName},
                                                 {1, "no-such-rng"}});  // unknown: Megatron's tracker raises
}

void SegmentBuilder::add_capture(int x) {
  std::vector<int> floating;
  for (size_t l = 0; l < leaves_.size(); ++l) {
    if (is_float_tensor(leaves_[l])) floating.push_back(static_cast<int>(l));
  }
  if (floating.empty()) {
    push(Unary{Unary::Fn::tanh, x}, values_[x]);
    return;
  }
  const int leaf = pick(floating);
  push(Capture{leaf}, leaves_[static_cast<size_t>(leaf)]);
  if (!leaves_[static_cast<size_t>(leaf)].requires_grad && choose_in_range(0, 2) == 1) {
    const int buffer = static_cast<int>(values_.size()) - 1;
    push(InPlace{InPlace::Fn::mul, 0.5, buffer}, values_[buffer]);
  }
  const int w = static_cast<int>(values_.size()) - 1;
  const ValueInfo& wi = values_[w];
  std::vector<int> left;  // a @ w
  std::vector<int> same;  // a * w, a + w
  for (int f : float_tensors()) {
    if (values_[f].captured) continue;
    if (values_[f].shape.size() == 2 && wi.shape.size() == 2 && values_[f].shape[1] == wi.shape[0]) left.push_back(f);
    if (values_[f].shape == wi.shape) same.push_back(f);
  }
  if (left.empty() && same.empty()) {
    ValueInfo out = wi;
    out.captured = false;
    push(Unary{Unary::Fn::tanh, w}, out);
    return;
  }
  const bool matmul = !left.empty() && (same.empty() || choose_in_range(0, 3) != 0);
  const int a = pick(matmul ? left : same);
  ValueInfo out = values_[a];
  out.requires_grad = values_[a].requires_grad || wi.requires_grad;
  if (matmul) {
    out.shape = {values_[a].shape[0], wi.shape[1]};
    push(Matmul{a, w}, out);
  } else {
    push(Binary{pick(std::vector<Binary::Fn>{Binary::Fn::mul, Binary::Fn::add}), a, w}, out);
  }
}

Arg SegmentBuilder::pick_arg(const std::vector<Arg>& earlier, std::vector<ValueInfo>& child_inputs) {
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
  return non_tensor_arg(kind == 1, child_inputs);
}

Arg SegmentBuilder::non_tensor_arg(bool none, std::vector<ValueInfo>& child_inputs) {
  if (none) {
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

void SegmentBuilder::choose_outputs(bool is_root) {
  if (!is_root && choose_in_range(0, 3) == 2) {
    // An output that does not require grad before the others: a non-tensor, an integer
    // tensor, a tensor computed without grad, or else an argmax made for the purpose.
    std::vector<int> no_grad;
    for (size_t i = 0; i < values_.size(); ++i) {
      const bool tensor = values_[i].kind == ValueInfo::Kind::tensor;
      if (tensor_outputs_only_ && (!tensor || values_[i].handed_off)) continue;
      if (values_[i].captured) continue;
      if (!values_[i].requires_grad || !tensor) no_grad.push_back(static_cast<int>(i));
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
  std::vector<int> candidates;
  for (int c : is_root ? float_tensors() : tensors()) {
    if (!values_[static_cast<size_t>(c)].captured) candidates.push_back(c);  // the leaf itself, handed on
  }
  if (!is_root && !tensor_outputs_only_) {
    // A body may also return a literal or None it was given.
    for (size_t i = 0; i < values_.size(); ++i) {
      if (values_[i].kind != ValueInfo::Kind::tensor) candidates.push_back(static_cast<int>(i));
    }
  }
  if (tensor_outputs_only_ && choose_in_range(0, 8) != 0) {
    // Mostly tensors the body made: an argument returned as it is, a view of one or one changed
    // in place is the caller's storage, which a discard frees (a finding of the released
    // function, drawn one time in eight).
    std::vector<int> made;
    for (int c : candidates) {
      if (!values_[static_cast<size_t>(c)].of_input) made.push_back(c);
    }
    if (!made.empty()) candidates = made;
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

}  // namespace case_building

namespace {

using case_building::SegmentBuilder;
using case_building::ValueInfo;

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
  // Sometimes an integer or a bool tensor, for arguments that are tensors but not differentiable:
  // a bool one twice as often, since an integer tensor is also what argmax makes (a bool tensor
  // argument was at 1 % of cases, the corner's floor).
  switch (choose_in_range(0, 6)) {
    case 3: c.leaves.push_back(Leaf{{rows, cols}, DType::int64, false, Fill::randn}); break;
    case 4:
    case 5: c.leaves.push_back(Leaf{{rows}, DType::boolean, false, Fill::randn}); break;
    default: break;
  }
  std::vector<ValueInfo> inputs;
  for (const Leaf& leaf : c.leaves) {
    const bool floating = !leaf.dtype || (*leaf.dtype != DType::int64 && *leaf.dtype != DType::boolean);
    inputs.push_back(ValueInfo{ValueInfo::Kind::tensor, leaf.shape, floating, leaf.requires_grad});
  }
  SegmentBuilder root(options, inputs, 0, inputs);
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
