// Cases several test files share, as JSON.
#pragma once

#include <string>

namespace recheck::test_cases {

// A checkpoint with dropout from every source that keeps its first input past backward (a
// stash), two iterations: every property holds on it for clearing; the non-clearing function
// leaves a .grad on the stashed input, and a function that restores only the CPU generator
// recomputes other dropout masks than its forward drew.
inline const char* const kStashedDropoutCase = R"({"format": "recheck-case", "version": 1, "seed": 4,
  "dtype": "float32", "device": "cpu", "iterations": 2,
  "leaves": [{"shape": [3, 3], "requires_grad": true, "fill": "randn"},
             {"shape": [3, 3], "requires_grad": true, "fill": "randn"}],
  "root": {"ops": [
    {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
      {"op": "stash", "x": 0},
      {"op": "matmul", "a": 0, "b": 1},
      {"op": "random", "fn": "dropout", "source": "cpu", "p": 0.5, "x": 2},
      {"op": "random", "fn": "noise", "source": "device", "p": 0.1, "x": 3},
      {"op": "random", "fn": "dropout", "source": "tracker", "tracker_state": "model-parallel-rng", "p": 0.5, "x": 4}
    ], "outputs": [5]}},
    {"op": "unary", "fn": "tanh", "x": 2}
  ], "outputs": [3]}})";

// nn.RReLU in training mode (the random op rrelu) from every source, over a product that has
// negative elements: each draws its slopes from the generator it names.
inline const char* const kRreluCase = R"({"format": "recheck-case", "version": 1, "seed": 7,
  "dtype": "float32", "device": "cpu", "iterations": 2,
  "leaves": [{"shape": [3, 3], "requires_grad": true, "fill": "randn"},
             {"shape": [3, 3], "requires_grad": true, "fill": "randn"}],
  "root": {"ops": [
    {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
      {"op": "matmul", "a": 0, "b": 1},
      {"op": "random", "fn": "rrelu", "source": "cpu", "p": 0.3333333333333333, "x": 2},
      {"op": "random", "fn": "rrelu", "source": "device", "p": 0.3333333333333333, "x": 3},
      {"op": "random", "fn": "rrelu", "source": "tracker", "tracker_state": "model-parallel-rng", "p": 0.5, "x": 4}
    ], "outputs": [5]}},
    {"op": "unary", "fn": "tanh", "x": 2}
  ], "outputs": [3]}})";

// A random op of fn `fn` (its name in a case file) taking `p`, from every source in turn, in one
// checkpoint's body over an 8x8 product (rows enough that a row mask rarely drops them all): each draws from the generator it names, and the next reads
// what the last made.
inline std::string random_ops_case(const std::string& fn, double p) {
  const std::string common = R"("fn": ")" + fn + R"(", "p": )" + std::to_string(p);
  return R"({"format": "recheck-case", "version": 1, "seed": 7,
  "dtype": "float32", "device": "cpu", "iterations": 2,
  "leaves": [{"shape": [8, 8], "requires_grad": true, "fill": "randn"},
             {"shape": [8, 8], "requires_grad": true, "fill": "randn"}],
  "root": {"ops": [
    {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
      {"op": "matmul", "a": 0, "b": 1},
      {"op": "random", "source": "cpu", )" + common + R"(, "x": 2},
      {"op": "random", "source": "device", )" + common + R"(, "x": 3},
      {"op": "random", "source": "tracker", "tracker_state": "model-parallel-rng", )" + common + R"(, "x": 4}
    ], "outputs": [5]}},
    {"op": "unary", "fn": "tanh", "x": 2}
  ], "outputs": [3]}})";
}

}  // namespace recheck::test_cases
