// A run's report as JUnit XML (properties/junit.h): a failed test case per property with an
// alarm, pre-existing findings not failures, text escaped; and `recheck run --junit` writing it.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "properties/junit.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Junit, a_failed_case_per_property_with_an_alarm_and_nothing_else) {
  const nlohmann::json report = {
      {"sut", "cpu-rng-only"}, {"oracle", "nonclearing"}, {"seed", 1}, {"seconds", 2.5}, {"cases", 40},
      {"interrupted", false}, {"error", nullptr}, {"crashes", 0},
      {"summary", {{"rng-restored", {{"pass", 38}, {"regression", 2}}}, {"outputs-bitwise", {{"pass", 39}, {"pre-existing", 1}}}}},
      {"findings",
       {{{"case", 3}, {"draw_seed", 4}, {"property", "rng-restored"}, {"classification", "regression"},
         {"sut", "device state differs <after> & \"before\""}, {"oracle", ""}, {"file", "out/seed-1-case-3.json"}},
        {{"case", 9}, {"draw_seed", 10}, {"property", "rng-restored"}, {"classification", "regression"},
         {"sut", "again"}, {"oracle", ""}},
        {{"case", 5}, {"draw_seed", 6}, {"property", "outputs-bitwise"}, {"classification", "pre-existing"},
         {"sut", "differs"}, {"oracle", "differs"}}}}};
  const std::string xml = junit_xml(report);
  EXPECT_NE(xml.find("tests=\"3\" failures=\"1\" errors=\"0\""), std::string::npos) << xml;
  EXPECT_EQ(occurrences(xml, "<failure "), 1u) << "a pre-existing finding is no failure:\n" << xml;
  EXPECT_NE(xml.find("<failure message=\"2 regression, divergence or crash findings\">"), std::string::npos) << xml;
  EXPECT_NE(xml.find("&lt;after&gt; &amp; &quot;before&quot;"), std::string::npos) << "escaped:\n" << xml;
  EXPECT_EQ(xml.find("<after>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("case: out/seed-1-case-3.json"), std::string::npos) << xml;
  EXPECT_NE(xml.find("name=\"runs-to-completion\""), std::string::npos) << xml;
}

TEST(Junit, run_writes_it_beside_the_json_report) {
  const std::string dir = ::testing::TempDir() + "/junit-run";
  const auto r = test_shell::run_shell(std::string(test_paths::recheck_binary()) + " run --sut cpu-rng-only --seed 1 --cases 60 --quiet --out " +
                                       dir + " --junit " + ::testing::TempDir() + "/junit.xml");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::ifstream in(::testing::TempDir() + "/junit.xml");
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(xml.rfind("<?xml", 0), 0u) << xml;
  EXPECT_NE(xml.find("<testcase classname=\"recheck\" name=\"rng-restored\">\n    <failure"), std::string::npos) << xml;
  EXPECT_NE(xml.find("</testsuite>"), std::string::npos) << xml;
}

}  // namespace
}  // namespace recheck
