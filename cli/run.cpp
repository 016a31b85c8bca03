// recheck run: draw random cases, check every property of a variant against the oracle.
#include <sys/wait.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "cli/bucket_minimize.h"
#include "cli/run_progress.h"
#include "cli/command.h"
#include "core/case.h"
#include "core/torch_compat.h"
#include "properties/buckets.h"
#include "properties/causes.h"
#include "properties/corpus.h"
#include "properties/generator.h"
#include "properties/junit.h"
#include "properties/report.h"
#include "runner/case_worker.h"
#include "runner/hunt.h"
#include "runner/interrupts.h"
#include "runner/isolated_check.h"
#include "runner/ranks.h"
#include "runner/worker_process.h"

#include <ATen/Parallel.h>
#include <random>

namespace recheck::cli {

namespace {

const char* kRunHelp = R"(usage: recheck run [options]

Draws random nested checkpoint cases and runs each three ways (eager, oracle, sut), then checks
every property and classifies it: pass, regression, pre-existing, fixed, divergent.

options:
  --sut NAME        variant under test (default: the subject's change, clearing)
  --oracle NAME     reference variant (default: the subject's oracle, nonclearing)
  --subject NAME    the checkpoint function under test (`recheck variants` lists the subjects;
                    default: the one declaring --sut, else megatron-checkpoint-function); its
                    change and oracle are the defaults of --sut and --oracle, and a Python
                    function no subject declares (python:FILE.py:ATTR) is judged by its properties
  --claims LIST     which of the change's claims to hold the sut to: none, clearing (the
                    clearing change's: grad-released, memory-floor, no-extra-allocations), or
                    some of those names joined by commas. Each claim named is judged on the sut
                    alone (pass or regression); the others are not checked, and the report says
                    so. Default: the sut's own (a C++ variant and python-change: make every
                    claim; python: is held to what the oracle does; torch-py makes none)
  --seed N          first draw seed; case i uses seed N+i (default: random, printed)
  --cases N         number of cases to check
  --seconds S       time budget (default 60 when --cases is not given)
  --device D        cpu or cuda (default: cpu)
  --max-depth N     deepest checkpoint nesting (default 4)
  --max-ops N       most ops per segment (default 6)
  --out DIR         folder for failing cases as JSON (default: recheck-findings): every alarm,
                    the first five of each property and classification, the first case of
                    each bucket and its minimized case (bucket-N.min.json)
  --minimize-seconds S  after the run, minimize the first case of each bucket (findings with one
                    cause signature) within S seconds in all (default: a tenth of the run's own
                    time, at least 5 s; 0: none): the alarms first, each an equal share of
                    what is left among them, then the other buckets
  --minimize-alarms-only  minimize only the alarms' buckets (the others keep their first case)
  --previous FILE   a previous run's --json report: mark each bucket new or still present,
                    and list the previous run's buckets this one did not see as gone
  --json FILE       write a machine-readable report ('-' for standard output), its buckets
                    included
  --junit FILE      write the verdicts as JUnit XML for a CI system: a test case per property,
                    failed by its regressions and divergences, and one for crashes
  --quiet           no progress lines
  --threads N       torch's intra-op threads for the checks (default, or 0: torch's own choice)
  --cpu-memory-budget B  on CPU, refuse allocations beyond B bytes per run, as a device of
                    that size would: such cases are counted as skipped, not failed
  --world-size N    Megatron's tensor-parallel group of N ranks (default 1; up to 8), each a
                    process checking the same cases with its own chunk of what a checkpoint
                    distributes, the verdicts taken on rank 0: Megatron's split and gather run
                    across processes. Needs Megatron's Python variants as --sut and --oracle
  --jobs N          check cases in N worker processes at once (default 1; 0: one per core); the
                    report is the same for every N, cases being reported in their order. On
                    CPU each run is held to its share of the available memory (as with
                    --cpu-memory-budget, which sets it instead); on CUDA each worker to 1/N
                    of the GPU's memory
  --no-isolate      check cases in this process (for a debugger); by default they run in a
                    worker process, and a case that crashes it (abort, segmentation fault) is
                    reported as a `crash` finding with its case saved, and the run goes on;
                    the oracle then runs the case alone in a worker, and is checked against
                    itself in another: a crash it makes too is the released function's
                    (pre-existing, reported, not a failure); a worker
                    the kernel's out-of-memory killer ends is a skipped case instead
  --eager WHEN      always (the default): eager mode runs on every case; when-needed: only
                    where the oracle and the sut do not agree on everything a property reading
                    it judges (or an alarm needs it): regression, divergent and fixed verdicts
                    are the same, pre-existing ones of those properties are counted only where
                    it ran (the report says on how many cases)
  --fresh-process   check each case in a fresh fork of its worker, which imported the code
                    under test and called none of it: what one case leaves in the process (a
                    first-call flag, a cache, a global RNG tracker) cannot hide or cause a
                    verdict of another. Costs a fork per case (tools/gate-pr sets it)

Ctrl-C or SIGTERM stops the run within a second: the summary so far, a complete --json report
marked interrupted. Exit codes: 0 nothing found; 1 a regression, divergence or crash the oracle does not make; 2 bad
usage, or the cases cannot run (the device, a variant); 130 (143 for SIGTERM) interrupted with
nothing found, so that a cancelled CI job does not read green.
)";

int command_run(const Args& args) {
  if (!args.positional().empty()) throw UsageError("run takes no positional argument: '" + args.positional()[0] + "'");
  const std::string sut_name = sut_option(args);
  const std::string oracle_name = oracle_option(args);
  const std::unique_ptr<CheckpointImplementation> sut = make_variant(sut_name);
  const std::unique_ptr<CheckpointImplementation> oracle = make_variant(oracle_name);
  const ClaimChoice claims = claims_option(args);
  // What importing the variants' code logged here (taken, so that no worker inherits it).
  LoggedCounts logged = take_logged();
  GenOptions gen;
  gen.device = device_option(args);
  gen.max_depth = static_cast<int>(args.number("max-depth", gen.max_depth, 0, 16));
  gen.max_ops = static_cast<int>(args.number("max-ops", gen.max_ops, 1, 64));
  gen = options_for(gen, *sut);
  const int world_size = world_size_option(args, *sut, *oracle, gen.device);
  if (args.flag("fresh-process") && world_size > 1) {
    throw UsageError("--fresh-process: not with --world-size above 1 (the other ranks' processes are kept across cases)");
  }
  const int64_t cases = args.number("cases", -1, 1, INT64_MAX / 2);
  const int64_t seconds = args.number("seconds", cases < 0 ? 60 : -1, 1, 365LL * 24 * 3600);
  const bool quiet = args.flag("quiet");
  const uint64_t seed = args.has("seed")
                            ? static_cast<uint64_t>(args.number("seed", 0, 0, INT64_MAX / 2))
                            : static_cast<uint64_t>(std::random_device{}() % 1000000000ULL);
  const std::string out_dir = args.get("out", "recheck-findings");
  check_output_folder(out_dir, "--out");
  const int64_t minimize_option = args.number("minimize-seconds", -1, 0, 7 * 24 * 3600);
  // Read before any case runs: a file that is not a report is bad input (exit 2), found at once.
  std::optional<Buckets> previous;
  if (args.has("previous")) {
    try {
      previous = buckets_of_report(args.get("previous", ""));
    } catch (const std::runtime_error& error) {
      throw UsageError(std::string("--previous: ") + error.what());
    }
  }
  check_output_files(args, {"json", "junit"});
  const int64_t threads = args.number("threads", 0, 0, 1024);
  const std::string eager_option = args.get("eager", "always");
  if (eager_option != "always" && eager_option != "when-needed") {
    throw UsageError("--eager: expected always or when-needed, got '" + eager_option + "'");
  }
  const EagerRun eager_run = eager_option == "always" ? EagerRun::always : EagerRun::when_needed;
  const int jobs = jobs_option(args);
  if (jobs > 1 && args.flag("no-isolate")) throw UsageError("--jobs above 1 checks cases in worker processes: not with --no-isolate");
  if (args.flag("fresh-process") && args.flag("no-isolate")) {
    throw UsageError("--fresh-process forks a worker per case: not with --no-isolate, which forks none");
  }
  RunOptions run_options;
  run_options.cpu_memory_budget = args.number("cpu-memory-budget", 0, 0, INT64_MAX / 2);
  // Several workers share the machine's memory: each run gets its share of what is available
  // now, so that a case too large for it is skipped, as one too large for the machine is, and
  // one worker's case cannot take the memory another's needs.
  std::string share_note;
  if (jobs > 1 && gen.device == "cuda") {
    share_note = ", each worker held to 1/" + std::to_string(jobs) + " of the GPU's memory";
  } else if (jobs > 1 && gen.device == "cpu" && !args.has("cpu-memory-budget")) {
    const int64_t available = runner::memory_available();
    if (available > 0) {
      run_options.cpu_memory_budget = available / jobs;
      share_note = ", each run held to " + std::to_string(run_options.cpu_memory_budget / (1 << 20)) +
                   " MiB (the available memory's share of " + std::to_string(jobs) + " jobs)";
    }
  }

  std::cerr << "recheck run: sut " << sut->name() << " against oracle " << oracle->name() << ", seed " << seed
            << ", " << (cases > 0 ? std::to_string(cases) + " cases" : "") << (cases > 0 && seconds > 0 ? " or " : "")
            << (seconds > 0 ? std::to_string(seconds) + " s" : "") << ", device " << gen.device
            << (world_size > 1 ? ", world size " + std::to_string(world_size) : "")
            << (jobs > 1 ? ", " + std::to_string(jobs) + " jobs" : "") << share_note << "\n";
  // Where Python code came from, at once: a typo in PYTHONPATH shows here as the installed copy.
  json provenance = json::object();
  std::string code_note;  // the same, in each finding's note
  for (const auto& [role, variant] : {std::pair<const char*, const CheckpointImplementation*>{"sut", sut.get()},
                                      {"oracle", oracle.get()}}) {
    // Asked once: a Python variant's answer runs git and reads the installed distributions.
    const Provenance pairs = variant->provenance();
    if (pairs.empty()) continue;
    const std::string described = describe_provenance(pairs);
    std::cerr << "  " << role << " " << variant->name() << ": " << described << "\n";
    code_note += std::string(" | ") + role + " code: " + described;
    for (const auto& [name, value] : pairs) provenance[role][name] = value;
  }
  const std::map<std::string, std::string> not_checked = properties_not_checked(*oracle, *sut, claims);
  if (claims.chosen) {
    std::cerr << "  claims held: " << (claims.held.empty() ? "none" : describe_claims(claims)) << "\n";
  }
  // The environment a replay needs ("PYTHONPATH=... ") and this program, as started.
  const std::string replay = replay_command(*sut, *oracle);

  runner::stop_on_interrupt();
  Summary summary;
  summary.checks(sut->name());
  for (const auto& [property, reason] : not_checked) summary.not_checked(property, reason);
  // Every alarm is listed in the report; the other findings up to kListed (a campaign of days
  // finds millions, which the buckets count), the rest only counted.
  json findings = json::array();
  constexpr size_t kListed = 10000;
  int64_t not_listed = 0;
  auto list_finding = [&](json finding, bool alarm) {
    if (alarm || findings.size() < kListed) {
      findings.push_back(std::move(finding));
    } else {
      ++not_listed;
    }
  };
  Buckets buckets;
  std::map<std::string, int> written_per_kind;
  constexpr int kPreExistingFilesPerProperty = 5;
  int64_t op_executions = 0;
  const auto start = Clock::now();
  auto last_progress = start;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  auto should_stop = [&](int64_t index) {
    return (cases > 0 && index >= cases) || (seconds > 0 && elapsed() >= static_cast<double>(seconds)) ||
           runner::interrupted();
  };
  std::string first_skipped;
  auto report_finding = [&](int64_t index, const std::string& property, const std::string& classification,
                            bool alarm, const std::string& sut_text, const std::string& oracle_text,
                            const std::string& cause) {
    const uint64_t draw_seed = seed + static_cast<uint64_t>(index);
    json finding = {{"case", index},          {"draw_seed", draw_seed},   {"property", property},
                    {"classification", classification}, {"sut", sut_text}, {"oracle", oracle_text},
                    {"cause", cause}};
    const std::string kind = property + "/" + classification;
    const bool first_of_bucket = !buckets.contains(cause);
    buckets.add(cause, property, classification, alarm, index, draw_seed,
                "sut: " + sut_text + (oracle_text.empty() ? "" : " | oracle: " + oracle_text));
    if (alarm || first_of_bucket || written_per_kind[kind] < kPreExistingFilesPerProperty) {
      ++written_per_kind[kind];
      make_output_folder(out_dir);
      const std::string file =
          save_finding(draw_case(gen, draw_seed), out_dir, seed, index, sut->name(), property, classification,
                       classification + " " + property + " (sut " + sut->name() + ", oracle " + oracle->name() +
                           "): sut: " + sut_text + " | oracle: " + oracle_text + code_note);
      finding["file"] = file;
      if (first_of_bucket) buckets.at(cause).file = file;
      if (alarm) {
        std::cerr << classification << ": " << property << " in case " << index << " (draw seed " << draw_seed
                  << ")\n    sut: " << sut_text << "\n    oracle: " << oracle_text << "\n    replay: "
                  << replay << " repro " << file << subject_argument(args) << " --sut " << sut->name() << " --oracle " << oracle->name()
                  << claims_argument(claims) << world_size_argument() << "\n";
      }
    }
    list_finding(std::move(finding), alarm || property == kCrashProperty);  // a crash's entry is amended below
  };
  // The run over time, for the report's "progress" (and recheck page): only with --json, as
  // coverage draws each case again here.
  RunProgress progress;
  const bool track_progress = args.has("json");
  int64_t alarms_found = 0;
  auto sample_progress = [&](bool last) {
    progress.sample(elapsed(), summary.cases(), static_cast<int64_t>(findings.size()) + not_listed, alarms_found,
                    static_cast<int64_t>(buckets.size()), last);
  };
  int64_t eager_skipped = 0;  // cases checked without eager mode (--eager when-needed)
  auto handle = [&](int64_t index, const CaseResult& result) {
    summary.add(result);
    if (result.skipped.empty() && !result.eager_ran) ++eager_skipped;
    for (const PropertyResult& r : result.results) alarms_found += is_alarm(r.classification) ? 1 : 0;
    op_executions += result.op_executions;
    if (!result.skipped.empty()) {
      // Too large for the memory: counted and named, not a failure.
      list_finding({{"case", index}, {"draw_seed", seed + static_cast<uint64_t>(index)},
                    {"classification", "skipped"}, {"reason", result.skipped}}, false);
      if (summary.skipped() == 1) first_skipped = "case " + std::to_string(index) + ": " + result.skipped;
    }
    for (const PropertyResult& r : result.results) {
      if (r.classification == Classification::pass) continue;
      report_finding(index, r.property, to_string(r.classification), is_alarm(r.classification), r.sut.describe(),
                     r.oracle.describe(), r.cause);
    }
    if (track_progress) {
      progress.reached(draw_case(gen, seed + static_cast<uint64_t>(index)));
      sample_progress(false);
    }
    if (!quiet && std::chrono::duration<double>(Clock::now() - last_progress).count() >= 2.0) {
      last_progress = Clock::now();
      std::cerr << "[" << static_cast<int64_t>(elapsed()) << " s] " << summary.cases() << " cases, "
                << summary.count(Classification::regression) << " regression, "
                << summary.count(Classification::divergent) << " divergent, "
                << summary.count(Classification::pre_existing) << " pre-existing\n";
    }
  };
  bool threads_set = false;
  auto check_here = [&](int64_t index) {
    // Set where the cases run (the worker), so this process keeps clear of torch's thread pools.
    if (threads > 0 && !threads_set) at::set_num_threads(static_cast<int>(threads));
    threads_set = true;
    return check_case(draw_case(gen, seed + static_cast<uint64_t>(index)), *oracle, *sut, run_options, eager_run,
                      claims);
  };
  // With more than one rank, the other ranks check each case alongside (runner/ranks.h).
  runner::RankPeers peers;
  auto check = [&](int64_t index) {
    if (peers.active()) peers.send(std::to_string(index));
    CaseResult result = check_here(index);
    if (peers.active()) peers.wait();
    return result;
  };

  // In the process that checks cases (a Python variant on CUDA cannot start torch.cuda in a
  // worker forked after CUDA started here), the other ranks forked from it first.
  auto ready = [&] { check_ready_to_run(gen.device == "cuda", *oracle, *sut); };
  auto prepare = [&] {
    peers.start(ready, [&](const std::string& line) { (void)check_here(std::stoll(line)); });
    ready();
    // Workers sharing one GPU: each its share of the device's memory, a case too large for it
    // skipped as one too large for the device is.
    if (jobs > 1 && gen.device == "cuda") compat::cuda_limit_memory_fraction(1.0 / jobs);
  };
  int64_t crashes = 0;
  int64_t pre_existing_crashes = 0;  // crashes the oracle makes alone too
  std::string worker_failed;
  if (args.flag("no-isolate")) {
    try {
      prepare();
    } catch (const std::exception& error) {
      worker_failed = error.what();
      std::cerr << "recheck run: " << worker_failed << "\n";
    }
    for (int64_t index = 0; worker_failed.empty() && !should_stop(index); ++index) handle(index, check(index));
  } else {
    // Cases run in worker processes, so that an abort or a segmentation fault inside a variant
    // is a finding with its case saved, and the run goes on with the next case in a new worker.
    // This process runs no torch op itself, so forking it is safe.
    auto lost = [&](int64_t index, const runner::CaseLost& case_lost) {
      if (case_lost.killed_for_memory) {
        handle(index, runner::skipped_for_memory());
        return;
      }
      ++crashes;
      // A crash the oracle makes too (alone, or checked against itself) is the released
      // function's (pre-existing): reported, not a failure of the run.
      std::string oracle_end;
      if (case_lost.error.empty()) {
        oracle_end = runner::oracle_crash(draw_case(gen, seed + static_cast<uint64_t>(index)), *oracle, ready, run_options,
                                          eager_run, claims);
      }
      if (!oracle_end.empty()) ++pre_existing_crashes;
      // An exception that ended the worker in a case (not a crash of the variant: code the check
      // could not run, a Python variant's module of another version) says what it was.
      report_finding(index, kCrashProperty, kCrash, oracle_end.empty(),
                     "the worker process " + case_lost.status + (case_lost.error.empty() ? "" : ": " + case_lost.error),
                     oracle_end,
                     crash_signature("the worker process " + case_lost.status + (case_lost.error.empty() ? "" : ": " + case_lost.error), !oracle_end.empty()));
      if (!oracle_end.empty()) findings.back()["pre_existing"] = true;
    };
    runner::WorkerHunt hunt{prepare, should_stop, check, handle, lost};
    hunt.fresh_process_per_case = args.flag("fresh-process");
    const runner::HuntOutcome outcome = runner::hunt_in_workers(jobs, hunt);
    if (!outcome.failed.empty()) {
      worker_failed = outcome.failed;
      std::cerr << "recheck run: " << worker_failed << "; stopping\n";
    }
  }

  const double total_seconds = elapsed();
  if (track_progress) sample_progress(true);
  add_logged(logged, summary.logged());
  // The reports, written once the cases are checked and again once their buckets are minimized:
  // a minimization that dies (a crash in the reducer, a kill) leaves the run's report behind.
  auto write_reports = [&](bool before_minimizing) {
    if (!args.has("json") && !args.has("junit")) return;
    if (before_minimizing && args.get("json", "-") == "-") return;  // one report on standard output
    json report = {{"tool", "recheck"},
                   {"command", "run"},
                   {"sut", sut->name()},
                   {"oracle", oracle->name()},
                   {"seed", seed},
                   {"device", gen.device},
                   {"world_size", world_size},
                   {"cases", summary.cases()},
                   {"seconds", total_seconds},
                   {"op_executions", op_executions},
                   {"interrupted", runner::interrupted()},
                   {"crashes", crashes},
                   {"pre_existing_crashes", pre_existing_crashes},
                   {"skipped", summary.skipped()},
                   {"eager", {{"when", eager_option}, {"cases_without", eager_skipped}}},
                   {"error", worker_failed.empty() ? json() : json(worker_failed)},
                   {"summary", summary.to_json()},
                   {"findings", findings},
                   {"findings_not_listed", not_listed},
                   {"buckets", buckets.to_json()},
                   {"progress", progress.samples()},
                   {"coverage", progress.coverage()}};
    if (!provenance.empty()) report["provenance"] = provenance;
    if (claims.chosen) {
      json not_held = json::array();
      for (const std::string& name : claim_names()) {
        if (claims.held.count(name) == 0) not_held.push_back(name);
      }
      report["claims"] = {{"held", json(claims.held)}, {"not_held", not_held}};
    }
    if (!logged.empty()) report["logged"] = logged;
    if (args.has("json")) write_json_report(args.get("json", "-"), report);
    if (args.has("junit")) write_file_atomically(args.get("junit", ""), junit_xml(report));
  };
  // Each bucket's first case minimized, after the run's own time (a campaign's is not spent on it).
  int minimized = 0;
  const double minimize_seconds =
      minimize_option >= 0 ? static_cast<double>(minimize_option) : std::max(5.0, total_seconds / 10);
  const auto minimizing_start = Clock::now();
  const std::string replay_suffix = subject_argument(args) + " --sut " + sut->name() + " --oracle " + oracle->name() +
                                    claims_argument(claims) + world_size_argument();
  const auto first_case = [&](const Bucket& b) { return draw_case(gen, b.draw_seed); };
  if (minimize_seconds > 0 && buckets.size() > 0 && worker_failed.empty() && !runner::interrupted() &&
      world_size == 1 && !args.flag("no-isolate")) {
    make_output_folder(out_dir);
    write_reports(true);
    minimized = minimize_buckets(buckets, {first_case, "recheck run", *oracle, *sut, claims, out_dir, minimize_seconds, replay,
                                           replay_suffix, args.flag("minimize-alarms-only")});
  } else {
    minimize_buckets(buckets, {first_case, "recheck run", *oracle, *sut, claims, out_dir, 0, replay, replay_suffix});
  }
  if (previous) buckets.compare_with(*previous);
  std::cout << "\nrecheck run: " << summary.cases() << " cases in " << std::fixed << std::setprecision(1)
            << total_seconds << " s (" << std::setprecision(1)
            << (total_seconds > 0 ? summary.cases() / total_seconds : 0.0) << " cases/s), sut " << sut->name()
            << ", oracle " << oracle->name() << ", seed " << seed << (runner::interrupted() ? ", interrupted" : "") << "\n\n"
            << summary.table() << "\n";
  if (eager_run == EagerRun::when_needed) {
    std::cout << "eager mode: ran on " << summary.cases() - summary.skipped() - eager_skipped << " of "
              << summary.cases() - summary.skipped()
              << " cases (--eager when-needed: left out where the oracle and the sut agree on all it judges; the "
                 "properties reading it count pre-existing verdicts only where it ran)\n";
  }
  if (summary.skipped() > 0) {
    std::cout << "skipped: " << summary.skipped() << " cases too large for the memory (first, " << first_skipped
              << ")\n";
  }
  if (buckets.size() > 0) {
    std::cout << "\n" << buckets.describe_by_cause();
    if (minimized > 0) {
      std::cout << "(" << minimized << " of them minimized after the run, in " << std::setprecision(1)
                << std::chrono::duration<double>(Clock::now() - minimizing_start).count() << " s of the "
                << minimize_seconds << " s allowed: --minimize-seconds)\n";
    }
    std::cout << "\n";
  }
  std::cout << logged_summary(logged);
  if (crashes > 0) {
    std::cout << "crashes: " << crashes << " cases crashed the worker process";
    if (pre_existing_crashes > 0) std::cout << ", " << pre_existing_crashes << " of them with the oracle too (pre-existing)";
    std::cout << "\n";
  }
  const int64_t new_crashes = crashes - pre_existing_crashes;
  if (!worker_failed.empty()) {
    std::cout << "ERROR: " << worker_failed << "\n";
  }
  if (summary.alarms() + new_crashes > 0) {
    std::cout << "FAIL: " << summary.alarms() << " regression or divergent verdicts, " << new_crashes
              << " crashes the oracle does not make; cases written to " << out_dir << "/\n";
  } else if (worker_failed.empty()) {  // otherwise the error above is the outcome
    std::cout << "OK: no regression, no divergence";
    if (summary.count(Classification::pre_existing) > 0) {
      std::cout << " (" << summary.count(Classification::pre_existing)
                << (sut->change_claims() == ChangeClaims::not_applicable
                        ? " pre-existing findings about " + sut->name() + " itself, which has no change to regress"
                        : std::string(" pre-existing findings about the oracle too"))
                << "; examples in " << out_dir << "/)";
    }
    std::cout << "\n";
  }
  write_reports(false);
  if (summary.alarms() + new_crashes > 0) return 1;
  return worker_failed.empty() ? 0 : 2;
}

}  // namespace

const Command kRun{"run", "draw random cases, check every property of a variant against the oracle", kRunHelp, {"quiet", "no-isolate", "fresh-process", "minimize-alarms-only"}, {"subject", "sut", "oracle", "claims", "seed", "cases", "seconds", "device", "max-depth", "max-ops", "out", "json", "junit", "minimize-seconds", "previous", "threads", "cpu-memory-budget", "world-size", "jobs", "eager"}, command_run, false};

}  // namespace recheck::cli
