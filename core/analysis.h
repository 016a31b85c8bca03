// One analysis of a case: what is known of each value without running it (its kind, dtype,
// shape, whether it requires grad, is a leaf, a view, contiguous). Each op kind has its rule in
// one place, an exhaustive visit (core/analysis.cpp): an op kind added to core/case.h without a
// rule here does not compile. Validation reads the shapes (a value's size is known before
// anything is allocated for it), the generator's census (case_features) and the fuzzer's
// feedback read the rest. docs/adding-an-op.md lists what else a new op touches.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/case.h"

namespace recheck {

// A tensor's sizes, shared rather than copied (a hostile file's fork of millions of arguments
// must not copy a shape per argument).
using Shape = std::shared_ptr<const std::vector<int64_t>>;
Shape make_shape(std::vector<int64_t> dims);

struct ValueFacts {
  enum class Kind : uint8_t { tensor, none, literal };
  // Null: not a tensor, or made by an op whose inputs do not fit together (it raises when it
  // runs). The ops follow libtorch's shape rules (core/shapes.h).
  Shape shape;
  DType dtype = DType::float32;
  Kind kind = Kind::tensor;
  bool requires_grad = false;
  bool leaf = false;
  bool view = false;        // made by a view op: it shares its base's storage
  bool contiguous = true;
  bool floating() const { return dtype != DType::int64 && dtype != DType::boolean; }
};

ValueFacts leaf_facts(const Case& c, const Leaf& leaf);

// A checkpoint's argument: the facts of the value it names (none where it names no value), or
// of a literal or None.
ValueFacts arg_facts(const Arg& arg, const std::vector<ValueFacts>& values);

// A value as a checkpoint's or a fork's body receives it: never a leaf there (the checkpoint
// detaches its tensor arguments; a fork's body is called inside it).
ValueFacts as_body_input(ValueFacts facts);

// What a plain op (every op but checkpoint and fork, whose bodies the caller walks) makes from
// `values`: one value, or none (stash). `leaves`: the case's leaves' facts (leaf_facts), which
// a capture reads wherever it sits. `copies`, when given: the elements of the largest temporary
// it makes on the way (matmul's operands expanded to the batch sizes). The op's references must
// be defined (validation checks them first, a capture's leaf too).
std::vector<ValueFacts> plain_op_facts(const Op& op, const std::vector<ValueFacts>& values,
                                       const std::vector<ValueFacts>& leaves, int64_t* copies = nullptr);

// leaf_facts of every leaf of `c`, in order.
std::vector<ValueFacts> leaves_facts(const Case& c);

// A checkpoint's outputs from its body's: the Function's tensor outputs are new non-leaf
// tensors, and the floating ones require grad when any tensor argument does.
std::vector<ValueFacts> checkpoint_output_facts(const std::vector<ValueFacts>& args,
                                                const std::vector<ValueFacts>& body_outputs);

}  // namespace recheck
