// recheck_fuzz_inputs: fuzzes what reads cases, not what checks them. Each input goes
//   - through the byte decoder: the case must validate, stay within the limits, and come back
//     unchanged from JSON;
//   - through the JSON loader as a case file: it must give a case or a CaseError, nothing else.
// Anything else (another exception, a crash, a sanitizer report, a hang) is a finding. Meant
// for the sanitizer build (tools/campaign --sanitize): the ten-million-execution goal of issue 6.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/errors.h"
#include "fuzz/feedback.h"
#include "properties/generator.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "recheck_fuzz_inputs: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_decoder(const uint8_t* data, std::size_t size) {
  const recheck::Case c = recheck::decode_case(data, size);
  try {
    recheck::validate(c);
  } catch (const recheck::CaseError& e) {
    fail("a decoded case does not validate", e.what());
  }
  if (recheck::decode_case(data, size).root.ops.size() != c.root.ops.size()) fail("the decoder is not deterministic", "");
  const nlohmann::json j = recheck::to_json(c);
  recheck::Case back;
  try {
    back = recheck::case_from_json(nlohmann::json::parse(j.dump()));
  } catch (const std::exception& e) {
    fail("a decoded case does not load back from its JSON", e.what());
  }
  if (recheck::to_json(back) != j) fail("a decoded case changes through JSON", j.dump());
  recheck::fuzz::record_case(c);
}

void check_loader(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  recheck::Case c;
  try {
    c = recheck::parse_case_text(text, "input");
  } catch (const recheck::CaseError&) {
    return;  // not JSON, or not a valid case: the CLI prints the error with the field path
  } catch (const std::exception& e) {
    fail("the loader threw something other than CaseError", e.what());
  }
  recheck::fuzz::record_case(c);
  // What loads must save and load again to the same case.
  const nlohmann::json j = recheck::to_json(c);
  try {
    if (recheck::to_json(recheck::case_from_json(nlohmann::json::parse(j.dump()))) != j) {
      fail("a loaded case changes through JSON", j.dump());
    }
  } catch (const std::exception& e) {
    fail("a loaded case does not load back from its own JSON", std::string(e.what()) + ": " + j.dump());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  recheck::skip_libtorch_backtraces();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  check_decoder(data, size);
  check_loader(data, size);
  return 0;
}
