// Ctrl-C and SIGTERM (which SLURM sends at a job's time limit): what a command does when cut
// short (docs/architecture.md, "Note: interrupts"). The first interrupt ends the loop in
// progress after the current case, and the command prints or writes what it has so far; the
// worker process still in its case 0.4 s later is killed (a case of 40 ops nested 8 deep can
// take a minute), and so is one at a second interrupt: the case in progress is then left out,
// neither counted nor reported. A second interrupt where cases run in this process
// (--no-isolate) ends recheck at once.
#pragma once

#include <sys/types.h>

namespace recheck::runner {

// Installs the handlers for SIGINT, SIGTERM and SIGALRM (the 0.4 s grace). Idempotent.
void stop_on_interrupt();
// Whether an interrupt came, and which signal it was (0: none). A command it cut short exits
// 128 + that number (130 for Ctrl-C, 143 for SIGTERM) unless it found something (1).
bool interrupted();
int interrupt_signal();

// The worker process in progress (0: none), to which an interrupt is passed on. Set by
// WorkerProcess (0 just before it forks); once it was ever called, a second interrupt never ends
// recheck itself, which still has a report or a case to write.
void set_current_worker(pid_t pid);

}  // namespace recheck::runner
