// The worker processes of runner/, without the recheck binary: how a worker's death is read
// (a crash, the out-of-memory killer, an error it raised), the line protocol of a hunt, an
// interrupt passed on to a worker stuck in its case, and results crossing the process boundary.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/interpreter.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "runner/case_worker.h"
#include "runner/hunt.h"
#include "runner/interrupts.h"
#include "runner/isolated_check.h"
#include "runner/results_json.h"
#include "runner/worker_process.h"
#include "suts/subject.h"

namespace recheck::runner {
namespace {

// A process about to fork a child per case moves its resident anonymous memory onto 2 MiB pages:
// the bytes are still there, each child sees them and writes its own copy, and memory that is
// mostly not resident (a thread stack, a reserved arena) is left alone.
TEST(WorkerProcess, resident_anonymous_memory_moves_onto_huge_pages_and_keeps_its_bytes) {
  constexpr size_t kBytes = size_t{16} << 20;
  std::vector<unsigned char> filled(kBytes);
  for (size_t i = 0; i < kBytes; ++i) filled[i] = static_cast<unsigned char>(i * 7 + 3);
  // Mapped, one page in 512 touched: mostly not resident.
  void* mapped = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  auto* sparse = static_cast<unsigned char*>(mapped);
  for (size_t i = 0; i < kBytes; i += size_t{2} << 20) sparse[i] = 1;
  const int64_t collapsed = collapse_onto_huge_pages();
  if (collapsed == 0) GTEST_SKIP() << "this kernel collapses nothing (MADV_COLLAPSE is Linux 6.1 on)";
  EXPECT_GE(collapsed, static_cast<int64_t>(kBytes) - (int64_t{4} << 20)) << "the filled buffer, less its unaligned ends";
  for (size_t i = 0; i < kBytes; i += 4093) ASSERT_EQ(filled[i], static_cast<unsigned char>(i * 7 + 3)) << i;
  WorkerProcess child;
  child.start([&](FILE*, int out) {
    bool same = true;
    for (size_t i = 0; i < kBytes; i += 4093) same = same && filled[i] == static_cast<unsigned char>(i * 7 + 3);
    filled[0] = 99;  // its own copy, not the parent's
    write_all(out, same ? "same\n" : "differs\n");
  }, /*with_input=*/false);
  EXPECT_EQ(child.read_line().value_or("none"), "same");
  EXPECT_EQ(child.stop(), "exited with status 0");
  EXPECT_EQ(filled[0], 3);
  // The sparse mapping stayed as it was: collapsing it would have made all of it resident.
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident(kBytes / page);
  ASSERT_EQ(mincore(mapped, kBytes, resident.data()), 0);
  size_t in_memory = 0;
  for (const unsigned char r : resident) in_memory += r & 1;
  EXPECT_LE(in_memory, resident.size() / 64) << "the mostly untouched mapping was collapsed";
  munmap(mapped, kBytes);
}

TEST(WorkerProcess, answers_line_by_line_and_says_how_it_ended) {
  WorkerProcess worker;
  worker.start(
      [](FILE* in, int out) {
        char* buffer = nullptr;
        std::size_t capacity = 0;
        for (ssize_t n; (n = getline(&buffer, &capacity, in)) > 0;) write_all(out, "got " + std::string(buffer, n));
      },
      true);
  ASSERT_TRUE(worker.send("one\n"));
  EXPECT_EQ(worker.read_line(), std::optional<std::string>("got one"));
  ASSERT_TRUE(worker.send("two\n"));
  EXPECT_EQ(worker.read_line(), std::optional<std::string>("got two"));
  EXPECT_EQ(worker.stop(), "exited with status 0");
  EXPECT_FALSE(worker.running());
}

TEST(WorkerProcess, an_abort_is_a_death_by_signal_and_no_line) {
  WorkerProcess worker;
  worker.start([](FILE*, int out) { write_all(out, "half a li"); std::abort(); }, false);
  EXPECT_EQ(worker.read_line(), std::nullopt) << "a line cut short by the death is no line";
  EXPECT_EQ(worker.stop(), "was killed by signal 6 (Aborted)");
  EXPECT_FALSE(killed_for_memory(worker.status(), 0));
}

TEST(WorkerProcess, an_exception_is_one_error_line_and_status_3) {
  WorkerProcess worker;
  worker.start([](FILE*, int) { throw std::runtime_error("no device\nwith a second line"); }, false);
  EXPECT_EQ(worker.read_line(), std::optional<std::string>("error no device"));
  EXPECT_EQ(worker.stop(), "exited with status 3");
}

// The out-of-memory killer's count, from a file in place of /proc/vmstat.
class OutOfMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/vmstat-" + std::to_string(getpid());
    write_count(7);
    setenv("RECHECK_VMSTAT", path_.c_str(), 1);
  }
  void TearDown() override { unsetenv("RECHECK_VMSTAT"); }
  void write_count(int count) const {
    std::ofstream(path_ + ".next") << "pgfault 1\noom_kill " << count << "\n";
    std::rename((path_ + ".next").c_str(), path_.c_str());
  }
  std::string path_;
};

// What a hunt handed on, in the order it did: "R3" a result for case 3, "L3" case 3 lost.
struct Seen {
  std::vector<std::string> events;
  std::vector<CaseLost> lost;
  WorkerHunt hunt(std::function<bool(int64_t)> should_stop, std::function<CaseResult(int64_t)> check,
                  std::function<void()> prepare = [] {}) {
    return {std::move(prepare), std::move(should_stop), std::move(check),
            [this](int64_t i, const CaseResult& result) {
              EXPECT_EQ(result.op_executions, i);
              events.push_back("R" + std::to_string(i));
            },
            [this](int64_t i, const CaseLost& case_lost) {
              events.push_back("L" + std::to_string(i));
              lost.push_back(case_lost);
            }};
  }
};

CaseResult numbered(int64_t i) {
  CaseResult result;
  result.op_executions = i;
  return result;
}

std::vector<std::string> events(std::initializer_list<const char*> list) { return {list.begin(), list.end()}; }

TEST_F(OutOfMemory, a_sigkill_while_the_count_goes_up_is_a_kill_for_memory) {
  EXPECT_EQ(oom_kills(), 7);
  for (const bool counted : {true, false}) {
    Seen seen;
    const HuntOutcome outcome = hunt_in_workers(1, seen.hunt([](int64_t i) { return i >= 4; }, [&](int64_t i) {
      // What the kernel does: counts the kill, then kills.
      if (i == 2) {
        if (counted) write_count(8);
        raise(SIGKILL);
      }
      return numbered(i);
    }));
    EXPECT_EQ(seen.events, events({"R0", "R1", "L2", "R3"})) << counted;
    ASSERT_EQ(seen.lost.size(), 1u);
    EXPECT_EQ(seen.lost[0].killed_for_memory, counted) << "the same SIGKILL without the count is a crash";
    EXPECT_EQ(seen.lost[0].status, "was killed by signal 9 (Killed)");
    EXPECT_EQ(outcome.failed, "");
    write_count(7);
  }
}

TEST(Hunt, a_crash_loses_its_case_and_a_new_worker_goes_on_from_the_next) {
  Seen seen;
  const HuntOutcome outcome = hunt_in_workers(1, seen.hunt([](int64_t i) { return i >= 11; }, [](int64_t i) {
    if (i == 8) std::abort();
    return numbered(i);
  }));
  EXPECT_EQ(seen.events, events({"R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "L8", "R9", "R10"}));
  ASSERT_EQ(seen.lost.size(), 1u);
  EXPECT_FALSE(seen.lost[0].killed_for_memory);
  EXPECT_EQ(seen.lost[0].status, "was killed by signal 6 (Aborted)");
  EXPECT_EQ(outcome.failed, "");
}

// With several jobs each case is checked once, by one worker, and everything is handed on in
// case order, whichever worker was first: a crash in one worker stops no other.
TEST(Hunt, several_jobs_check_each_case_once_and_hand_them_on_in_order) {
  for (const int jobs : {2, 3}) {
    Seen seen;
    const HuntOutcome outcome = hunt_in_workers(jobs, seen.hunt([](int64_t i) { return i >= 12; }, [](int64_t i) {
      if (i == 4) std::abort();
      // Later cases finish first: worker 0's cases are slow.
      if (i % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return numbered(i);
    }));
    EXPECT_EQ(seen.events,
              events({"R0", "R1", "R2", "R3", "L4", "R5", "R6", "R7", "R8", "R9", "R10", "R11"}))
        << jobs << " jobs";
    EXPECT_EQ(outcome.failed, "");
  }
}

TEST(Hunt, ends_at_its_limit_and_says_why_it_could_not_start) {
  Seen done;
  EXPECT_EQ(hunt_in_workers(2, done.hunt([](int64_t i) { return i >= 4; }, numbered)).failed, "");
  EXPECT_EQ(done.events, events({"R0", "R1", "R2", "R3"}));
  Seen refused;
  const HuntOutcome outcome = hunt_in_workers(
      2, refused.hunt([](int64_t) { return false; }, numbered, [] { throw std::runtime_error("no CUDA device"); }));
  EXPECT_EQ(refused.events, events({}));
  EXPECT_EQ(outcome.failed, "the worker could not start (exited with status 3): no CUDA device");
}

// With a fresh process per case, what one case leaves in the process (here a count of calls, as
// a first-call flag would be) reaches no other; without, the worker's later cases see it.
TEST(Hunt, a_fresh_process_per_case_starts_every_case_from_the_prepared_state) {
  for (const bool fresh : {true, false}) {
    static int calls = 0;  // in the worker; each fork starts from the worker's value
    static int prepared = 0;
    calls = prepared = 0;
    std::vector<int64_t> seen_calls;
    WorkerHunt hunt{[] { ++prepared; }, [](int64_t i) { return i >= 4; },
                    [](int64_t) {
                      CaseResult result;
                      result.op_executions = calls++ * 100 + prepared;
                      return result;
                    },
                    [&](int64_t, const CaseResult& result) { seen_calls.push_back(result.op_executions); },
                    [](int64_t, const CaseLost&) {}};
    hunt.fresh_process_per_case = fresh;
    EXPECT_EQ(hunt_in_workers(1, hunt).failed, "");
    // Prepared once in each case's fork (after the trial, in a fork of its own) or once for all.
    EXPECT_EQ(seen_calls, fresh ? std::vector<int64_t>({1, 1, 1, 1}) : std::vector<int64_t>({1, 101, 201, 301}));
  }
}

TEST(Hunt, a_fresh_process_per_case_reports_crashes_exceptions_and_refusals_as_a_worker_does) {
  Seen seen;
  WorkerHunt hunt = seen.hunt([](int64_t i) { return i >= 5; }, [](int64_t i) {
    if (i == 1) std::abort();
    if (i == 3) throw std::runtime_error("no attribute '_current_state_name'");
    return numbered(i);
  });
  hunt.fresh_process_per_case = true;
  EXPECT_EQ(hunt_in_workers(2, hunt).failed, "");
  EXPECT_EQ(seen.events, events({"R0", "L1", "R2", "L3", "R4"}));
  ASSERT_EQ(seen.lost.size(), 2u);
  EXPECT_EQ(seen.lost[0].status, "was killed by signal 6 (Aborted)");
  EXPECT_EQ(seen.lost[1].error, "no attribute '_current_state_name'");
  Seen refused;
  WorkerHunt refusing = refused.hunt([](int64_t) { return false; }, numbered, [] { throw std::runtime_error("no CUDA device"); });
  refusing.fresh_process_per_case = true;
  EXPECT_EQ(hunt_in_workers(1, refusing).failed, "the worker could not start (exited with status 3): no CUDA device");
  EXPECT_EQ(refused.events, events({}));
}

// A case that hangs (a deadlock in a variant: libtorch's node mutex waited on by its own
// thread) is killed after case_seconds and lost as hung, with and without a fork per case, and
// the hunt goes on from the next case; with no limit nothing is killed.
TEST(Hunt, a_case_past_its_time_is_killed_and_lost_as_hung_and_the_hunt_goes_on) {
  for (const bool fresh : {false, true}) {
    Seen seen;
    WorkerHunt hunt = seen.hunt([](int64_t i) { return i >= 4; }, [](int64_t i) {
      if (i == 1) std::this_thread::sleep_for(std::chrono::hours(1));
      if (i == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // slow, in time
      return numbered(i);
    });
    hunt.fresh_process_per_case = fresh;
    hunt.case_seconds = 1.5;
    const auto began = std::chrono::steady_clock::now();
    EXPECT_EQ(hunt_in_workers(2, hunt).failed, "");
    EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(30));
    EXPECT_EQ(seen.events, events({"R0", "L1", "R2", "R3"})) << fresh;
    ASSERT_EQ(seen.lost.size(), 1u);
    EXPECT_TRUE(seen.lost[0].hung);
    EXPECT_FALSE(seen.lost[0].killed_for_memory);
    EXPECT_EQ(seen.lost[0].status, "did not finish the case within 1.5 s (--case-seconds) and was killed");
  }
}

// stop_within kills a child that does not end in time, and says so; one that ends is described
// as stop describes it.
TEST(WorkerProcessTest, stop_within_kills_a_child_that_does_not_end_and_says_so) {
  WorkerProcess hanging;
  hanging.start([](FILE*, int) { std::this_thread::sleep_for(std::chrono::hours(1)); }, false, false);
  EXPECT_EQ(hanging.stop_within(0.5), "did not end within 0.5 s and was killed");
  EXPECT_TRUE(WIFSIGNALED(hanging.status()));
  WorkerProcess ending;
  ending.start([](FILE*, int) {}, false, false);
  EXPECT_EQ(ending.stop_within(5), "exited with status 0");
}

// An exception that escapes a case ends the worker there, and says what it was: `run` reports
// the text with the case, never a bare exit status.
TEST(Hunt, an_exception_in_a_case_names_the_case_and_its_text) {
  Seen seen;
  hunt_in_workers(1, seen.hunt([](int64_t i) { return i >= 4; }, [](int64_t i) {
    if (i == 2) throw std::runtime_error("'CudaRNGStatesTracker' object has no attribute '_current_state_name'");
    return numbered(i);
  }));
  EXPECT_EQ(seen.events, events({"R0", "R1", "L2", "R3"}));
  ASSERT_EQ(seen.lost.size(), 1u);
  EXPECT_EQ(seen.lost[0].status, "exited with status 3");
  EXPECT_EQ(seen.lost[0].error, "'CudaRNGStatesTracker' object has no attribute '_current_state_name'");
}

// Ctrl-C while workers are stuck in their cases: passed on to every worker, each killed 0.4 s
// later; the cases in progress are left out, and this process is still here to report.
TEST(Interrupts, workers_stuck_in_their_cases_are_killed_after_the_grace) {
  stop_on_interrupt();
  std::thread ctrl_c([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(getpid(), SIGINT);
  });
  const auto start = std::chrono::steady_clock::now();
  Seen seen;
  const HuntOutcome outcome = hunt_in_workers(2, seen.hunt([](int64_t) { return false; }, [](int64_t i) {
    while (i >= 2) pause();  // an interrupt does not end these cases
    return numbered(i);
  }));
  ctrl_c.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(interrupted());
  EXPECT_EQ(interrupt_signal(), SIGINT);
  EXPECT_EQ(seen.events, events({"R0", "R1"})) << "the cases in progress are left out";
  EXPECT_EQ(outcome.failed, "");
  EXPECT_LT(seconds, 30.0) << "the workers were not killed";
  forget_interrupt();  // the tests after this one, in the same process under the sanitizers
  EXPECT_FALSE(interrupted());
}

TEST(ResultsJson, a_case_result_crosses_the_process_boundary_whole) {
  CaseResult result;
  result.op_executions = 42;
  Verdict failing = Verdict::fail("iteration 1, leaf v2 .grad", std::nullopt, "differs");
  result.results.push_back({"grads-bitwise", Verdict::pass(), failing, Classification::regression, ""});
  result.results.push_back({"errors-match", failing, failing, Classification::pre_existing, ""});
  result.logged = {{"megatron.core.tensor_parallel.random WARNING: CPU RNG state changed", 3}};
  const CaseResult back = case_result_from_json(nlohmann::json::parse(to_json(result).dump()));
  EXPECT_EQ(back.op_executions, 42);
  EXPECT_EQ(back.logged, result.logged);
  EXPECT_EQ(back.skipped, "");
  ASSERT_EQ(back.results.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.results[i].property, result.results[i].property);
    EXPECT_EQ(back.results[i].classification, result.results[i].classification);
    EXPECT_EQ(back.results[i].sut.holds, result.results[i].sut.holds);
    EXPECT_EQ(back.results[i].oracle.holds, result.results[i].oracle.holds);
    EXPECT_EQ(back.results[i].sut.describe(), result.results[i].sut.describe());
    EXPECT_EQ(back.results[i].oracle.describe(), result.results[i].oracle.describe());
  }
  EXPECT_TRUE(back.has_alarm());
  CaseResult skipped;
  skipped.skipped = "too large";
  EXPECT_TRUE(to_json(CaseResult{}).at("skipped").is_null());
  EXPECT_EQ(case_result_from_json(to_json(skipped)).skipped, "too large");
}

// Runs as nonclearing, but aborts the process at its call after `threshold` (when set): it
// survives one run of a case of that many calls in a process, not a second. So does released
// code that reads freed memory, by what the process did before (a discarded output that is its
// body's argument: the false alarm of the gate on Megatron-LM 7cdba422b8).
class AbortsWhenRunTwice : public CheckpointImplementation {
 public:
  static inline int threshold = 0;
  static inline int calls = 0;
  std::string name() const override { return "aborts-when-run-twice"; }
  Values apply(const RunFunction& run_function, const CallSettings& call, const Values& args) override {
    if (++calls > threshold && threshold > 0) std::abort();
    return inner_->apply(run_function, call, args);
  }
  RngSources rng_sources(bool on_cuda) const override { return inner_->rng_sources(on_cuda); }

 private:
  std::unique_ptr<CheckpointImplementation> inner_ = make_checkpoint("nonclearing");
};

// A crash of the variant is pre-existing when the released function crashes on the case too:
// run alone, or, where that survives, checked against itself, as the variant was checked.
TEST(OracleCrash, is_found_alone_or_checked_against_itself) {
  AbortsWhenRunTwice twice;
  Case c;
  for (uint64_t seed = 1; AbortsWhenRunTwice::calls == 0; ++seed) {
    ASSERT_LT(seed, 50u) << "no drawn case with a checkpoint";
    c = draw_case(GenOptions{}, seed);
    (void)run_case(c, twice);
  }
  AbortsWhenRunTwice::threshold = AbortsWhenRunTwice::calls;  // one run's calls, in the forks to come
  AbortsWhenRunTwice::calls = 0;
  const std::string ended = oracle_crash(c, twice);
  EXPECT_NE(ended.find("the worker process checking it against itself was killed by signal"), std::string::npos) << ended;

  auto plain = make_checkpoint("nonclearing");
  EXPECT_EQ(oracle_crash(c, *plain), "") << "a function that does not crash";
  AbortsWhenRunTwice::threshold = 0;
}

// A case checked in a worker gives what it gives in this process.
TEST(CaseWorker, gives_the_verdicts_of_a_check_in_this_process) {
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("skip-rng-restore");
  CaseWorker worker("drawn", "cpu", *oracle, *sut, Limits{});
  int alarms = 0;
  // At least 12 cases, and on until the mutant has raised an alarm (about one case in twenty).
  for (uint64_t seed = 1; seed <= 12 || (alarms == 0 && seed <= 120); ++seed) {
    const Case c = draw_case(GenOptions{}, seed);
    const IsolatedCheck isolated = worker.check(c);
    ASSERT_TRUE(isolated.result) << isolated.crash;
    const CaseResult here = check_case(c, *oracle, *sut);
    ASSERT_EQ(isolated.result->results.size(), here.results.size());
    for (size_t i = 0; i < here.results.size(); ++i) {
      EXPECT_EQ(isolated.result->results[i].classification, here.results[i].classification) << seed;
      EXPECT_EQ(isolated.result->results[i].sut.describe(), here.results[i].sut.describe()) << seed;
    }
    alarms += here.has_alarm();
  }
  EXPECT_GT(alarms, 0) << "a mutant that raises no alarm in 120 cases shows nothing here";
}

}  // namespace
}  // namespace recheck::runner

namespace recheck {
namespace {

// What the code under test logged is counted in the process that ran the case, carried with the
// case's result, and listed once, with its count, at the end of a run.
TEST(Logged, is_counted_per_case_and_listed_once_at_the_end) {
  (void)take_logged();
  count_logged("megatron WARNING: m");
  count_logged("megatron WARNING: m");
  count_logged("UserWarning (checkpoint.py:1): n");
  CaseResult first;
  first.logged = take_logged();
  EXPECT_TRUE(take_logged().empty()) << "taking starts the counts again";
  CaseResult second;
  second.logged = {{"megatron WARNING: m", 2}};
  Summary summary;
  summary.add(first);
  summary.add(second);
  EXPECT_EQ(summary.logged().at("megatron WARNING: m"), 4);
  EXPECT_EQ(summary.logged().at("UserWarning (checkpoint.py:1): n"), 1);
  const std::string text = logged_summary(summary.logged());
  EXPECT_NE(text.find("logged by the code under test: 5 messages"), std::string::npos) << text;
  EXPECT_NE(text.find("        4  megatron WARNING: m\n"), std::string::npos) << text;
  EXPECT_EQ(logged_summary({}), "");
}

}  // namespace
}  // namespace recheck
