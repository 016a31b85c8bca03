// The corners of checkpointing a case reaches (case_features): what the generator's distribution
// is measured in, and what fuzz-seeds keeps inputs for.
#include "properties/generator.h"

#include <set>

namespace recheck {

namespace {

// What the analysis knows of a value without running the case.
struct Facts {
  enum class Kind { tensor, none, literal };
  Kind kind = Kind::tensor;
  DType dtype = DType::float32;
  bool requires_grad = false;
  bool leaf = false;
  bool view = false;
  bool contiguous = true;

  // The facts of a new tensor computed from this one: same kind, dtype and requires_grad, but
  // a fresh, contiguous non-leaf that is nobody's view.
  Facts computed() const {
    Facts f = *this;
    f.leaf = false;
    f.view = false;
    f.contiguous = true;
    return f;
  }
};

class FeatureWalker {
 public:
  explicit FeatureWalker(std::set<std::string>& out) : out_(out) {}

  // Returns the facts of the segment's outputs.
  std::vector<Facts> walk(const Segment& segment, std::vector<Facts> values, int depth, bool in_fork) {
    const size_t input_count = values.size();
    std::vector<bool> read(values.size(), false);
    int checkpoints = 0;
    auto mark = [&](int ref) {
      if (static_cast<size_t>(ref) < read.size()) read[ref] = true;
    };
    for (const Op& op : segment.ops) {
      for (int ref : op_inputs(op)) mark(ref);
      std::vector<Facts> produced;
      auto like = [&](int x) { return values.at(x).computed(); };
      if (const auto* u = std::get_if<Unary>(&op)) produced.push_back(like(u->x));
      if (const auto* b = std::get_if<Binary>(&op)) {
        Facts f = like(b->a);
        f.requires_grad = values.at(b->a).requires_grad || values.at(b->b).requires_grad;
        produced.push_back(f);
      }
      if (const auto* m = std::get_if<Matmul>(&op)) {
        Facts f = like(m->a);
        f.requires_grad = values.at(m->a).requires_grad || values.at(m->b).requires_grad;
        produced.push_back(f);
      }
      if (const auto* v = std::get_if<View>(&op)) {
        Facts f = values.at(v->x);
        f.leaf = false;
        f.view = v->fn != View::Fn::flatten || f.contiguous;  // reshape of a non-contiguous tensor copies
        f.contiguous = f.contiguous && v->fn != View::Fn::transpose;
        produced.push_back(f);
      }
      if (const auto* i = std::get_if<InPlace>(&op)) {
        out_.insert(static_cast<size_t>(i->x) < input_count && depth > 0 ? "in-place on a body input"
                                                                        : "in-place on an intermediate");
        produced.push_back(values.at(i->x));
      }
      if (const auto* r = std::get_if<Reduce>(&op)) produced.push_back(like(r->x));
      if (std::holds_alternative<Argmax>(op)) {
        Facts f;
        f.dtype = DType::int64;
        produced.push_back(f);
      }
      if (const auto* r = std::get_if<Random>(&op)) {
        out_.insert(std::string("random: ") + to_string(r->source));
        if (r->source == RngSource::tracker && depth > 0) out_.insert("tracker draw inside a checkpoint");
        produced.push_back(like(r->x));
      }
      if (const auto* s = std::get_if<Stash>(&op)) {
        out_.insert(static_cast<size_t>(s->x) < input_count && depth > 0 ? "stash of a body input" : "stash");
      }
      if (const auto* r = std::get_if<Raise>(&op)) {
        out_.insert(r->when == Raise::When::always ? "raise in forward" : "raise in recomputation");
        produced.push_back(like(r->x));
      }
      if (const auto* f = std::get_if<Fork>(&op)) {
        out_.insert("tracker fork");
        if (depth > 0) out_.insert("tracker fork inside a checkpoint");
        std::vector<Facts> args;
        for (int ref : f->args) args.push_back(values.at(ref));
        for (Facts& a : args) a.leaf = false;
        produced = walk(*f->body, args, depth, true);
      }
      if (const auto* c = std::get_if<Checkpoint>(&op)) {
        ++checkpoints;
        produced = walk_checkpoint(*c, values, input_count, depth, in_fork);
      }
      for (Facts& f : produced) {
        values.push_back(f);
        read.push_back(false);
      }
    }
    if (checkpoints >= 2) out_.insert("sibling checkpoints");
    std::vector<Facts> outputs;
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
  std::vector<Facts> walk_checkpoint(const Checkpoint& c, const std::vector<Facts>& values, size_t input_count,
                                     int depth, bool in_fork) {
    out_.insert("max checkpoint depth " + std::to_string(depth + 1));
    if (in_fork) out_.insert("checkpoint inside a tracker fork");
    if (c.distribute) out_.insert("distribute_saved_activations");
    std::vector<Facts> args;
    std::set<std::string> seen;
    bool any_requires_grad = false;
    for (size_t a = 0; a < c.args.size(); ++a) {
      const Arg& arg = c.args[a];
      const std::string key = show_arg(arg);
      if (!seen.insert(key).second) out_.insert("arg: the same value twice");
      Facts f;
      if (const auto* ref = std::get_if<Ref>(&arg)) {
        f = values.at(ref->value);
        if (f.kind == Facts::Kind::tensor) {
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
          any_requires_grad = any_requires_grad || f.requires_grad;
        } else {
          out_.insert(f.kind == Facts::Kind::none ? "arg: None" : "arg: literal passed on");
        }
      } else if (std::holds_alternative<None>(arg)) {
        f.kind = Facts::Kind::none;
        out_.insert("arg: None");
      } else {
        f.kind = Facts::Kind::literal;
        if (std::holds_alternative<int64_t>(arg)) out_.insert("arg: int");
        if (std::holds_alternative<double>(arg)) out_.insert("arg: float");
        if (std::holds_alternative<bool>(arg)) out_.insert("arg: bool");
        if (std::holds_alternative<std::string>(arg)) out_.insert("arg: str");
      }
      args.push_back(f);
    }
    std::vector<Facts> inside = args;
    for (Facts& f : inside) f.leaf = false;
    const std::vector<Facts> body_outputs = walk(*c.body, inside, depth + 1, false);
    if (body_outputs.size() >= 2) out_.insert("body: several outputs");
    for (size_t o = 0; o < body_outputs.size(); ++o) {
      const Facts& f = body_outputs[o];
      if (f.kind != Facts::Kind::tensor) out_.insert("body output: non-tensor");
      else if (!f.requires_grad) out_.insert("body output: not requiring grad");
      const int ref = c.body->outputs[o];
      if (ref < static_cast<int>(c.args.size())) out_.insert("body output: an input returned as is");
    }
    // The Function's tensor outputs require grad when any tensor argument does.
    std::vector<Facts> outputs;
    for (const Facts& body_output : body_outputs) {
      Facts& f = outputs.emplace_back(body_output.computed());
      if (f.kind == Facts::Kind::tensor && f.dtype != DType::int64 && f.dtype != DType::boolean) {
        f.requires_grad = any_requires_grad;
      }
    }
    return outputs;
  }

  std::set<std::string>& out_;
};

}  // namespace

std::vector<std::string> case_features(const Case& c) {
  std::set<std::string> features;
  features.insert(std::string("dtype: ") + to_string(c.dtype));
  features.insert("iterations: " + std::to_string(c.iterations));
  for (const Leaf& leaf : c.leaves) {
    int64_t elements = 1;
    for (int64_t d : leaf.shape) elements *= d;
    if (elements >= 64 * 64) features.insert("large tensors (4,096 elements or more)");
  }
  std::vector<Facts> leaves;
  for (const Leaf& leaf : c.leaves) {
    Facts f;
    f.dtype = leaf_dtype(c, leaf);
    f.requires_grad = leaf.requires_grad;
    f.leaf = true;
    leaves.push_back(f);
  }
  FeatureWalker(features).walk(c.root, leaves, 0, false);
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
