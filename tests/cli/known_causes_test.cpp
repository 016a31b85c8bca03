// The catalogue of known causes against a run of the released function (the workload tier:
// 3,000 generated cases), read by tools/explain-buckets and by recheck's own reports.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "properties/buckets.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace {

using namespace recheck;
using nlohmann::json;
using test_shell::Result;

Result run(const std::string& args) { return test_shell::run_shell(std::string(test_paths::recheck_binary()) + " " + args); }

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// The catalogue of known causes (docs/known-causes.json, read by tools/explain-buckets) names a
// cause for every bucket the released function shows on a fixed seed, and for no mutant's alarm.
// A new cause, or a signature whose wording changed, fails it: explain it in docs/known-causes.md.
TEST(KnownCauses, name_every_pre_existing_bucket_of_the_released_function_and_no_alarm) {
  const std::string dir = test_shell::fresh_folder(::testing::TempDir() + "/known-causes");
  const std::string explain = "python3 " + std::string(test_paths::source_dir()) + "/tools/explain-buckets ";
  const Result released = run("run --seed 20261204 --cases 3000 --jobs 2 --quiet --minimize-seconds 0 --out " + dir +
                              "/a --json " + dir + "/a.json");
  ASSERT_EQ(released.exit_code, 0) << released.output;
  const Result named = test_shell::run_shell(explain + dir + "/a.json");
  EXPECT_EQ(named.exit_code, 0) << named.output;
  EXPECT_NE(named.output.find(" 0 unexplained"), std::string::npos) << named.output;
  // recheck's own reading of the catalogue (std::regex) names every bucket as the tool does
  // (Python's re), and the run's report counts them by cause instead of listing them.
  const Result listed = test_shell::run_shell(explain + dir + "/a.json --markdown");
  for (const json& b : read_json(dir + "/a.json").at("buckets")) {
    const std::string cause = known_cause_of(b.at("signature").get<std::string>());
    EXPECT_NE(cause, "") << b.dump();
    std::string escaped = b.at("signature").get<std::string>();
    for (size_t at = escaped.find('|'); at != std::string::npos; at = escaped.find('|', at + 2)) escaped.insert(at, "\\");
    const size_t row = listed.output.find("`" + escaped + "`");
    ASSERT_NE(row, std::string::npos) << escaped;
    EXPECT_EQ(listed.output.rfind("#### `" + cause + "`", row), listed.output.rfind("#### `", row)) << escaped;
  }
  EXPECT_NE(released.output.find("by known cause (docs/known-causes.md"), std::string::npos) << released.output;
  EXPECT_EQ(released.output.find("no known cause:"), std::string::npos) << released.output;

  const Result mutant = run("run --sut cpu-rng-only --seed 1 --cases 200 --quiet --minimize-seconds 0 --out " + dir +
                            "/m --json " + dir + "/m.json");
  ASSERT_EQ(mutant.exit_code, 1) << mutant.output;
  const Result alarm = test_shell::run_shell(explain + dir + "/m.json");
  EXPECT_EQ(alarm.exit_code, 1) << alarm.output;
  EXPECT_NE(alarm.output.find("unexplained:\n"), std::string::npos) << alarm.output;
  EXPECT_NE(alarm.output.find(" regression: "), std::string::npos) << alarm.output;

  // A report cut short, and a catalogue that is not one: one line each, exit 2.
  std::ofstream(dir + "/cut.json") << "{\"buckets\": [";
  const Result cut = test_shell::run_shell(explain + dir + "/cut.json");
  EXPECT_EQ(cut.exit_code, 2) << cut.output;
  EXPECT_NE(cut.output.find("cut.json: not JSON"), std::string::npos) << cut.output;
  const Result catalogue = test_shell::run_shell(explain + "--causes " + dir + "/a.json " + dir + "/a.json");
  EXPECT_EQ(catalogue.exit_code, 2) << catalogue.output;
  EXPECT_NE(catalogue.output.find("not a catalogue of causes"), std::string::npos) << catalogue.output;
}

}  // namespace
