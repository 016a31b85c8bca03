// Determinism (the workload tier): a seed gives the same report in fresh processes, with any
// thread or job count, and a case the same evidence whatever ran before it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/paths.h"
#include "tests/shell.h"

namespace {

recheck::test_shell::Result run(const std::string& args) {
  return recheck::test_shell::run_shell(std::string(recheck::test_paths::recheck_binary()) + " " + args);
}

// The verdicts and evidence of a run, without what may differ between runs (time, paths).
nlohmann::json verdicts_of(const std::string& json_path) {
  std::ifstream in(json_path);
  nlohmann::json report = nlohmann::json::parse(in);
  nlohmann::json findings = report.at("findings");
  for (auto& finding : findings) finding.erase("file");
  return {{"summary", report.at("summary")}, {"findings", findings}};
}

// The whole report but its time, its progress over time (its last sample stays) and the
// findings' file names (each run writes its own folder).
std::string report_without_time(const std::string& json_path) {
  std::ifstream in(json_path);
  nlohmann::json report = nlohmann::json::parse(in);
  report.erase("seconds");
  // Sampled by the clock: how the run went over time, not what it found (its last sample is).
  nlohmann::json& progress = report.at("progress");
  if (!progress.empty()) {
    progress = nlohmann::json::array({progress.back()});
    progress.back().erase("seconds");
  }
  for (auto& finding : report.at("findings")) finding.erase("file");
  // Where the files are, and the minimized cases: made after the run within a time budget (and
  // not at all with --no-isolate), so not part of what a seed determines.
  for (auto& bucket : report.at("buckets")) {
    for (const char* key : {"file", "minimized", "minimized_ops", "replay"}) bucket.erase(key);
  }
  return report.dump(1);
}

TEST(Determinism, the_same_cases_give_the_same_report_in_fresh_processes_with_any_thread_count) {
  // A folder of this process's own: finding files are compared below.
  const std::string dir = ::testing::TempDir() + "/determinism-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string common = "run --seed 11 --cases 40 --quiet";
  const auto report = [&](const std::string& name, const std::string& flags) {
    EXPECT_EQ(run(common + flags + " --out " + dir + "/determinism-" + name + " --json " + dir + "/" + name + ".json").exit_code, 0);
    return report_without_time(dir + "/" + name + ".json");
  };
  const std::string first = report("d1", " --threads 1");
  EXPECT_NE(first.find("pre-existing"), std::string::npos) << "the batch should hold findings to compare";
  EXPECT_NE(first.find("\"op_executions\""), std::string::npos) << first;
  EXPECT_EQ(report("d2", " --threads 1"), first) << "a second process";
  EXPECT_EQ(report("d3", " --threads 2"), first) << "two threads";
  EXPECT_EQ(report("d4", " --threads 1 --no-isolate"), first) << "no worker process";
  // Several worker processes at once: the same report, the same finding files.
  EXPECT_EQ(report("d5", " --threads 1 --jobs 2"), first) << "two jobs";
  EXPECT_EQ(report("d6", " --threads 1 --jobs 3"), first) << "three jobs";
  const auto files = [&](const std::string& name) {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir + "/determinism-" + name)) {
      // A bucket's minimized case (bucket-N.min.json) is as small as its time budget allowed.
      if (entry.path().filename().string().rfind("bucket-", 0) == 0) continue;
      std::ifstream in(entry.path());
      names.insert(entry.path().filename().string() + " " + std::string(std::istreambuf_iterator<char>(in), {}));
    }
    return names;
  };
  EXPECT_FALSE(files("d1").empty());
  EXPECT_EQ(files("d5"), files("d1"));
}

TEST(Determinism, a_case_gives_the_same_evidence_whatever_ran_before_it) {
  const std::string dir = ::testing::TempDir();
  constexpr int kFirst = 31;  // draw seeds 31..42 hold findings to compare
  ASSERT_EQ(run("run --seed " + std::to_string(kFirst) + " --cases 12 --quiet --out " + dir + "/order --json " + dir + "/batch.json").exit_code, 0);
  std::map<uint64_t, nlohmann::json> in_batch;
  nlohmann::json batch = verdicts_of(dir + "/batch.json");
  for (auto& f : batch.at("findings")) {
    f.erase("case");
    in_batch[f.at("draw_seed").get<uint64_t>()].push_back(f);
  }
  // The same cases one by one, last first, each in its own process.
  std::map<uint64_t, nlohmann::json> alone;
  for (int i = 11; i >= 0; --i) {
    const std::string path = dir + "/alone-" + std::to_string(i) + ".json";
    ASSERT_EQ(run("run --seed " + std::to_string(kFirst + i) + " --cases 1 --quiet --out " + dir + "/order --json " + path).exit_code, 0);
    nlohmann::json one = verdicts_of(path);
    for (auto& f : one.at("findings")) {
      f.erase("case");
      alone[f.at("draw_seed").get<uint64_t>()].push_back(f);
    }
  }
  EXPECT_FALSE(in_batch.empty());
  EXPECT_EQ(nlohmann::json(alone).dump(), nlohmann::json(in_batch).dump());
}

}  // namespace
