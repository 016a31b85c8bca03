// The smallest valid case file, as JSON: one leaf and a tanh. Tests of reading and limits edit it.
#pragma once

#include <nlohmann/json.hpp>

namespace recheck::test_cases {

inline nlohmann::json minimal() {
  return nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 1, "dtype": "float32",
    "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [2], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "unary", "fn": "tanh", "x": 0}], "outputs": [1]}})");
}

}  // namespace recheck::test_cases
