// recheck variants: list the checkpoint variants --sut and --oracle accept.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "properties/properties.h"
#include "suts/subject.h"
#ifdef RECHECK_WITH_PYTHON
#include "python/bridge.h"
#endif

namespace recheck::cli {

namespace {

const char* kVariantsHelp = R"(usage: recheck variants [--subject NAME]

Lists the checkpoint variants --sut and --oracle accept: each subject's (one checkpoint function
under test, suts/subject.h) after a line naming it and one listing the properties its checks
report, then the Python ones.
  --subject NAME    only this subject's variants
)";

// The options the subject's function takes with each call, as the generator draws them, when it
// declares any: "# call options drawn per checkpoint: early_stop True|False; ...".
void print_call_options(const Subject& subject) {
  std::vector<CallOption> options;
  try {
    options = subject.make(subject.change)->call_options();
  } catch (const std::exception& error) {
    std::cout << "# call options: not read (" << error.what() << ")\n";
    return;
  }
  if (options.empty()) return;
  std::cout << "# call options drawn per checkpoint (the first value is the default):";
  const char* separator = " ";
  for (const CallOption& option : options) {
    std::cout << separator << option.name << " ";
    for (size_t i = 0; i < option.values.size(); ++i) std::cout << (i ? "|" : "") << option.values[i];
    for (const std::string& value : option.only_without_rng) std::cout << " (" << value << " only for a body without random draws)";
    separator = "; ";
  }
  std::cout << "\n";
}

int command_variants(const Args& args) {
  const bool one = args.has("subject");
  for (const Subject& subject : subjects()) {
    if (one && &subject != &subject_option(args)) continue;
    std::cout << "# subject " << subject.name << ": " << subject.description << " (run checks " << subject.change
              << " against " << subject.oracle << ")\n";
    std::cout << "# properties:";
    for (size_t i = 0; i < subject.properties.size(); ++i) std::cout << (i ? ", " : " ") << subject.properties[i];
    std::cout << "\n";
    require_every_property_decided(subject);
    std::cout << "# leaves out:";
    for (size_t i = 0; i < subject.leaves_out.size(); ++i) {
      std::cout << (i ? "; " : " ") << subject.leaves_out[i].first << " (" << subject.leaves_out[i].second << ")";
    }
    if (subject.leaves_out.empty()) std::cout << " none";
    std::cout << "\n";
    print_call_options(subject);
    for (const SubjectImplementation& v : subject.implementations) {
      std::cout << v.name << "\t" << v.description;
      if (!v.differs_by.empty()) std::cout << "\t[" << (v.made_from.empty() ? subject.change : v.made_from) << " with " << v.differs_by << "]";
      std::cout << "\n";
    }
  }
  if (one) return 0;
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

const Command kVariants{"variants", "list the checkpoint variants", kVariantsHelp, {}, {"subject"}, command_variants, false};

}  // namespace recheck::cli
