// The ops that make tensors from tensors and touch nothing of the run but the RNG (no body, no
// stash, no iteration): what each does with libtorch, raising what Python's torch raises. The
// interpreter (core/interpreter.cpp) runs the others, and hands these here.
#pragma once

#include <cstdint>

#include "core/case.h"
#include "core/value.h"

namespace recheck::tensor_ops {

Values run(const Unary& op, const Values& v);
Values run(const Binary& op, const Values& v);
Values run(const Matmul& op, const Values& v);
Values run(const View& op, const Values& v);
Values run(const InPlace& op, const Values& v);
Values run(const Reduce& op, const Values& v);
Values run(const Argmax& op, const Values& v);
// `drawn`, when given, gets the fingerprint (core/op_trace.h) of the numbers the op took from its
// generator (the sample, before it meets the input): a recomputation must draw forward's. Only
// the fingerprint is kept: holding the sample would change what the run's memory shows.
Values run(const Random& op, const Values& v, uint64_t* drawn = nullptr);

// The value `op` reads, which must be a tensor whose storage holds its elements: TypeError or
// RuntimeError otherwise, as Python's torch raises.
const at::Tensor& expect_tensor(const Value& value, const char* op);

// The most elements a value an op makes may have (set_value_element_limit, core/interpreter.h).
void set_element_limit(int64_t elements);

}  // namespace recheck::tensor_ops
