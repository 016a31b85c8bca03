// The exported scripts (properties/export_runtime.py) re-implement recheck's properties in
// Python, so that a finding replays with torch alone. They must not drift from the C++
// properties: each case here, generated for PyTorch's non-reentrant checkpoint with its call
// options, is checked by recheck and by its exported script, and every property the script
// checks without Megatron must get the same verdict from both.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/case.h"
#include "properties/export_python.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "python/bridge.h"
#include "suts/subject.h"
#include "tests/paths.h"

namespace recheck {
namespace {

// The properties an exported script checks with torch alone: the ones compared with an oracle
// run Megatron's function as that oracle, and flag-in-body reads Megatron's flag.
const std::vector<std::string> kTorchOnly = {"outputs-bitwise", "recompute-fidelity", "grads-match-eager",
                                             "rng-restored",    "errors-match",       "no-side-effects",
                                             "grad-released"};

// The exported scripts of `cases`, run one after another in one Python process (torch imported
// once), each property's verdict as each script prints it: true where it holds.
std::vector<std::map<std::string, bool>> script_verdicts(const std::vector<Case>& cases, std::vector<std::string>& outputs) {
  ExportOptions options;
  options.checkpoint = "torch-non-reentrant";
  options.property.clear();
  for (const std::string& p : kTorchOnly) options.property += (options.property.empty() ? "" : ",") + p;
  const std::string dir = ::testing::TempDir() + "/export_agreement_" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  std::string paths;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string script = dir + "/case_" + std::to_string(i) + ".py";
    std::ofstream(script) << export_python(cases[i], options);
    paths += "'" + script + "', ";
  }
  const std::string driver = dir + "/driver.py";
  std::ofstream(driver) << "import runpy, sys\n"
                        << "for path in [" << paths << "]:\n"
                        << "    print('=== ' + path, flush=True)\n"
                        << "    sys.argv = [path]\n"
                        << "    try:\n"
                        << "        runpy.run_path(path, run_name='__main__')\n"
                        << "    except (AssertionError, SystemExit):\n"
                        << "        pass\n"
                        << "    sys.stdout.flush()\n";
  const std::string log = dir + "/driver.log";
  std::system((std::string(test_paths::python_executable()) + " " + driver + " > " + log + " 2>/dev/null").c_str());
  std::ifstream in(log);
  std::vector<std::map<std::string, bool>> verdicts;
  outputs.clear();
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("=== ", 0) == 0) {
      verdicts.emplace_back();
      outputs.emplace_back();
      continue;
    }
    if (verdicts.empty()) continue;
    outputs.back() += line + "\n";
    for (const std::string& p : kTorchOnly) {
      const std::string key = ", " + p + ": ";
      const size_t at = line.find(key);
      if (line.rfind("torch ", 0) == 0 && at != std::string::npos) verdicts.back()[p] = line.compare(at + key.size(), 5, "holds") == 0;
    }
  }
  std::system(("rm -rf " + dir).c_str());
  return verdicts;
}

TEST(ExportAgreement, the_exported_script_gives_recheck_s_verdict_on_every_property_it_checks) {
  python::register_bridge();
  const Subject& subject = find_subject("torch-checkpoint-non-reentrant");
  auto released = subject.make(subject.change);
  const GenOptions options = options_for(GenOptions{}, *released);
  const char* wanted = std::getenv("RECHECK_EXPORT_AGREEMENT_CASES");
  const int count = wanted ? std::atoi(wanted) : 200;
  std::vector<Case> cases;
  std::vector<CaseResult> results;
  std::vector<uint64_t> seeds;
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = 9000 + static_cast<uint64_t>(i);
    Case c = draw_case(options, seed);
    CaseResult result = check_case(c, *released, *released);
    if (!result.skipped.empty()) continue;
    cases.push_back(std::move(c));
    results.push_back(std::move(result));
    seeds.push_back(seed);
  }
  std::vector<std::string> outputs;
  const std::vector<std::map<std::string, bool>> script = script_verdicts(cases, outputs);
  ASSERT_EQ(script.size(), cases.size()) << "the driver ran " << script.size() << " of " << cases.size() << " scripts";
  std::map<std::string, int> failing;  // per property, the cases where both say it fails
  for (size_t k = 0; k < cases.size(); ++k) {
    for (const PropertyResult& r : results[k].results) {
      if (std::find(kTorchOnly.begin(), kTorchOnly.end(), r.property) == kTorchOnly.end()) continue;
      const auto it = script[k].find(r.property);
      ASSERT_NE(it, script[k].end()) << "the script printed no verdict for " << r.property << ", draw seed " << seeds[k]
                                     << ":\n" << outputs[k];
      EXPECT_EQ(it->second, r.sut.holds) << r.property << ", draw seed " << seeds[k] << ": recheck "
                                         << (r.sut.holds ? "holds" : "fails: " + r.sut.describe()) << "\nscript:\n"
                                         << outputs[k] << show(cases[k]);
      failing[r.property] += !r.sut.holds && !it->second;
    }
  }
  // Both sides saw failures to agree on, not only passes.
  EXPECT_GT(failing["errors-match"], 0);
}

}  // namespace
}  // namespace recheck
