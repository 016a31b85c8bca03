// The C++ port's variants as declared: each is what it was made from with one decision taken
// another way, and a check reports exactly the properties its subject declares.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "properties/generator.h"
#include "properties/report.h"
#include "suts/megatron_checkpoint_function/checkpoint.h"
#include "suts/subject.h"

namespace recheck {
namespace {

// A mutant reads as the one bug it models: what it was made from, with one decision taken
// another way (checkpoint.h). Two would make a mutant whose kill says nothing about either.
TEST(Variants, each_mutant_is_what_it_was_made_from_with_one_decision_taken_another_way) {
  for (const std::string& name : variant_names(VariantKind::mutant)) {
    const Variant& mutant = find_variant(name);
    ASSERT_FALSE(mutant.made_from.empty()) << name;
    const std::vector<std::string> taken = decisions_taken_otherwise(mutant.decisions, find_variant(mutant.made_from).decisions);
    EXPECT_EQ(taken.size(), 1u) << name << " made from " << mutant.made_from << " takes otherwise: " << ::testing::PrintToString(taken);
  }
}

TEST(Variants, each_equivalent_rewrite_is_the_change_with_one_decision_taken_another_way) {
  const Variant& change = find_variant(default_subject().change);
  for (const std::string& name : variant_names(VariantKind::equivalent)) {
    EXPECT_EQ(decisions_taken_otherwise(find_variant(name).decisions, change.decisions).size(), 1u) << name;
  }
}

TEST(Variants, the_oracle_is_the_change_without_its_clearing_and_lists_so) {
  const Subject& subject = default_subject();
  EXPECT_EQ(decisions_taken_otherwise(find_variant(subject.oracle).decisions, find_variant(subject.change).decisions),
            std::vector<std::string>{"clearing = none"});
  EXPECT_EQ(subject.find("clear-before-collect")->differs_by, "clearing.when = before_collecting");
}

// Every subject's properties are properties, and a check reports exactly those: Megatron's
// subject leaves out memory-eager-floor (its change is held to the released function's floor),
// and its reports list no line for it, not even as unchecked.
TEST(Subjects, a_check_reports_exactly_the_properties_its_subject_declares) {
  for (const Subject& subject : subjects()) {
    for (const std::string& name : subject.properties) EXPECT_NE(find_property(name), nullptr) << subject.name << ": " << name;
  }
  const Subject& megatron = default_subject();
  EXPECT_FALSE(megatron.applies("memory-eager-floor"));
  auto oracle = megatron.make(megatron.oracle);
  auto change = megatron.make(megatron.change);
  const CaseResult result = check_case(draw_case(options_for(GenOptions{}, *oracle), 3), *oracle, *change);
  std::vector<std::string> reported;
  for (const PropertyResult& r : result.results) reported.push_back(r.property);
  // What it does not report is what the report says it did not check, and why.
  const std::map<std::string, std::string> unchecked = properties_not_checked(*oracle, *change, ClaimChoice{});
  std::vector<std::string> declared;
  for (const std::string& name : megatron.properties) {
    if (unchecked.count(name) == 0) declared.push_back(name);
  }
  std::sort(reported.begin(), reported.end());
  std::sort(declared.begin(), declared.end());
  EXPECT_EQ(reported, declared);
  EXPECT_EQ(unchecked.count("memory-eager-floor"), 0u);
  // An implementation no subject declares is checked on the default subject's properties.
  EXPECT_EQ(subject_declaring("python:somewhere:else"), nullptr);
  EXPECT_EQ(&subject_for("python:somewhere:else"), &megatron);
}

}  // namespace
}  // namespace recheck
