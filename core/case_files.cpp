// Case files: read within the limits, written atomically (a reader never sees half a file).
#include "core/case.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/case_detail.h"

namespace recheck {

using nlohmann::json;
using namespace case_detail;

std::string read_case_file_text(const std::string& path, const Limits& limits) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) throw CaseError(path + ": cannot open the file: no such file");
  if (error) throw CaseError(path + ": cannot open the file: " + error.message());
  if (status.type() == fs::file_type::directory) throw CaseError(path + ": a folder, not a case file");
  // A pipe would block the read and a device like /dev/zero never ends.
  if (status.type() != fs::file_type::regular) throw CaseError(path + ": not a regular file");
  const auto size = fs::file_size(path, error);
  if (error) throw CaseError(path + ": cannot open the file: " + error.message());
  if (size > static_cast<std::uintmax_t>(limits.file_bytes)) {
    throw CaseError(path + ": " + over_limit("file size", static_cast<int64_t>(size), "file_bytes", limits.file_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CaseError(path + ": cannot open the file: " + std::strerror(errno));
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

Case load_case_file(const std::string& path, const Limits& limits) {
  return parse_case_text(read_case_file_text(path, limits), path, limits);
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  static std::atomic<int> counter{0};
  const std::filesystem::path target(path);
  if (path.empty()) throw OutputError("cannot write a file with an empty name");
  std::error_code error;
  if (std::filesystem::is_directory(target, error)) throw OutputError(path + ": cannot write: a folder is in the way");
  // A short, hidden name in the same folder (a rename across file systems would not be
  // atomic): not NAME.tmp, which can be over the 255-byte limit when NAME is just under it.
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temporary = (folder / (".recheck-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp")).string();
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw OutputError(path + ": cannot write: " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    const int saved = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    throw OutputError(path + ": " + what + ": " + std::strerror(saved));
  };
  for (std::size_t done = 0; done < contents.size();) {
    const ssize_t wrote = ::write(fd, contents.data() + done, contents.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) fail("write failed");
    done += static_cast<std::size_t>(wrote);
  }
  if (::close(fd) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw OutputError(path + ": write failed: " + std::strerror(saved));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw OutputError(path + ": cannot put the file in place: " + std::strerror(saved));
  }
}

void save_case_file(const Case& c, const std::string& path) {
  // A note that is not UTF-8 (a file name's bytes) is written with U+FFFD in its place.
  write_file_atomically(path, to_json(c).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace recheck
