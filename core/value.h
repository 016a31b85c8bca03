// A value flowing through a case: what Python would hold in a variable passed to or returned
// from a checkpointed function. None, a tensor, or one of the non-tensor scalars Megatron's
// callers sometimes pass.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace recheck {

struct None {
  friend bool operator==(None, None) { return true; }
};

using Value = std::variant<None, at::Tensor, int64_t, double, bool, std::string>;
using Values = std::vector<Value>;

inline bool is_tensor(const Value& v) { return std::holds_alternative<at::Tensor>(v); }
inline bool is_none(const Value& v) { return std::holds_alternative<None>(v); }
inline const at::Tensor& as_tensor(const Value& v) { return std::get<at::Tensor>(v); }

// Python's type name of a value, as Python's own error messages print it.
inline const char* python_type_name(const Value& v) {
  switch (v.index()) {
    case 0: return "NoneType";
    case 1: return "Tensor";
    case 2: return "int";
    case 3: return "float";
    case 4: return "bool";
    default: return "str";
  }
}

}  // namespace recheck
