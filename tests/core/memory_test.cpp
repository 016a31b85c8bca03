// Memory: the counting allocator, grad-released and memory-floor on the residual-stream model,
// and the gradient adoption effect. The CUDA tests (suite Gpu*) carry the CTest label `gpu`
// and skip, saying so, without a GPU.
#include <gtest/gtest.h>

#include <c10/core/CPUAllocator.h>
#include <nlohmann/json.hpp>

#include "core/memory.h"
#include "core/torch_compat.h"
#include "properties/report.h"
#include "core/rng.h"
#include "tests/paths.h"
#include "tests/memory_cases.h"
#include "tests/shell.h"

namespace recheck {
namespace {

TEST(CpuProbe, counts_exact_bytes_and_leaves_the_allocator_installed) {
  {
    memory::CpuProbe probe;
    const int64_t start = probe.current();
    {
      at::Tensor t = at::empty({1000}, at::kFloat);
      EXPECT_EQ(probe.current() - start, 4000);
      {
        memory::Uncounted uncounted;
        at::Tensor not_counted = at::empty({500}, at::kDouble);
        EXPECT_EQ(probe.current() - start, 4000);
      }
    }
    EXPECT_EQ(probe.current(), start);
    EXPECT_EQ(probe.peak() - start, 4000);
    probe.reset_peak();
    EXPECT_EQ(probe.peak(), start);
  }
  // Blocks made while a probe is open can be freed after it closed, and blocks made before it
  // opened while it is open: the allocator stays, so that it sees every free.
  c10::Allocator* installed = c10::GetCPUAllocator();
  { memory::CpuProbe probe; }
  EXPECT_EQ(c10::GetCPUAllocator(), installed);
}

// A block made before the probe opened and freed while it is open is credited: a run that
// replaces a tensor with a fresh one of equal size holds what it held before.
TEST(CpuProbe, credits_the_free_of_a_block_made_before_it_opened) {
  memory::begin_run();
  at::Tensor state = at::empty({256}, at::kFloat);  // made before the probe, as a run's RNG states are
  memory::CpuProbe probe;
  state = at::empty({256}, at::kFloat);  // the replacement: the old block is freed here
  EXPECT_EQ(probe.current(), 0) << "1024 bytes made, 1024 freed";
  EXPECT_EQ(probe.peak(), 1024);
  state.reset();
  EXPECT_EQ(probe.current(), -1024) << "the run freed more than it made";
}

// What an earlier run left behind is not the run's: freed during it, it is not credited, so
// that a verdict never depends on the case checked before.
TEST(CpuProbe, does_not_credit_the_free_of_a_block_an_earlier_run_left_behind) {
  memory::begin_run();
  at::Tensor left_behind = at::empty({256}, at::kFloat);
  memory::begin_run();
  memory::CpuProbe probe;
  left_behind.reset();
  EXPECT_EQ(probe.current(), 0);
}

TEST(AllocationLog, logs_each_counted_allocation_with_its_scope) {
  memory::CpuProbe probe;
  memory::AllocationLog log(/*cuda=*/false);
  memory::set_allocation_scope(3);
  { at::Tensor t = at::empty({10}, at::kFloat); }
  memory::set_allocation_scope(0);
  {
    memory::Uncounted uncounted;
    at::Tensor harness = at::empty({7}, at::kFloat);
  }
  { at::Tensor u = at::empty({1}, at::kByte); }
  const std::vector<memory::Allocation> made = log.take();
  ASSERT_EQ(made.size(), 2u);
  EXPECT_EQ(made[0].bytes, 40);
  EXPECT_EQ(made[0].scope, 3);
  EXPECT_EQ(made[1].bytes, 1);
  EXPECT_EQ(made[1].scope, 0);
  EXPECT_TRUE(log.take().empty());
}

// libtorch's CPU kernels take scratch memory with raw_allocate, which asserts that a block's
// context is its address: `recheck memory --dtype bfloat16` on CPU stopped at that assert
// ("dptr.get() == dptr.get_context() INTERNAL ASSERT FAILED") while the probe was installed.
TEST(CpuProbe, raw_allocations_are_counted_and_freed) {
  memory::CpuProbe probe;
  const int64_t start = probe.current();
  c10::Allocator* allocator = c10::GetCPUAllocator();
  void* block = allocator->raw_allocate(3000);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(probe.current() - start, 3000);
  allocator->raw_deallocate(block);
  EXPECT_EQ(probe.current(), start);
  {
    memory::Uncounted uncounted;  // taken uncounted, given back through the probe: not lost
    void* uncounted_block = allocator->raw_allocate(3000);
    EXPECT_EQ(probe.current(), start);
    allocator->raw_deallocate(uncounted_block);
  }
  // A bfloat16 matmul of this size is one such kernel.
  const at::Tensor a = at::randn({256, 256}).to(at::kBFloat16);
  EXPECT_NO_THROW((void)at::matmul(a, a));
}

TEST(CpuProbe, refuses_a_second_probe) {
  memory::CpuProbe probe;
  EXPECT_THROW(memory::CpuProbe second, std::logic_error);
}

TEST(CpuProbe, records_a_timeline_of_every_allocation_and_free) {
  memory::CpuProbe probe;
  const int64_t start = probe.current();
  probe.start_timeline();
  memory::mark_timeline("before");
  uintptr_t address = 0;
  {
    at::Tensor t = at::empty({10}, at::kFloat);
    address = reinterpret_cast<uintptr_t>(t.data_ptr());
    memory::mark_timeline("between");
  }
  const memory::Timeline timeline = probe.stop_timeline();
  memory::mark_timeline("after");  // nothing records now
  EXPECT_EQ(timeline.start, start);
  ASSERT_EQ(timeline.events.size(), 2u);
  EXPECT_EQ(timeline.events[0].bytes, 40);
  EXPECT_EQ(timeline.events[0].held - start, 40);
  EXPECT_EQ(timeline.events[0].address, address);
  EXPECT_EQ(timeline.events[1].bytes, -40);
  EXPECT_EQ(timeline.events[1].address, address);
  EXPECT_EQ(timeline.events[1].held, start);
  ASSERT_EQ(timeline.marks.size(), 2u);
  EXPECT_EQ(timeline.marks[0].label, "before");
  EXPECT_EQ(timeline.marks[0].event, 0u);
  EXPECT_EQ(timeline.marks[1].label, "between");
  EXPECT_EQ(timeline.marks[1].event, 1u);
  EXPECT_FALSE(timeline.truncated);
}

TEST(CpuProbe, a_timeline_past_its_limit_says_it_was_cut) {
  memory::CpuProbe probe;
  probe.start_timeline(1);
  { at::Tensor t = at::empty({10}, at::kFloat); }
  const memory::Timeline timeline = probe.stop_timeline();
  EXPECT_EQ(timeline.events.size(), 1u);
  EXPECT_TRUE(timeline.truncated);
}

TEST(MemoryFloor, clearing_frees_exactly_the_grad_bytes_of_the_stashed_stream_inputs) {
  const ResidualStreamOptions model = small_model();
  const Case c = residual_stream_case(model);
  auto oracle = make_checkpoint("nonclearing");
  auto clearing = make_checkpoint("clearing");
  const Observations o = run_case(c, *oracle);
  const Observations s = run_case(c, *clearing);
  ASSERT_FALSE(o.error);
  ASSERT_FALSE(s.error);
  // Every layer's stream inputs hold a [seq, hidden] float32 .grad in the oracle.
  const int64_t expected = int64_t{model.layers} * model.streams * model.seq * model.hidden * 4;
  for (size_t i = 0; i < s.iterations.size(); ++i) {
    const MemoryRecord& ms = s.iterations[i].memory;
    const MemoryRecord& mo = o.iterations[i].memory;
    ASSERT_TRUE(ms.measured && mo.measured);
    EXPECT_EQ(mo.released_bytes, expected) << "iteration " << i;
    EXPECT_EQ(mo.released_grads, model.layers * model.streams);
    EXPECT_EQ(mo.floor - ms.floor, expected) << "iteration " << i;
    EXPECT_EQ(ms.released_bytes, 0);
    EXPECT_LE(ms.peak, mo.peak);
  }
}

// Who holds the bytes: every recomputation input alive after an iteration, with what keeps it.
TEST(MemoryFloor, names_what_holds_each_recomputation_input_still_alive) {
  const Case c = residual_stream_case(small_model());
  const Observations o = run_case(c, *make_checkpoint("nonclearing"));
  const Observations s = run_case(c, *make_checkpoint("clearing"));
  ASSERT_FALSE(o.error);
  ASSERT_FALSE(s.error);
  const std::vector<AliveInput>& alive = o.iterations.back().alive_inputs;
  ASSERT_EQ(alive.size(), 6u);  // 3 layers x 2 streams, each stashed by its layer
  EXPECT_EQ(alive[0].where, "root.ops[2] input 0");
  EXPECT_EQ(alive[0].held_by, "the stash root.ops[2].body.ops[0]");
  EXPECT_EQ(alive[0].storage_bytes, 16 * 8 * 4);
  EXPECT_EQ(alive[0].grad_bytes, 16 * 8 * 4);  // the oracle keeps the .grad
  EXPECT_EQ(s.iterations.back().alive_inputs.at(0).grad_bytes, 0);  // the change clears it
  // The oracle's floor is not the sut's prediction when the sut keeps the .grad (the change left
  // out): the finding's evidence says who held the bytes.
  const Observations kept = run_case(c, *make_checkpoint("no-clear"));
  const Verdict verdict = find_property("memory-floor")->check(kept, Runs{o, o});
  ASSERT_FALSE(verdict.holds);
  EXPECT_NE(verdict.describe().find("root.ops[2] input 0 (512 bytes, .grad 512 bytes), held by the stash "
                                    "root.ops[2].body.ops[0]"),
            std::string::npos)
      << verdict.describe();
}

// A body that stashes a tensor it computed from its input keeps the input through the graph
// behind that tensor (the AccumulateGrad of the detached input): the shape of what retains the
// inputs in Megatron-LM's hyper-connection layers (docs/memory.md).
TEST(MemoryFloor, an_input_kept_through_a_stashed_tensor_s_graph_is_named_by_that_graph) {
  Case c;
  c.seed = 7;
  c.leaves.push_back(Leaf{{4, 4}, std::nullopt, true, Fill::randn});
  c.leaves.push_back(Leaf{{4, 4}, std::nullopt, true, Fill::randn});
  Checkpoint layer;
  layer.args = {Ref{0}, Ref{1}};
  layer.body->ops.push_back(Matmul{0, 1});                   // v2, from both inputs
  layer.body->ops.push_back(Stash{2});
  layer.body->ops.push_back(Unary{Unary::Fn::tanh, 2});     // v3
  layer.body->outputs = {3};
  c.root.ops.push_back(std::move(layer));
  c.root.outputs = {2};
  validate(c, Limits{});
  const Observations o = run_case(c, *make_checkpoint("nonclearing"));
  ASSERT_FALSE(o.error);
  const std::vector<AliveInput>& alive = o.iterations.back().alive_inputs;
  ASSERT_EQ(alive.size(), 2u);
  for (const AliveInput& a : alive) {
    EXPECT_EQ(a.held_by, "its AccumulateGrad, in the graph of the tensor the stash root.ops[0].body.ops[1] keeps")
        << a.where;
  }
}

// `recheck memory` builds the model it is asked for: ci/gpu's [8192, 4096] streams (2^25
// elements each) are over the default limits for case files, which are not for it.
TEST(MemoryFloor, a_model_over_the_limits_for_files_is_built_as_asked) {
  ResidualStreamOptions model;
  model.seq = 8192;
  model.hidden = 4096;
  model.dtype = DType::bfloat16;
  model.iterations = 3;
  const Case c = residual_stream_case(model);  // builds shapes only: nothing is allocated
  EXPECT_EQ(c.leaves[0].shape, (std::vector<int64_t>{8192, 4096}));
  EXPECT_THROW(validate(c), CaseError);
}

// Validation works the shapes out as eager mode has them, but a distribute checkpoint leaves its
// first argument flattened after forward: [64, 1] becomes [64], and adding the checkpoint's
// [64, 1] output to it makes [64, 64], not [64, 1]. (At [65536, 1] that is 16 GiB from a
// 256 KiB leaf.) The interpreter checks the real sizes before such an op allocates: over the
// limit, the oracle and the sut raise MemoryError and the case is skipped as too large.
TEST(RunTimeLimit, a_broadcast_with_a_distributed_argument_over_the_limit_is_skipped_before_it_allocates) {
  const Case c = case_from_json(nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 1,
    "dtype": "float32", "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [64, 1], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [
      {"op": "checkpoint", "distribute": true, "args": [{"ref": 0}],
       "body": {"ops": [{"op": "unary", "fn": "neg", "x": 0}], "outputs": [1]}},
      {"op": "binary", "fn": "add", "a": 0, "b": 1}],
     "outputs": [2]}})"),
                                   parse_limits("leaf_elements=1000"));
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  struct Restore {
    ~Restore() { set_value_element_limit(Limits{}.leaf_elements); }
  } restore;  // the limit is process-wide
  set_value_element_limit(1000);
  const CaseResult over = check_case(c, *oracle, *sut);
  set_value_element_limit(4096);
  const CaseResult within = check_case(c, *oracle, *sut);
  EXPECT_NE(over.skipped.find("binary would make a tensor of 4096 elements, over the limit leaf_elements=1000"),
            std::string::npos) << over.skipped;
  EXPECT_EQ(within.skipped, "") << "at 4096 the [64, 64] sum is made";
}

TEST(MemoryFloor, grad_released_and_memory_floor_tell_no_clear_from_clearing) {
  const Case c = residual_stream_case(small_model());
  auto oracle = make_checkpoint("nonclearing");
  for (const char* variant : {"clearing", "no-clear"}) {
    auto sut = make_checkpoint(variant);
    const CaseResult result = check_case(c, *oracle, *sut);
    const Classification expected = std::string(variant) == "clearing" ? Classification::pass : Classification::regression;
    EXPECT_EQ(classification_of(result, "grad-released"), expected) << variant;
    EXPECT_EQ(classification_of(result, "memory-floor"), expected) << variant;
    // Nothing else can tell them apart: no-clear computes exactly what clearing does.
    for (const PropertyResult& r : result.results) {
      if (r.property != "grad-released" && r.property != "memory-floor") {
        EXPECT_EQ(r.classification, Classification::pass) << variant << " " << r.property;
      }
    }
  }
}

// The class behind issue 20's first false alarm: a nested checkpoint returns its input modified
// in place and the outer body stashes it. Autograd refuses the stashed view's grad_fn (its base
// changed after the custom Function made it), yet the view still holds the inner checkpoint's
// node, and through it the outer recomputation input and its .grad. A walk of the stash skipped
// it; the prediction is now what letting go of the live inputs' .grad frees, measured.
TEST(MemoryFloor, a_gradient_held_through_a_view_autograd_refuses_to_read_is_predicted) {
  const Case c = case_from_json(nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 3,
    "dtype": "float32", "device": "cpu", "iterations": 2,
    "leaves": [{"shape": [8, 8], "requires_grad": false, "fill": "randn"},
               {"shape": [8, 8], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "checkpoint", "distribute": false, "args": [{"ref": 1}, {"ref": 0}], "body": {"ops": [
      {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
        {"op": "inplace", "fn": "mul", "scalar": 0.5, "x": 1},
        {"op": "matmul", "a": 1, "b": 0}], "outputs": [1, 3]}},
      {"op": "stash", "x": 2}], "outputs": [1, 2]}}],
     "outputs": [3]}})"));
  auto oracle = make_checkpoint("nonclearing");
  auto clearing = make_checkpoint("clearing");
  const Observations o = run_case(c, *oracle);
  const Observations s = run_case(c, *clearing);
  ASSERT_FALSE(o.error) << o.error->error.message;
  ASSERT_EQ(o.iterations.size(), 2u);
  for (size_t i = 0; i < o.iterations.size(); ++i) {
    const MemoryRecord& mo = o.iterations[i].memory;
    const MemoryRecord& ms = s.iterations[i].memory;
    EXPECT_EQ(mo.released_grads, 1) << "the outer recomputation input, kept by the stashed view's graph";
    EXPECT_EQ(mo.released_bytes, 8 * 8 * 4) << "iteration " << i;
    EXPECT_EQ(mo.floor - ms.floor, mo.released_bytes) << "iteration " << i;
    // And the attribution names that graph, through the node autograd refuses to hand out.
    bool named = false;
    for (const AliveInput& a : o.iterations[i].alive_inputs) {
      named = named || (a.grad_bytes == 8 * 8 * 4 &&
                        a.held_by == "its AccumulateGrad, in the graph of the tensor the stash root.ops[0].body.ops[1] keeps");
    }
    EXPECT_TRUE(named) << "iteration " << i;
  }
  for (const char* variant : {"clearing", "no-clear"}) {
    auto sut = make_checkpoint(variant);
    const CaseResult result = check_case(c, *oracle, *sut);
    const Classification expected = std::string(variant) == "clearing" ? Classification::pass : Classification::regression;
    EXPECT_EQ(classification_of(result, "memory-floor"), expected) << variant << "\n" << describe_results(result.results);
  }
}

// A case checked right after one whose backward raised: the oracle's run used to be credited
// with freeing blocks the earlier case left behind (its floor 32 bytes under the sut's).
TEST(MemoryFloor, what_an_earlier_case_left_behind_is_credited_to_no_run) {
  const Case first = load_case_file(std::string(test_paths::source_dir()) + "/corpus/regressions/ends-with-an-errored-backward.json");
  const Case second = load_case_file(std::string(test_paths::source_dir()) + "/corpus/regressions/memory-floor-after-a-case-whose-backward-raised.json");
  auto oracle = make_checkpoint("nonclearing");
  auto clearing = make_checkpoint("clearing");
  (void)check_case(first, *oracle, *clearing, {}, EagerRun::when_needed);
  const CaseResult result = check_case(second, *oracle, *clearing, {}, EagerRun::when_needed);
  EXPECT_FALSE(result.has_alarm()) << describe_results(result.results);
}

// A variant that replaces a tensor the run started with (the tracker's states, made when the
// run seeds its generators) by an equal copy holds as much as before: the free of the old one is
// credited, and its floor is the oracle's. For a moment the copies sit beside the originals (a
// checkpoint's saved states still hold those), so its peak is higher, and it allocates what the
// oracle does not: both are said, the floor is not.
class ReplacesTrackerStates final : public CheckpointImplementation {
 public:
  std::string name() const override { return "replaces-tracker-states"; }
  Values apply(const RunFunction& run_function, const CallSettings& settings, const Values& args) override {
    Values outputs = inner_->apply(run_function, settings, args);
    auto copies = std::make_shared<rng::StateMap>();
    for (const auto& [state_name, state] : rng::get_cuda_rng_tracker().live_states()) (*copies)[state_name] = state.clone();
    rng::get_cuda_rng_tracker().set_states(copies);
    return outputs;
  }

 private:
  std::unique_ptr<CheckpointImplementation> inner_ = make_checkpoint("clearing");
};

const char* kOneCheckpoint = R"({"format": "recheck-case", "version": 1, "seed": 1,
    "dtype": "float32", "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [3, 4], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {
      "ops": [{"op": "unary", "fn": "tanh", "x": 0}], "outputs": [1]}}], "outputs": [1]}})";

TEST(MemoryFloor, a_variant_that_replaces_a_tensor_with_an_equal_one_holds_as_much) {
  const Case c = case_from_json(nlohmann::json::parse(kOneCheckpoint));
  auto oracle = make_checkpoint("nonclearing");
  ReplacesTrackerStates replacing;
  const Observations o = run_case(c, *oracle);
  const Observations s = run_case(c, replacing);
  ASSERT_FALSE(s.error);
  EXPECT_EQ(s.iterations[0].memory.floor, o.iterations[0].memory.floor);
  const CaseResult result = check_case(c, *oracle, replacing);
  for (const PropertyResult& r : result.results) {
    if (r.property == "memory-floor") {
      EXPECT_EQ(r.sut.describe().rfind("during iteration 0: peak ", 0), 0u) << "the floor holds, the peak does not: "
                                                                             << r.sut.describe();
    }
  }
  EXPECT_EQ(classification_of(result, "rng-restored"), Classification::pass);
  EXPECT_EQ(classification_of(result, "no-extra-allocations"), Classification::regression);
}

// One extra allocation of the smallest size, made anywhere (here in the checkpoint's forward,
// and freed at once: neither the floor nor the peak can see it), is caught.
class AllocatesFourBytes final : public CheckpointImplementation {
 public:
  std::string name() const override { return "allocates-four-bytes"; }
  Values apply(const RunFunction& run_function, const CallSettings& settings, const Values& args) override {
    (void)at::empty({1}, at::kFloat);
    return inner_->apply(run_function, settings, args);
  }

 private:
  std::unique_ptr<CheckpointImplementation> inner_ = make_checkpoint("clearing");
};

TEST(NoExtraAllocations, catches_one_extra_allocation_of_four_bytes) {
  const Case c = case_from_json(nlohmann::json::parse(kOneCheckpoint));
  auto oracle = make_checkpoint("nonclearing");
  AllocatesFourBytes extra;
  const CaseResult result = check_case(c, *oracle, extra);
  EXPECT_EQ(classification_of(result, "no-extra-allocations"), Classification::regression);
  EXPECT_EQ(classification_of(result, "memory-floor"), Classification::pass);
  for (const PropertyResult& r : result.results) {
    if (r.property != "no-extra-allocations") continue;
    // The counts after it move with libtorch; the scope and the 4 bytes may not.
    EXPECT_EQ(r.sut.describe().rfind("iteration 0, root.ops[0] forward #1: 1 allocation(s) the oracle does not make (bytes: 4); ", 0),
              0u) << r.sut.describe();
  }
}

// Clearing frees earlier, which lets autograd adopt a gradient it would otherwise copy: fewer
// allocations than the oracle, never one more.
TEST(NoExtraAllocations, clearing_allocates_a_subset_of_what_the_oracle_allocates) {
  const Case c = residual_stream_case(small_model());
  auto oracle = make_checkpoint("nonclearing");
  auto clearing = make_checkpoint("clearing");
  const Observations o = run_case(c, *oracle);
  const Observations s = run_case(c, *clearing);
  size_t oracle_count = 0;
  size_t sut_count = 0;
  for (size_t i = 0; i < o.iterations.size(); ++i) {
    ASSERT_TRUE(o.iterations[i].allocations.measured);
    for (const auto& [scope, sizes] : o.iterations[i].allocations.by_scope) oracle_count += sizes.size();
    for (const auto& [scope, sizes] : s.iterations[i].allocations.by_scope) sut_count += sizes.size();
  }
  EXPECT_GT(sut_count, 0u);
  EXPECT_LE(sut_count, oracle_count);
  const Verdict verdict = find_property("no-extra-allocations")->check(s, Runs{o, o});
  EXPECT_TRUE(verdict.holds) << verdict.describe();
}

TEST(GradReleased, tells_a_gradient_kept_alive_outside_the_recomputation_inputs) {
  // A checkpoint of a leaf whose body keeps nothing: only the variant's own cache can hold the
  // gradient after backward.
  const Case c = case_from_json(nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 1,
    "dtype": "float32", "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [3, 4], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {
      "ops": [{"op": "unary", "fn": "tanh", "x": 0}], "outputs": [1]}}], "outputs": [1]}})"));
  auto oracle = make_checkpoint("nonclearing");
  auto keeper = make_checkpoint("keeps-last-grads");
  const CaseResult result = check_case(c, *oracle, *keeper);
  for (const PropertyResult& r : result.results) {
    if (r.property != "grad-released") continue;
    EXPECT_EQ(r.classification, Classification::regression);
    EXPECT_NE(r.sut.describe().find("root.ops[0] input 0: gradient of 48 bytes held elsewhere"), std::string::npos)
        << r.sut.describe();
  }
}

TEST(GradientAdoption, nonclearing_cannot_adopt_while_the_detached_input_holds_the_gradient) {
  EXPECT_FALSE(leaf_adopts_returned_gradient("nonclearing"));
  // Whether clearing lets the engine adopt it depends on the libtorch; recorded, and printed
  // by `recheck memory`.
  RecordProperty("clearing_adopts", leaf_adopts_returned_gradient("clearing") ? "yes" : "no");
}

}  // namespace
}  // namespace recheck
