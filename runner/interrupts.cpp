#include "runner/interrupts.h"

#include <sys/time.h>

#include <atomic>
#include <csignal>

namespace recheck::runner {

namespace {

std::atomic<bool> g_interrupted{false};
volatile sig_atomic_t g_interrupt_signal = 0;
volatile sig_atomic_t g_workers_used = 0;
volatile sig_atomic_t g_worker_pid = 0;

void on_interrupt(int signal) {
  const bool again = g_interrupted.exchange(true);
  if (!again) g_interrupt_signal = signal;
  if (g_worker_pid <= 0) {
    // A second one where cases run in this process (--no-isolate) ends recheck at once, as if
    // no handler were set: signal() and raise() are safe in a handler.
    if (again && !g_workers_used) {
      std::signal(signal, SIG_DFL);
      std::raise(signal);
    }
    return;
  }
  if (again) {
    kill(static_cast<pid_t>(g_worker_pid), SIGKILL);
  } else {
    kill(static_cast<pid_t>(g_worker_pid), SIGINT);
    // A plain system call (Linux): safe in a signal handler.
    const itimerval grace{{0, 0}, {0, 400000}};
    setitimer(ITIMER_REAL, &grace, nullptr);
  }
}

void on_grace_over(int) {
  if (g_worker_pid > 0) kill(static_cast<pid_t>(g_worker_pid), SIGKILL);
}

}  // namespace

void stop_on_interrupt() {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  std::signal(SIGALRM, on_grace_over);
}

bool interrupted() { return g_interrupted.load(); }

int interrupt_signal() { return g_interrupt_signal; }

void set_current_worker(pid_t pid) {
  g_workers_used = 1;
  g_worker_pid = pid;
}

}  // namespace recheck::runner
