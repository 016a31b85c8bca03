#include "runner/interrupts.h"

#include <sys/time.h>

#include <atomic>
#include <csignal>

namespace recheck::runner {

namespace {

std::atomic<bool> g_interrupted{false};
volatile sig_atomic_t g_interrupt_signal = 0;
volatile sig_atomic_t g_workers_used = 0;
// The workers in progress, 0 for a free slot: read by the handlers, written only by the main
// thread (a slot is claimed before the pid is written into it).
constexpr int kMaxWorkers = 512;
volatile sig_atomic_t g_workers[kMaxWorkers] = {};

bool any_worker() {
  for (int i = 0; i < kMaxWorkers; ++i) {
    if (g_workers[i] > 0) return true;
  }
  return false;
}

void kill_workers(int signal) {
  for (int i = 0; i < kMaxWorkers; ++i) {
    if (g_workers[i] > 0) kill(static_cast<pid_t>(g_workers[i]), signal);
  }
}

void on_interrupt(int signal) {
  const bool again = g_interrupted.exchange(true);
  if (!again) g_interrupt_signal = signal;
  if (!any_worker()) {
    // A second one where cases run in this process (--no-isolate) ends recheck at once, as if
    // no handler were set: signal() and raise() are safe in a handler.
    if (again && !g_workers_used) {
      std::signal(signal, SIG_DFL);
      std::raise(signal);
    }
    return;
  }
  if (again) {
    kill_workers(SIGKILL);
  } else {
    kill_workers(SIGINT);
    // A plain system call (Linux): safe in a signal handler.
    const itimerval grace{{0, 0}, {0, 400000}};
    setitimer(ITIMER_REAL, &grace, nullptr);
  }
}

void on_grace_over(int) { kill_workers(SIGKILL); }

}  // namespace

void stop_on_interrupt() {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  std::signal(SIGALRM, on_grace_over);
}

bool interrupted() { return g_interrupted.load(); }

int interrupt_signal() { return g_interrupt_signal; }

void forget_interrupt() {
  const itimerval none{{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &none, nullptr);
  g_interrupt_signal = 0;
  g_interrupted = false;
}

void workers_used() { g_workers_used = 1; }

void add_worker(pid_t pid) {
  g_workers_used = 1;
  for (int i = 0; i < kMaxWorkers; ++i) {
    if (g_workers[i] == 0) {
      g_workers[i] = pid;
      return;
    }
  }
}

void forget_workers() {
  for (int i = 0; i < kMaxWorkers; ++i) g_workers[i] = 0;
}

void remove_worker(pid_t pid) {
  for (int i = 0; i < kMaxWorkers; ++i) {
    if (g_workers[i] == pid) g_workers[i] = 0;
  }
}

}  // namespace recheck::runner
