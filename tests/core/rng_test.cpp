// The RNG model and the port of Megatron's CudaRNGStatesTracker, restating Megatron's own
// tracker tests (tests/unit_tests/tensor_parallel/test_random.py) on the device stand-in.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/rng.h"
#include "core/errors.h"

namespace recheck {
namespace {

at::Tensor draw(int n = 10) {
  return at::empty({n}, at::kFloat).normal_(0, 1, rng::device_generator());
}

class RngTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rng::use_device(rng::Device::cpu);
    rng::reset_all(1234);
    tracker().reset();
  }
  rng::CudaRNGStatesTracker& tracker() { return rng::get_cuda_rng_tracker(); }
};

TEST_F(RngTest, device_stand_in_is_not_the_cpu_generator) {
  rng::manual_seed(rng::cpu_generator(), 7);
  rng::manual_seed(rng::device_generator(), 7);
  const auto before = rng::snapshot();
  draw();
  const auto after = rng::snapshot();
  EXPECT_EQ(before.cpu, after.cpu);
  EXPECT_NE(before.device, after.device);
}

TEST_F(RngTest, set_states_then_get_states_returns_what_was_set) {
  auto states = std::make_shared<rng::StateMap>();
  (*states)["state1"] = rng::get_state(rng::device_generator());
  tracker().set_states(states);
  EXPECT_TRUE(tracker().get_states()->at("state1").equal(states->at("state1")));
  tracker().reset();
  EXPECT_TRUE(tracker().get_states()->empty());
}

TEST_F(RngTest, add_refuses_a_duplicate_seed) {
  tracker().add("state2", 1111);
  try {
    tracker().add("state3", 1111);
    FAIL() << "a duplicate seed was accepted";
  } catch (const PythonError& error) {
    EXPECT_EQ(std::string(error.what()), "seed 1111 already exists");
  }
}

TEST_F(RngTest, add_refuses_a_duplicate_name) {
  tracker().add("state2", 1111);
  try {
    tracker().add("state2", 111);
    FAIL() << "a duplicate name was accepted";
  } catch (const PythonError& error) {
    EXPECT_EQ(std::string(error.what()), "cuda rng state state2 already exists");
  }
}

TEST_F(RngTest, added_state_is_the_generator_seeded_with_that_seed) {
  const auto device_before = rng::get_state(rng::device_generator());
  tracker().add("state2", 1111);
  rng::manual_seed(rng::device_generator(), 1111);
  EXPECT_TRUE(tracker().get_states()->at("state2").equal(rng::get_state(rng::device_generator())));
  rng::set_state(rng::device_generator(), device_before);
}

TEST_F(RngTest, add_leaves_the_device_generator_as_it_was) {
  const auto before = rng::get_state(rng::device_generator());
  tracker().add("state1", 42);
  EXPECT_TRUE(before.equal(rng::get_state(rng::device_generator())));
}

TEST_F(RngTest, get_states_returns_a_copy) {
  tracker().add("state1", 1234);
  auto copy = tracker().get_states();
  tracker().fork("state1", [] { draw(); });
  // The fork replaced the live entry; the copy still holds the state from before.
  EXPECT_FALSE(copy->at("state1").equal(tracker().get_states()->at("state1")));
}

TEST_F(RngTest, double_fork_draws_what_single_forks_draw) {
  tracker().add("state1", 1234);
  tracker().add("state2", 5678);
  std::vector<at::Tensor> double_1, double_2;
  tracker().fork("state1", [&] {
    double_1.push_back(draw());
    tracker().fork("state2", [&] {
      double_2.push_back(draw());
      tracker().fork("state1", [&] { double_1.push_back(draw()); });
      double_2.push_back(draw());
    });
    double_1.push_back(draw());
  });
  const auto double_state1 = tracker().get_states()->at("state1");
  const auto double_state2 = tracker().get_states()->at("state2");

  tracker().reset();
  tracker().add("state1", 1234);
  tracker().add("state2", 5678);
  std::vector<at::Tensor> single_1, single_2;
  tracker().fork("state1", [&] {
    for (int i = 0; i < 3; ++i) single_1.push_back(draw());
  });
  tracker().fork("state2", [&] {
    for (int i = 0; i < 2; ++i) single_2.push_back(draw());
  });
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(double_1[i].equal(single_1[i])) << "state1 draw " << i;
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(double_2[i].equal(single_2[i])) << "state2 draw " << i;
  EXPECT_TRUE(double_state1.equal(tracker().get_states()->at("state1")));
  EXPECT_TRUE(double_state2.equal(tracker().get_states()->at("state2")));
}

TEST_F(RngTest, fork_restores_the_device_generator_even_when_the_body_throws) {
  tracker().add("state1", 1);
  const auto before = rng::snapshot();
  EXPECT_THROW(tracker().fork("state1", [] {
    draw();
    throw std::runtime_error("body failed");
  }), std::runtime_error);
  const auto after = rng::snapshot();
  EXPECT_EQ(before.device, after.device);
  EXPECT_EQ(after.tracker_current, rng::CudaRNGStatesTracker::kDefaultStateName);
  EXPECT_NE(before.tracker.at("state1"), after.tracker.at("state1"));  // the body's draw is kept
}

TEST_F(RngTest, fork_of_an_unknown_state_raises) {
  try {
    tracker().fork("missing", [] {});
    FAIL() << "forked an unknown state";
  } catch (const PythonError& error) {
    EXPECT_EQ(std::string(error.what()), "cuda rng state missing is not added");
  }
}

// The device generator's state after seeding it with `seed` (the generator is left as it was).
at::Tensor device_state_seeded_with(uint64_t seed) {
  at::Generator g = rng::device_generator();
  const auto saved = rng::get_state(g);
  rng::manual_seed(g, seed);
  auto state = rng::get_state(g);
  rng::set_state(g, saved);
  return state;
}

TEST_F(RngTest, model_parallel_seed_uses_megatrons_seed_arithmetic) {
  rng::model_parallel_cuda_manual_seed(123, /*tp_rank=*/3, /*ep_rank=*/2, /*etp_rank=*/1);
  const auto states = tracker().get_states();
  ASSERT_EQ(states->size(), 3u);
  EXPECT_TRUE(states->at(rng::kModelParallelRngTrackerName).equal(device_state_seeded_with(123 + 2718 + 3)));
  EXPECT_TRUE(states->at(rng::kDataParallelRngTrackerName).equal(device_state_seeded_with(123)));
  EXPECT_TRUE(states->at(rng::kExpertParallelRngTrackerName).equal(device_state_seeded_with(123 + 1024 + 100 * 2 + 1)));
  // The default device state is seeded with the data-parallel seed.
  EXPECT_TRUE(rng::get_state(rng::device_generator()).equal(device_state_seeded_with(123)));
}

// A case's seed is any 64-bit value: Megatron's offsets wrap as the generators read the seed
// (in int64_t arithmetic, INT64_MAX + 2718 is undefined behaviour, which UBSan reports).
TEST_F(RngTest, model_parallel_seeds_wrap_at_the_top_of_the_seed_range) {
  rng::model_parallel_cuda_manual_seed(INT64_MAX, /*tp_rank=*/3, /*ep_rank=*/2, /*etp_rank=*/1);
  const auto states = tracker().get_states();
  const uint64_t top = static_cast<uint64_t>(INT64_MAX);
  EXPECT_TRUE(states->at(rng::kModelParallelRngTrackerName).equal(device_state_seeded_with(top + 2718 + 3)));
  EXPECT_TRUE(states->at(rng::kExpertParallelRngTrackerName).equal(device_state_seeded_with(top + 1024 + 100 * 2 + 1)));
  EXPECT_TRUE(states->at(rng::kDataParallelRngTrackerName).equal(device_state_seeded_with(top)));
}

TEST_F(RngTest, set_all_restores_what_get_all_captured) {
  rng::model_parallel_cuda_manual_seed(5);
  const auto captured = rng::get_all_rng_states();
  const auto before = rng::snapshot();
  at::empty({4}).normal_(0, 1, rng::cpu_generator());
  draw();
  tracker().fork(rng::kModelParallelRngTrackerName, [] { draw(); });
  ASSERT_NE(before, rng::snapshot());
  rng::set_all_rng_states(captured);
  EXPECT_EQ(before, rng::snapshot());
}

}  // namespace
}  // namespace recheck
