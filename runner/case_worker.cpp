#include "runner/case_worker.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/rng.h"
#include "core/torch_compat.h"
#include "runner/interrupts.h"
#include "runner/ranks.h"
#include "runner/results_json.h"

namespace recheck::runner {

using nlohmann::json;

CaseResult skipped_for_memory() {
  CaseResult result;
  result.skipped = "the check process was killed by the kernel's out-of-memory killer: the machine ran out of memory";
  return result;
}

void check_can_run(const std::string& device, const std::string& file, const CheckpointImplementation& oracle,
                   const CheckpointImplementation& sut) {
  try {
    check_ready_to_run(device == "cuda", oracle, sut);
  } catch (const std::exception& error) {
    throw CaseError(file + ": cannot run this case here: " + first_line(error.what()));
  }
}

std::string device_missing(const std::string& device) {
  auto ask = [&] {
    try {
      rng::check_device_available(device == "cuda" ? rng::Device::cuda : rng::Device::cpu);
      return std::string();
    } catch (const std::exception& error) {
      return first_line(error.what());
    }
  };
  if (device != "cuda") return ask();
  static std::optional<std::string> answer;
  if (answer) return *answer;
  WorkerProcess asker;
  asker.start([&](FILE*, int to_parent) { write_all(to_parent, "why " + ask() + "\n"); }, false, false);
  const std::optional<std::string> line = asker.read_line();
  const std::string how = asker.stop();
  answer = line && line->rfind("why ", 0) == 0 && asker.status() == 0
               ? line->substr(4)
               : "the process that looked for a CUDA device " + how;
  return *answer;
}

void CaseWorker::start() {
  process_.start(
      [this](FILE* in, int out) {
        // With more than one rank, the other ranks check each case alongside (runner/ranks.h).
        RankPeers peers;
        auto ready = [&] { check_can_run(device_, file_, oracle_, sut_); };
        peers.start(ready, [&](const std::string& line) {
          (void)check_case(case_from_json(json::parse(line), limits_), oracle_, sut_, {}, EagerRun::always, claims_);
        });
        ready();
        if (device_fraction_ < 1.0 && device_ == "cuda") compat::cuda_limit_memory_fraction(device_fraction_);
        write_all(out, "ready\n");
        char* buffer = nullptr;
        std::size_t capacity = 0;
        for (ssize_t n; (n = getline(&buffer, &capacity, in)) > 0;) {
          std::string line(buffer, static_cast<std::size_t>(n));
          const Case c = case_from_json(json::parse(line), limits_);
          if (!line.empty() && line.back() == '\n') line.pop_back();
          if (peers.active()) peers.send(line);
          const CaseResult result = check_case(c, oracle_, sut_, options_, EagerRun::always, claims_);
          if (peers.active()) peers.wait();
          write_all(out, to_json(result).dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
        }
      },
      true);
  // "ready" once the device and the variants are checked, or why not.
  const std::optional<std::string> first = process_.read_line();
  if (first == "ready") return;
  const std::string status = process_.stop();
  if (first && first->rfind("error ", 0) == 0) throw CaseError(first->substr(6));
  throw CaseError(file_ + ": the check process " + status + " before the case");
}

void CaseWorker::hold_to_share(int jobs) {
  if (jobs <= 1) return;
  if (device_ == "cuda") {
    device_fraction_ = 1.0 / jobs;
  } else if (const int64_t available = memory_available(); available > 0) {
    options_.cpu_memory_budget = available / jobs;
  }
}

void CaseWorker::send(const Case& c) {
  const std::string line = recheck::to_json(c).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  if (!process_.running()) start();
  kills_before_ = oom_kills();
  if (!process_.send(line)) {
    process_.stop();
    start();
    process_.send(line);
  }
}

IsolatedCheck CaseWorker::receive() {
  IsolatedCheck outcome;
  if (case_seconds_ > 0 && process_.running()) {
    // The answer comes in one write: once output is there, read_line does not wait for long.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(case_seconds_);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        kill(process_.pid(), SIGKILL);
        process_.stop();
        std::ostringstream hung;
        hung << "the check process " << kHangWords << " " << case_seconds_ << " s and was killed";
        outcome.crash = hung.str();
        outcome.hung = true;
        return outcome;
      }
      if (!wait_for_output({&process_}, static_cast<int>(std::min<int64_t>(left.count(), 60000))).empty()) break;
      if (interrupted()) break;
    }
  }
  const std::optional<std::string> answer = process_.read_line();
  // No answer, or a part of one (the worker died writing it): the check crashed.
  if (!answer) {
    const std::string how = process_.stop();
    if (killed_for_memory(process_.status(), kills_before_)) {
      outcome.result = skipped_for_memory();
    } else {
      outcome.crash = "the check process " + how;
    }
    return outcome;
  }
  if (answer->rfind("error ", 0) == 0) {
    process_.stop();
    throw CaseError(answer->substr(6));
  }
  outcome.result = case_result_from_json(json::parse(*answer));
  return outcome;
}

IsolatedCheck CaseWorker::check(const Case& c) {
  send(c);
  return receive();
}

IsolatedCheck check_isolated(const Case& c, const std::string& file, CheckpointImplementation& oracle,
                             CheckpointImplementation& sut, const Limits& limits, const ClaimChoice& claims,
                             double case_seconds) {
  CaseWorker worker(file, c.device, oracle, sut, limits);
  worker.hold_to_claims(claims);
  worker.limit_case_seconds(case_seconds);
  return worker.check(c);
}

}  // namespace recheck::runner
