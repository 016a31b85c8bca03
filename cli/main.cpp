// recheck: the command line. Each command is a file of its own (cli/run.cpp, cli/repro.cpp, ...)
// with its entry in the command table (cli/command.h); this file parses the command's name,
// sets up what every command shares, and dispatches.
// Exit codes: 0 no regression, 1 regression or divergence found, 2 bad usage, bad input, an
// output that cannot be written, or a device that cannot run the case (one line on stderr),
// 128 + the signal (130, 143) when Ctrl-C or SIGTERM cut a command short and it found nothing.
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "core/interpreter.h"
#include "runner/interrupts.h"
#ifdef RECHECK_WITH_PYTHON
#include "python/bridge.h"
#endif

namespace recheck::cli {
namespace {

std::string main_help() {
  std::ostringstream out;
  out << "recheck: differential tests for activation-checkpoint autograd functions\n\n"
      << "usage: recheck <command> [options]\n\ncommands:\n";
  for (const Command* command : commands()) {
    out << "  " << std::left << std::setw(10) << command->name << " " << command->summary << "\n";
  }
  out << "\n`recheck <command> --help` describes each command.\n"
      << "exit codes: 0 no regression, 1 regression or divergence found, 2 bad usage, bad input, or a\n"
      << "device or variant that cannot run in this process (run says which)\n";
  return out.str();
}

int run_command(const Command& command, int argc, char** argv) {
  try {
    std::set<std::string> flags(command.flags.begin(), command.flags.end());
    flags.insert("help");
    const Args args(argc, argv, 2, flags, std::set<std::string>(command.options.begin(), command.options.end()));
    if (args.flag("help")) {
      std::cout << command.help;
      return 0;
    }
    if (command.stops_on_interrupt) runner::stop_on_interrupt();
    return command.run(args);
  } catch (const UsageError& error) {
    std::cerr << "recheck " << command.name << ": " << error_line(error) << " (see recheck " << command.name
              << " --help)\n";
    return 2;
  } catch (const std::exception& error) {
    // A c10::Error is not expected here (cases run inside the checks, which catch what they
    // raise): one line and exit 2 rather than an abort with a C++ stack.
    std::cerr << "recheck " << command.name << ": " << error_line(error) << "\n";
    return 2;
  }
}

}  // namespace
}  // namespace recheck::cli

int main(int argc, char** argv) {
  using namespace recheck;
  using namespace recheck::cli;
  if (argc < 2) {
    std::cerr << main_help();
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << main_help();
    return 0;
  }
  const Command* command = nullptr;
  for (const Command* c : commands()) {
    if (name == c->name) command = c;
  }
  if (command == nullptr) {
    std::cerr << "recheck: unknown command '" << name << "' (see recheck --help)\n";
    return 2;
  }
  // Standard output closed or full: the failure is reported at the end, not by a signal.
  std::signal(SIGPIPE, SIG_IGN);
  skip_libtorch_backtraces();
  use_deterministic_algorithms();
#ifdef RECHECK_WITH_PYTHON
  python::register_bridge();
#endif
  // `--json -` gives standard output to the JSON report alone: what the command prints for
  // people goes to standard error instead, so that the report parses.
  std::streambuf* const stdout_buffer = std::cout.rdbuf();
  for (int i = 2; name != "show" && i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--json=-" || (arg == "--json" && i + 1 < argc && std::string(argv[i + 1]) == "-")) {
      g_report_stream = std::make_unique<std::ostream>(stdout_buffer);
      std::cout.rdbuf(std::cerr.rdbuf());
      break;
    }
  }
  set_program_name(argv[0]);
  int code = run_command(*command, argc, argv);
  if (code == 0 && runner::interrupted()) code = 128 + runner::interrupt_signal();
  std::cout.rdbuf(stdout_buffer);
  if (g_report_stream) g_report_stream->flush();
  // A write to standard output that failed (a full disk, a closed stream) is an error, not a
  // quiet exit 0 with the output lost.
  std::cout.flush();
  if (!std::cout || (g_report_stream && !*g_report_stream) || std::fflush(stdout) != 0) {
    std::cerr << "recheck " << name << ": cannot write to standard output\n";
    return 2;
  }
  return code;
}
