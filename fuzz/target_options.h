// What the fuzz targets are told beyond libFuzzer's own flags: `--name=value` arguments, which
// libFuzzer leaves to the target (it reserves flags starting with "--" for it), or RECHECK_*
// environment variables, which fork-mode children inherit. The argument wins.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

namespace recheck::fuzz {

// `--name=value` among argv, else the environment variable, else `fallback`.
inline std::string target_option(int argc, char** argv, const char* name, const char* env, const char* fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  if (const char* value = std::getenv(env); value != nullptr && *value != '\0') return value;
  return fallback;
}

}  // namespace recheck::fuzz
