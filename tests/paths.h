// Where a test finds the source tree and the built programs. The paths live in one small
// generated translation unit per test program (CMakeLists.txt: recheck_test_paths), not in the
// test sources' compile commands: a command line naming the build folder (CHECKOUT/build/recheck) differs in a
// clone elsewhere, and ccache would then miss every test source there (CI builds a fresh clone).
#pragma once

namespace recheck::test_paths {

const char* source_dir();         // the checkout: corpus/, tools/, docs/
const char* recheck_binary();     // the recheck built beside the tests
const char* fuzz_check();         // the fuzz targets, where built (recheck_tests only)
const char* fuzz_inputs();
const char* python_executable();  // the Python of the bridge (recheck_python_tests only)

}  // namespace recheck::test_paths
