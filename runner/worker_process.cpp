#include "runner/worker_process.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "runner/interrupts.h"

namespace recheck::runner {

namespace {

// This process's ends of the pipes to every worker it has running. A child forked later must
// not hold them: a worker whose input pipe another child still holds open never sees the end
// of its input, and waiting for it to end would wait for ever.
std::set<int>& parent_ends() {
  static std::set<int> ends;
  return ends;
}

}  // namespace

int64_t collapse_onto_huge_pages() {
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;  // Linux 6.1's value; older headers lack it
#endif
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  if (page == 0 || kHuge % page != 0) return 0;
  std::ifstream maps("/proc/self/maps");
  int64_t collapsed = 0;
  std::vector<unsigned char> resident(kHuge / page);
  for (std::string line; std::getline(maps, line);) {
    // "start-end perms offset dev inode [name]": private, writable, no file ("" or [heap]).
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, name;
    fields >> range >> perms >> offset >> dev >> inode;
    std::getline(fields >> std::ws, name);
    if (perms.size() < 4 || perms[1] != 'w' || perms[3] != 'p' || inode != "0" || !(name.empty() || name == "[heap]")) {
      continue;
    }
    const size_t dash = range.find('-');
    const uintptr_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    for (uintptr_t chunk = (start + kHuge - 1) & ~(kHuge - 1); chunk + kHuge <= end; chunk += kHuge) {
      // Thread stacks and reserved arenas are mostly untouched: collapsing them would make
      // their whole 2 MiB resident in every worker.
      if (mincore(reinterpret_cast<void*>(chunk), kHuge, resident.data()) != 0) continue;
      size_t in_memory = 0;
      for (const unsigned char r : resident) in_memory += r & 1;
      if (in_memory * 2 < resident.size()) continue;
      void* at = reinterpret_cast<void*>(chunk);
      if (madvise(at, kHuge, MADV_HUGEPAGE) == 0 && madvise(at, kHuge, MADV_COLLAPSE) == 0) {
        collapsed += static_cast<int64_t>(kHuge);
      }
    }
  }
  return collapsed;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    return std::string("was killed by signal ") + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

bool write_all(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

int64_t oom_kills() {
  const char* path = std::getenv("RECHECK_VMSTAT");
  std::ifstream in(path != nullptr && *path != '\0' ? path : "/proc/vmstat");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return -1;
}

int64_t memory_available() {
  const char* path = std::getenv("RECHECK_MEMINFO");
  std::ifstream in(path != nullptr && *path != '\0' ? path : "/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value) {
    std::getline(in, unit);  // " kB"
    if (key == "MemAvailable:") return value * 1024;
  }
  return -1;
}

bool killed_for_memory(int status, int64_t kills_before) {
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && kills_before >= 0 && oom_kills() > kills_before;
}

void WorkerProcess::start(const WorkerBody& body, bool with_input, bool takes_interrupts) {
  stop();
  int to[2] = {-1, -1};
  int from[2];
  if (pipe(from) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (with_input && pipe(to) != 0) {
    close(from[0]);
    close(from[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  auto close_all = [&] {
    for (int fd : {to[0], to[1], from[0], from[1]}) {
      if (fd >= 0) close(fd);
    }
  };
  // What this process buffered would be written twice, by it and by the child.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (takes_interrupts) workers_used();  // from now on a second interrupt spares recheck
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close_all();
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // The child ends with its parent, even one killed outright (no orphan left computing).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) std::_Exit(1);
    forget_workers();
    for (int fd : parent_ends()) close(fd);
    parent_ends().clear();
    close(from[0]);
    if (with_input) close(to[1]);
    FILE* in = with_input ? fdopen(to[0], "r") : nullptr;
    try {
      body(in, from[1]);
    } catch (const std::exception& error) {
      write_all(from[1], "error " + error_line(error) + "\n");
      std::_Exit(3);
    }
    std::_Exit(0);
  }
  close(from[1]);
  if (with_input) close(to[0]);
  pid_ = pid;
  takes_interrupts_ = takes_interrupts;
  to_child_ = with_input ? to[1] : -1;
  from_child_ = fdopen(from[0], "r");
  parent_ends().insert(from[0]);
  if (with_input) parent_ends().insert(to[1]);
  if (takes_interrupts) {
    add_worker(pid);
    // An interrupt that came before the worker was known armed no timer to kill it.
    if (interrupted()) kill(pid, SIGKILL);
  }
}

bool WorkerProcess::send(const std::string& line) { return to_child_ >= 0 && write_all(to_child_, line); }

std::optional<std::string> WorkerProcess::read_line() {
  if (from_child_ == nullptr) return std::nullopt;
  char* buffer = nullptr;
  std::size_t capacity = 0;
  const ssize_t n = getline(&buffer, &capacity, from_child_);
  std::string line = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
  std::free(buffer);
  if (line.empty() || line.back() != '\n') return std::nullopt;
  line.pop_back();
  return line;
}

std::vector<size_t> wait_for_output(const std::vector<WorkerProcess*>& children, int timeout_ms) {
  std::vector<pollfd> fds;
  for (const WorkerProcess* child : children) fds.push_back({child->output_fd(), POLLIN, 0});
  std::vector<size_t> ready;
  if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
    if (errno == EINTR) return ready;
    throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
  }
  for (size_t k = 0; k < fds.size(); ++k) {
    if (fds[k].revents != 0) ready.push_back(k);
  }
  return ready;
}

int WorkerProcess::output_fd() const { return from_child_ != nullptr ? fileno(from_child_) : -1; }

std::vector<std::string> WorkerProcess::read_available(bool& ended) {
  ended = false;
  std::vector<std::string> lines;
  if (from_child_ == nullptr) {
    ended = true;
    return lines;
  }
  char buffer[65536];
  ssize_t n;
  while ((n = read(fileno(from_child_), buffer, sizeof buffer)) < 0 && errno == EINTR) {
  }
  if (n <= 0) {
    ended = true;
    pending_.clear();
    return lines;
  }
  pending_.append(buffer, static_cast<std::size_t>(n));
  for (std::size_t end; (end = pending_.find('\n')) != std::string::npos;) {
    lines.push_back(pending_.substr(0, end));
    pending_.erase(0, end + 1);
  }
  return lines;
}

void WorkerProcess::close_pipes() {
  if (to_child_ >= 0) {
    parent_ends().erase(to_child_);
    close(to_child_);
  }
  if (from_child_ != nullptr) {
    parent_ends().erase(fileno(from_child_));
    std::fclose(from_child_);
  }
  to_child_ = -1;
  from_child_ = nullptr;
  pending_.clear();
  status_ = 0;
}

std::string WorkerProcess::stop() { return stop_within(0); }

std::string WorkerProcess::stop_within(double seconds) {
  if (pid_ == 0) return "";
  close_pipes();
  bool killed = false;
  if (seconds > 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      const pid_t ended = waitpid(pid_, &status_, WNOHANG);
      if (ended == pid_ || (ended < 0 && errno != EINTR)) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid_, SIGKILL);
        killed = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!killed) {
      if (takes_interrupts_) remove_worker(pid_);
      pid_ = 0;
      return describe_status(status_);
    }
  }
  while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  if (takes_interrupts_) remove_worker(pid_);
  pid_ = 0;
  if (killed) {
    std::ostringstream text;
    text << "did not end within " << seconds << " s and was killed";
    return text.str();
  }
  return describe_status(status_);
}

}  // namespace recheck::runner
