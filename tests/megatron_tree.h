// Where the embedded Python finds megatron-core, for tests that copy its package into trees of
// their own (the Python tests of the bridge and of tools/gate-pr).
#pragma once

#include <string>

#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {

// The path of megatron-core's random.py for the embedded Python, or "" without megatron-core.
inline std::string megatron_random_py() {
  // Python's warnings (megatron-core's, about Apex and Transformer Engine) kept out of the path.
  std::string path = test_shell::run_shell("(" + std::string(test_paths::python_executable()) +
                                           " -c 'import megatron.core.tensor_parallel.random as r; print(r.__file__)'"
                                           " 2>/dev/null)").output;
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  return path;
}

}  // namespace recheck
