// Where the embedded Python finds megatron-core, for tests that copy its package into trees of
// their own (the Python tests of the bridge and of tools/gate-pr).
#pragma once

#include <string>

#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {

// The path of megatron-core's random.py for the embedded Python, or "" without megatron-core.
inline std::string megatron_random_py() {
  // Asked once per test process, and without importing megatron (its package imports take seconds):
  // where the top-level package would be loaded from, and the file under it.
  static const std::string path = [] {
    std::string found = test_shell::run_shell(
                            "(" + std::string(test_paths::python_executable()) +
                            " -c 'import importlib.util, os; s = importlib.util.find_spec(\"megatron\"); "
                            "f = s and s.submodule_search_locations and os.path.join(list(s.submodule_search_locations)[0], "
                            "\"core\", \"tensor_parallel\", \"random.py\"); print(f if f and os.path.isfile(f) else \"\")'"
                            " 2>/dev/null)")
                            .output;
    while (!found.empty() && (found.back() == '\n' || found.back() == '\r')) found.pop_back();
    return found;
  }();
  return path;
}

}  // namespace recheck
