// A run's report as JUnit XML, the format CI systems display (GitHub Actions through a test
// reporter, GitLab's `artifacts:reports:junit`, Jenkins): one test case per property, failed
// when the run found a regression or a divergence in it, with each finding's case, evidence and
// file; one more for runs-to-completion (crashes). Pre-existing findings are not failures.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace recheck {

// `report`: what `recheck run --json` writes (sut, oracle, seed, seconds, cases, summary,
// findings, crashes, interrupted).
std::string junit_xml(const nlohmann::json& report);

}  // namespace recheck
