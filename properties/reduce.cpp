#include "properties/reduce.h"

#include <algorithm>
#include <set>
#include <vector>

namespace recheck {

namespace {

// Every value number an op reads directly (not inside its body), by reference, to rewrite.
void for_each_ref(Op& op, const std::function<void(int&)>& f) {
  struct Visit {
    const std::function<void(int&)>& f;
    void operator()(Unary& o) const { f(o.x); }
    void operator()(Binary& o) const { f(o.a); f(o.b); }
    void operator()(Matmul& o) const { f(o.a); f(o.b); }
    void operator()(View& o) const { f(o.x); }
    void operator()(InPlace& o) const { f(o.x); }
    void operator()(Reduce& o) const { f(o.x); }
    void operator()(Argmax& o) const { f(o.x); }
    void operator()(Random& o) const { f(o.x); }
    void operator()(Stash& o) const { f(o.x); }
    void operator()(Raise& o) const { f(o.x); }
    void operator()(Hook& o) const { f(o.x); }
    void operator()(ModuleState& o) const { f(o.x); }
    void operator()(Checkpoint& o) const {
      for (Arg& arg : o.args) {
        if (auto* ref = std::get_if<Ref>(&arg)) f(ref->value);
      }
    }
    void operator()(Fork& o) const {
      for (int& a : o.args) f(a);
    }
    void operator()(Autocast& o) const {
      for (int& a : o.args) f(a);
    }
    void operator()(Discard& o) const {
      for (int& c : o.checkpoints) f(c);
      f(o.hook);
    }
    void operator()(Capture&) const {}  // a root leaf: drop_leaf renumbers it
  };
  std::visit(Visit{f}, op);
}

Segment* mutable_body(Op& op) {
  if (auto* ck = std::get_if<Checkpoint>(&op)) return &*ck->body;
  if (auto* fork = std::get_if<Fork>(&op)) return &*fork->body;
  if (auto* autocast = std::get_if<Autocast>(&op)) return &*autocast->body;
  return nullptr;
}

// The arguments of a region run inline (a fork or an autocast region): the values it names.
std::vector<int>& region_args(Op& op) {
  if (auto* autocast = std::get_if<Autocast>(&op)) return autocast->args;
  return std::get<Fork>(op).args;
}

// A mapping that cannot be made (a value still read that has no replacement).
struct Impossible {};
constexpr int kGone = -1;

// Rewrites the references of ops [from, end) and of the outputs with `map`; throws Impossible
// when one maps to kGone.
void remap(Segment& segment, std::size_t from, const std::function<int(int)>& map) {
  auto apply = [&](int& r) {
    const int m = map(r);
    if (m == kGone) throw Impossible{};
    r = m;
  };
  for (std::size_t i = from; i < segment.ops.size(); ++i) for_each_ref(segment.ops[i], apply);
  for (int& r : segment.outputs) apply(r);
}

int first_value_of(const Segment& segment, int input_count, std::size_t op_index) {
  int v = input_count;
  for (std::size_t i = 0; i < op_index; ++i) v += op_output_count(segment.ops[i]);
  return v;
}

// A segment of the case, by the op indices leading to it from the root, with its input count.
struct Place {
  std::vector<std::size_t> path;
};

void collect_places(const Segment& segment, std::vector<std::size_t>& path, std::vector<Place>& out) {
  out.push_back(Place{path});
  for (std::size_t i = 0; i < segment.ops.size(); ++i) {
    if (const Segment* body = op_body(segment.ops[i])) {
      path.push_back(i);
      collect_places(*body, path, out);
      path.pop_back();
    }
  }
}

struct Located {
  Segment* segment;
  int input_count;
  Segment* parent;       // null for the root
  std::size_t op_index;  // of the op owning `segment` in `parent`
  int parent_input_count;
};

Located locate(Case& c, const std::vector<std::size_t>& path) {
  Located at{&c.root, static_cast<int>(c.leaves.size()), nullptr, 0, 0};
  for (std::size_t index : path) {
    Op& op = at.segment->ops[index];
    const int inputs = std::holds_alternative<Checkpoint>(op) ? static_cast<int>(std::get<Checkpoint>(op).args.size())
                                                               : static_cast<int>(region_args(op).size());
    at = Located{mutable_body(op), inputs, at.segment, index, at.input_count};
  }
  return at;
}

// ---- the steps: each makes a candidate from `c`, or throws Impossible ------------------------

// Removes op `k`; what read its outputs reads its first input instead.
Case drop_op(const Case& c, const std::vector<std::size_t>& path, std::size_t k) {
  Case out = c;
  Located at = locate(out, path);
  Segment& s = *at.segment;
  const int start = first_value_of(s, at.input_count, k);
  const int count = op_output_count(s.ops[k]);
  const std::vector<int> inputs = op_inputs(s.ops[k]);
  const int replacement = inputs.empty() ? kGone : inputs[0];
  s.ops.erase(s.ops.begin() + static_cast<std::ptrdiff_t>(k));
  remap(s, k, [&](int r) { return r < start ? r : r < start + count ? replacement : r - count; });
  return out;
}

// Replaces checkpoint or fork `k` by its body, inline.
Case inline_body(const Case& c, const std::vector<std::size_t>& path, std::size_t k) {
  Case out = c;
  Located at = locate(out, path);
  Segment& s = *at.segment;
  Op op = s.ops[k];
  const Segment body = *mutable_body(op);
  std::vector<int> arg_values;  // body input -> parent value, or kGone for a literal
  if (const auto* ck = std::get_if<Checkpoint>(&op)) {
    for (const Arg& arg : ck->args) arg_values.push_back(std::holds_alternative<Ref>(arg) ? std::get<Ref>(arg).value : kGone);
  } else {
    arg_values = region_args(op);
  }
  const int m = static_cast<int>(arg_values.size());
  const int start = first_value_of(s, at.input_count, k);
  auto body_to_parent = [&](int b) { return b < m ? arg_values[static_cast<std::size_t>(b)] : start + (b - m); };
  std::vector<Op> inlined = body.ops;
  for (Op& o : inlined) {
    for_each_ref(o, [&](int& r) {
      r = body_to_parent(r);
      if (r == kGone) throw Impossible{};
    });
  }
  const int outputs = static_cast<int>(body.outputs.size());
  const int added = segment_value_count(body, m) - m;
  s.ops.erase(s.ops.begin() + static_cast<std::ptrdiff_t>(k));
  s.ops.insert(s.ops.begin() + static_cast<std::ptrdiff_t>(k), inlined.begin(), inlined.end());
  remap(s, k + inlined.size(), [&](int r) {
    if (r < start) return r;
    if (r < start + outputs) return body_to_parent(body.outputs[static_cast<std::size_t>(r - start)]);
    return r - outputs + added;
  });
  return out;
}

// Drops argument `j` of checkpoint or fork `k`, when its body does not read it.
Case drop_arg(const Case& c, const std::vector<std::size_t>& path, std::size_t k, std::size_t j) {
  Case out = c;
  Located at = locate(out, path);
  Op& op = at.segment->ops[k];
  if (auto* ck = std::get_if<Checkpoint>(&op)) {
    ck->args.erase(ck->args.begin() + static_cast<std::ptrdiff_t>(j));
  } else {
    auto& args = region_args(op);
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(j));
  }
  Segment& body = *mutable_body(op);
  const int dropped = static_cast<int>(j);
  remap(body, 0, [&](int r) { return r < dropped ? r : r == dropped ? kGone : r - 1; });
  return out;
}

// Drops output `i` of the segment at `path`; for a body, only when the parent does not read it.
Case drop_output(const Case& c, const std::vector<std::size_t>& path, std::size_t i) {
  Case out = c;
  Located at = locate(out, path);
  at.segment->outputs.erase(at.segment->outputs.begin() + static_cast<std::ptrdiff_t>(i));
  if (at.parent != nullptr) {
    const int value = first_value_of(*at.parent, at.parent_input_count, at.op_index) + static_cast<int>(i);
    remap(*at.parent, at.op_index + 1, [&](int r) { return r < value ? r : r == value ? kGone : r - 1; });
  }
  return out;
}

// Checkpoint `k` at `path` without call option `name`: the function's default.
Case drop_option(const Case& c, const std::vector<std::size_t>& path, std::size_t k, const std::string& name) {
  Case o = c;
  const Located at = locate(o, path);
  auto* ck = std::get_if<Checkpoint>(&at.segment->ops.at(k));
  if (ck == nullptr || ck->options.erase(name) == 0) throw Impossible{};
  return o;
}

// Renumbers the leaf of every capture in `segment` and the bodies it nests; throws Impossible
// where one maps to kGone.
void remap_captures(Segment& segment, const std::function<int(int)>& map) {
  for (Op& op : segment.ops) {
    if (auto* capture = std::get_if<Capture>(&op)) {
      capture->leaf = map(capture->leaf);
      if (capture->leaf == kGone) throw Impossible{};
    }
    if (Segment* body = mutable_body(op)) remap_captures(*body, map);
  }
}

// Renumbers the leaves the training loop differentiates, dropping those `map` sends to kGone;
// throws Impossible where torch.autograd.grad would be left without any.
void remap_backward_inputs(Case& c, const std::function<int(int)>& map) {
  std::vector<int> kept;
  for (int n : c.backward.inputs) {
    if (map(n) != kGone) kept.push_back(map(n));
  }
  if (kept.empty() && c.backward.call == Backward::Call::grad) throw Impossible{};
  c.backward.inputs = kept;
}

Case drop_leaf(const Case& c, std::size_t j) {
  Case out = c;
  out.leaves.erase(out.leaves.begin() + static_cast<std::ptrdiff_t>(j));
  const int dropped = static_cast<int>(j);
  const auto map = [&](int r) { return r < dropped ? r : r == dropped ? kGone : r - 1; };
  remap(out.root, 0, map);
  remap_captures(out.root, map);
  remap_backward_inputs(out, map);
  return out;
}

// Every dimension equal to `from`, in every leaf, becomes `to`: shapes that matched still match.
Case resize_dims(const Case& c, int64_t from, int64_t to) {
  Case out = c;
  for (Leaf& leaf : out.leaves) {
    for (int64_t& d : leaf.shape) {
      if (d == from) d = to;
    }
  }
  return out;
}

// One step of a pass: a candidate made from the current case, or Impossible. A kept step that
// `restarts` ends the pass (it changed what the places of the pass point at); one that does not
// lets the pass go on with the next step, made from the new case.
struct Step {
  std::function<Case(const Case&)> make;
  bool restarts = true;
};

class Reducer {
 public:
  Reducer(int batch, const std::function<std::vector<bool>(const std::vector<Case>&)>& still_fail, ReduceStats* stats,
          const std::function<bool()>& stop, const Limits& limits)
      : batch_(std::max(batch, 1)), still_fail_(still_fail), stats_(stats), stop_(stop), limits_(limits) {}

  // True once the caller asked to stop: every later attempt fails without building anything.
  bool stopped() {
    if (!stopped_ && stop_ && stop_()) stopped_ = true;
    return stopped_;
  }

  // One pass over every step kind, largest first; true when something was kept.
  bool pass(Case& c) {
    const std::vector<Step> steps = steps_of(c);
    bool changed = false;
    std::size_t next = 0;
    while (next < steps.size()) {
      // The next `batch_` valid candidates, in order, made from the current case.
      std::vector<Case> candidates;
      std::vector<std::size_t> made_by;
      for (; next < steps.size() && candidates.size() < static_cast<std::size_t>(batch_); ++next) {
        if (stopped()) return changed;
        try {
          Case candidate = steps[next].make(c);
          validate(candidate, limits_);
          candidates.push_back(std::move(candidate));
          made_by.push_back(next);
        } catch (const Impossible&) {
        } catch (const CaseError&) {
        }
      }
      if (candidates.empty()) break;
      if (stats_ != nullptr) stats_->candidates += static_cast<int>(candidates.size());
      const std::vector<bool> fails = still_fail_(candidates);
      std::size_t kept = 0;
      while (kept < candidates.size() && !(kept < fails.size() && fails[kept])) ++kept;
      if (kept == candidates.size()) continue;
      if (stats_ != nullptr) ++stats_->accepted;
      c = std::move(candidates[kept]);
      changed = true;
      if (steps[made_by[kept]].restarts) return true;
      next = made_by[kept] + 1;
    }
    return changed;
  }

 private:
  // Every step of a pass over `c`, in the order they are tried. The steps that restart the pass
  // point into `c` by place; the last ones (dtype, iterations, requires_grad) make their
  // candidate from whatever case they are given.
  static std::vector<Step> steps_of(const Case& c) {
    std::vector<Step> steps;
    auto restarting = [&](std::function<Case(const Case&)> make) { steps.push_back(Step{std::move(make), true}); };
    std::vector<Place> places;
    std::vector<std::size_t> path;
    collect_places(c.root, path, places);
    // Deepest segments last, so that indices of shallower places stay valid while they change:
    // a kept step restarts the pass with fresh places.
    Case scratch = c;
    for (const Place& place : places) {
      const Located at = locate(scratch, place.path);
      for (std::size_t k = at.segment->ops.size(); k-- > 0;) {
        if (op_body(at.segment->ops[k]) != nullptr) {
          restarting([p = place.path, k](const Case& from) { return inline_body(from, p, k); });
        }
      }
    }
    for (const Place& place : places) {
      const Located at = locate(scratch, place.path);
      for (std::size_t k = at.segment->ops.size(); k-- > 0;) {
        restarting([p = place.path, k](const Case& from) { return drop_op(from, p, k); });
      }
    }
    for (const Place& place : places) {
      const Located at = locate(scratch, place.path);
      for (std::size_t k = 0; k < at.segment->ops.size(); ++k) {
        const Op& op = at.segment->ops[k];
        std::size_t args = 0;
        if (const auto* ck = std::get_if<Checkpoint>(&op)) args = ck->args.size();
        if (const auto* fork = std::get_if<Fork>(&op)) args = fork->args.size();
        if (const auto* autocast = std::get_if<Autocast>(&op)) args = autocast->args.size();
        for (std::size_t j = args; j-- > 0;) {
          restarting([p = place.path, k, j](const Case& from) { return drop_arg(from, p, k, j); });
        }
      }
      if (at.segment->outputs.size() > 1) {
        for (std::size_t i = at.segment->outputs.size(); i-- > 0;) {
          restarting([p = place.path, i](const Case& from) { return drop_output(from, p, i); });
        }
      }
    }
    // A checkpoint's call options back to the function's defaults, one at a time.
    for (const Place& place : places) {
      const Located at = locate(scratch, place.path);
      for (std::size_t k = 0; k < at.segment->ops.size(); ++k) {
        const auto* ck = std::get_if<Checkpoint>(&at.segment->ops[k]);
        if (ck == nullptr) continue;
        for (const auto& [name, value] : ck->options) {
          restarting([p = place.path, k, name = name](const Case& from) { return drop_option(from, p, k, name); });
        }
      }
    }
    for (std::size_t j = c.leaves.size(); j-- > 0;) {
      restarting([j](const Case& from) { return drop_leaf(from, j); });
    }
    std::set<int64_t> dims;
    for (const Leaf& leaf : c.leaves) dims.insert(leaf.shape.begin(), leaf.shape.end());
    for (int64_t d : dims) {
      if (d > 1) restarting([d](const Case& from) { return resize_dims(from, d, 1); });
      if (d > 2) restarting([d](const Case& from) { return resize_dims(from, d, d / 2); });
    }
    auto going_on = [&](std::function<Case(const Case&)> make) { steps.push_back(Step{std::move(make), false}); };
    if (c.dtype != DType::float32) {
      going_on([](const Case& from) { Case o = from; o.dtype = DType::float32; return o; });
    }
    if (c.iterations > 1) {
      going_on([](const Case& from) { Case o = from; o.iterations = 1; return o; });
    }
    if (c.continue_after_error) {
      going_on([](const Case& from) { Case o = from; o.continue_after_error = false; return o; });
    }
    if (c.backward.twice) going_on([](const Case& from) { Case o = from; o.backward.twice = false; return o; });
    if (c.backward.call == Backward::Call::grad) {
      going_on([](const Case& from) { Case o = from; o.backward.call = Backward::Call::backward; return o; });
    }
    if (!c.backward.inputs.empty()) {
      going_on([](const Case& from) {
        Case o = from;
        if (o.backward.call == Backward::Call::grad) throw Impossible{};
        o.backward.inputs.clear();
        return o;
      });
    }
    for (std::size_t j = 0; j < c.leaves.size(); ++j) {
      if (c.leaves[j].requires_grad) {
        going_on([j](const Case& from) {
          Case o = from;
          o.leaves[j].requires_grad = false;
          const int leaf = static_cast<int>(j);
          remap_backward_inputs(o, [leaf](int n) { return n == leaf ? kGone : n; });
          return o;
        });
      }
    }
    return steps;
  }

  int batch_;
  const std::function<std::vector<bool>(const std::vector<Case>&)>& still_fail_;
  ReduceStats* stats_;
  const std::function<bool()>& stop_;
  const Limits& limits_;
  bool stopped_ = false;
};

}  // namespace

Case reduce_case_batched(const Case& c, int batch,
                         const std::function<std::vector<bool>(const std::vector<Case>&)>& still_fail,
                         ReduceStats* stats, const std::function<bool()>& stop, const Limits& limits) {
  Case current = c;
  Reducer reducer(batch, still_fail, stats, stop, limits);
  while (reducer.pass(current) && !reducer.stopped()) {
  }
  return current;
}

Case reduce_case(const Case& c, const std::function<bool(const Case&)>& still_fails, ReduceStats* stats,
                 const std::function<bool()>& stop, const Limits& limits) {
  return reduce_case_batched(
      c, 1, [&](const std::vector<Case>& candidates) { return std::vector<bool>{still_fails(candidates.front())}; },
      stats, stop, limits);
}

std::optional<FailureSignature> find_alarm(const CaseResult& result, const std::string& property) {
  for (const PropertyResult& r : result.results) {
    if (property.empty() ? is_alarm(r.classification) : r.property == property && r.classification != Classification::pass) {
      return FailureSignature{r.property, r.classification, ""};
    }
  }
  return std::nullopt;
}

bool shows(const CaseResult& result, const FailureSignature& signature) {
  if (!result.skipped.empty()) return false;
  for (const PropertyResult& r : result.results) {
    if (r.property == signature.property) {
      return r.classification == signature.classification && (signature.cause.empty() || r.cause == signature.cause);
    }
  }
  return false;
}

}  // namespace recheck
