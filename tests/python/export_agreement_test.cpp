// The exported scripts (properties/export_runtime.py, export_checks.py) re-implement recheck's properties in
// Python, so that a finding replays with torch alone. They must not drift from the C++
// properties: each case here, generated for a subject's released function, is checked by recheck
// and by its exported script, and every property the script checks must get the same verdict
// from both, for every subject: Megatron's CheckpointFunction (recheck's C++ port against
// megatron-core's Python), PyTorch's non-reentrant checkpoint with its call options (torch
// alone), and Megatron's CheckpointWithoutOutput with the plain checkpoints around and inside it.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "core/case.h"
#include "core/case_detail.h"
#include "core/rng.h"
#include "core/tensor_ops.h"
#include "properties/export_python.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "python/bridge.h"
#include "suts/subject.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

// What script_verdicts gives for a script whose process a signal ended (reading freed memory:
// whether that crashes is the allocator's choice, so it is no verdict).
const std::string kCrashed = "(crashed)";

// The exported scripts of `cases`, run one after another by one Python process (torch, and
// megatron-core where the scripts run it, imported once), with `isolate` each in a child process
// of its own forked from it (a script that crashes prints no verdict); each property's verdict as
// each script prints it: true where it holds.
std::vector<std::map<std::string, bool>> script_verdicts(const std::vector<Case>& cases, const std::string& checkpoint,
                                                         const std::string& oracle,
                                                         const std::vector<std::string>& properties, bool isolate,
                                                         std::vector<std::string>& outputs) {
  ExportOptions options;
  options.checkpoint = checkpoint;
  options.oracle = oracle;
  options.property.clear();
  for (const std::string& p : properties) options.property += (options.property.empty() ? "" : ",") + p;
  const std::string dir = ::testing::TempDir() + "/export_agreement_" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  std::string paths;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string script = dir + "/case_" + std::to_string(i) + ".py";
    std::ofstream(script) << export_python(cases[i], options);
    paths += "'" + script + "', ";
  }
  const std::string driver = dir + "/driver.py";
  std::ofstream(driver) << "import os, runpy, sys, warnings\n"
                        << "import torch\n"
                        << "if " << (checkpoint.rfind("megatron", 0) == 0 ? "True" : "False") << ":\n"
                        << "    warnings.simplefilter('ignore')\n"
                        << "    import megatron.core.tensor_parallel.random\n"
                        << "ISOLATE = " << (isolate ? "True" : "False") << "\n"
                        << "for path in [" << paths << "]:\n"
                        << "    print('=== ' + path, flush=True)\n"
                        << "    pid = os.fork() if ISOLATE else 0\n"
                        << "    if pid == 0:\n"
                        << "        sys.argv = [path]\n"
                        << "        try:\n"
                        << "            runpy.run_path(path, run_name='__main__')\n"
                        << "        except (AssertionError, SystemExit):\n"
                        << "            pass\n"
                        << "        sys.stdout.flush()\n"
                        << "        if ISOLATE:\n"
                        << "            os._exit(0)\n"
                        << "    else:\n"
                        << "        status = os.waitpid(pid, 0)[1]\n"
                        << "        if os.WIFSIGNALED(status):\n"
                        << "            print('=== crashed: signal %d' % os.WTERMSIG(status), flush=True)\n";
  const std::string log = dir + "/driver.log";
  std::system((std::string(test_paths::python_executable()) + " " + driver + " > " + log + " 2>/dev/null").c_str());
  std::ifstream in(log);
  std::vector<std::map<std::string, bool>> verdicts;
  outputs.clear();
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("=== crashed: ", 0) == 0) {
      if (!verdicts.empty()) verdicts.back() = {{kCrashed, false}};
      continue;
    }
    if (line.rfind("=== ", 0) == 0) {
      verdicts.emplace_back();
      outputs.emplace_back();
      continue;
    }
    if (verdicts.empty()) continue;
    outputs.back() += line + "\n";
    for (const std::string& p : properties) {
      const std::string key = ", " + p + ": ";
      const size_t at = line.find(key);
      if (line.rfind("torch ", 0) == 0 && at != std::string::npos) verdicts.back()[p] = line.compare(at + key.size(), 5, "holds") == 0;
    }
  }
  std::system(("rm -rf " + dir).c_str());
  return verdicts;
}

// recheck's verdict on each property for `sut` against itself; with `isolate` checked in a child
// process: a released function that crashes the process on the case (Megatron's
// CheckpointWithoutOutput reading a freed output) gives none.
std::optional<std::map<std::string, bool>> recheck_verdicts(const Case& c, CheckpointImplementation& sut, bool isolate) {
  if (!isolate) {
    const CaseResult result = check_case(c, sut, sut);
    if (!result.skipped.empty()) return std::nullopt;
    std::map<std::string, bool> verdicts;
    for (const PropertyResult& r : result.results) verdicts[r.property] = r.sut.holds;
    return verdicts;
  }
  int pipe_ends[2];
  if (pipe(pipe_ends) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid == 0) {
    // OpenMP's threads do not survive a fork: a parent that computed with them (an earlier test
    // in this process) would leave the child waiting on them forever.
    at::set_num_threads(1);
    close(pipe_ends[0]);
    std::string text;
    const CaseResult result = check_case(c, sut, sut);
    if (result.skipped.empty()) {
      for (const PropertyResult& r : result.results) text += r.property + (r.sut.holds ? " 1\n" : " 0\n");
    }
    text += "end\n";
    (void)!write(pipe_ends[1], text.data(), text.size());
    _exit(0);
  }
  close(pipe_ends[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_ends[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  close(pipe_ends[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || text.size() < 4 || text.compare(text.size() - 4, 4, "end\n") != 0) return std::nullopt;
  std::map<std::string, bool> verdicts;
  std::istringstream lines(text);
  std::string property;
  for (int holds; lines >> property >> holds;) verdicts[property] = holds != 0;
  if (verdicts.empty()) return std::nullopt;  // skipped
  return verdicts;
}

// Draws `count` cases for the released function of `subject` (from draw seed `first_seed` on),
// checks each with recheck (the function against itself) and with its exported script (the
// function as the subject exports it, compared with itself too), and expects the same verdict on
// each of `properties`; returns per property the cases where both say it fails.
std::map<std::string, int> expect_agreement(const Subject& subject, const std::vector<std::string>& properties,
                                            uint64_t first_seed, const char* count_variable, int default_count) {
  auto sut = subject.make(subject.oracle);
  const std::string checkpoint = subject.exported_as(subject.oracle);
  const GenOptions options = options_for(GenOptions{}, *sut);
  const char* wanted = std::getenv(count_variable);
  const int count = wanted ? std::atoi(wanted) : default_count;
  std::vector<Case> cases;
  std::vector<std::map<std::string, bool>> results;
  std::vector<uint64_t> seeds;
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = first_seed + static_cast<uint64_t>(i);
    Case c = draw_case(options, seed);
    auto verdicts = recheck_verdicts(c, *sut, subject.cases_may_crash);
    if (!verdicts) continue;
    cases.push_back(std::move(c));
    results.push_back(std::move(*verdicts));
    seeds.push_back(seed);
  }
  std::vector<std::string> outputs;
  const std::vector<std::map<std::string, bool>> script = script_verdicts(cases, checkpoint, checkpoint, properties, subject.cases_may_crash, outputs);
  EXPECT_EQ(script.size(), cases.size()) << "the driver ran " << script.size() << " of " << cases.size() << " scripts";
  std::map<std::string, int> failing;
  size_t crashed = 0;
  for (size_t k = 0; k < std::min(cases.size(), script.size()); ++k) {
    if (script[k].count(kCrashed) != 0) {
      ++crashed;
      continue;
    }
    for (const auto& [property, holds] : results[k]) {
      if (std::find(properties.begin(), properties.end(), property) == properties.end()) continue;
      const auto it = script[k].find(property);
      if (it == script[k].end()) {
        ADD_FAILURE() << "the script printed no verdict for " << property << ", draw seed " << seeds[k] << ":\n"
                      << outputs[k] << show(cases[k]);
        break;
      }
      EXPECT_EQ(it->second, holds) << property << ", draw seed " << seeds[k] << ": recheck "
                                   << (holds ? "holds" : "fails") << "\nscript:\n" << outputs[k] << show(cases[k]);
      failing[property] += !holds && !it->second;
    }
  }
  // Left out only where the function may crash the process, and then seldom.
  EXPECT_TRUE(crashed == 0 || subject.cases_may_crash) << crashed << " scripts crashed";
  EXPECT_LE(crashed * 10, cases.size()) << crashed << " of " << cases.size() << " scripts crashed";
  return failing;
}

// Every subject, in one test each: its released function on every property the subject holds
// that a script can check (all but the memory ones), each from a first draw seed of its own.
// These three are the seeds they were measured with; a subject added later gets one from its
// name, so that it is held to the same agreement without a line here.
const std::map<std::string, uint64_t> kFirstSeeds = {
    {"megatron-checkpoint-function", 11000},
    {"torch-checkpoint-non-reentrant", 9000},
    {"megatron-checkpoint-without-output", 7000},
};

uint64_t first_seed(const std::string& subject) {
  const auto known = kFirstSeeds.find(subject);
  if (known != kFirstSeeds.end()) return known->second;
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a
  for (const char c : subject) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return 20000 + (hash % 1000) * 100;
}

// Every subject the bridge's program knows: the built-in one and the bridge's.
std::vector<std::string> every_subject() {
  python::register_bridge();
  std::vector<std::string> names;
  for (const Subject& subject : subjects()) names.push_back(subject.name);
  return names;
}

class ExportAgreementOf : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportAgreementOf, the_exported_script_gives_recheck_s_verdict_on_every_property_it_checks) {
  python::register_bridge();
  const Subject& subject = find_subject(GetParam());
  std::vector<std::string> properties;
  for (const std::string& p : subject.properties) {
    if (exportable(p)) properties.push_back(p);
  }
  ASSERT_FALSE(properties.empty());
  const auto failing =
      expect_agreement(subject, properties, first_seed(subject.name), "RECHECK_EXPORT_AGREEMENT_CASES", 150);
  // Both sides saw failures to agree on, not only passes.
  EXPECT_GT(failing.count("errors-match") ? failing.at("errors-match") : 0, 0);
  if (subject.applies("discard-own-outputs")) {
    EXPECT_GT(failing.count("discard-own-outputs") ? failing.at("discard-own-outputs") : 0, 0);
  }
}

// "megatron_checkpoint_function": the subject's name as a test name.
std::string subject_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(EverySubject, ExportAgreementOf, ::testing::ValuesIn(every_subject()), subject_test_name);

// The instantiation above is every registered subject's; a measured seed names one of them (a
// renamed subject would otherwise drop to a seed from its name without a word).
TEST(ExportAgreement, each_measured_first_seed_is_a_registered_subject_s) {
  const std::vector<std::string> names = every_subject();
  for (const auto& [subject, seed] : kFirstSeeds) {
    EXPECT_NE(std::find(names.begin(), names.end(), subject), names.end()) << subject << " is not registered";
  }
}

// How a subject's functions are called from a script is declared in its folder (export.py) and
// nowhere else: every name a subject exports its implementations as is one export-python takes
// and the script offers, and the script refuses another, listing them.
TEST(ExportAgreement, a_script_calls_every_subject_s_functions_by_the_names_the_subject_declares) {
  python::register_bridge();
  const Case c = load_case_file(std::string(test_paths::source_dir()) + "/corpus/seeds/nested-three-deep.json");
  std::vector<std::string> names;
  for (const Subject& subject : subjects()) {
    for (const SubjectImplementation& implementation : subject.implementations) {
      const std::string name = subject.exported_as(implementation.name);
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  ASSERT_GE(names.size(), 3u);
  ExportOptions options;
  options.property = "grads-match-eager";
  std::string script;
  for (const std::string& name : names) {
    options.checkpoint = options.oracle = name;
    EXPECT_NO_THROW(script = export_python(c, options)) << name;
  }
  // (std::filesystem's remove_all clashes with the pip torch this program links: a shell makes it.)
  const std::string dir = ::testing::TempDir() + "/export_names_" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  const std::string path = dir + "/case.py";
  std::ofstream(path) << script;
  const test_shell::Result refused =
      test_shell::run_shell(std::string(test_paths::python_executable()) + " " + path + " --checkpoint no-such-function");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("invalid choice: 'no-such-function'"), std::string::npos) << refused.output;
  for (const std::string& name : names) {
    EXPECT_NE(refused.output.find("'" + name + "'"), std::string::npos) << name << " is not among the choices:\n" << refused.output;
  }
}

// Every random op computes in an exported script (properties/export_runtime.py) what it computes
// in recheck (core/tensor_ops.cpp), bit for bit, drawing from the CPU generator and from the
// device's (on CPU a stand-in generator, seeded alike on both sides): a finding replays with the
// values recheck found it with.
TEST(ExportAgreement, every_random_op_computes_in_a_script_the_bits_it_computes_in_recheck) {
  python::register_bridge();
  const Case c = load_case_file(std::string(test_paths::source_dir()) + "/corpus/seeds/nested-three-deep.json");
  ExportOptions options;
  options.property = "grads-match-eager";
  options.checkpoint = options.oracle = "torch-non-reentrant";
  const std::string dir = ::testing::TempDir() + "/export_random_" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  const std::string script = dir + "/case.py";
  std::ofstream(script) << export_python(c, options);

  const at::Tensor x = at::linspace(-2.0, 2.0, 12, at::kFloat).reshape({4, 3});
  const std::pair<RngSource, const char*> sources[] = {{RngSource::cpu, "cpu"}, {RngSource::device, "device"}};
  std::string expected;
  std::string calls;
  for (const auto& fn : case_detail::kRandomFns) {
    for (const auto& [source, source_name] : sources) {
      rng::manual_seed(rng::cpu_generator(), 11);
      rng::manual_seed(rng::device_generator(), 12);
      Random op;
      op.fn = fn.value;
      op.source = source;
      op.p = case_detail::random_default_p(fn.value);
      const at::Tensor out = tensor_ops::expect_tensor(tensor_ops::run(op, {Value(x)}).at(0), "test").contiguous();
      expected += std::string(fn.name) + " " + source_name + ":";
      const at::Tensor bits = out.view(at::kInt);
      for (int64_t i = 0; i < bits.numel(); ++i) expected += " " + std::to_string(bits.data_ptr<int32_t>()[i]);
      expected += "\n";
      std::ostringstream p;
      p.precision(17);
      p << op.p;
      calls += "    ('" + std::string(fn.name) + "', '" + source_name + "', " + p.str() + "),\n";
    }
  }
  const std::string driver = dir + "/driver.py";
  std::ofstream(driver) << "import runpy, torch\n"
                        << "g = runpy.run_path('" << script << "', run_name='agreement')\n"
                        << "x = torch.linspace(-2.0, 2.0, 12, dtype=torch.float32).reshape(4, 3)\n"
                        << "out_file = open('" << dir << "/bits.txt', 'w')\n"
                        << "for fn, source, p in [\n" << calls << "]:\n"
                        << "    torch.manual_seed(11)\n"
                        << "    g['DEVICE_GEN'].manual_seed(12)\n"
                        << "    out = g['Run'].random(None, x, fn, source, None, p).contiguous()\n"
                        << "    print(fn + ' ' + source + ':' + ''.join(' %d' % b for b in out.view(torch.int32).flatten().tolist()), file=out_file)\n"
                        << "out_file.close()\n";
  const test_shell::Result ran = test_shell::run_shell(std::string(test_paths::python_executable()) + " " + driver);
  std::ifstream in(dir + "/bits.txt");
  const std::string bits((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::system(("rm -rf " + dir).c_str());
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_EQ(bits, expected);
}

}  // namespace
}  // namespace recheck
