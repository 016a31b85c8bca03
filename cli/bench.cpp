// recheck bench: cases/s, op executions/s and the cost of a check against a plain eager run.
#include <chrono>
#include <iomanip>
#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/torch_compat.h"
#include <ATen/Parallel.h>

#include "oracles/eager.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "runner/hunt.h"
#include "runner/interrupts.h"

namespace recheck::cli {

namespace {

const char* kBenchHelp = R"(usage: recheck bench [--cases N] [--seed N] [--subject NAME] [--json FILE]
       recheck bench --jobs LIST [--cases N] [--seed N] [--device D] [--subject NAME] [--json FILE]

Single thread. For each generated case (draw seeds N, N+1, ...) times one plain eager run, then
a full check (eager, oracle and sut runs with their recomputations, then every property), and
prints cases per second, op executions per second, and the check-to-eager cost ratio, with the
ratio of op executions, which is the floor the harness overhead sits on; and what triage costs:
each case is checked a second time without the op trace and the cause signatures, and the
difference is given as a share of that check. Figures, not a test:
compare ratios measured in one run. Interrupted, it prints the figures of the cases done so
far and exits 130 (143 for SIGTERM).

With --jobs LIST (say 1,2,4): how checking scales with worker processes. For each count, the
same cases (default 2000) are checked the way `recheck run --jobs N` checks them, each worker
with one torch thread, and it prints cases per second and the speed-up over the first count,
measured in this one run. --device cuda puts every worker on the one GPU (each its own CUDA
context). --subject NAME checks that subject's change against its oracle (default
megatron-checkpoint-function: clearing against nonclearing).
)";

// bench --jobs: the same cases checked by `run`'s hunt at each job count.
int bench_jobs(const Args& args) {
  std::vector<int> counts;
  const std::string list = args.get("jobs", "");
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    try {
      size_t used = 0;
      const int n = std::stoi(item, &used);
      if (used != item.size() || n < 1 || n > 256) throw std::out_of_range(item);
      counts.push_back(n);
    } catch (const std::exception&) {
      throw UsageError("--jobs: expected job counts from 1 to 256 separated by commas, got '" + list + "'");
    }
    start = comma + 1;
  }
  const int64_t cases = args.number("cases", 2000, 1, INT64_MAX / 2);
  const uint64_t seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX / 2));
  GenOptions gen;
  gen.device = device_option(args);
  const Subject& subject = subject_option(args);
  auto oracle = subject.make(subject.oracle);
  auto sut = subject.make(subject.change);
  runner::stop_on_interrupt();
  json rows = json::array();
  double first_rate = 0;
  std::cout << "recheck bench: " << cases << " default cases (draw seeds " << seed << ".."
            << seed + static_cast<uint64_t>(cases) - 1 << ") on " << gen.device << ", one torch thread per worker\n";
  for (const int jobs : counts) {
    int64_t checked = 0;
    int64_t lost = 0;
    const auto start = Clock::now();
    const runner::HuntOutcome outcome = runner::hunt_in_workers(
        jobs, {[&] {
                 at::set_num_threads(1);
                 check_ready_to_run(gen.device == "cuda", *oracle, *sut);
                 // As run --jobs does: workers sharing one GPU, each its share of its memory.
                 if (jobs > 1 && gen.device == "cuda") compat::cuda_limit_memory_fraction(1.0 / jobs);
               },
               [&](int64_t i) { return i >= cases || runner::interrupted(); },
               [&](int64_t i) { return check_case(draw_case(gen, seed + static_cast<uint64_t>(i)), *oracle, *sut); },
               [&](int64_t, const CaseResult&) { ++checked; }, [&](int64_t, const runner::CaseLost&) { ++lost; }});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!outcome.failed.empty()) throw std::runtime_error(outcome.failed);
    const double rate = checked / seconds;
    if (first_rate == 0) first_rate = rate;
    std::cout << std::fixed << std::setprecision(1) << "  jobs " << std::setw(3) << jobs << ": " << std::setw(8) << rate
              << " cases/s" << std::setprecision(2) << "  (" << rate / first_rate << " x jobs " << counts[0] << ")"
              << (lost > 0 ? ", " + std::to_string(lost) + " cases lost" : "") << "\n";
    rows.push_back({{"jobs", jobs}, {"cases", checked}, {"seconds", seconds}, {"cases_per_second", rate},
                    {"speedup", rate / first_rate}, {"lost", lost}});
    if (runner::interrupted()) break;
  }
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"}, {"command", "bench"}, {"seed", seed},
                                              {"device", gen.device}, {"interrupted", runner::interrupted()},
                                              {"jobs", rows}});
  }
  return 0;
}

int command_bench(const Args& args) {
  check_output_files(args, {"json"});
  if (args.has("jobs")) return bench_jobs(args);
  if (args.has("device")) throw UsageError("--device goes with --jobs");
  const int64_t requested = args.number("cases", 500, 1, INT64_MAX / 2);
  const uint64_t seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX / 2));
  at::set_num_threads(1);
  const GenOptions gen;
  const Subject& subject = subject_option(args);
  auto oracle = subject.make(subject.oracle);
  auto sut = subject.make(subject.change);
  EagerExecution eager;
  double eager_seconds = 0;
  double check_seconds = 0;
  double untriaged_seconds = 0;  // the same checks without the trace and the cause signatures
  double lazy_seconds = 0;  // the same checks with eager mode only where needed (--eager when-needed)
  int64_t lazy_without_eager = 0;
  int64_t eager_ops = 0;
  int64_t check_ops = 0;
  int64_t cases = 0;  // checked: fewer than requested when interrupted
  for (; cases < requested && !runner::interrupted(); ++cases) {
    const int64_t i = cases;
    const Case c = draw_case(gen, seed + static_cast<uint64_t>(i));
    auto t0 = Clock::now();
    eager_ops += run_case(c, eager).op_executions;
    auto t1 = Clock::now();
    // The checks with and without triage, in turn first: the second run of a case finds the
    // allocator and the caches warm, which alone is worth several percent.
    RunOptions untriaged;
    untriaged.record_op_trace = false;
    const bool triaged_first = i % 2 == 0;
    if (!triaged_first) (void)check_case(c, *oracle, *sut, untriaged);
    auto t2 = Clock::now();
    check_ops += check_case(c, *oracle, *sut).op_executions;
    auto t3 = Clock::now();
    if (triaged_first) (void)check_case(c, *oracle, *sut, untriaged);
    auto t4 = Clock::now();
    const CaseResult lazy = check_case(c, *oracle, *sut, {}, EagerRun::when_needed);
    auto t5 = Clock::now();
    lazy_seconds += std::chrono::duration<double>(t5 - t4).count();
    lazy_without_eager += lazy.eager_ran ? 0 : 1;
    eager_seconds += std::chrono::duration<double>(t1 - t0).count();
    check_seconds += std::chrono::duration<double>(t3 - t2).count();
    untriaged_seconds += std::chrono::duration<double>(triaged_first ? t4 - t3 : t2 - t1).count();
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
            << op_ratio << ": the floor; harness overhead is what lies above it)\n"
            << std::setprecision(1) << "  triage (the op trace and the cause signatures): "
            << 100.0 * (check_seconds - untriaged_seconds) / untriaged_seconds << " % of a check without them\n"
            << "  eager mode when needed (recheck run --eager when-needed): " << cases / lazy_seconds << " cases/s, "
            << std::setprecision(2) << check_seconds / lazy_seconds << "x the full check's; eager mode left out on "
            << lazy_without_eager << " of " << cases << " cases (" << subject.change << " against " << subject.oracle
            << ")\n";
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
                                              {"untriaged_check_seconds", untriaged_seconds},
                                              {"triage_cost_fraction", (check_seconds - untriaged_seconds) / untriaged_seconds},
                                              {"op_executions_ratio", op_ratio},
                                              {"eager_when_needed_seconds", lazy_seconds},
                                              {"eager_when_needed_cases_without_eager", lazy_without_eager}});
  }
  return 0;
}

}  // namespace

const Command kBench{"bench", "measure cases/s, op executions/s and the cost of a check against a plain eager run", kBenchHelp, {}, {"cases", "seed", "json", "jobs", "device", "subject"}, command_bench, true};

}  // namespace recheck::cli
