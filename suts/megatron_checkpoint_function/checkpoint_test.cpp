// The port of Megatron's CheckpointFunction, step by step, and the quirks it keeps on purpose.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/errors.h"
#include "core/rng.h"
#include "suts/megatron_checkpoint_function/autograd_backward.h"
#include "suts/megatron_checkpoint_function/checkpoint.h"

namespace recheck {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rng::use_device(rng::Device::cpu);
    rng::reset_all(99);
    set_checkpointing(false);
  }
  static at::Tensor leaf(std::vector<int64_t> shape, uint64_t seed) {
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Tensor t = at::randn(shape, g, at::kFloat);
    t.set_requires_grad(true);
    return t;
  }
  static RaisedError error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (...) {
      return describe_current_exception();
    }
    return {"", "no error"};
  }
};

// x * w + tanh(x), with the result also kept by `keep` when given.
RunFunction layer(std::vector<at::Tensor>* keep = nullptr) {
  return [keep](const Values& in) -> Values {
    const at::Tensor& x = as_tensor(in.at(0));
    const at::Tensor& w = as_tensor(in.at(1));
    if (keep) keep->push_back(x);
    return {x * w + at::tanh(x)};
  };
}

// A case too large for the machine's memory is skipped, not compared as if its ops had raised:
// libtorch's CPU allocator reports the failure as a plain error, which recheck names MemoryError.
TEST_F(CheckpointTest, a_failed_cpu_allocation_is_named_out_of_memory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator aborts on a request this size";
#endif
  const RaisedError error = error_of([] { (void)at::empty({int64_t{1} << 50}, at::kByte); });  // 1 PiB
  // MemoryError where libtorch raises a plain error (1.13), OutOfMemoryError if it names it so.
  EXPECT_TRUE(error.out_of_memory()) << error.type << ": " << error.message;
  EXPECT_NE(error.message.find("DefaultCPUAllocator"), std::string::npos) << error.message;
}

TEST_F(CheckpointTest, forward_runs_the_function_once_without_grad_and_returns_its_outputs) {
  int calls = 0;
  bool grad_mode_inside = true;
  RunFunction f = [&](const Values& in) -> Values {
    ++calls;
    grad_mode_inside = at::GradMode::is_enabled();
    return {as_tensor(in[0]) * 2};
  };
  at::Tensor x = leaf({3}, 1);
  Values out = make_checkpoint("nonclearing")->apply(f, CallSettings{}, {x});
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(grad_mode_inside);
  EXPECT_TRUE(as_tensor(out[0]).equal(x.detach() * 2));
  EXPECT_TRUE(as_tensor(out[0]).requires_grad());
}

TEST_F(CheckpointTest, backward_recomputes_with_grad_on_and_matches_eager_gradients) {
  at::Tensor x = leaf({4}, 1), w = leaf({4}, 2);
  at::Tensor xe = x.detach().clone().set_requires_grad(true), we = w.detach().clone().set_requires_grad(true);
  Values out = make_checkpoint("clearing")->apply(layer(), CallSettings{}, {x, w});
  torch::autograd::backward({as_tensor(out[0]).sum()});
  torch::autograd::backward({as_tensor(layer()({xe, we})[0]).sum()});
  EXPECT_TRUE(x.grad().equal(xe.grad()));
  EXPECT_TRUE(w.grad().equal(we.grad()));
}

TEST_F(CheckpointTest, clearing_resets_grad_of_detached_inputs_after_collecting) {
  std::vector<at::Tensor> seen;  // what the run function received: forward args, then detached inputs
  at::Tensor x = leaf({4}, 1), w = leaf({4}, 2);
  Values out = make_checkpoint("clearing")->apply(layer(&seen), CallSettings{}, {x, w});
  torch::autograd::backward({as_tensor(out[0]).sum()});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FALSE(seen[1].grad().defined());
  EXPECT_TRUE(x.grad().defined());
}

TEST_F(CheckpointTest, nonclearing_leaves_grad_on_detached_inputs) {
  std::vector<at::Tensor> seen;
  at::Tensor x = leaf({4}, 1), w = leaf({4}, 2);
  Values out = make_checkpoint("nonclearing")->apply(layer(&seen), CallSettings{}, {x, w});
  torch::autograd::backward({as_tensor(out[0]).sum()});
  ASSERT_EQ(seen.size(), 2u);
  ASSERT_TRUE(seen[1].grad().defined());
  EXPECT_TRUE(seen[1].grad().equal(x.grad()));
}

TEST_F(CheckpointTest, clearing_returns_same_grads_when_input_is_stashed) {
  auto grads_of = [&](const std::string& variant) {
    rng::reset_all(99);
    std::vector<at::Tensor> stash;
    at::Tensor x = leaf({4}, 1), w = leaf({4}, 2);
    Values out = make_checkpoint(variant)->apply(layer(&stash), CallSettings{}, {x, w});
    torch::autograd::backward({as_tensor(out[0]).sum()});
    return std::make_pair(x.grad(), w.grad());
  };
  auto [xc, wc] = grads_of("clearing");
  auto [xn, wn] = grads_of("nonclearing");
  EXPECT_TRUE(xc.equal(xn));
  EXPECT_TRUE(wc.equal(wn));
}

TEST_F(CheckpointTest, recompute_draws_the_forward_randomness_and_restores_the_states_after) {
  std::vector<at::Tensor> masks;
  RunFunction f = [&](const Values& in) -> Values {
    at::Tensor cpu_mask = at::empty({8}).bernoulli_(0.5, rng::cpu_generator());
    at::Tensor device_mask = at::empty({8}).bernoulli_(0.5, rng::device_generator());
    at::Tensor tracker_mask;
    rng::get_cuda_rng_tracker().fork(rng::kModelParallelRngTrackerName,
                                     [&] { tracker_mask = at::empty({8}).bernoulli_(0.5, rng::device_generator()); });
    masks.push_back(at::cat({cpu_mask, device_mask, tracker_mask}));
    return {as_tensor(in[0]) * cpu_mask * device_mask * tracker_mask};
  };
  at::Tensor x = leaf({8}, 3);
  Values out = make_checkpoint("clearing")->apply(f, CallSettings{}, {x});
  const rng::Snapshot after_forward = rng::snapshot();
  torch::autograd::backward({as_tensor(out[0]).sum()});
  ASSERT_EQ(masks.size(), 2u);
  EXPECT_TRUE(masks[0].equal(masks[1]));
  EXPECT_EQ(after_forward, rng::snapshot());
}

TEST_F(CheckpointTest, rng_is_restored_when_recompute_throws) {
  int calls = 0;
  RunFunction f = [&](const Values& in) -> Values {
    at::empty({8}).normal_(0, 1, rng::device_generator());
    if (++calls == 2) throw std::runtime_error("recompute failed");
    return {as_tensor(in[0]) * 2};
  };
  at::Tensor x = leaf({8}, 3);
  Values out = make_checkpoint("clearing")->apply(f, CallSettings{}, {x});
  const rng::Snapshot after_forward = rng::snapshot();
  EXPECT_EQ(error_of([&] { torch::autograd::backward({as_tensor(out[0]).sum()}); }).message, "recompute failed");
  EXPECT_EQ(after_forward, rng::snapshot());
}

TEST_F(CheckpointTest, flag_is_set_while_forward_runs_and_unset_after_backward) {
  std::vector<bool> flags;
  RunFunction f = [&](const Values& in) -> Values {
    flags.push_back(is_checkpointing());
    return {as_tensor(in[0]) * 2};
  };
  at::Tensor x = leaf({2}, 1);
  Values out = make_checkpoint("clearing")->apply(f, CallSettings{}, {x});
  EXPECT_FALSE(is_checkpointing());
  torch::autograd::backward({as_tensor(out[0]).sum()});
  EXPECT_EQ(flags, (std::vector<bool>{true, true}));
  EXPECT_FALSE(is_checkpointing());
}

TEST_F(CheckpointTest, non_tensor_argument_raises_type_error_after_the_function_ran) {
  int calls = 0;
  RunFunction f = [&](const Values& in) -> Values {
    ++calls;
    return {as_tensor(in[0]) * 2};
  };
  at::Tensor x = leaf({2}, 1);
  const RaisedError error = error_of([&] { make_checkpoint("clearing")->apply(f, CallSettings{}, {x, int64_t{3}}); });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(error.type, "TypeError");
  EXPECT_EQ(error.message, "save_for_backward can only save variables, but argument 1 is of type int");
  EXPECT_FALSE(is_checkpointing());
}

// Python's Function.apply refuses the argument before it gives the outputs the checkpoint's
// node: a tensor the function returned, and kept, does not require grad (megatron-core's
// stash-kept showed the port's did).
TEST_F(CheckpointTest, non_tensor_argument_is_refused_before_the_outputs_get_the_checkpoint_s_node) {
  at::Tensor returned;
  RunFunction f = [&](const Values& in) -> Values {
    returned = as_tensor(in[0]).sum();
    return {returned};
  };
  at::Tensor x = leaf({2}, 1);
  const RaisedError error = error_of([&] { make_checkpoint("nonclearing")->apply(f, CallSettings{}, {x, 0.5}); });
  EXPECT_EQ(error.message, "save_for_backward can only save variables, but argument 1 is of type float");
  ASSERT_TRUE(returned.defined());
  EXPECT_FALSE(returned.requires_grad());
  EXPECT_FALSE(returned.grad_fn());
}

TEST_F(CheckpointTest, non_tensor_argument_is_accepted_when_nothing_requires_grad) {
  RunFunction f = [](const Values& in) -> Values { return {as_tensor(in[0]) * 2, in[1]}; };
  at::Tensor x = at::ones({2});
  Values out = make_checkpoint("clearing")->apply(f, CallSettings{}, {x, std::string("mode")});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(std::get<std::string>(out[1]), "mode");
}

TEST_F(CheckpointTest, none_argument_is_saved_and_gets_no_gradient) {
  RunFunction f = [](const Values& in) -> Values {
    EXPECT_TRUE(is_none(in[1]));
    return {as_tensor(in[0]) * 3};
  };
  at::Tensor x = leaf({2}, 1);
  Values out = make_checkpoint("clearing")->apply(f, CallSettings{}, {x, None{}});
  torch::autograd::backward({as_tensor(out[0]).sum()});
  EXPECT_TRUE(x.grad().equal(at::full({2}, 3.0)));
}

TEST_F(CheckpointTest, backward_raises_when_no_recomputed_output_requires_grad) {
  // The output requires grad through the Function, but its recomputation is a constant.
  RunFunction f = [](const Values&) -> Values { return {at::ones({2})}; };
  at::Tensor x = leaf({2}, 1);
  Values out = make_checkpoint("clearing")->apply(f, CallSettings{}, {x});
  const RaisedError error = error_of([&] { torch::autograd::backward({as_tensor(out[0]).sum()}); });
  EXPECT_EQ(error.type, "ValueError");
  EXPECT_EQ(error.message, "not enough values to unpack (expected 2, got 0)");
}

// Megatron's backward hands the recomputed outputs and the incoming gradients to Python's
// torch.autograd.backward, which checks their shapes before the engine runs and names them as
// Python's tuple.index finds them: the first element that is, or compares equal to (a tensor
// `==` whose one-element result is true), the one that failed.
TEST_F(CheckpointTest, a_gradient_of_the_wrong_shape_is_refused_as_python_refuses_it) {
  auto mismatch = [&](float first_grad, float first_output) {
    at::Tensor out0 = at::full({1, 1}, first_output).requires_grad_();
    at::Tensor out1 = at::full({1, 1}, 2.0f).requires_grad_();
    return error_of([&] {
      python_autograd_backward({out0 * 1, out1 * 1}, {at::full({1, 1}, first_grad), at::full({1}, 3.0f)});
    });
  };
  const RaisedError unequal = mismatch(0.0f, 0.0f);
  EXPECT_EQ(unequal.type, "RuntimeError");
  EXPECT_EQ(unequal.message,
            "Mismatch in shape: grad_output[1] has a shape of torch.Size([1]) and output[1] has a shape of "
            "torch.Size([1, 1]).");
  // The outputs are compared as the recomputed tensors, values and all.
  EXPECT_EQ(mismatch(3.0f, 2.0f).message,
            "Mismatch in shape: grad_output[0] has a shape of torch.Size([1]) and output[0] has a shape of "
            "torch.Size([1, 1]).");
  // An earlier gradient of more than one element makes Python's comparison raise instead.
  at::Tensor out = at::ones({2}).requires_grad_();
  const RaisedError ambiguous = error_of([&] {
    python_autograd_backward({out * 1, out * 2}, {at::ones({2}), at::ones({3})});
  });
  EXPECT_EQ(ambiguous.message, "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0");
  const RaisedError many = error_of([&] {
    python_autograd_backward({out * 1, (out * 2).view({2, 1})}, {at::ones({2}), at::ones({2})});
  });
  EXPECT_EQ(many.message, "Boolean value of Tensor with more than one value is ambiguous");
  // Shapes that agree reach the engine.
  at::Tensor x = leaf({2}, 1);
  python_autograd_backward({x * 2}, {at::ones({2})});
  EXPECT_TRUE(at::equal(x.grad(), at::full({2}, 2.0f)));
}

// Python's Function numbers its outputs with the non-tensors among them, and autograd's
// view+inplace error names the output by that number: a checkpoint returning (0.5, x), x an
// input returned as-is and modified in place afterwards, fails on "Output 1".
TEST_F(CheckpointTest, outputs_are_numbered_with_the_non_tensors_among_them_as_python_numbers_them) {
  at::Tensor x = at::randn({1, 1});
  RunFunction f = [](const Values& in) -> Values { return {0.5, in.at(0)}; };
  Values out = make_checkpoint("clearing")->apply(f, CallSettings{}, {x, leaf({1, 1}, 1)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(std::get<double>(out[0]), 0.5);
  x.mul_(0.5);
  const RaisedError error = error_of([&] { (void)as_tensor(out[1]).grad_fn(); });
  EXPECT_EQ(error.message.rfind("Output 1 of CheckpointFunctionBackward is a view", 0), 0u) << error.message;
}

TEST_F(CheckpointTest, grad_call_with_explicit_inputs_is_refused) {
  at::Tensor x = leaf({2}, 1);
  Values out = make_checkpoint("clearing")->apply(layer(), CallSettings{}, {x, leaf({2}, 2)});
  const RaisedError error = error_of([&] { torch::autograd::grad({as_tensor(out[0]).sum()}, {x}); });
  EXPECT_EQ(error.type, "RuntimeError");
  EXPECT_EQ(error.message, "Checkpointing is not compatible with .grad(), please use .backward() if possible");
}

TEST_F(CheckpointTest, distributed_view_argument_is_refused) {
  at::Tensor base = leaf({2, 3}, 1);
  at::Tensor view = base.narrow(0, 0, 1);
  RunFunction f = [](const Values& in) -> Values { return {as_tensor(in[0]) * 2}; };
  const RaisedError error = error_of([&] { make_checkpoint("clearing")->apply(f, CallSettings{true, {}}, {view}); });
  EXPECT_EQ(error.type, "AssertionError");
  EXPECT_NE(error.message.find("Ensure tensor._base is None"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("torch.Size([2, 3])"), std::string::npos) << error.message;
}

// Python builds the new 1-D chunk (args[0].data.view(-1)) before it checks for a view, so a
// non-contiguous view fails on the flattening first.
TEST_F(CheckpointTest, distributed_non_contiguous_view_fails_flattening_before_the_view_check) {
  at::Tensor view = leaf({2, 3}, 1).transpose(0, 1);
  RunFunction f = [](const Values& in) -> Values { return {as_tensor(in[0]) * 2}; };
  const RaisedError error = error_of([&] { make_checkpoint("clearing")->apply(f, CallSettings{true, {}}, {view}); });
  EXPECT_EQ(error.type, "RuntimeError");
  EXPECT_EQ(error.message.rfind("view size is not compatible with input tensor's size and stride", 0), 0u) << error.message;
}

TEST_F(CheckpointTest, distribute_keeps_a_1d_chunk_until_backward_restores_the_shape) {
  at::Tensor x = at::randn({2, 3});
  at::Tensor h = x.clone().set_requires_grad(true);
  RunFunction f = [](const Values& in) -> Values { return {as_tensor(in[0]) * 2}; };
  Values out = make_checkpoint("clearing")->apply(f, CallSettings{true, {}}, {h});
  EXPECT_EQ(h.sizes(), (at::IntArrayRef{6}));
  torch::autograd::backward({as_tensor(out[0]).sum()});
  EXPECT_EQ(h.sizes(), (at::IntArrayRef{2, 3}));
  EXPECT_TRUE(h.detach().equal(x));
  EXPECT_TRUE(h.grad().equal(at::full({2, 3}, 2.0)));
}

// Checkpoint A returns its input unchanged, so autograd makes its output a view of that input;
// checkpoint B, given the view and the input, modifies the input in place. Python's Function
// saves B's arguments without asking them for a grad_fn, and raises autograd's view+inplace error
// only when backward unpacks them; the port must not raise it earlier, in forward.
TEST_F(CheckpointTest, view_of_a_base_modified_in_place_is_refused_in_backward_as_in_python) {
  at::Tensor v0 = at::randn({1, 1});
  at::Tensor v1 = leaf({1, 1}, 1);
  RunFunction first = [](const Values& in) -> Values { return {in.at(0)}; };
  RunFunction second = [](const Values& in) -> Values {
    as_tensor(in.at(1)).mul_(0.5);
    return {in.at(0)};
  };
  const auto checkpoint = make_checkpoint("nonclearing");
  const Values a = checkpoint->apply(first, CallSettings{}, {v0, v1});
  ASSERT_TRUE(as_tensor(a[0]).is_view());
  Values b;
  EXPECT_EQ(error_of([&] { b = checkpoint->apply(second, CallSettings{}, {a[0], v0}); }).message, "no error");
  ASSERT_EQ(b.size(), 1u);
  const RaisedError error = error_of([&] { torch::autograd::backward({as_tensor(b[0]).sum()}); });
  EXPECT_EQ(error.type, "RuntimeError");
  EXPECT_NE(error.message.find("Output 0 of CheckpointFunctionBackward is a view and its base or another view of its "
                               "base has been modified inplace"),
            std::string::npos)
      << error.message;
}

// Python unpacks ctx.saved_tensors in order, so whichever comes first fails first: a view that
// autograd's view+inplace check refuses, or a saved tensor modified in place since it was saved.
TEST_F(CheckpointTest, backward_fails_on_the_first_saved_tensor_it_cannot_unpack_as_python_does) {
  for (const bool view_first : {true, false}) {
    at::Tensor v0 = at::randn({1, 1});
    at::Tensor v1 = leaf({1, 1}, 1);
    at::Tensor v3 = at::randn({1, 1});
    const auto checkpoint = make_checkpoint("nonclearing");
    RunFunction first = [](const Values& in) -> Values { return {in.at(0)}; };
    const Values a = checkpoint->apply(first, CallSettings{}, {v0, v1});
    const size_t view_at = view_first ? 0 : 1;
    RunFunction second = [&v0, view_at](const Values& in) -> Values {
      v0.mul_(0.5);
      return {as_tensor(in.at(view_at)) * 1};
    };
    const Values args = view_first ? Values{a[0], v0, v3} : Values{v3, a[0], v0};
    const Values b = checkpoint->apply(second, CallSettings{}, args);
    v3.mul_(2);  // after it was saved
    const RaisedError error = error_of([&] { torch::autograd::backward({as_tensor(b[0]).sum()}); });
    const std::string expected = view_first ? "Output 0 of CheckpointFunctionBackward is a view"
                                            : "one of the variables needed for gradient computation has been modified";
    EXPECT_EQ(error.message.rfind(expected, 0), 0u) << "view first: " << view_first << ": " << error.message;
  }
}

// libtorch names tensor types CPUFloatType where Python's torch writes torch.FloatTensor, except
// for the dtypes without a legacy tensor type, which Python leaves as libtorch wrote them.
TEST_F(CheckpointTest, errors_spell_tensor_types_and_nodes_as_python_does) {
  const RaisedError error = error_of([] {
    TORCH_CHECK(false, "[CPUFloatType [2]] [CPUDoubleType [1]] [CPUBFloat16Type [3]] "
                       "torch::autograd::CppNode<recheck::(anonymous namespace)::CheckpointFunction>");
  });
  EXPECT_EQ(error.type, "RuntimeError");
  EXPECT_EQ(error.message,
            "[torch.FloatTensor [2]] [torch.DoubleTensor [1]] [CPUBFloat16Type [3]] CheckpointFunctionBackward");
}

TEST_F(CheckpointTest, unknown_variant_names_the_known_ones) {
  try {
    make_checkpoint("no-such-variant");
    FAIL();
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("clearing, nonclearing"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace recheck
