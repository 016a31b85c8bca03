// recheck_fuzz_check: libFuzzer decodes each input into a case (decode_case) and checks every
// property of the variant under test against the oracle. A regression or a divergence prints
// the verdicts, the evidence and the case, then aborts, so that libFuzzer keeps the input;
// `recheck minimize CRASH_FILE --sut NAME` turns it into a small JSON case.
//
//   recheck_fuzz_check [libFuzzer flags] [--sut=NAME] [--oracle=NAME] [--device=cpu|cuda] CORPUS...
//
// or RECHECK_SUT, RECHECK_ORACLE, RECHECK_DEVICE in the environment (fork mode passes those on).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/errors.h"
#include "core/interpreter.h"
#include "fuzz/feedback.h"
#include "fuzz/target_options.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "suts/subject.h"

namespace {

// Cases already checked, by a 128-bit hash of their JSON text, with the marks their check
// left. About a third of libFuzzer's mutations change only bytes the decoder ignores or clamps,
// so the input decodes to a case already checked; checks are deterministic (the Determinism
// tests hold recheck to it), so that case gets its marks again without a second check. Every
// case remembered passed without alarm: an alarm aborts at its first check.
class CheckedCases {
 public:
  using Key = std::pair<uint64_t, uint64_t>;
  static Key key_of(const std::string& text) {
    uint64_t fnv = 14695981039346656037ULL;
    for (unsigned char ch : text) fnv = (fnv ^ ch) * 1099511628211ULL;
    return {std::hash<std::string>{}(text), fnv};
  }
  const recheck::fuzz::Verdicts* find(const Key& key) const {
    auto it = seen_.find(key);
    return it == seen_.end() ? nullptr : &it->second;
  }
  void add(const Key& key, recheck::fuzz::Verdicts verdicts) {
    if (seen_.size() >= kMaxCases) seen_.clear();  // bounded memory; forgetting only costs time
    seen_.emplace(key, std::move(verdicts));
  }
  int64_t inputs = 0;
  int64_t checked = 0;

 private:
  struct Hash {
    std::size_t operator()(const Key& k) const { return static_cast<std::size_t>(k.first ^ (k.second << 1)); }
  };
  static constexpr std::size_t kMaxCases = 1 << 20;
  std::unordered_map<Key, recheck::fuzz::Verdicts, Hash> seen_;
};

struct Target {
  std::string sut_name;
  std::unique_ptr<recheck::CheckpointImplementation> oracle;
  std::unique_ptr<recheck::CheckpointImplementation> sut;
  recheck::GenOptions options;
  CheckedCases checked;
};

Target* target = nullptr;

void print_checked() {
  if (target == nullptr || target->checked.inputs == 0) return;
  std::fprintf(stderr, "recheck_fuzz_check: %lld inputs, %lld distinct cases checked\n",
               static_cast<long long>(target->checked.inputs), static_cast<long long>(target->checked.checked));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  using recheck::fuzz::target_option;
  recheck::skip_libtorch_backtraces();
  recheck::use_deterministic_algorithms();
  auto* t = new Target;
  std::string oracle;
  t->options.device = target_option(*argc, *argv, "device", "RECHECK_DEVICE", "cpu");
  try {
    // --subject (RECHECK_SUBJECT): its change and oracle are the defaults of --sut and --oracle.
    const std::string subject_name = target_option(*argc, *argv, "subject", "RECHECK_SUBJECT", "");
    const recheck::Subject& subject =
        subject_name.empty() ? recheck::default_subject() : recheck::find_subject(subject_name);
    t->sut_name = target_option(*argc, *argv, "sut", "RECHECK_SUT", subject.change.c_str());
    oracle = target_option(*argc, *argv, "oracle", "RECHECK_ORACLE", subject.oracle.c_str());
    t->oracle = recheck::make_checkpoint(oracle);
    t->sut = recheck::make_checkpoint(t->sut_name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recheck_fuzz_check: %s\n", e.what());
    std::exit(2);
  }
  if (t->options.device != "cpu" && t->options.device != "cuda") {
    std::fprintf(stderr, "recheck_fuzz_check: --device must be cpu or cuda, not '%s'\n", t->options.device.c_str());
    std::exit(2);
  }
  try {
    recheck::check_ready_to_run(t->options.device == "cuda", *t->oracle, *t->sut);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recheck_fuzz_check: %s\n", e.what());
    std::exit(2);
  }
  t->options = recheck::options_for(t->options, *t->sut);
  std::fprintf(stderr, "recheck_fuzz_check: %s against %s on %s\n", t->sut_name.c_str(), oracle.c_str(),
               t->options.device.c_str());
  target = t;
  std::atexit(print_checked);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const recheck::Case c = recheck::decode_case(data, size, target->options);
  recheck::fuzz::record_case(c);
  ++target->checked.inputs;
  const std::string json = recheck::to_json(c).dump();
  const CheckedCases::Key key = CheckedCases::key_of(json);
  if (const recheck::fuzz::Verdicts* verdicts = target->checked.find(key)) {
    recheck::fuzz::record_verdicts(*verdicts);
    return 0;
  }
  ++target->checked.checked;
  // Eager mode runs only when the sut and the oracle observed something different (when they
  // agree, no property that compares them with eager mode can raise an alarm), or to report an
  // alarm as repro would.
  const recheck::CaseResult result =
      recheck::check_case(c, *target->oracle, *target->sut, {}, recheck::EagerRun::when_needed);
  recheck::fuzz::Verdicts verdicts = recheck::fuzz::verdicts_of(result.results);
  recheck::fuzz::record_verdicts(verdicts);
  if (!result.has_alarm()) {
    // A case skipped for lack of memory may fit another time: it is not remembered.
    if (result.skipped.empty()) target->checked.add(key, std::move(verdicts));
    return 0;
  }
  std::cerr << "\nrecheck_fuzz_check: " << target->sut_name << " fails:\n"
            << recheck::describe_results(result.results) << "\nThe case:\n"
            << recheck::show(c) << "\nAs JSON:\n" << json << "\n"
            << "Minimize it: recheck minimize CRASH_FILE --sut " << target->sut_name << "\n"
            << std::flush;
  std::abort();
}
