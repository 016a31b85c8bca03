// What the code under test logged while cases ran (a Python variant's log records and warnings:
// Megatron's tracker warns at every fork in which a case draws the CPU generator, which cases do
// on purpose), counted instead of printed: each run summarizes them once at its end.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace recheck {

using LoggedCounts = std::map<std::string, int64_t>;  // "SOURCE LEVEL: message" -> times

// Counts one message in this process.
void count_logged(const std::string& message);
// The counts since the last take, and starts again from none.
LoggedCounts take_logged();
// Adds `more` into `into`.
void add_logged(LoggedCounts& into, const LoggedCounts& more);

}  // namespace recheck
