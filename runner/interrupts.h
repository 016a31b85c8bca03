// Ctrl-C and SIGTERM (which SLURM sends at a job's time limit): what a command does when cut
// short (docs/architecture.md, "Note: interrupts"). The first interrupt ends the loop in
// progress after the current case, and the command prints or writes what it has so far; a
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
// Forgets an interrupt that was dealt with, for a process that goes on to other work after the
// one it cut short (the unit tests, run many to a process under the sanitizers).
void forget_interrupt();

// The worker processes in progress, to which an interrupt is passed on (`run --jobs N` has N).
// WorkerProcess calls workers_used just before it forks, adds the child after and removes it
// when it has ended; once workers were used, a second interrupt never ends recheck itself, which
// still has a report or a case to write.
void workers_used();
void add_worker(pid_t pid);
void remove_worker(pid_t pid);
// In a child just forked: its parent's workers are not its own to interrupt.
void forget_workers();

}  // namespace recheck::runner
