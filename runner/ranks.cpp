#include "runner/ranks.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "core/tensor_parallel.h"

namespace recheck::runner {

namespace {

// A file name of this process's own where the group meets: the FileStore makes it.
std::string rendezvous_file() {
  static std::atomic<int> made{0};
  return (std::filesystem::temp_directory_path() /
          ("recheck-group-" + std::to_string(getpid()) + "-" + std::to_string(made++)))
      .string();
}

}  // namespace

RankPeers::~RankPeers() {
  for (auto& peer : peers_) peer->stop();
  if (!rendezvous_.empty()) std::remove(rendezvous_.c_str());
}

void RankPeers::start(const std::function<void()>& prepare, const Job& job) {
  const int world_size = tensor_parallel_rank().world_size;
  if (world_size <= 1) return;
  rendezvous_ = rendezvous_file();
  std::remove(rendezvous_.c_str());
  TensorParallelRank rank = tensor_parallel_rank();
  rank.rendezvous = rendezvous_;
  for (int r = 1; r < world_size; ++r) {
    auto peer = std::make_unique<WorkerProcess>();
    rank.rank = r;
    peer->start(
        [&, rank](FILE* in, int out) {
          set_tensor_parallel_rank(rank);
          prepare();
          char* buffer = nullptr;
          std::size_t capacity = 0;
          for (ssize_t n; (n = getline(&buffer, &capacity, in)) > 0;) {
            std::string line(buffer, static_cast<std::size_t>(n));
            if (!line.empty() && line.back() == '\n') line.pop_back();
            job(line);
            write_all(out, "done\n");
          }
          std::free(buffer);
        },
        /*with_input=*/true, /*takes_interrupts=*/false);
    peers_.push_back(std::move(peer));
  }
  rank.rank = 0;
  set_tensor_parallel_rank(rank);
}

void RankPeers::send(const std::string& line) {
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (!peers_[i]->send(line + "\n")) {
      throw std::runtime_error("rank " + std::to_string(i + 1) + " of the tensor-parallel group " + peers_[i]->stop());
    }
  }
}

void RankPeers::wait() {
  for (size_t i = 0; i < peers_.size(); ++i) {
    const std::optional<std::string> answer = peers_[i]->read_line();
    if (answer == "done") continue;
    const std::string rank = "rank " + std::to_string(i + 1) + " of the tensor-parallel group";
    if (answer && answer->rfind("error ", 0) == 0) throw std::runtime_error(rank + " raised: " + answer->substr(6));
    throw std::runtime_error(rank + " " + peers_[i]->stop());
  }
  // Every rank has met in the group and checked a case: the file is no longer read.
  if (!rendezvous_.empty()) std::remove(rendezvous_.c_str());
  rendezvous_.clear();
}

}  // namespace recheck::runner
