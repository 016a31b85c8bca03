#include "core/tensor_parallel.h"

namespace recheck {

namespace {

TensorParallelRank& current() {
  static TensorParallelRank rank;
  return rank;
}

}  // namespace

const TensorParallelRank& tensor_parallel_rank() { return current(); }

void set_tensor_parallel_rank(const TensorParallelRank& rank) { current() = rank; }

}  // namespace recheck
