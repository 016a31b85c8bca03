// The command-line tool as a user runs it: exit codes, the table, errors naming the field.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/torch_compat.h"
#include "tests/paths.h"
#include "tests/shell.h"
#include "properties/generator.h"

namespace {

using recheck::test_shell::Result;
using recheck::test_shell::run_shell;

Result run(const std::string& args) { return run_shell(std::string(recheck::test_paths::recheck_binary()) + " " + args); }

const std::string kSeeds = std::string(recheck::test_paths::source_dir()) + "/corpus/seeds/";

TEST(Cli, run_prints_a_table_and_exits_zero_for_clearing) {
  const std::string out = ::testing::TempDir() + "/cli-run";
  const Result r = run("run --seed 7 --cases 30 --quiet --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("recheck run: 30 cases"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("grads-bitwise"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("OK: no regression, no divergence"), std::string::npos) << r.output;
}

TEST(Cli, run_writes_a_json_report) {
  const std::string report = ::testing::TempDir() + "/report.json";
  const Result r = run("run --seed 7 --cases 5 --quiet --out " + ::testing::TempDir() + "/cli-json --json " + report);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(report);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"cases\": 5"), std::string::npos) << text;
}

TEST(Cli, repro_prints_graph_and_each_property) {
  const Result r = run("repro " + kSeeds + "non-tensor-argument.json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint(distribute=False, v0, 3, 'mode', True, 0.5)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("errors-match         pre-existing"), std::string::npos) << r.output;
}

TEST(Cli, bad_case_file_exits_two_naming_the_field) {
  const std::string path = ::testing::TempDir() + "/bad.json";
  std::ofstream(path) << R"({"format": "recheck-case", "version": 1, "seed": -1})";
  const Result r = run("show " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(path + ": case.seed: expected a non-negative integer, found -1"), std::string::npos) << r.output;
}

TEST(Cli, unknown_variant_exits_two) {
  const Result r = run("run --sut nosuch --cases 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown variant 'nosuch'"), std::string::npos) << r.output;
}

TEST(Cli, help_describes_each_command) {
  for (const char* command : {"run", "repro", "show", "variants"}) {
    const Result r = run(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_NE(r.output.find("usage: recheck " + std::string(command)), std::string::npos) << r.output;
  }
}

// Several jobs share the machine's memory: each run is held to the available memory's share,
// and a case too large for it is skipped, as one too large for the machine is. One job keeps the
// whole machine. (The kernel's figure comes from a file of the test's own here.)
TEST(Cli, jobs_hold_each_run_to_its_share_of_the_available_memory) {
  const std::string meminfo = ::testing::TempDir() + "/meminfo-" + std::to_string(getpid());
  std::ofstream(meminfo) << "MemTotal: 100 kB\nMemAvailable: 16 kB\n";
  const std::string common = "RECHECK_MEMINFO=" + meminfo + " " + std::string(recheck::test_paths::recheck_binary()) +
                             " run --seed 11 --cases 40 --quiet --out " + ::testing::TempDir() + "/share-findings";
  const Result two = run_shell(common + " --jobs 2 2>&1");
  EXPECT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("2 jobs, each run held to 0 MiB"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("skipped: "), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("would exceed the CPU memory budget of 8192 bytes"), std::string::npos) << two.output;
  const Result one = run_shell(common + " --jobs 1 2>&1");
  EXPECT_EQ(one.output.find("skipped: "), std::string::npos) << one.output;
}

TEST(Cli, mutants_refuses_a_variant_that_is_not_a_mutant) {
  const Result r = run("mutants --mutant clearing");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'clearing' is not a mutant"), std::string::npos) << r.output;
}

TEST(Cli, bench_prints_rates_and_the_cost_ratio) {
  const Result r = run("bench --cases 20");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cases/s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("check-to-eager cost ratio"), std::string::npos) << r.output;
}

TEST(Cli, memory_prints_floors_writes_the_picture_and_fails_no_clear) {
  const std::string svg = ::testing::TempDir() + "/memory.svg";
  const std::string json_path = ::testing::TempDir() + "/memory.json";
  std::remove(svg.c_str());
  const Result ok = run("memory --layers 2 --streams 2 --seq 8 --hidden 4 --svg " + svg + " --json " + json_path);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  // 2 layers x 2 streams x [8, 4] float32 gradients of 128 bytes: 512 bytes freed, 256 per layer.
  EXPECT_NE(ok.output.find("256.0 bytes freed at the floor (predicted 256.0"), std::string::npos) << ok.output;
  std::ifstream picture(svg);
  const std::string text((std::istreambuf_iterator<char>(picture)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<polyline"), std::string::npos);
  const Result bad = run("memory --layers 2 --streams 2 --seq 8 --hidden 4 --svg '' --sut no-clear");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("FAIL"), std::string::npos) << bad.output;
  const Result usage = run("memory --dtype int8");
  EXPECT_EQ(usage.exit_code, 2) << usage.output;
}

TEST(Cli, limits_are_configurable_and_named_when_exceeded) {
  const Result r = run("show " + kSeeds + "nested-three-deep.json --limits depth=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("nesting depth 3 is over the limit depth=2 (raise it with --limits depth=N)"), std::string::npos)
      << r.output;
  EXPECT_EQ(run("show " + kSeeds + "nested-three-deep.json --limits depth=3").exit_code, 0);
  // A fuzzer input decoded with --bytes is held to the limits too (they were not checked).
  const std::string bytes = std::string(recheck::test_paths::source_dir()) + "/corpus/fuzz-check/seed-000";
  const Result decoded = run("show " + bytes + " --bytes --limits ops=2");
  EXPECT_EQ(decoded.exit_code, 2) << decoded.output;
  EXPECT_NE(decoded.output.find("seed-000 (decoded as fuzzer bytes): case: op count"), std::string::npos) << decoded.output;
  EXPECT_EQ(run("show " + bytes + " --bytes").exit_code, 0);
}

TEST(Cli, a_case_too_large_for_the_memory_is_skipped_and_named_not_failed) {
  const std::string json_path = ::testing::TempDir() + "/skipped.json";
  const Result r = run("run --seed 1 --cases 20 --quiet --cpu-memory-budget 3000 --out " + ::testing::TempDir() +
                       "/skipped --json " + json_path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cases too large for the memory (first, case "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ran out of memory"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("crash"), std::string::npos) << r.output;
  std::ifstream in(json_path);
  const nlohmann::json report = nlohmann::json::parse(in);
  EXPECT_GT(report.at("skipped").get<int64_t>(), 0);
  EXPECT_EQ(report.at("crashes").get<int64_t>(), 0);
}

}  // namespace

namespace {

// One hostile or broken case file: what it holds, and what its one-line error must say.
struct Hostile {
  const char* name;
  std::string text;
  const char* says;
};

}  // namespace

TEST(Cli, hostile_inputs_exit_2_with_one_line_naming_the_file_and_what_was_expected) {
  std::ifstream in(kSeeds + "nested-three-deep.json");
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json j = nlohmann::json::parse(good);
  auto with = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json copy = j;
    change(copy);
    return copy.dump();
  };
  const std::vector<Hostile> cases = {
      {"malformed", "{\"format\": \"recheck-case\", \"version\": 1,,}", "not valid JSON"},
      {"truncated", good.substr(0, good.size() / 2), "not valid JSON"},
      {"empty", "", "not valid JSON"},
      {"binary", std::string("\0\x01\xff\xfe garbage", 13), "not valid JSON"},
      {"wrong-type", with([](nlohmann::json& c) { c["leaves"][0]["shape"] = "3x4"; }), "case.leaves[0].shape: expected an array"},
      {"unknown-op", with([](nlohmann::json& c) { c["root"]["ops"][0]["op"] = "frobnicate"; }), "case.root.ops[0].op: expected one of"},
      {"version", with([](nlohmann::json& c) { c["version"] = 2; }), "case.version: this recheck reads version 1"},
      {"huge-integer", with([](nlohmann::json& c) { c["leaves"][0]["shape"][0] = 1e30; }), "case.leaves[0].shape[0]: expected an integer"},
      {"huge-float", good.substr(0, good.find("\"seed\"")) + "\"seed\": 1e999," + good.substr(good.find(',', good.find("\"seed\"")) + 1), "number overflow"},
      {"negative", with([](nlohmann::json& c) { c["iterations"] = -1; }), "case.iterations: expected an integer from 1"},
      {"deep", std::string(100000, '[') + std::string(100000, ']'), "JSON nested 100000 levels deep"},
  };
  const std::string dir = ::testing::TempDir() + "/hostile";
  std::filesystem::create_directories(dir);
  for (const Hostile& h : cases) {
    const std::string path = dir + "/" + h.name + ".json";
    std::ofstream(path, std::ios::binary) << h.text;
    for (const std::string command : {"show", "repro", "minimize", "replay", "export-python"}) {
      const std::string out = command == "minimize"        ? " --out " + dir + "/out.json"
                              : command == "export-python" ? " --property grads-bitwise --out " + dir + "/out.py"
                                                           : "";
      const Result s = run(command + " " + path + out);
      EXPECT_EQ(s.exit_code, 2) << h.name << " " << command << ": " << s.output;
      EXPECT_EQ(std::count(s.output.begin(), s.output.end(), '\n'), 1) << h.name << " " << command << ": " << s.output;
      EXPECT_NE(s.output.find(path), std::string::npos) << h.name << ": " << s.output;
      EXPECT_NE(s.output.find(h.says), std::string::npos) << h.name << ": " << s.output;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.json"));  // nothing half-written
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.py"));
}

TEST(Cli, an_output_that_cannot_be_written_is_refused_before_any_work_in_one_line) {
  const std::string dir = ::testing::TempDir() + "/outputs";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/a-folder");
  std::ofstream(dir + "/a-file") << "x";
  const std::string c = kSeeds + "nested-three-deep.json";
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"repro " + c + " --json " + dir + "/missing/report.json", "no folder " + dir + "/missing to write it in"},
      {"repro " + c + " --json " + dir + "/a-folder", "is a folder, not a file"},
      {"run --seed 1 --cases 2 --quiet --out " + dir + "/f --json " + dir + "/a-file/report.json", "no folder"},
      {"run --seed 1 --cases 2 --quiet --out " + dir + "/a-file/findings", dir + "/a-file is not a folder"},
      {"minimize " + c + " --out " + dir + "/missing/min.json", "no folder"},
      {"export-python " + c + " --property grads-bitwise --out " + dir + "/a-folder", "is a folder, not a file"},
      {"replay " + c + " --json " + dir + "/missing/replay.json", "no folder"},
      {"fuzz-seeds " + dir + "/a-file/seeds --tries 10", "cannot create the folder"},
  };
  for (const auto& [command, says] : commands) {
    const Result r = run(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << command << ": " << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << command << ": " << r.output;
  }
  // A name at the file system's 255-byte limit is written whole, with nothing left beside it.
  const std::string longest = dir + "/" + std::string(250, 'r') + ".json";
  const Result r = run("repro " + c + " --json " + longest);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NO_THROW(nlohmann::json::parse(std::ifstream(longest)));
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_NE(entry.path().filename().string().rfind(".recheck-", 0), 0u) << "left behind: " << entry.path();
  }
}

TEST(Cli, a_cuda_case_without_cuda_is_refused_or_skipped_naming_the_cause) {
  if (recheck::compat::cuda_available()) GTEST_SKIP() << "CUDA works here";
  const std::string dir = ::testing::TempDir() + "/cuda-case";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kSeeds + "nested-three-deep.json"));
  j["device"] = "cuda";
  const std::string path = dir + "/on-cuda.json";
  std::ofstream(path) << j.dump();
  const std::vector<std::string> commands = {"repro " + path, "minimize " + path + " --out " + dir + "/min.json",
                                             "export-python " + path + " --property grads-bitwise --out " + dir + "/x.py"};
  for (const std::string& command : commands) {
    const Result r = run(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << command << ": " << r.output;
    EXPECT_NE(r.output.find(path + ": cannot "), std::string::npos) << command << ": " << r.output;
    EXPECT_NE(r.output.find("no CUDA device is available"), std::string::npos) << command << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/min.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.py"));
  const Result replay = run("replay " + path);
  EXPECT_EQ(replay.exit_code, 0) << replay.output;
  EXPECT_NE(replay.output.find("skip  " + path), std::string::npos) << replay.output;
  EXPECT_NE(replay.output.find("(needs a cuda device)"), std::string::npos) << replay.output;
}

TEST(Cli, replay_reads_only_regular_files_and_takes_limits) {
  const std::string fifo = ::testing::TempDir() + "/replay-fifo.json";
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Result r = run("replay " + fifo);  // before: blocked in open() for ever
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(fifo + ": not a regular file"), std::string::npos) << r.output;
  std::filesystem::remove(fifo);
  const Result limited = run("replay --limits depth=1 " + kSeeds + "nested-three-deep.json");
  EXPECT_EQ(limited.exit_code, 2) << limited.output;
  EXPECT_NE(limited.output.find("over the limit depth=1"), std::string::npos) << limited.output;
  EXPECT_EQ(run("replay --limits depth=3 " + kSeeds + "nested-three-deep.json").exit_code, 0);
}

TEST(Cli, a_json_case_with_a_byte_order_mark_is_read_as_json_whatever_its_name) {
  const std::string path = ::testing::TempDir() + "/bom-case";  // no .json: JSON by its first character
  std::ifstream in(kSeeds + "nested-three-deep.json");
  std::ofstream(path, std::ios::binary) << "\xEF\xBB\xBF" << in.rdbuf();
  const Result with_bom = run("show " + path);
  const Result plain = run("show " + kSeeds + "nested-three-deep.json");
  EXPECT_EQ(with_bom.exit_code, 0) << with_bom.output;
  EXPECT_EQ(with_bom.output, plain.output);  // not decoded as a fuzzer's bytes
}

TEST(Cli, standard_output_is_the_report_with_json_dash_and_a_failed_write_to_it_is_an_error) {
  const std::string c = kSeeds + "nested-three-deep.json";
  const Result both = run_shell("{ " + std::string(recheck::test_paths::recheck_binary()) + " repro " + c + " --json - 2>/dev/null; }");
  EXPECT_EQ(both.exit_code, 0) << both.output;
  const nlohmann::json report = nlohmann::json::parse(both.output);  // the report alone, or this throws
  EXPECT_EQ(report.at("command"), "repro");
  const Result full = run_shell("{ " + std::string(recheck::test_paths::recheck_binary()) + " show " + c + " > /dev/full; }");
  EXPECT_EQ(full.exit_code, 2) << full.output;
  EXPECT_NE(full.output.find("recheck show: cannot write to standard output"), std::string::npos) << full.output;
}

TEST(Cli, usage_mistakes_are_one_line) {
  const std::string c = kSeeds + "nested-three-deep.json";
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"frobnicate", "unknown command 'frobnicate'"},
      {"show " + c + " --limits depth=3 --limits depth=4", "--limits given twice"},
      {"run --seed 1 --seed 2 --cases 1", "--seed given twice"},
      {"export-python " + c + " --property grads-bitwise,", "got 'grads-bitwise,'"},
      // What --checkpoint takes is what the subject folders' export.py files declare, in every build.
      {"export-python " + c + " --property grads-bitwise --checkpoint nope",
       "--checkpoint: expected megatron, megatron-clearing, torch or torch-non-reentrant, got 'nope'"},
      {"export-python " + kSeeds + "../python/without-output-stashed-input-keeps-its-grad.json --oracle torch-non-reentrant",
       "--oracle torch-non-reentrant: the case holds checkpoints without output (Megatron's CheckpointWithoutOutput), "
       "which torch-non-reentrant has not: use megatron or megatron-clearing"},
      {"replay " + kSeeds + "../../ci", "no case file (*.json) under the paths given"},
      {"run --cases 1 --json " + ::testing::TempDir() + "/" + std::string(260, 'j'), "the file name is over 255 bytes"},
  };
  for (const auto& [command, says] : commands) {
    const Result r = run(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << command << ": " << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << command << ": " << r.output;
  }
  // After "--", a name starting with a dash is a file.
  const std::string dashed = ::testing::TempDir() + "/-dashed.json";
  std::filesystem::copy_file(c, dashed, std::filesystem::copy_options::overwrite_existing);
  const Result r = run_shell("cd " + ::testing::TempDir() + " && " + recheck::test_paths::recheck_binary() + " show -- -dashed.json 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("case: seed 17"), std::string::npos) << r.output;
}

TEST(Cli, a_file_name_that_is_not_utf8_does_not_lose_the_report) {
  // The name goes into the report and the note: JSON text must be UTF-8, and the library threw
  // at the end of the work.
  const std::string dir = ::testing::TempDir() + "/utf8";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string name = dir + "/bad\xff" + "name";
  std::ofstream(name, std::ios::binary) << std::string("\x07\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0", 12);
  const Result r = run("show --json '" + name + "' > " + dir + "/shown.json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json shown = nlohmann::json::parse(std::ifstream(dir + "/shown.json"));
  EXPECT_NE(shown.at("note").get<std::string>().find("bad\xEF\xBF\xBDname"), std::string::npos) << shown.dump();
  const Result report = run("repro '" + name + "' --json " + dir + "/report.json");
  EXPECT_NE(report.exit_code, 2) << report.output;
  EXPECT_NO_THROW(nlohmann::json::parse(std::ifstream(dir + "/report.json")));
}

TEST(Cli, a_newline_in_a_file_name_keeps_the_error_on_one_line) {
  // The message was cut at the newline: "recheck show: DIR/bad", the rest of it lost.
  const std::string dir = ::testing::TempDir() + "/newline";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string name = dir + "/bad\nname.json";
  std::ofstream(name) << "{\"format\": \"recheck-case\"";
  const Result r = run("show '" + name + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("bad\\nname.json: not valid JSON"), std::string::npos) << r.output;
  // An error raised in a worker process reads as the same one line as without workers (a
  // worker used to write a space for the newline).
  if (recheck::compat::cuda_available()) return;
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kSeeds + "nested-three-deep.json"));
  j["device"] = "cuda";
  std::ofstream(name, std::ios::trunc) << j.dump();
  const Result isolated = run("repro '" + name + "'");
  const Result in_process = run("repro --no-isolate '" + name + "'");
  EXPECT_EQ(isolated.exit_code, 2) << isolated.output;
  EXPECT_NE(isolated.output.find("bad\\nname.json: cannot run this case here"), std::string::npos) << isolated.output;
  EXPECT_EQ(isolated.output, in_process.output);
}

TEST(Cli, export_python_keeps_the_case_note_inside_the_docstring) {
  // A note ending the docstring ran its own code when the script ran.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kSeeds + "nested-three-deep.json"));
  j["note"] = "\"\"\" + __import__(\"os\").system(\"touch pwned\") + \"\"\" C:\\xfiles";
  const std::string path = ::testing::TempDir() + "/injected.json";
  std::ofstream(path) << j.dump();
  const Result r = run("export-python " + path + " --property grads-bitwise");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("\"\"\" + __import__"), std::string::npos) << r.output.substr(0, 400);
  EXPECT_NE(r.output.find("\\\"\\\"\\\" + __import__(\\\"os\\\")"), std::string::npos) << r.output.substr(0, 400);
  EXPECT_NE(r.output.find("C:\\\\xfiles"), std::string::npos) << r.output.substr(0, 400);
}
