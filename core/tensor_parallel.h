// The tensor-parallel group a process checks cases in. Megatron splits a checkpoint's saved
// input across it and gathers it back for the recomputation: Python variants run that through a
// torch.distributed group of this size (python/bridge.py start_tensor_parallel), every rank
// checking the same cases in a process of its own (runner/ranks.h), the verdicts taken on rank 0.
// Every rank seeds Megatron's tracker as rank 0 does, so that what a checkpoint distributes is
// the same tensor on every rank (replicated, as Megatron requires of it) and only the chunk each
// keeps differs.
// recheck's C++ port keeps one rank, so that a group of more needs Python variants only.
#pragma once

#include <string>

namespace recheck {

struct TensorParallelRank {
  int rank = 0;
  int world_size = 1;
  std::string rendezvous;  // the file where the ranks meet (torch.distributed's FileStore); "" for one
  int timeout_seconds = 120;  // the longest a collective waits for the other ranks
};

// This process's; rank 0 of 1 unless set (recheck run --world-size).
const TensorParallelRank& tensor_parallel_rank();
void set_tensor_parallel_rank(const TensorParallelRank& rank);

}  // namespace recheck
