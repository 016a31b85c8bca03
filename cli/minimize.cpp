// recheck minimize: shrink a failing case to a small JSON case that shows the same alarm.
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "properties/reduce.h"
#include "properties/report.h"
#include "properties/corpus.h"
#include "runner/case_worker.h"
#include "runner/interrupts.h"

namespace recheck::cli {

namespace {

const char* kMinimizeHelp = R"(usage: recheck minimize CASE [--sut NAME] [--oracle NAME] [--property NAME] [--out FILE]

Shrinks a failing case while the same property keeps failing the same way (the same
classification: regression or divergent), and writes the smallest case found as JSON, with a
note saying what it shows and the expectations `recheck replay` checks. The reducer drops ops,
inlines checkpoints, forks and autocast regions, drops arguments, outputs and unused leaves, shrinks
shapes, and simplifies the dtype, the iteration count and requires_grad flags.

CASE is a JSON case or a fuzzer input (as for `recheck repro`: --bytes, --device, --limits).
--sut NAME        the variant the case fails on (default: the subject's change, clearing)
--oracle NAME     reference variant (default: the subject's oracle, nonclearing)
--subject NAME    the checkpoint function under test (`recheck variants` lists the subjects;
                  default: the one declaring --sut, else megatron-checkpoint-function); its
                  change and oracle are the defaults of --sut and --oracle
--property NAME   the property to keep failing (default: the first that raises an alarm); with
                  it, a pre-existing finding (the oracle fails too) can be minimized as well
--out FILE        where to write the minimized case (default: CASE's name + .min.json)
--no-isolate      check in this process (for a debugger). By default every check runs in a
                  worker process: a case that crashes it (an abort, a segmentation fault in the
                  variant) is minimized as runs-to-completion crash, and a candidate that crashes
                  it while another alarm is minimized is a candidate that does not show it.
--jobs N          check up to N candidates side by side, each in a worker process of its own
                  (0: one per core). The case written is the same for every N: of the N
                  candidates the reducer would try next, the first that still shows the alarm
                  is kept, as checking them one at a time would. Default 1.
--claims LIST     hold the sut to these of the change's claims, as `recheck run --claims` did
--world-size N    check every candidate in a tensor-parallel group of N ranks, as the run that
                  found the case did (recheck run --world-size); not with --no-isolate
Ctrl-C (or SIGTERM) stops at the candidate in progress and writes the smallest case so far.
Exit codes: 0 minimized and written; 2 bad input, or the case shows no alarm to minimize;
130 (143 for SIGTERM) interrupted, the smallest case so far written.
)";

int command_minimize(const Args& args) {
  const Case original = load_positional_case(args, "minimize");
  const auto sut = make_variant(sut_option(args));
  const auto oracle = make_variant(oracle_option(args));
  const ClaimChoice claims = claims_option(args);
  const std::string out = args.get("out", args.positional()[0] + ".min.json");
  check_output_file(out, args.has("out") ? "--out" : "the default --out");
  const std::string& file = args.positional()[0];
  const int world_size = world_size_option(args, *sut, *oracle, original.device);
  if (world_size > 1 && args.flag("no-isolate")) {
    throw UsageError("--world-size above 1 checks the case in child processes, one per rank: not with --no-isolate");
  }
  const std::string property = args.get("property", "");
  if (!property.empty() && property != kCrashProperty && find_property(property) == nullptr) {
    throw UsageError("--property: no property named '" + property + "'");
  }
  const auto start = Clock::now();
  // Every check, the first one and each candidate's, in a worker process (unless --no-isolate):
  // a candidate that crashes the variant is a candidate that does not show the alarm, not the
  // end of the minimization, and a case that crashes it from the start is minimized as a crash.
  const Limits limits = limits_of(args);
  const bool isolate = !args.flag("no-isolate");
  const int jobs = jobs_option(args);
  if (jobs > 1 && !isolate) throw UsageError("--jobs above 1 checks candidates in worker processes: not with --no-isolate");
  std::vector<std::unique_ptr<runner::CaseWorker>> workers;
  for (int j = 0; j < jobs; ++j) {
    workers.push_back(std::make_unique<runner::CaseWorker>(file, original.device, *oracle, *sut, limits));
    workers.back()->hold_to_share(jobs);
    workers.back()->hold_to_claims(claims);
  }
  runner::CaseWorker& worker = *workers.front();
  if (!isolate) runner::check_can_run(original.device, file, *oracle, *sut);
  auto check = [&](const Case& c) { return isolate ? worker.check(c) : runner::IsolatedCheck{check_case(c, *oracle, *sut, {}, EagerRun::always, claims), ""};
  };
  const std::optional<CaseResult> first = check(original).result;
  const bool crash = !first && (property.empty() || property == kCrashProperty);
  const std::optional<FailureSignature> signature = first ? find_alarm(*first, property) : std::nullopt;
  if (!crash && !signature) {
    std::cerr << "recheck minimize: " << file
              << (!first                    ? " crashes the check process, and shows no "
                  : first->skipped.empty() ? " shows no "
                                           : " is skipped (" + first->skipped + "), and shows no ")
              << (property.empty() ? "alarm" : "alarm in " + property) << " on " << sut->name() << " against "
              << oracle->name() << ": nothing to minimize\n";
    return 2;
  }
  const std::string shown_property = crash ? kCrashProperty : signature->property;
  const std::string shown_classification = crash ? kCrash : to_string(signature->classification);
  // Ctrl-C (or SIGTERM) ends the minimization at the candidate in progress (its worker is killed
  // 0.4 s on), and the smallest case found so far is written: every case kept showed the alarm.
  runner::stop_on_interrupt();
  std::cout << "minimizing: " << sut->name() << " " << shown_property << " " << shown_classification << std::endl;
  ReduceStats reduce_stats;
  int64_t candidates_checked = 0;
  // A batch of candidates, one per worker, all sent before any answer is read.
  auto still_fail = [&](const std::vector<Case>& candidates) {
    std::vector<bool> fails(candidates.size(), false);
    if (runner::interrupted()) return fails;
    candidates_checked += static_cast<int64_t>(candidates.size());
    std::vector<runner::IsolatedCheck> checked(candidates.size());
    try {
      if (isolate) {
        for (std::size_t i = 0; i < candidates.size(); ++i) workers[i]->send(candidates[i]);
        for (std::size_t i = 0; i < candidates.size(); ++i) checked[i] = workers[i]->receive();
      } else {
        checked[0] = check(candidates[0]);
      }
    } catch (const CaseError&) {
      if (runner::interrupted()) return fails;  // a worker killed while it started
      throw;
    }
    // A crash is kept only from a fresh process: what an earlier candidate left behind (a
    // corrupted heap, a sticky CUDA error) must not make a later one crash.
    if (crash && isolate) {
      for (auto& w : workers) w->stop();
    }
    if (runner::interrupted()) return fails;  // a candidate cut short shows nothing
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      fails[i] = crash ? !checked[i].result : checked[i].result && shows(*checked[i].result, *signature);
    }
    return fails;
  };
  Case smallest = reduce_case_batched(original, jobs, still_fail, &reduce_stats, [] { return runner::interrupted(); }, limits);
  for (auto& w : workers) w->stop();
  const bool interrupted = runner::interrupted();
  const CaseStats before = stats(original);
  const CaseStats after = stats(smallest);
  smallest.note = sut->name() + ": " + shown_property + " " + shown_classification + " against " + oracle->name() +
                  " (minimized by recheck minimize from " + std::filesystem::path(file).filename().string() + ", " +
                  std::to_string(before.ops) + " ops" +
                  (interrupted ? "; interrupted after " + std::to_string(candidates_checked) +
                                     " candidates, so a smaller case may show it too"
                               : "") +
                  ")";
  smallest.expect = {Expectation{sut->name(), shown_property, shown_classification}};
  // The correct variant's verdict on the same case, recorded too when it raises no alarm, so
  // that a replay also catches a suite that starts crying wolf on it (not after an interrupt).
  const Subject& subject = subject_option(args);
  if (sut->name() != subject.change && !interrupted) {
    const auto change = make_variant(subject.change);
    std::optional<CaseResult> correct;
    try {
      correct = isolate ? runner::check_isolated(smallest, file, *oracle, *change, limits).result
                        : std::optional<CaseResult>(check_case(smallest, *oracle, *change));
    } catch (const CaseError&) {
      if (!runner::interrupted()) throw;
    }
    if (runner::interrupted()) {
      std::cout << "interrupted: " << subject.change << "'s check of the smallest case was cut short; its expectation is left out\n";
    } else if (correct && correct->skipped.empty() && !correct->has_alarm()) {
      smallest.expect.push_back(Expectation{subject.change, kAnyProperty, kNoAlarm});
    }
  }
  save_case_file(smallest, out);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << "ops " << before.ops << " -> " << after.ops << ", checkpoints " << before.checkpoints << " -> "
            << after.checkpoints << ", nesting depth " << before.max_depth << " -> " << after.max_depth << ", leaves "
            << original.leaves.size() << " -> " << smallest.leaves.size() << "\n"
            << candidates_checked << " candidates checked, " << reduce_stats.accepted << " kept, "
            << std::fixed << std::setprecision(1) << seconds << " s\n"
            << show(smallest) << "wrote " << out << "\nreplay: " << replay_command(*sut, *oracle) << " repro " << out << subject_argument(args)
            << " --sut " << sut->name() << (oracle->name() != subject.oracle ? " --oracle " + oracle->name() : "")
            << claims_argument(claims) << world_size_argument() << "\n";
  if (interrupted) std::cout << "interrupted: wrote the smallest case found so far\n";
  return 0;
}

}  // namespace

const Command kMinimize{"minimize", "shrink a failing case (JSON, or a fuzzer's crash file) to a small JSON case", kMinimizeHelp, {"bytes", "no-isolate"}, {"subject", "sut", "oracle", "claims", "property", "out", "limits", "device", "world-size", "jobs"}, command_minimize, false};

}  // namespace recheck::cli
