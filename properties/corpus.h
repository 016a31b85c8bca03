// What a saved case records it shows, and how recheck saves a finding as such a case: the rules
// of corpus expectations, in one place. A case's "expect" lists {sut, property, classification}:
// checked against the oracle, `sut` gets `classification` in `property`. Two names that are not
// properties of the suite: property "*" with classification "no-alarm" (no property raises an
// alarm), and property "runs-to-completion" with classification "crash" (the variant crashes the
// process checking the case). A case without expectations expects no alarm on `clearing`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/case.h"
#include "properties/report.h"

namespace recheck {

constexpr const char* kCrashProperty = "runs-to-completion";
constexpr const char* kCrash = "crash";
constexpr const char* kAnyProperty = "*";
constexpr const char* kNoAlarm = "no-alarm";

// The case's expectations, or the default one.
std::vector<Expectation> expectations_of(const Case& c);

// Throws CaseError, naming `field` (e.g. "FILE: case.expect[2]"), for an expectation that breaks
// the rules: an unknown property, "*" without "no-alarm" or "runs-to-completion" without "crash"
// (and the other way round).
void check_expectation(const Expectation& e, const std::string& field);

// What a check showed, in an expectation's terms: a classification, "no-alarm" or the first
// alarm ("grads-bitwise regression") for "*", "crash" or "no crash". `result` null: the process
// checking the case crashed.
std::string observed(const Expectation& e, const CaseResult* result);

// Creates `dir` and the folders above it where missing; OutputError naming it when it cannot.
void make_output_folder(const std::string& dir);

// A finding of `recheck run` saved as a case that shows it: DIR/seed-SEED-case-INDEX-PROPERTY-
// CLASSIFICATION.json (named by the run's seed too, so that runs with other seeds into the same
// folder keep their files), with `note` and the expectation that `recheck replay` checks.
// Returns the file's path.
std::string save_finding(Case c, const std::string& dir, uint64_t seed, int64_t index, const std::string& sut,
                         const std::string& property, const std::string& classification, const std::string& note);

}  // namespace recheck
