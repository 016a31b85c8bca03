// libtorch's shape rules, worked out without tensors: validation holds every value a case makes
// to the element limit with them before anything runs, and the interpreter checks the real
// sizes with them again before an op allocates.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace recheck::shapes {

// The elements of a tensor of this shape; INT64_MAX where the count would not fit.
int64_t element_count(const std::vector<int64_t>& shape);

// Broadcasting (at::add and the like): sizes aligned from the right, equal or one of them 1.
// Nothing where the shapes do not fit together (the op raises).
std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// at::matmul: dot, matrix-vector, vector-matrix, matrix-matrix, and batches of them, the batch
// sizes broadcast. `copies`: the most elements of an operand expanded to the batch sizes, which
// libtorch's batched path makes when it cannot fold the batch into a matrix product (bounded as
// if it never could: a case that would fit when folded may be refused).
std::optional<std::vector<int64_t>> matmul(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                           int64_t* copies);

}  // namespace recheck::shapes
