// recheck run: draw random cases, check every property of a variant against the oracle.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "cli/command.h"
#include "core/case.h"
#include "properties/buckets.h"
#include "properties/corpus.h"
#include "properties/generator.h"
#include "properties/junit.h"
#include "properties/report.h"
#include "runner/bucket_minimize.h"
#include "runner/interrupts.h"
#include "runner/run_session.h"
#include "runner/worker_process.h"

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
                    function no subject declares (python:FILE.py:ATTR) is judged by its properties;
                    without --subject (or another --oracle) such a function is its own oracle,
                    judged against eager mode alone, and its findings fail the run
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
  --case-seconds S  a case still running after S seconds hangs (a deadlock, an endless loop):
                    its worker is killed, and the case is a crash finding (an alarm unless the
                    oracle hangs or crashes on it too), replayable as any other (default 300;
                    0: no limit; without --no-isolate only)
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

// The parsed options of a run, with what it needs from the variants; usage errors for bad ones.
struct ParsedRun {
  runner::RunPlan plan;
  int world_size = 1;
  bool minimize_alarms_only = false;
  int64_t minimize_option = -1;  // --minimize-seconds, -1 when not given
  std::optional<Buckets> previous;
  std::string share_note;  // how each worker's memory is held, for the first line
  json provenance = json::object();
};

ParsedRun parse_run(const Args& args, const CheckpointImplementation& sut, const CheckpointImplementation& oracle) {
  ParsedRun parsed;
  runner::RunPlan& plan = parsed.plan;
  plan.claims = claims_option(args);
  plan.gen.device = device_option(args);
  plan.gen.max_depth = static_cast<int>(args.number("max-depth", plan.gen.max_depth, 0, 16));
  plan.gen.max_ops = static_cast<int>(args.number("max-ops", plan.gen.max_ops, 1, 64));
  plan.gen = options_for(plan.gen, sut);
  parsed.world_size = world_size_option(args, sut, oracle, plan.gen.device);
  plan.fresh_process = args.flag("fresh-process");
  plan.case_seconds = case_seconds_option(args);
  if (plan.fresh_process && parsed.world_size > 1) {
    throw UsageError("--fresh-process: not with --world-size above 1 (the other ranks' processes are kept across cases)");
  }
  plan.cases = args.number("cases", -1, 1, INT64_MAX / 2);
  plan.seconds = args.number("seconds", plan.cases < 0 ? 60 : -1, 1, 365LL * 24 * 3600);
  plan.quiet = args.flag("quiet");
  plan.seed = args.has("seed") ? static_cast<uint64_t>(args.number("seed", 0, 0, INT64_MAX / 2))
                               : static_cast<uint64_t>(std::random_device{}() % 1000000000ULL);
  plan.out_dir = args.get("out", "recheck-findings");
  check_output_folder(plan.out_dir, "--out");
  parsed.minimize_option = args.number("minimize-seconds", -1, 0, 7 * 24 * 3600);
  parsed.minimize_alarms_only = args.flag("minimize-alarms-only");
  // Read before any case runs: a file that is not a report is bad input (exit 2), found at once.
  if (args.has("previous")) {
    try {
      parsed.previous = buckets_of_report(args.get("previous", ""));
    } catch (const std::runtime_error& error) {
      throw UsageError(std::string("--previous: ") + error.what());
    }
  }
  check_output_files(args, {"json", "junit"});
  plan.track_progress = args.has("json");
  plan.threads = args.number("threads", 0, 0, 1024);
  const std::string eager_option = args.get("eager", "always");
  if (eager_option != "always" && eager_option != "when-needed") {
    throw UsageError("--eager: expected always or when-needed, got '" + eager_option + "'");
  }
  plan.eager_run = eager_option == "always" ? EagerRun::always : EagerRun::when_needed;
  plan.jobs = jobs_option(args);
  plan.isolate = !args.flag("no-isolate");
  if (plan.jobs > 1 && !plan.isolate) throw UsageError("--jobs above 1 checks cases in worker processes: not with --no-isolate");
  if (plan.fresh_process && !plan.isolate) {
    throw UsageError("--fresh-process forks a worker per case: not with --no-isolate, which forks none");
  }
  plan.run_options.cpu_memory_budget = args.number("cpu-memory-budget", 0, 0, INT64_MAX / 2);
  // Several workers share the machine's memory: each run gets its share of what is available
  // now, so that a case too large for it is skipped, as one too large for the machine is, and
  // one worker's case cannot take the memory another's needs.
  if (plan.jobs > 1 && plan.gen.device == "cuda") {
    parsed.share_note = ", each worker held to 1/" + std::to_string(plan.jobs) + " of the GPU's memory";
  } else if (plan.jobs > 1 && plan.gen.device == "cpu" && !args.has("cpu-memory-budget")) {
    const int64_t available = runner::memory_available();
    if (available > 0) {
      plan.run_options.cpu_memory_budget = available / plan.jobs;
      parsed.share_note = ", each run held to " + std::to_string(plan.run_options.cpu_memory_budget / (1 << 20)) +
                          " MiB (the available memory's share of " + std::to_string(plan.jobs) + " jobs)";
    }
  }
  plan.not_checked = properties_not_checked(oracle, sut, plan.claims);
  // The environment a replay needs ("PYTHONPATH=... ") and this program, as started.
  plan.replay_prefix = replay_command(sut, oracle);
  plan.replay_suffix = subject_argument(args) + " --sut " + sut.name() + " --oracle " + oracle.name() +
                       claims_argument(plan.claims) + world_size_argument() +
                       (args.has("case-seconds") ? " --case-seconds " + args.get("case-seconds", "") : "");
  return parsed;
}

// The first lines: what runs against what, and where Python code came from (at once: a typo in
// PYTHONPATH shows here as the installed copy). Fills the plan's code note and the provenance.
void announce_run(ParsedRun& parsed, const CheckpointImplementation& sut, const CheckpointImplementation& oracle) {
  const runner::RunPlan& plan = parsed.plan;
  std::cerr << "recheck run: sut " << sut.name() << " against oracle " << oracle.name() << ", seed " << plan.seed
            << ", " << (plan.cases > 0 ? std::to_string(plan.cases) + " cases" : "")
            << (plan.cases > 0 && plan.seconds > 0 ? " or " : "")
            << (plan.seconds > 0 ? std::to_string(plan.seconds) + " s" : "") << ", device " << plan.gen.device
            << (parsed.world_size > 1 ? ", world size " + std::to_string(parsed.world_size) : "")
            << (plan.jobs > 1 ? ", " + std::to_string(plan.jobs) + " jobs" : "") << parsed.share_note << "\n";
  for (const auto& [role, variant] : {std::pair<const char*, const CheckpointImplementation*>{"sut", &sut},
                                      {"oracle", &oracle}}) {
    // Asked once: a Python variant's answer runs git and reads the installed distributions.
    const Provenance pairs = variant->provenance();
    if (pairs.empty()) continue;
    const std::string described = describe_provenance(pairs);
    std::cerr << "  " << role << " " << variant->name() << ": " << described << "\n";
    parsed.plan.code_note += std::string(" | ") + role + " code: " + described;
    for (const auto& [name, value] : pairs) parsed.provenance[role][name] = value;
  }
  if (plan.claims.chosen) {
    std::cerr << "  claims held: " << (plan.claims.held.empty() ? "none" : describe_claims(plan.claims)) << "\n";
  }
}

json run_report(const ParsedRun& parsed, const runner::RunRecord& record, const CheckpointImplementation& sut,
                const CheckpointImplementation& oracle, const LoggedCounts& logged) {
  const runner::RunPlan& plan = parsed.plan;
  json report = {{"tool", "recheck"},
                 {"command", "run"},
                 {"sut", sut.name()},
                 {"oracle", oracle.name()},
                 {"seed", plan.seed},
                 {"device", plan.gen.device},
                 {"world_size", parsed.world_size},
                 {"cases", record.summary.cases()},
                 {"seconds", record.seconds},
                 {"op_executions", record.op_executions},
                 {"interrupted", runner::interrupted()},
                 {"crashes", record.crashes},
                 {"pre_existing_crashes", record.pre_existing_crashes},
                 {"skipped", record.summary.skipped()},
                 {"eager", {{"when", plan.eager_run == EagerRun::always ? "always" : "when-needed"},
                            {"cases_without", record.eager_skipped}}},
                 {"error", record.failed.empty() ? json() : json(record.failed)},
                 {"summary", record.summary.to_json()},
                 {"findings", record.findings},
                 {"findings_not_listed", record.findings_not_listed},
                 {"buckets", record.buckets.to_json()},
                 {"progress", record.progress.samples()},
                 {"coverage", record.progress.coverage()}};
  if (!parsed.provenance.empty()) report["provenance"] = parsed.provenance;
  if (plan.claims.chosen) {
    json not_held = json::array();
    for (const std::string& name : claim_names()) {
      if (plan.claims.held.count(name) == 0) not_held.push_back(name);
    }
    report["claims"] = {{"held", json(plan.claims.held)}, {"not_held", not_held}};
  }
  if (!logged.empty()) report["logged"] = logged;
  return report;
}

// The summary on standard output: the table, the buckets by cause, and the outcome's last line.
// A function no subject declares (Subject::findings_fail) fails the run with any finding or crash.
bool findings_fail_the_run(const runner::RunRecord& record, const CheckpointImplementation& sut) {
  return subject_for(sut.name()).findings_fail &&
         record.summary.count(Classification::pre_existing) + record.crashes > 0;
}

void print_run(const runner::RunRecord& record, const runner::RunPlan& plan, const CheckpointImplementation& sut,
               const CheckpointImplementation& oracle, const LoggedCounts& logged, int minimized,
               double minimizing_seconds, double minimize_seconds) {
  const Summary& summary = record.summary;
  std::cout << "\nrecheck run: " << summary.cases() << " cases in " << std::fixed << std::setprecision(1)
            << record.seconds << " s (" << std::setprecision(1)
            << (record.seconds > 0 ? summary.cases() / record.seconds : 0.0) << " cases/s), sut " << sut.name()
            << ", oracle " << oracle.name() << ", seed " << plan.seed << (runner::interrupted() ? ", interrupted" : "")
            << "\n\n"
            << summary.table() << "\n";
  if (plan.eager_run == EagerRun::when_needed) {
    std::cout << "eager mode: ran on " << summary.cases() - summary.skipped() - record.eager_skipped << " of "
              << summary.cases() - summary.skipped()
              << " cases (--eager when-needed: left out where the oracle and the sut agree on all it judges; the "
                 "properties reading it count pre-existing verdicts only where it ran)\n";
  }
  if (summary.skipped() > 0) {
    std::cout << "skipped: " << summary.skipped() << " cases too large for the memory (first, " << record.first_skipped
              << ")\n";
  }
  if (record.buckets.size() > 0) {
    std::cout << "\n" << record.buckets.describe_by_cause();
    if (minimized > 0) {
      std::cout << "(" << minimized << " of them minimized after the run, in " << std::setprecision(1)
                << minimizing_seconds << " s of the " << minimize_seconds << " s allowed: --minimize-seconds)\n";
    }
    std::cout << "\n";
  }
  std::cout << logged_summary(logged);
  if (record.crashes > 0) {
    std::cout << "crashes: " << record.crashes << " cases crashed the worker process";
    if (record.pre_existing_crashes > 0) {
      std::cout << ", " << record.pre_existing_crashes << " of them with the oracle too (pre-existing)";
    }
    std::cout << "\n";
  }
  if (!record.failed.empty()) std::cout << "ERROR: " << record.failed << "\n";
  if (findings_fail_the_run(record, sut)) {
    std::cout << "FAIL: " << summary.count(Classification::pre_existing) << " findings and " << record.crashes
              << " crashes of " << sut.name()
              << " against eager mode (no subject declares it, so it is its own oracle and judged against eager mode "
                 "alone; --subject NAME judges it as that subject's function); cases written to "
              << plan.out_dir << "/\n";
  } else if (summary.alarms() + record.new_crashes() > 0) {
    std::cout << "FAIL: " << summary.alarms() << " regression or divergent verdicts, " << record.new_crashes()
              << " crashes the oracle does not make; cases written to " << plan.out_dir << "/\n";
  } else if (record.failed.empty()) {  // otherwise the error above is the outcome
    std::cout << "OK: no regression, no divergence";
    if (summary.count(Classification::pre_existing) > 0) {
      std::cout << " (" << summary.count(Classification::pre_existing)
                << (sut.change_claims() == ChangeClaims::not_applicable
                        ? " pre-existing findings about " + sut.name() + " itself, which has no change to regress"
                        : std::string(" pre-existing findings about the oracle too"))
                << "; examples in " << plan.out_dir << "/)";
    }
    std::cout << "\n";
  }
}

int command_run(const Args& args) {
  if (!args.positional().empty()) throw UsageError("run takes no positional argument: '" + args.positional()[0] + "'");
  const std::string sut_name = sut_option(args);
  const std::string oracle_name = oracle_option(args);
  const std::unique_ptr<CheckpointImplementation> sut = make_variant(sut_name);
  const std::unique_ptr<CheckpointImplementation> oracle = make_variant(oracle_name);
  // What importing the variants' code logged here (taken, so that no worker inherits it).
  LoggedCounts logged = take_logged();
  ParsedRun parsed = parse_run(args, *sut, *oracle);
  announce_run(parsed, *sut, *oracle);
  const runner::RunPlan& plan = parsed.plan;

  runner::stop_on_interrupt();
  runner::RunRecord record = runner::run_session(plan, *oracle, *sut);
  add_logged(logged, record.summary.logged());
  // The reports, written once the cases are checked and again once their buckets are minimized:
  // a minimization that dies (a crash in the reducer, a kill) leaves the run's report behind.
  auto write_reports = [&](bool before_minimizing) {
    if (!args.has("json") && !args.has("junit")) return;
    if (before_minimizing && args.get("json", "-") == "-") return;  // one report on standard output
    const json report = run_report(parsed, record, *sut, *oracle, logged);
    if (args.has("json")) write_json_report(args.get("json", "-"), report);
    if (args.has("junit")) write_file_atomically(args.get("junit", ""), junit_xml(report));
  };
  // Each bucket's first case minimized, after the run's own time (a campaign's is not spent on it).
  int minimized = 0;
  const double minimize_seconds = parsed.minimize_option >= 0 ? static_cast<double>(parsed.minimize_option)
                                                              : std::max(5.0, record.seconds / 10);
  const auto minimizing_start = Clock::now();
  const auto first_case = [&](const Bucket& b) { return draw_case(plan.gen, b.draw_seed); };
  if (minimize_seconds > 0 && record.buckets.size() > 0 && record.failed.empty() && !runner::interrupted() &&
      parsed.world_size == 1 && plan.isolate) {
    make_output_folder(plan.out_dir);
    write_reports(true);
    minimized = runner::minimize_buckets(record.buckets, {first_case, "recheck run", *oracle, *sut, plan.claims, plan.out_dir,
                                                          minimize_seconds, plan.replay_prefix, plan.replay_suffix,
                                                          parsed.minimize_alarms_only});
  } else {
    runner::minimize_buckets(record.buckets, {first_case, "recheck run", *oracle, *sut, plan.claims, plan.out_dir, 0,
                                              plan.replay_prefix, plan.replay_suffix});
  }
  if (parsed.previous) record.buckets.compare_with(*parsed.previous);
  print_run(record, plan, *sut, *oracle, logged, minimized,
            std::chrono::duration<double>(Clock::now() - minimizing_start).count(), minimize_seconds);
  write_reports(false);
  if (record.summary.alarms() + record.new_crashes() > 0) return 1;
  if (findings_fail_the_run(record, *sut)) return 1;
  return record.failed.empty() ? 0 : 2;
}

}  // namespace

const Command kRun{"run", "draw random cases, check every property of a variant against the oracle", kRunHelp, {"quiet", "no-isolate", "fresh-process", "minimize-alarms-only"}, {"subject", "sut", "oracle", "claims", "seed", "cases", "seconds", "device", "max-depth", "max-ops", "out", "json", "junit", "minimize-seconds", "case-seconds", "previous", "threads", "cpu-memory-budget", "world-size", "jobs", "eager"}, command_run, false};

}  // namespace recheck::cli
