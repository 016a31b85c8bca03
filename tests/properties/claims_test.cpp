// A gate fit for every pull request: the claims a run holds (--claims), a fix judged by eager
// autograd rather than by its buggy base, and an RNG tracker judged by what the variant's own
// seeding made rather than by the port's list of state names.
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "oracles/eager.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "tests/cases.h"
#include "tests/three_runs.h"

namespace recheck {
namespace {

using test_cases::kStashedDropoutCase;

Runs3 run_three(const std::string& oracle_name, const std::string& sut_name) {
  return recheck::run_three(kStashedDropoutCase, oracle_name, sut_name);
}

TEST(Claims, are_parsed_by_name_and_named_back_the_same_way) {
  EXPECT_EQ(describe_claims(parse_claims("none")), "none");
  EXPECT_EQ(describe_claims(parse_claims("clearing")), "clearing");
  EXPECT_EQ(describe_claims(parse_claims("memory-floor,grad-released")), "grad-released,memory-floor");
  EXPECT_EQ(describe_claims(ClaimChoice{}), "");
  EXPECT_EQ(parse_claims("grad-released,memory-floor,no-extra-allocations").held.size(), 3u);
}

TEST(Claims, an_unknown_claim_is_refused_naming_it_and_the_known_ones) {
  try {
    (void)parse_claims("grad-released,grads-bitwise");
    FAIL() << "grads-bitwise is not a claim";
  } catch (const std::invalid_argument& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("no claim 'grads-bitwise'"), std::string::npos) << what;
    EXPECT_NE(what.find("no-extra-allocations"), std::string::npos) << what;
  }
  EXPECT_THROW((void)parse_claims(""), std::invalid_argument);
  EXPECT_THROW((void)parse_claims("grad-released,"), std::invalid_argument);
}

// A pull request that claims nothing is not held to the clearing change's claims: the function
// without the change passes where, held to them, it is a regression.
TEST(Claims, a_head_that_claims_nothing_is_not_held_to_the_clearing_claims) {
  const Runs3 r = run_three("nonclearing", "nonclearing");
  const std::vector<PropertyResult> held =
      check_properties(r.eager, r.oracle, r.sut, ChangeClaims::like_oracle, parse_claims("clearing"));
  ASSERT_NE(result_for(held, "grad-released"), nullptr);
  EXPECT_EQ(result_for(held, "grad-released")->classification, Classification::regression);
  const std::vector<PropertyResult> none =
      check_properties(r.eager, r.oracle, r.sut, ChangeClaims::like_oracle, parse_claims("none"));
  for (const std::string& claim : claim_names()) EXPECT_EQ(result_for(none, claim), nullptr) << claim;
  for (const PropertyResult& p : none) EXPECT_FALSE(is_alarm(p.classification)) << p.property;
  const std::vector<PropertyResult> one =
      check_properties(r.eager, r.oracle, r.sut, ChangeClaims::like_oracle, parse_claims("memory-floor"));
  EXPECT_EQ(result_for(one, "grad-released"), nullptr);
  ASSERT_NE(result_for(one, "memory-floor"), nullptr);
}

TEST(Claims, the_report_names_each_claim_not_held_instead_of_a_row_of_zeros) {
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  const auto reasons = properties_not_checked(*oracle, *sut, parse_claims("grad-released"));
  EXPECT_EQ(reasons.count("grad-released"), 0u);
  ASSERT_EQ(reasons.count("memory-floor"), 1u);
  EXPECT_NE(reasons.at("memory-floor").find("--claims grad-released"), std::string::npos);
  // Unchosen, the clearing change holds every claim: only what yields to one is left out.
  const auto unchosen = properties_not_checked(*oracle, *sut, ClaimChoice{});
  EXPECT_EQ(unchosen.size(), 1u);
  EXPECT_EQ(unchosen.count("stash-grads"), 1u);
  Summary summary;
  for (const auto& [property, reason] : reasons) summary.not_checked(property, reason);
  EXPECT_TRUE(std::regex_search(summary.table(), std::regex("\nmemory-floor +not checked: not a claim"))) << summary.table();
  // The first column fits the longest name: every row's name is followed by a space.
  EXPECT_TRUE(std::regex_search(summary.table(), std::regex("\nmodule-state-matches-eager +0 "))) << summary.table();
  EXPECT_EQ(summary.to_json().at("no-extra-allocations").value("not_checked", ""), reasons.at("no-extra-allocations"));
}

// A head that fixes its base: the base restores only the CPU generator, so its recomputation
// draws other dropout masks and its gradients are not eager mode's; the head's are. Its
// gradients differ bitwise from the base's, which is the fix, not a regression.
TEST(AFix, judged_by_eager_mode_is_fixed_where_its_gradients_leave_the_buggy_base_s) {
  const Runs3 r = run_three("cpu-rng-only", "nonclearing");
  const std::vector<PropertyResult> results =
      check_properties(r.eager, r.oracle, r.sut, ChangeClaims::like_oracle, parse_claims("none"));
  const PropertyResult* bitwise = result_for(results, "grads-bitwise");
  ASSERT_NE(bitwise, nullptr);
  ASSERT_FALSE(bitwise->sut.holds) << "the case does not tell the two apart";
  EXPECT_EQ(bitwise->classification, Classification::fixed);
  EXPECT_NE(bitwise->sut.detail.find("as eager mode judges"), std::string::npos) << bitwise->sut.detail;
  for (const PropertyResult& p : results) EXPECT_FALSE(is_alarm(p.classification)) << p.property << " " << p.sut.describe();
}

// The other way round, the same pair is the mistake it is: eager mode sees it.
TEST(AFix, reverted_is_a_regression_eager_mode_names) {
  const Runs3 r = run_three("nonclearing", "cpu-rng-only");
  const std::vector<PropertyResult> results =
      check_properties(r.eager, r.oracle, r.sut, ChangeClaims::like_oracle, parse_claims("none"));
  ASSERT_NE(result_for(results, "grads-match-eager"), nullptr);
  EXPECT_EQ(result_for(results, "grads-match-eager")->classification, Classification::regression);
  EXPECT_EQ(result_for(results, "grads-bitwise")->classification, Classification::regression);
}

// A tracker state the variant's own seeding adds (a pull request that adds context-parallel
// states) is judged by what it does: unchanged from its seeding, as no case draws from it.
TEST(Tracker, a_state_the_variant_s_seeding_adds_is_held_to_its_seeded_value) {
  Runs3 r = run_three("nonclearing", "nonclearing");
  const std::vector<uint8_t> seeded(16, 7);
  r.sut.tracker_seeded["context-parallel-rng"] = seeded;
  for (IterationRecord& record : r.sut.iterations) record.rng.tracker["context-parallel-rng"] = seeded;
  const Property* rng = find_property("rng-restored");
  EXPECT_TRUE(rng->check(r.sut, Runs{r.eager, r.oracle}).holds) << rng->check(r.sut, Runs{r.eager, r.oracle}).describe();
  r.sut.iterations[1].rng.tracker["context-parallel-rng"][0] = 8;
  const Verdict moved = rng->check(r.sut, Runs{r.eager, r.oracle});
  ASSERT_FALSE(moved.holds);
  EXPECT_NE(moved.detail.find("'context-parallel-rng' (its own, not drawn from by the case) changed since seeding"),
            std::string::npos)
      << moved.detail;
  // A state that appears during a run, made by no seeding, is still unexpected.
  Runs3 appeared = run_three("nonclearing", "nonclearing");
  appeared.sut.iterations[0].rng.tracker["made-in-forward"] = seeded;
  EXPECT_NE(rng->check(appeared.sut, Runs{appeared.eager, appeared.oracle}).detail.find("'made-in-forward' unexpected"),
            std::string::npos);
}

TEST(Tracker, one_that_keeps_no_current_state_name_is_compared_without_it) {
  Runs3 r = run_three("nonclearing", "nonclearing");
  for (IterationRecord& record : r.sut.iterations) {
    record.rng.tracker_current = "";
    record.rng.tracker_current_known = false;
  }
  const Property* rng = find_property("rng-restored");
  EXPECT_TRUE(rng->check(r.sut, Runs{r.eager, r.oracle}).holds);
  r.sut.iterations[0].rng.tracker_current_known = true;
  EXPECT_FALSE(rng->check(r.sut, Runs{r.eager, r.oracle}).holds);
}

}  // namespace
}  // namespace recheck
