// recheck repro: replay one case file and print each property's verdict and evidence.
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>

#include "cli/command.h"
#include "properties/report.h"
#include "properties/corpus.h"
#include "runner/case_worker.h"
#include "runner/results_json.h"

namespace recheck::cli {

namespace {

const char* kReproHelp = R"(usage: recheck repro CASE [--sut NAME] [--oracle NAME] [--json FILE] [--limits LIST] [--bytes]

Replays one case (eager, oracle, sut) and prints the graph, then each property's verdict with
its evidence. Exit code 1 when a property shows a regression or a divergence.

CASE is a JSON case file, or an input of the fuzz target recheck_fuzz_check (a crash file, a
corpus entry), which is decoded the way the target decodes it. A file named *.json, or whose
text starts with '{', is read as JSON; any other is read as fuzzer bytes; --bytes forces bytes.
--device cpu|cuda is the device a fuzzer input decodes to (default cpu).

--limits name=value,...  raises or lowers the limits a case file is held to; the names and
                         defaults: file_bytes=67108864, ops=100000, depth=64,
                         leaf_elements=16777216, leaf_bytes=1073741824,
                         value_bytes=17179869184, iterations=100
--no-isolate      check in this process (for a debugger); by default the case is checked in a
                  child process, so that a case crashing a variant is reported as
                  runs-to-completion crash (exit code 1), as `recheck run` reports it
--claims LIST     hold the sut to these of the change's claims, as `recheck run --claims` did
                  (its replay lines say so)
--case-seconds S  a check still running after S seconds hangs: it is killed and reported as
                  runs-to-completion crash, as `recheck run --case-seconds` did (default 300;
                  0: no limit)
--subject NAME    the checkpoint function under test (`recheck variants` lists the subjects;
                  default: the one declaring --sut, else megatron-checkpoint-function); its
                  change and oracle are the defaults of --sut and --oracle, and a Python
                  function no subject declares (python:FILE.py:ATTR) is judged by its properties;
                  without --subject (or another --oracle) such a function is its own oracle,
                  judged against eager mode alone, and its findings fail the run
--world-size N    check it in a tensor-parallel group of N ranks, as `recheck run --world-size N`
                  did (its replay lines say so); each rank a child process
)";

int command_repro(const Args& args) {
  check_output_files(args, {"json"});
  const Case c = load_positional_case(args, "repro");
  const auto sut = make_variant(sut_option(args));
  const auto oracle = make_variant(oracle_option(args));
  const ClaimChoice claims = claims_option(args);
  const std::string& file = args.positional()[0];
  if (world_size_option(args, *sut, *oracle, c.device) > 1 && args.flag("no-isolate")) {
    throw UsageError("--world-size above 1 checks the case in child processes, one per rank: not with --no-isolate");
  }
  // Checked before anything is printed, so that a case that cannot run here is one line.
  std::optional<runner::IsolatedCheck> isolated;
  if (args.flag("no-isolate")) {
    runner::check_can_run(c.device, file, *oracle, *sut);
  } else {
    isolated = runner::check_isolated(c, file, *oracle, *sut, limits_of(args), claims, case_seconds_option(args));
  }
  std::cout << show(c);
  if (!c.note.empty()) std::cout << "note: " << c.note << "\n";
  std::cout << "\nsut " << sut->name() << ", oracle " << oracle->name() << ":\n";
  auto write_report = [&](const json& result) {
    json report = {{"tool", "recheck"}, {"command", "repro"}, {"case", file}, {"sut", sut->name()},
                   {"oracle", oracle->name()}};
    report.update(result);
    write_json_report(args.get("json", "-"), report);
  };
  CaseResult result;
  if (!isolated) {
    result = check_case(c, *oracle, *sut, {}, EagerRun::always, claims);
  } else {
    if (!isolated->result) {
      std::cout << std::left << std::setw(21) << kCrashProperty << kCrash << ": " << isolated->crash << "\n";
      // The results' shape (runner/results_json.h), with the crash in place of the properties.
      if (args.has("json")) {
        write_report({{"op_executions", 0},
                      {"skipped", nullptr},
                      {"properties", json::array({{{"property", kCrashProperty}, {"classification", kCrash},
                                                   {"sut", isolated->crash}, {"oracle", ""},
                                                   {"sut_holds", false}, {"oracle_holds", true}}})}});
      }
      return 1;
    }
    result = std::move(*isolated->result);
  }
  std::cout << describe_results(result.results) << logged_summary(result.logged);
  // Too large for the memory here: no verdict, said so (exit 0, as `run` counts it skipped).
  if (!result.skipped.empty()) std::cout << "skipped: " << result.skipped << "\n";
  if (args.has("json")) write_report(runner::to_json(result));
  return result.has_alarm() ? 1 : 0;
}

}  // namespace

const Command kRepro{"repro", "replay one case file and print each property's verdict and evidence", kReproHelp, {"bytes", "no-isolate"}, {"subject", "sut", "oracle", "claims", "json", "limits", "device", "world-size", "case-seconds"}, command_repro, false};

}  // namespace recheck::cli
