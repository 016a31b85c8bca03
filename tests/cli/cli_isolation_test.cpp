// The command line's worker processes as a user meets them: Ctrl-C and SIGTERM inside a case,
// a worker the out-of-memory killer ends, a variant that aborts or crashes, a device a worker
// cannot use. (runner/'s own tests, without the binary: tests/runner/runner_test.cpp.)
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/torch_compat.h"
#include "properties/generator.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace {

using recheck::test_shell::Result;
using recheck::test_shell::run_shell;

Result run(const std::string& args) { return run_shell(std::string(recheck::test_paths::recheck_binary()) + " " + args); }

const std::string kSeeds = std::string(recheck::test_paths::source_dir()) + "/corpus/seeds/";

// What an interrupted run leaves in `folder` that is not a complete file: a temporary name
// still there (writes go to .recheck-PID-N.tmp, then are renamed), or a JSON file that does not
// parse.
std::vector<std::string> incomplete_files(const std::string& folder) {
  std::vector<std::string> found;
  if (!std::filesystem::exists(folder)) return found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".recheck-", 0) == 0) found.push_back(entry.path().string());
    if (entry.path().extension() == ".json") {
      try {
        // Kept in a variable: GCC's warn_unused_result is not silenced by a cast to void.
        const nlohmann::json parsed = nlohmann::json::parse(std::ifstream(entry.path()));
        (void)parsed;
      } catch (const std::exception&) {
        found.push_back(entry.path().string());
      }
    }
  }
  return found;
}

TEST(Cli, ctrl_c_stops_a_run_with_the_summary_so_far_and_a_complete_report) {
  const std::string json_path = ::testing::TempDir() + "/interrupted.json";
  std::remove(json_path.c_str());
  std::filesystem::remove_all(::testing::TempDir() + "/interrupted");
  // SIGINT 8 s into a 120 s run (the sanitizer build takes seconds to load libtorch and install
  // its handler); --preserve-status hands back recheck's own exit code.
  const Result r = run_shell("timeout --preserve-status -s INT 8 " + std::string(recheck::test_paths::recheck_binary()) +
                             " run --seconds 120 --seed 3 --quiet --out " + ::testing::TempDir() + "/interrupted --json " +
                             json_path);
  // Cut short, so not green: 128 + SIGINT, as a shell reports it, even with nothing found.
  EXPECT_EQ(r.exit_code, 130) << r.output;
  EXPECT_NE(r.output.find(", interrupted"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("grads-bitwise"), std::string::npos) << r.output;
  std::ifstream in(json_path);
  const nlohmann::json report = nlohmann::json::parse(in);  // complete, or this throws
  EXPECT_TRUE(report.at("interrupted").get<bool>());
  EXPECT_LT(report.at("seconds").get<double>(), 60.0) << "the run did not stop at the interrupt";
  EXPECT_EQ(incomplete_files(::testing::TempDir() + "/interrupted"), std::vector<std::string>{});
}

TEST(Cli, ctrl_c_or_sigterm_stops_a_run_inside_a_slow_case) {
  // The worker used to finish the case in progress before the run stopped (a case of 40 ops
  // nested 8 deep took over 25 s). Now it is killed 0.4 s after the signal, and the run reports.
  // A worker that never finishes its case: stopped (SIGSTOP) once the run is under way.
  for (const char* signal : {"INT", "TERM"}) {
    const std::string dir = ::testing::TempDir() + "/slow-interrupted";
    recheck::test_shell::fresh_folder(dir);
    const std::string json_path = dir + "/report.json";
    const Result r = run_shell(
        "bash -c '" + std::string(recheck::test_paths::recheck_binary()) + " run --seed 3 --seconds 120 --out " + dir + "/out --json " + json_path +
        " > " + dir + "/log 2>&1 & p=$!; for i in $(seq 6000); do grep -q \" cases, \" " + dir +
        "/log && break; sleep 0.01; done; w=$(pgrep -P $p); kill -STOP $w; s=$(date +%s%N); kill -" + signal +
        " $p; wait $p; echo exit=$? worker=$w ms=$(( ($(date +%s%N) - s) / 1000000 ))'");
    EXPECT_NE(r.output.find(std::string("exit=") + (std::string(signal) == "INT" ? "130" : "143")), std::string::npos)
        << signal << ": " << r.output;
    // A worker was there to stop, or the test would show nothing.
    EXPECT_EQ(r.output.find_first_of("0123456789", r.output.find("worker=")), r.output.find("worker=") + 7) << r.output;
    const std::size_t ms_at = r.output.find("ms=");
    ASSERT_NE(ms_at, std::string::npos) << r.output;
    EXPECT_LT(std::stoi(r.output.substr(ms_at + 3)), 10000) << signal << ": the run waited for the stopped worker";
    const nlohmann::json report = nlohmann::json::parse(std::ifstream(json_path));
    EXPECT_TRUE(report.at("interrupted").get<bool>()) << signal;
    EXPECT_EQ(report.at("crashes"), 0) << signal << ": the killed case is not a crash";
    EXPECT_GT(report.at("cases").get<int64_t>(), 0) << signal;
    EXPECT_EQ(incomplete_files(dir), std::vector<std::string>{}) << signal;
  }
}

// On Linux a machine out of memory kills the process touching the pages (SIGKILL from the
// out-of-memory killer) rather than failing an allocation: a case too large for the machine is
// skipped, not reported as a crash of the variant. recheck tells by the kernel's count of such
// kills (/proc/vmstat), read here from a file whose count the test raises as it kills the
// worker (stopped first, so that it cannot start a case between the two), as the kernel does,
// or leaves alone: the same SIGKILL is then a crash. (A FIFO that counted up at every read
// raced: a reader could join the pipe as the writer left it, read nothing, and the kill was a
// crash.) `run`'s worker, and the one `repro` checks its case in (a case that takes minutes,
// killed a second in).
TEST(Cli, a_worker_the_out_of_memory_killer_ends_is_a_skipped_case_not_a_crash) {
  const std::string dir = ::testing::TempDir() + "/oom-killed";
  recheck::test_shell::fresh_folder(dir);
  nlohmann::json chain = nlohmann::json::array();
  for (int i = 0; i < 60; ++i) chain.push_back({{"op", "matmul"}, {"a", i}, {"b", 0}});
  std::ofstream(dir + "/slow.json") << nlohmann::json{
      {"format", "recheck-case"}, {"version", 1}, {"device", "cpu"}, {"dtype", "float32"}, {"iterations", 1}, {"seed", 7},
      {"leaves", {{{"fill", "randn"}, {"requires_grad", true}, {"shape", {2048, 2048}}}}},
      {"root", {{"ops", {{{"op", "checkpoint"}, {"distribute", false}, {"args", {{{"ref", 0}}}},
                          {"body", {{"ops", chain}, {"outputs", {60}}}}}}},
                {"outputs", {1}}}}}.dump();
  std::ofstream(dir + "/kill.sh") << R"sh(set -u
dir=$1; recheck=$2; counted=$3; shift 3
echo "oom_kill 7" > "$dir/vmstat"
RECHECK_VMSTAT="$dir/vmstat" "$recheck" "$@" > "$dir/log" 2>&1 & p=$!
for i in $(seq 6000); do w=$(pgrep -P $p) && break; sleep 0.01; done
# Killed once it has computed for 0.3 s (user + system clock ticks): inside a case, not while
# it starts, however loaded the machine.
for i in $(seq 6000); do [ "$(awk '{print $14 + $15}' /proc/$w/stat 2> /dev/null || echo 0)" -ge 30 ] && break; sleep 0.01; done
kill -STOP $w
# Replaced by rename: a read sees the old file or the new one, whole.
[ "$counted" = 1 ] && echo "oom_kill 8" > "$dir/vmstat.next" && mv -f "$dir/vmstat.next" "$dir/vmstat"
kill -KILL $w
# repro ends by itself once it has reported the killed worker; run goes on until interrupted.
# Up to 5 s for the first, however loaded the machine, before the interrupt the second needs.
for i in $(seq 500); do kill -0 $p 2> /dev/null || break; sleep 0.01; done
kill -INT $p 2> /dev/null; wait $p; echo "exit=$? worker=$w"
cat "$dir/log"
)sh";
  auto kill_worker = [&](bool counted, const std::string& command) {
    const Result r = run_shell("bash " + dir + "/kill.sh " + dir + " " + recheck::test_paths::recheck_binary() + " " + (counted ? "1 " : "0 ") + command);
    // A worker was there to kill, or the test would show nothing.
    EXPECT_EQ(r.output.find_first_of("0123456789", r.output.find("worker=")), r.output.find("worker=") + 7) << r.output;
    return r.output;
  };
  for (const bool counted : {true, false}) {
    const std::string output =
        kill_worker(counted, "run --seed 1 --seconds 60 --out " + dir + "/out --json " + dir + "/report.json");
    EXPECT_NE(output.find(counted ? "exit=130" : "exit=1 "), std::string::npos) << counted << ": " << output;
    const nlohmann::json report = nlohmann::json::parse(std::ifstream(dir + "/report.json"));
    EXPECT_EQ(report.at("crashes"), counted ? 0 : 1) << report.dump();
    EXPECT_EQ(report.at("skipped"), counted ? 1 : 0) << report.dump();
    EXPECT_GT(report.at("cases").get<int64_t>(), 1) << "the run went on after the killed case: " << report.dump();
    if (counted) {
      EXPECT_NE(output.find("skipped: 1 cases too large for the memory (first, case "), std::string::npos) << output;
      EXPECT_NE(output.find("killed by the kernel's out-of-memory killer"), std::string::npos) << output;
      EXPECT_EQ(output.find("crash"), std::string::npos) << output;
    } else {
      EXPECT_NE(output.find("the worker process was killed by signal 9"), std::string::npos) << output;
    }
    const std::string repro = kill_worker(counted, "repro " + dir + "/slow.json");
    if (counted) {
      EXPECT_NE(repro.find("exit=0 "), std::string::npos) << repro;
      EXPECT_NE(repro.find("skipped: the check process was killed by the kernel's out-of-memory killer"),
                std::string::npos) << repro;
      EXPECT_EQ(repro.find("crash"), std::string::npos) << repro;
    } else {
      EXPECT_NE(repro.find("exit=1 "), std::string::npos) << repro;
      EXPECT_NE(repro.find("crash: the check process was killed by signal 9"), std::string::npos) << repro;
    }
  }
}

// `run` of draw seeds 1..6 into `out` with a test variant that crashes in every backward: each
// case that runs a backward through a checkpoint crashes (draw seed 6 does; which others do
// follows the generator), each a finding that says `why` the worker ended, and the run goes on
// with the others.
void expect_crashes(const std::string& variant, const std::string& out, const std::string& why) {
  std::filesystem::remove_all(out);
  const Result r = run("run --sut " + variant + " --seed 1 --cases 6 --quiet --out " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("crash: runs-to-completion in case 5 (draw seed 6)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
  const size_t counted = r.output.find("crashes: ");
  ASSERT_NE(counted, std::string::npos) << r.output;
  const int crashed = std::stoi(r.output.substr(counted + 9));
  EXPECT_GE(crashed, 1) << r.output;
  EXPECT_LT(crashed, 6) << r.output;
  EXPECT_NE(r.output.find("recheck run: " + std::to_string(6 - crashed) + " cases"), std::string::npos)
      << "the other cases were checked: " << r.output;
}

TEST(Cli, a_case_that_crashes_the_variant_is_a_finding_and_the_run_goes_on) {
  const std::string out = ::testing::TempDir() + "/crashes";
  // The test variant `aborts` calls std::abort() in every backward.
  expect_crashes("aborts", out, "the worker process was killed by signal 6");
  const std::string finding = out + "/seed-1-case-5-runs-to-completion-crash.json";
  const recheck::Case saved = recheck::load_case_file(finding);
  EXPECT_EQ(saved.seed, recheck::draw_case(recheck::GenOptions{}, 6).seed);

  // The printed replay line replays the crash instead of crashing recheck (it aborted, exit 134).
  const Result repro = run("repro " + finding + " --sut aborts");
  EXPECT_EQ(repro.exit_code, 1) << repro.output;
  EXPECT_NE(repro.output.find("runs-to-completion   crash: the check process was killed by signal 6"), std::string::npos)
      << repro.output;
  // Each finding records what it shows, so replaying the folder checks that every one still does.
  const Result replay = run("replay " + out);
  EXPECT_EQ(replay.exit_code, 0) << replay.output;
  EXPECT_NE(replay.output.find(" expectations hold, 0 do not"), std::string::npos) << replay.output;
  EXPECT_NE(replay.output.find("ok    " + finding + "  aborts runs-to-completion crash"), std::string::npos) << replay.output;
  const Result replay_fixed = run("replay " + finding + " --oracle nonclearing");
  EXPECT_EQ(replay_fixed.exit_code, 0) << replay_fixed.output;
  // A crash minimizes, each candidate checked in a process of its own.
  const Result minimized = run("minimize " + finding + " --sut aborts --out " + out + "/min.json");
  EXPECT_EQ(minimized.exit_code, 0) << minimized.output;
  EXPECT_NE(minimized.output.find("minimizing: aborts runs-to-completion crash"), std::string::npos) << minimized.output;
  const recheck::Case smallest = recheck::load_case_file(out + "/min.json");
  EXPECT_LT(recheck::stats(smallest).ops, recheck::stats(saved).ops);
  EXPECT_EQ(smallest.expect.at(0), (recheck::Expectation{"aborts", "runs-to-completion", "crash"}));
  EXPECT_EQ(run("replay " + out + "/min.json").exit_code, 0);
  // Crashing candidates checked side by side, each in a fresh process, keep the same case.
  const Result side_by_side = run("minimize " + finding + " --sut aborts --jobs 2 --out " + out + "/min-2.json");
  EXPECT_EQ(side_by_side.exit_code, 0) << side_by_side.output;
  EXPECT_EQ(recheck::to_json(recheck::load_case_file(out + "/min-2.json")).dump(), recheck::to_json(smallest).dump());
}

// A segmentation fault in the variant (the test variant `segfaults` writes through a null
// pointer in every backward) is isolated the same way: the same three cases crash.
TEST(Cli, a_segmentation_fault_inside_the_variant_is_a_finding_too) {
  const std::string out = ::testing::TempDir() + "/segfaults";
#if defined(__SANITIZE_ADDRESS__)
  // Under the sanitizers, they catch the write and end the worker with their exit status.
  expect_crashes("segfaults", out, "the worker process exited with status");
#else
  expect_crashes("segfaults", out, "the worker process was killed by signal 11");
#endif
  const Result repro = run("repro " + out + "/seed-1-case-5-runs-to-completion-crash.json --sut segfaults");
  EXPECT_EQ(repro.exit_code, 1) << repro.output;
  EXPECT_NE(repro.output.find("runs-to-completion   crash: the check process"), std::string::npos) << repro.output;
}

// Ctrl-C during a minimization keeps what it found: the smallest case so far is written (it
// still shows the crash: every case kept did), marked interrupted in its note, exit 130. It used
// to end with nothing written. A chain of 300 ops in one checkpoint takes about 900 candidates,
// each crash in a fresh process (over 20 s on 2 cores), so the interrupt, sent once
// "minimizing:" is printed, lands inside it.
TEST(Cli, ctrl_c_during_minimize_writes_the_smallest_case_so_far) {
  const std::string dir = ::testing::TempDir() + "/minimize-interrupted";
  recheck::test_shell::fresh_folder(dir);
  constexpr int kChain = 300;
  nlohmann::json body = nlohmann::json::array();
  for (int i = 0; i < kChain; ++i) body.push_back({{"op", "unary"}, {"fn", i % 2 ? "tanh" : "neg"}, {"x", i}});
  const nlohmann::json chain = {
      {"format", "recheck-case"}, {"version", 1}, {"device", "cpu"}, {"dtype", "float32"}, {"iterations", 1}, {"seed", 7},
      {"leaves", {{{"fill", "randn"}, {"requires_grad", true}, {"shape", {8, 8}}}}},
      {"root",
       {{"ops", {{{"op", "checkpoint"}, {"distribute", false}, {"args", {{{"ref", 0}}}}, {"body", {{"ops", body}, {"outputs", {kChain}}}}}}},
        {"outputs", {1}}}}};
  std::ofstream(dir + "/chain.json") << chain.dump();
  const std::string log = dir + "/log";
  const auto start = std::chrono::steady_clock::now();
  const Result r = run_shell("bash -c '" + std::string(recheck::test_paths::recheck_binary()) + " minimize " + dir + "/chain.json --sut aborts --out " +
                             dir + "/min.json > " + log + " 2>&1 & p=$!; for i in $(seq 6000); do grep -q minimizing: " +
                             log + " && break; sleep 0.01; done; kill -INT $p; wait $p; echo exit=$?'");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ifstream log_in(log);
  const std::string output((std::istreambuf_iterator<char>(log_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(r.output.find("exit=130"), std::string::npos) << r.output << output;
  EXPECT_NE(output.find("interrupted: wrote the smallest case found so far"), std::string::npos) << output;
  const recheck::Case smallest = recheck::load_case_file(dir + "/min.json");
  EXPECT_NE(smallest.note.find("interrupted after"), std::string::npos) << smallest.note;
  EXPECT_EQ(smallest.expect.at(0), (recheck::Expectation{"aborts", "runs-to-completion", "crash"}));
  const Result replay = run("replay " + dir + "/min.json");
  EXPECT_EQ(replay.exit_code, 0) << replay.output;
  EXPECT_LT(seconds, 60.0) << "the minimization did not stop at the interrupt";
}

// A process that cannot use the device fails every case the same way, for no fault of the
// variant's: the run stops before the first case, exit code 2, naming the cause, and writes no
// finding. Shown with CUDA asked of a build or machine without it.
TEST(Cli, a_worker_that_cannot_use_the_device_stops_the_run_naming_the_cause) {
  if (recheck::compat::cuda_available()) GTEST_SKIP() << "CUDA works here";
  const std::string out = ::testing::TempDir() + "/no-device";
  std::filesystem::remove_all(out);
  for (const std::string isolation : {"", " --no-isolate"}) {
    const std::string report = ::testing::TempDir() + "/no-device.json";
    const Result r = run("run --device cuda --seed 1 --cases 3 --quiet --out " + out + " --json " + report + isolation);
    EXPECT_EQ(r.exit_code, 2) << isolation << ": " << r.output;
    EXPECT_NE(r.output.find("ERROR: "), std::string::npos) << isolation << ": " << r.output;
    EXPECT_NE(r.output.find("no CUDA device is available"), std::string::npos) << isolation << ": " << r.output;
    std::ifstream in(report);
    const nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_NE(j.at("error").get<std::string>().find("no CUDA device is available"), std::string::npos) << j.dump();
    EXPECT_EQ(j.at("cases"), 0) << j.dump();
    EXPECT_EQ(r.output.find("crash"), std::string::npos) << isolation << ": " << r.output;
    EXPECT_EQ(r.output.find("OK"), std::string::npos) << isolation << ": " << r.output;
    EXPECT_FALSE(std::filesystem::exists(out) && !std::filesystem::is_empty(out)) << isolation << ": findings written";
  }
}

}  // namespace
