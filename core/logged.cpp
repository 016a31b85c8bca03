#include "core/logged.h"

#include <mutex>
#include <utility>

namespace recheck {

namespace {

std::mutex& lock() {
  static std::mutex m;
  return m;
}

LoggedCounts& counts() {
  static LoggedCounts c;
  return c;
}

}  // namespace

void count_logged(const std::string& message) {
  std::lock_guard<std::mutex> guard(lock());
  ++counts()[message];
}

LoggedCounts take_logged() {
  std::lock_guard<std::mutex> guard(lock());
  return std::exchange(counts(), {});
}

void add_logged(LoggedCounts& into, const LoggedCounts& more) {
  for (const auto& [message, times] : more) into[message] += times;
}

}  // namespace recheck
