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

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/errors.h"
#include "core/interpreter.h"
#include "fuzz/feedback.h"
#include "fuzz/target_options.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "suts/checkpoint.h"

namespace {

struct Target {
  std::string sut_name;
  std::unique_ptr<recheck::CheckpointImplementation> oracle;
  std::unique_ptr<recheck::CheckpointImplementation> sut;
  recheck::GenOptions options;
};

Target* target = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  using recheck::fuzz::target_option;
  recheck::skip_libtorch_backtraces();
  recheck::use_deterministic_algorithms();
  auto* t = new Target;
  t->sut_name = target_option(*argc, *argv, "sut", "RECHECK_SUT", "clearing");
  const std::string oracle = target_option(*argc, *argv, "oracle", "RECHECK_ORACLE", "nonclearing");
  t->options.device = target_option(*argc, *argv, "device", "RECHECK_DEVICE", "cpu");
  try {
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
  t->options = recheck::options_for(t->options, *t->sut);
  std::fprintf(stderr, "recheck_fuzz_check: %s against %s on %s\n", t->sut_name.c_str(), oracle.c_str(),
               t->options.device.c_str());
  target = t;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const recheck::Case c = recheck::decode_case(data, size, target->options);
  recheck::fuzz::record_case(c);
  // Eager mode runs only when the sut and the oracle observed something different: when they
  // agree, no property that compares them with eager mode can raise an alarm.
  const recheck::CaseResult result =
      recheck::check_case(c, *target->oracle, *target->sut, {}, recheck::EagerRun::when_needed);
  recheck::fuzz::record_results(result.results);
  if (!result.has_alarm()) return 0;
  std::cerr << "\nrecheck_fuzz_check: " << target->sut_name << " fails:\n"
            << recheck::describe_results(result.results) << "\nThe case:\n"
            << recheck::show(c) << "\nAs JSON:\n" << recheck::to_json(c).dump() << "\n"
            << "Minimize it: recheck minimize CRASH_FILE --sut " << target->sut_name << "\n"
            << std::flush;
  std::abort();
}
