// The command table (cli/command.h): an option is declared once, in its command's entry, and its
// help page describes every option the parser accepts and accepts every option it describes.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "cli/command.h"

namespace recheck::cli {
namespace {

TEST(CommandTable, each_help_page_describes_exactly_the_options_its_command_accepts) {
  std::set<std::string> names;
  for (const Command* command : commands()) {
    EXPECT_TRUE(names.insert(command->name).second) << command->name << " twice";
    const std::string help = command->help;
    EXPECT_NE(help.find(std::string("usage: recheck ") + command->name), std::string::npos) << command->name;
    std::set<std::string> declared(command->flags.begin(), command->flags.end());
    declared.insert(command->options.begin(), command->options.end());
    for (const std::string& option : declared) {
      EXPECT_TRUE(std::regex_search(help, std::regex("--" + option + "\\b"))) << command->name << " --" << option
                                                                               << " is accepted but not described";
    }
    const std::regex mentioned("--([a-z][a-z-]*[a-z])");
    for (auto it = std::sregex_iterator(help.begin(), help.end(), mentioned); it != std::sregex_iterator(); ++it) {
      const std::string option = (*it)[1];
      // Another command's options, named as such ("as for `recheck repro`: --bytes").
      if (option == "help" || option == "sut" || option == "oracle" || declared.count(option)) continue;
      ADD_FAILURE() << command->name << " --help describes --" << option << ", which it does not accept";
    }
  }
}

}  // namespace
}  // namespace recheck::cli
