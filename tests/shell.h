// Running a command line from a test: its exit code and its output, standard error merged.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace recheck::test_shell {

struct Result {
  int exit_code;
  std::string output;
};

inline Result run_shell(const std::string& command_line) {
  const std::string command = command_line + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string output;
  std::array<char, 4096> buffer;
  std::size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe.release());
  return {WEXITSTATUS(status), output};
}

// `dir`, emptied or made: a test's own folder, whatever an earlier run left there.
inline std::string fresh_folder(const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace recheck::test_shell
