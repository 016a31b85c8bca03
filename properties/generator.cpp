#include "properties/generator.h"

#include <algorithm>

#include "suts/rng.h"

namespace recheck {

namespace {

// What the generator knows of a value while it builds a segment, to pick fitting operands.
struct ValueInfo {
  enum class Kind { tensor, none, literal };
  Kind kind = Kind::tensor;
  std::vector<int64_t> shape;
  bool floating = true;
  bool requires_grad = false;
};

bool is_float_tensor(const ValueInfo& v) { return v.kind == ValueInfo::Kind::tensor && v.floating; }

template <typename T>
T pick(const std::vector<T>& options) {
  return *rc::gen::elementOf(options);
}

// Picks among weighted alternatives; shrinking moves towards the first one.
size_t pick_weighted(std::initializer_list<std::pair<std::size_t, size_t>> weights) {
  return *rc::gen::weightedElement<size_t>(weights);
}

class SegmentBuilder {
 public:
  SegmentBuilder(const GenOptions& options, int depth, std::vector<ValueInfo> inputs)
      : options_(options), depth_(depth), values_(std::move(inputs)), input_count_(values_.size()) {}

  Segment build(bool is_root) {
    const int op_count = *rc::gen::inRange(1, options_.max_ops + 1);
    for (int i = 0; i < op_count; ++i) add_op();
    choose_outputs(is_root);
    return std::move(segment_);
  }

  const std::vector<ValueInfo>& output_infos() const { return output_infos_; }

 private:
  enum OpKind : size_t { kUnary, kBinary, kMatmul, kView, kReduce, kArgmax, kRandom, kStash, kCheckpoint, kRaise };

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
      if (values_[i].kind == ValueInfo::Kind::tensor) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  void push(Op op, ValueInfo info) {
    segment_.ops.push_back(std::move(op));
    values_.push_back(std::move(info));
  }

  void add_op() {
    const std::vector<int> floats = float_tensors();
    if (floats.empty()) return;  // a body whose inputs are all None or literals computes nothing
    const size_t nested = depth_ < options_.max_depth ? 18 : 0;
    const size_t kind = pick_weighted({{20, kUnary}, {15, kBinary}, {6, kMatmul}, {8, kView}, {3, kReduce},
                                       {2, kArgmax}, {12, kRandom}, {5, kStash}, {nested, kCheckpoint},
                                       {1, kRaise}});
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
        const int b = pick(same_shape);  // may be x itself: the same tensor twice
        const auto fn = pick(std::vector<Binary::Fn>{Binary::Fn::add, Binary::Fn::mul, Binary::Fn::sub});
        ValueInfo out = xi;
        out.requires_grad = xi.requires_grad || values_[b].requires_grad;
        push(Binary{fn, x, b}, out);
        // In place on an intermediate no op has read yet: add and sub save nothing of their output.
        if (fn != Binary::Fn::mul && *rc::gen::inRange(0, 4) == 0) {
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
        op.source = pick(std::vector<RngSource>{RngSource::cpu, RngSource::device, RngSource::tracker});
        if (op.source == RngSource::tracker) {
          op.tracker_state = *rc::gen::weightedElement<std::string>(
              {{10, rng::kModelParallelRngTrackerName},
               {5, rng::kDataParallelRngTrackerName},
               {4, rng::kExpertParallelRngTrackerName},
               {1, "no-such-rng"}});  // an unknown state: Megatron's tracker raises
        }
        op.p = op.fn == Random::Fn::dropout ? pick(std::vector<double>{0.5, 0.25, 0.1}) : 0.1;
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
        const int target = !inputs.empty() && *rc::gen::inRange(0, 3) != 0 ? pick(inputs) : pick(all);
        segment_.ops.push_back(Stash{target});
        return;
      }
      case kCheckpoint:
        add_checkpoint();
        return;
      case kRaise:
        push(Raise{x}, xi);
        return;
    }
  }

  Arg pick_arg(std::vector<ValueInfo>& child_inputs) {
    const size_t kind = pick_weighted({{30, 0}, {3, 1}, {2, 2}, {1, 3}});
    if (kind == 0 || kind == 2) {
      std::vector<int> candidates = kind == 0 ? float_tensors() : tensors();
      const int ref = pick(candidates);
      child_inputs.push_back(values_[ref]);
      return Ref{ref};
    }
    if (kind == 1) {
      child_inputs.push_back(ValueInfo{ValueInfo::Kind::none, {}, false, false});
      return None{};
    }
    child_inputs.push_back(ValueInfo{ValueInfo::Kind::literal, {}, false, false});
    switch (*rc::gen::inRange(0, 4)) {
      case 0: return int64_t{3};
      case 1: return 0.5;
      case 2: return true;
      default: return std::string("mode");
    }
  }

  void add_checkpoint() {
    Checkpoint op;
    std::vector<ValueInfo> child_inputs;
    const int arg_count = *rc::gen::inRange(1, 4);
    for (int i = 0; i < arg_count; ++i) op.args.push_back(pick_arg(child_inputs));
    op.distribute = *rc::gen::inRange(0, 8) == 0;
    SegmentBuilder child(options_, depth_ + 1, child_inputs);
    op.body = child.build(/*is_root=*/false);
    segment_.ops.push_back(std::move(op));
    for (const ValueInfo& info : child.output_infos()) values_.push_back(info);
  }

  void choose_outputs(bool is_root) {
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
    const int count = *rc::gen::inRange(1, std::min<int>(3, static_cast<int>(candidates.size())) + 1);
    for (int i = 0; i < count; ++i) {
      const int ref = pick(candidates);
      segment_.outputs.push_back(ref);
      output_infos_.push_back(values_[ref]);
    }
  }

  const GenOptions& options_;
  int depth_;
  std::vector<ValueInfo> values_;
  size_t input_count_;
  Segment segment_;
  std::vector<ValueInfo> output_infos_;
};

}  // namespace

rc::Gen<Case> gen_case(const GenOptions& options) {
  return rc::gen::exec([options] {
    Case c;
    c.seed = *rc::gen::inRange<uint64_t>(0, 1000000);
    c.dtype = *rc::gen::weightedElement<DType>({{4, DType::float32}, {1, DType::float64}});
    c.device = options.device;
    c.iterations = *rc::gen::weightedElement<int>({{3, 1}, {2, 2}, {1, 3}});
    const int64_t rows = *rc::gen::inRange<int64_t>(1, 5);
    const int64_t cols = *rc::gen::inRange<int64_t>(1, 5);
    // An input, a square parameter, and sometimes a second input.
    c.leaves.push_back(Leaf{{rows, cols}, std::nullopt, *rc::gen::weightedElement<bool>({{3, true}, {1, false}}), Fill::randn});
    c.leaves.push_back(Leaf{{cols, cols}, std::nullopt, true, Fill::randn});
    if (*rc::gen::inRange(0, 2) == 0) {
      c.leaves.push_back(Leaf{{rows, cols}, std::nullopt, *rc::gen::inRange(0, 2) == 0, Fill::randn});
    }
    std::vector<ValueInfo> inputs;
    for (const Leaf& leaf : c.leaves) inputs.push_back(ValueInfo{ValueInfo::Kind::tensor, leaf.shape, true, leaf.requires_grad});
    SegmentBuilder root(options, 0, inputs);
    c.root = root.build(/*is_root=*/true);
    return c;
  });
}

Case draw_case(const GenOptions& options, uint64_t seed) {
  return gen_case(options)(rc::Random(seed), rc::kNominalSize).value();
}

}  // namespace recheck
