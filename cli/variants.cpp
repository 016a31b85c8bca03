// recheck variants: list the checkpoint variants --sut and --oracle accept.
#include <iostream>

#include "cli/command.h"
#include "suts/checkpoint.h"
#ifdef RECHECK_WITH_PYTHON
#include "python/bridge.h"
#endif

namespace recheck::cli {

namespace {

const char* kVariantsHelp = "usage: recheck variants\n\nLists the checkpoint variants --sut and --oracle accept.\n";

int command_variants(const Args&) {
  for (const Variant& v : variants()) std::cout << v.name << "\t" << v.description << "\n";
#ifdef RECHECK_WITH_PYTHON
  for (const python::Alias& a : python::aliases()) std::cout << a.name << "\t" << a.description << " (" << a.spec << ")\n";
  std::cout << "python:MODULE:ATTR\tany Python checkpoint function (see docs/python.md)\n"
            << "python-clearing:MODULE:ATTR\tthe PR's change wrapped around a Megatron-style Function\n"
            << "python-change:MODULE:ATTR\ta Python function that is itself the change (your patch), held to its claims\n"
            << "  (MODULE: a module name, or a .py file loaded under a module name of its own)\n";
#else
  std::cout << "(megatron-py, megatron-py-clearing, torch-py and python:MODULE:ATTR need a build with the Python "
               "bridge: ci/python)\n";
#endif
  return 0;
}

}  // namespace

const Command kVariants{"variants", "list the checkpoint variants", kVariantsHelp, {}, {}, command_variants, false};

}  // namespace recheck::cli
