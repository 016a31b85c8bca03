// recheck export-python: a case as a standalone Python script that asserts a property.
#include <iostream>
#include <string>

#include "cli/command.h"
#include "properties/export_python.h"
#include "properties/corpus.h"
#include "runner/case_worker.h"

namespace recheck::cli {

namespace {

const char* kExportPythonHelp = R"(usage: recheck export-python CASE [options]

Writes CASE (JSON, or a fuzzer's crash file) as a standalone Python script: it rebuilds the case
with torch ops (the same leaf data, seeds and loss weights recheck uses), runs it eagerly and
through a checkpoint function, and asserts a property. Run it with `python3 SCRIPT`: an
AssertionError with the evidence means the property fails. It needs torch, and megatron-core for
Megatron's function or a case that forks its RNG tracker.

options:
  --checkpoint C    how the script calls the function: a name a subject's export.py declares,
                    such as megatron, megatron-clearing (recheck's wrapper of the PR's change),
                    torch (reentrant) or torch-non-reentrant (with the options each checkpoint
                    passes); another is refused with the list
                    (default: as the subject that declares the case's first failing
                    expectation's variant calls it, else megatron)
  --oracle C        what grads-bitwise, stash-kept, stash-grads and hooks-bitwise compare the
                    checkpoint with, one of the same (default: the released function of that
                    subject, else megatron)
  --property NAME   the property asserted (default: the case's first failing expectation's);
                    every property but the memory ones (memory-floor, memory-eager-floor,
                    no-extra-allocations), which need recheck's counting allocator
  --out FILE        write there (atomically) instead of standard output
  --limits, --bytes, --device   as for show
)";

int command_export_python(const Args& args) {
  check_output_files(args, {"out"});
  const Case c = load_positional_case(args, "export-python");
  // The script carries the leaf values and loss weights recheck draws on the case's device.
  if (const std::string missing = runner::device_missing(c.device); !missing.empty()) {
    throw CaseError(args.positional()[0] + ": cannot export this case here: " + missing);
  }
  ExportOptions options;
  const Expectation* failing = nullptr;
  for (const Expectation& e : c.expect) {
    if (e.classification != "pass" && e.classification != kNoAlarm && e.property != kAnyProperty &&
        exportable(e.property)) {
      failing = &e;
      break;
    }
  }
  if (failing) {
    options.property = failing->property;
    // How the subject that declares the variant says its function is called; a Python function
    // no subject declares is torch's reentrant checkpoint or a Megatron-style one.
    const Subject* subject = subject_declaring(failing->sut);
    const bool torch_reentrant = resolve_checkpoint_alias(failing->sut).find("torch.utils.checkpoint") != std::string::npos;
    if (subject != nullptr) {
      options.checkpoint = subject->exported_as(failing->sut);
      options.oracle = subject->exported_as(subject->oracle);
    }
    else options.checkpoint = torch_reentrant ? "torch" : default_subject().exported_as(failing->sut);
  } else if (!args.has("property")) {
    throw UsageError("export-python: " + args.positional()[0] + " records no failing property: say which with --property");
  }
  options.property = args.get("property", options.property);
  options.checkpoint = args.get("checkpoint", options.checkpoint);
  options.oracle = args.get("oracle", options.oracle);
  std::string script;
  try {
    script = export_python(c, options);
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
  if (args.has("out")) {
    write_file_atomically(args.get("out", ""), script);
    std::cerr << "wrote " << args.get("out", "") << " (" << options.property << ", --checkpoint " << options.checkpoint
              << "): python3 " << args.get("out", "") << "\n";
  } else {
    std::cout << script;
  }
  return 0;
}

}  // namespace

const Command kExportPython{"export-python", "write a case as a standalone Python script that asserts a property with torch\n             (and megatron-core) alone, for an upstream issue", kExportPythonHelp, {"bytes"}, {"checkpoint", "oracle", "property", "out", "limits", "device"}, command_export_python, false};

}  // namespace recheck::cli
