// recheck show: print a case file's graph as indented text, or the case as JSON.
#include <iostream>

#include "cli/command.h"

namespace recheck::cli {

namespace {

const char* kShowHelp = R"(usage: recheck show CASE [--limits LIST] [--bytes] [--json]

Prints the case's graph as indented text: leaves, ops, checkpoint bodies (marked with |), or
with --json the case as JSON (a fuzzer input turned into a case file). CASE, --bytes, --device
and --limits as for `recheck repro`.
)";

int command_show(const Args& args) {
  const Case c = load_positional_case(args, "show");
  if (args.flag("json")) {
    std::cout << to_json(c).dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << show(c);
  }
  return 0;
}

}  // namespace

const Command kShow{"show", "print a case file's graph as indented text", kShowHelp, {"bytes", "json"}, {"limits", "device"}, command_show, false};

}  // namespace recheck::cli
