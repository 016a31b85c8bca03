// The one case builder behind the generator and the fuzzer's decoder (properties/generator.h):
// every choice it makes is drawn by RapidCheck (which shrinks it towards the first
// alternative) or read from the fuzzer's bytes, so that decoded cases are as valid and reach the
// same corners as generated ones.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include "properties/generator.h"

namespace recheck {

// A case built with choices from `bytes`, or drawn by RapidCheck when it is null (inside a
// generator: gen_case).
Case build_case(const GenOptions& options, FuzzedDataProvider* bytes);

}  // namespace recheck
