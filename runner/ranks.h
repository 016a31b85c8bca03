// The other ranks of a tensor-parallel group of more than one (core/tensor_parallel.h). The
// process that checks cases is rank 0; it forks a peer process for each other rank, which checks
// the same cases as rank 0 tells it to, so that each of Megatron's collectives (the split's
// chunk, the gather) has every participant. Each rank keeps its own chunk; only rank 0's verdicts
// count. The group meets through a file (torch.distributed's FileStore) and talks over loopback.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runner/worker_process.h"

namespace recheck::runner {

class RankPeers {
 public:
  // What every rank runs for each line rank 0 sends (a case's index, a case as JSON).
  using Job = std::function<void(const std::string& line)>;

  RankPeers() = default;
  RankPeers(const RankPeers&) = delete;
  RankPeers& operator=(const RankPeers&) = delete;
  ~RankPeers();

  // In the process that checks cases, before `prepare` starts torch.distributed there: with the
  // world size set for this process (tensor_parallel_rank) above 1, forks a peer for each other
  // rank, which sets its rank, runs `prepare` (meeting rank 0 in the group) and then `job` for
  // each line sent; makes this process rank 0. Nothing with one rank.
  void start(const std::function<void()>& prepare, const Job& job);
  bool active() const { return !peers_.empty(); }

  // Before rank 0 runs `line` itself: sends it to every peer.
  void send(const std::string& line);
  // After rank 0 ran it: waits until every peer has. Throws std::runtime_error naming the rank
  // that raised (with its error) or died (and how).
  void wait();

 private:
  std::vector<std::unique_ptr<WorkerProcess>> peers_;
  std::string rendezvous_;
};

}  // namespace recheck::runner
