// recheck bench: cases/s, op executions/s and the cost of a check against a plain eager run.
#include <chrono>
#include <iomanip>
#include <iostream>

#include "cli/command.h"
#include <ATen/Parallel.h>

#include "oracles/eager.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "runner/interrupts.h"

namespace recheck::cli {

namespace {

const char* kBenchHelp = R"(usage: recheck bench [--cases N] [--seed N] [--json FILE]

Single thread. For each generated case (draw seeds N, N+1, ...) times one plain eager run, then
a full check (eager, oracle and sut runs with their recomputations, then every property), and
prints cases per second, op executions per second, and the check-to-eager cost ratio, with the
ratio of op executions, which is the floor the harness overhead sits on. Figures, not a test:
compare ratios measured in one run. Interrupted, it prints the figures of the cases done so
far and exits 130 (143 for SIGTERM).
)";

int command_bench(const Args& args) {
  check_output_files(args, {"json"});
  const int64_t requested = args.number("cases", 500, 1, INT64_MAX / 2);
  const uint64_t seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX / 2));
  at::set_num_threads(1);
  const GenOptions gen;
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  EagerExecution eager;
  double eager_seconds = 0;
  double check_seconds = 0;
  int64_t eager_ops = 0;
  int64_t check_ops = 0;
  int64_t cases = 0;  // checked: fewer than requested when interrupted
  for (; cases < requested && !runner::interrupted(); ++cases) {
    const int64_t i = cases;
    const Case c = draw_case(gen, seed + static_cast<uint64_t>(i));
    auto t0 = Clock::now();
    eager_ops += run_case(c, eager).op_executions;
    auto t1 = Clock::now();
    check_ops += check_case(c, *oracle, *sut).op_executions;
    auto t2 = Clock::now();
    eager_seconds += std::chrono::duration<double>(t1 - t0).count();
    check_seconds += std::chrono::duration<double>(t2 - t1).count();
  }
  if (cases == 0) {
    // A script waiting for the report gets one that says why it holds no figures.
    std::cout << "recheck bench: interrupted before the first case finished\n";
    if (args.has("json")) {
      write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                                {"command", "bench"},
                                                {"cases", 0},
                                                {"interrupted", true},
                                                {"seed", seed},
                                                {"threads", 1}});
    }
    return 0;
  }
  const double cost_ratio = check_seconds / eager_seconds;
  const double op_ratio = static_cast<double>(check_ops) / static_cast<double>(eager_ops);
  std::cout << std::fixed << std::setprecision(1) << "recheck bench: " << cases << " default cases (draw seeds "
            << seed << ".." << seed + static_cast<uint64_t>(cases) - 1 << "), single thread" << (runner::interrupted() ? ", interrupted" : "") << "\n"
            << "  full check:      " << cases / check_seconds << " cases/s, " << check_ops / check_seconds
            << " op executions/s\n"
            << "  plain eager run: " << cases / eager_seconds << " cases/s, " << eager_ops / eager_seconds
            << " op executions/s\n"
            << std::setprecision(2) << "  check-to-eager cost ratio: " << cost_ratio << " (op executions ratio "
            << op_ratio << ": the floor; harness overhead is what lies above it)\n";
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "bench"},
                                              {"cases", cases},
                                              {"interrupted", runner::interrupted()},
                                              {"seed", seed},
                                              {"threads", 1},
                                              {"check_seconds", check_seconds},
                                              {"eager_seconds", eager_seconds},
                                              {"check_op_executions", check_ops},
                                              {"eager_op_executions", eager_ops},
                                              {"cases_per_second", cases / check_seconds},
                                              {"op_executions_per_second", check_ops / check_seconds},
                                              {"check_to_eager_cost_ratio", cost_ratio},
                                              {"op_executions_ratio", op_ratio}});
  }
  return 0;
}

}  // namespace

const Command kBench{"bench", "measure cases/s, op executions/s and the cost of a check against a plain eager run", kBenchHelp, {}, {"cases", "seed", "json"}, command_bench, true};

}  // namespace recheck::cli
