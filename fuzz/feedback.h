// Structural feedback for libFuzzer. libtorch is not instrumented, and with gcc nothing is, so
// what guides the search is what these counters say about a case and its check: op kinds by
// nesting depth, consecutive op pairs, checkpoint depth, argument kinds by position, RNG sources
// by context, dtypes, the case's corner labels (case_features), and each property's
// classification. They live in libFuzzer's extra-counters section, which libFuzzer clears
// before every input and reads after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/case.h"
#include "properties/properties.h"

namespace recheck::fuzz {

constexpr std::size_t kCounterCount = 2048;

// Marks what `c` holds.
void record_case(const Case& c);
// Each property's classification, kept compactly as (place of the property in properties(),
// classification), so that the check target can mark them again when an input decodes to a case
// it has already checked.
using Verdicts = std::vector<std::pair<uint8_t, uint8_t>>;
Verdicts verdicts_of(const std::vector<PropertyResult>& results);
void record_verdicts(const Verdicts& verdicts);

// The counters, for tests. libFuzzer clears them itself before every input.
const uint8_t* counters();
void clear_counters();
std::size_t counters_set();

}  // namespace recheck::fuzz
