// The commands' workloads, end to end: `recheck run` bucketing and minimizing its findings,
// `recheck triage` of a campaign's inputs, `recheck mutants`' hunts. Each runs hundreds of cases
// through the binary, so they are in the workload tier (ci/test), not the unit one that the
// sanitizers run too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

using nlohmann::json;
using test_shell::Result;

Result run(const std::string& args) { return test_shell::run_shell(std::string(test_paths::recheck_binary()) + " " + args); }

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(Cli, mutants_reports_each_hunt_and_the_control) {
  const std::string json_path = ::testing::TempDir() + "/mutants.json";
  const Result r = run("mutants --mutant clear-before-collect,recompute-no-grad --seeds 2 --budget 100 --json " + json_path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("clear-before-collect"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2/2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("control: clearing raised 0 alarms"), std::string::npos) << r.output;
  std::ifstream in(json_path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"median_cases_to_kill\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"ok\": true"), std::string::npos) << text;
  // The hunts in two worker processes: the same table, times aside.
  const std::string jobs_path = ::testing::TempDir() + "/mutants-jobs.json";
  const Result two = run("mutants --mutant clear-before-collect,recompute-no-grad --seeds 2 --budget 100 --jobs 2 --json " +
                         jobs_path);
  EXPECT_EQ(two.exit_code, 0) << two.output;
  const auto without_times = [](const std::string& path) {
    std::ifstream report(path);
    nlohmann::json j = nlohmann::json::parse(report);
    for (auto& mutant : j.at("mutants")) {
      mutant.erase("seconds");
      for (auto& hunt : mutant.at("per_seed")) hunt.erase("seconds");
    }
    return j.dump(1);
  };
  EXPECT_EQ(without_times(jobs_path), without_times(json_path));
}

// The run's buckets hold every finding once, each bucket's minimized case shows its cause
// again, and a second run compared with the first finds its buckets still present.
TEST(Triage, run_buckets_its_findings_minimizes_each_and_compares_with_a_previous_report) {
  const std::string dir = ::testing::TempDir() + "/triage-run";
  test_shell::fresh_folder(dir);
  const Result r = run("run --seed 11 --cases 150 --quiet --minimize-seconds 60 --out " + dir + "/out --json " + dir + "/a.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("buckets: "), std::string::npos) << r.output;
  const json report = read_json(dir + "/a.json");
  int64_t findings = 0;
  for (const json& f : report.at("findings")) findings += f.at("classification") != "skipped";
  int64_t counted = 0;
  int minimized = 0;
  std::set<std::string> signatures;
  for (const json& b : report.at("buckets")) {
    counted += b.at("count").get<int64_t>();
    EXPECT_TRUE(signatures.insert(b.at("signature").get<std::string>()).second);
    const std::string file = b.at("minimized").get<std::string>();
    EXPECT_NE(b.at("replay").get<std::string>(), "") << b.dump();
    if (file.empty() || minimized >= 4) continue;
    ++minimized;
    const Result again = run("repro " + file + " --json " + dir + "/again.json");
    const json repro = read_json(dir + "/again.json");
    bool shown = false;
    for (const json& p : repro.at("properties")) {
      shown = shown || (p.at("property") == b.at("property") && p.at("cause") == b.at("signature"));
    }
    EXPECT_TRUE(shown) << file << " does not show " << b.at("signature") << "\n" << again.output;
  }
  EXPECT_EQ(counted, findings);
  EXPECT_GT(minimized, 0);

  const Result second = run("run --seed 11 --cases 150 --quiet --minimize-seconds 0 --out " + dir + "/out2 --json " +
                            dir + "/b.json --previous " + dir + "/a.json");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("0 new, " + std::to_string(signatures.size()) + " still present, 0 gone"), std::string::npos)
      << second.output;

  // A mutant's alarms are new against clearing's report.
  const Result mutant = run("run --sut cpu-rng-only --seed 1 --cases 200 --quiet --minimize-seconds 0 --out " + dir +
                            "/out3 --json " + dir + "/c.json --previous " + dir + "/a.json");
  EXPECT_EQ(mutant.exit_code, 1) << mutant.output;
  const json mutant_report = read_json(dir + "/c.json");
  for (const json& b : mutant_report.at("buckets")) {
    if (b.at("alarm").get<bool>()) {
      EXPECT_EQ(b.at("status"), "new") << b.dump();
    }
  }
}

// recheck triage: a campaign's inputs (cases, crash files, run reports) in buckets, each
// minimized once; what cannot be read is listed as incomplete and nothing else is lost.
TEST(Triage, triage_buckets_cases_and_crash_files_merges_reports_and_lists_what_it_could_not_read) {
  const std::string dir = ::testing::TempDir() + "/triage-inputs";
  test_shell::fresh_folder(dir);
  std::filesystem::create_directories(dir + "/artifacts");
  // Two runs of a mutant: their cases written, their reports kept.
  for (const std::string seed : {"1", "2"}) {
    const Result r = run("run --sut cpu-rng-only --seed " + seed + " --cases 60 --quiet --minimize-seconds 0 --out " + dir +
                         "/run" + seed + " --json " + dir + "/report" + seed + ".json");
    ASSERT_EQ(r.exit_code, 1) << r.output;
  }
  // A crash file as libFuzzer writes one (bytes the check target decodes), and a report cut short.
  std::ofstream(dir + "/artifacts/crash-0123") << std::string(64, '\x07') << "recheck";
  std::ofstream(dir + "/artifacts/half.json") << "{\"tool\": \"recheck\", \"buckets\": [{\"signature\": ";

  const Result triaged = run("triage " + dir + "/run1 " + dir + "/artifacts --sut cpu-rng-only --minimize-seconds 20 --out " +
                             dir + "/min --json " + dir + "/t.json");
  EXPECT_EQ(triaged.exit_code, 1) << triaged.output;
  EXPECT_NE(triaged.output.find("incomplete: " + dir + "/artifacts/half.json: not JSON (a half-written file?)"),
            std::string::npos)
      << triaged.output;
  const json t = read_json(dir + "/t.json");
  EXPECT_EQ(t.at("incomplete"), 1);
  EXPECT_GT(t.at("cases").get<int>(), 1);
  int64_t counted = 0;
  int minimized = 0;
  for (const json& b : t.at("buckets")) {
    counted += b.at("count").get<int64_t>();
    if (!b.at("minimized").get<std::string>().empty()) {
      ++minimized;
      // The minimized case still shows its bucket.
      const Result again = run("replay " + b.at("minimized").get<std::string>());
      EXPECT_EQ(again.exit_code, 0) << again.output;
    }
  }
  EXPECT_EQ(counted, t.at("findings").get<int64_t>());
  EXPECT_GT(minimized, 0);

  // Replayed on the correct variant, the mutant's alarms do not hold: replay groups them by cause.
  std::filesystem::create_directories(dir + "/on-clearing");
  int copied = 0;
  for (const json& b : t.at("buckets")) {
    if (!b.at("alarm").get<bool>() || b.at("minimized").get<std::string>().empty()) continue;
    json c = read_json(b.at("minimized").get<std::string>());
    for (json& e : c.at("expect")) e["sut"] = "clearing";
    std::ofstream(dir + "/on-clearing/" + std::to_string(copied++) + ".json") << c.dump();
  }
  ASSERT_GT(copied, 0);
  const Result replayed = run("replay " + dir + "/on-clearing --json " + dir + "/replay.json");
  EXPECT_EQ(replayed.exit_code, 1) << replayed.output;
  EXPECT_NE(replayed.output.find("expectations that do not hold, by cause:"), std::string::npos) << replayed.output;
  const json r = read_json(dir + "/replay.json");
  int64_t grouped = 0;
  for (const json& b : r.at("buckets")) grouped += b.at("count").get<int64_t>();
  EXPECT_EQ(grouped, r.at("failed").get<int64_t>());
  EXPECT_GT(r.at("failed").get<int64_t>(), 0);
  EXPECT_NE(triaged.output.find("buckets: " + std::to_string(counted) + " findings in "), std::string::npos) << triaged.output;

  // Two reports merge: each signature's count is the sum of the two runs' counts.
  const Result merged = run("triage " + dir + "/report1.json " + dir + "/report2.json --minimize-seconds 0 --out " + dir +
                            "/min2 --json " + dir + "/m.json");
  EXPECT_EQ(merged.exit_code, 1) << merged.output;
  std::map<std::string, int64_t> expected;
  for (const std::string report : {"/report1.json", "/report2.json"}) {
    const json one = read_json(dir + report);  // named: a range over a temporary's member outlives it
    for (const json& b : one.at("buckets")) expected[b.at("signature")] += b.at("count").get<int64_t>();
  }
  std::map<std::string, int64_t> got;
  const json m = read_json(dir + "/m.json");
  for (const json& b : m.at("buckets")) got[b.at("signature")] = b.at("count").get<int64_t>();
  EXPECT_EQ(got, expected);
  EXPECT_EQ(m.at("reports"), 2);
}

}  // namespace
}  // namespace recheck
