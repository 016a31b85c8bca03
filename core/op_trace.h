// What each op of a run read and made, as fingerprints: the trace a cause signature reads to say
// where two runs first part (properties/causes.h). Ops are numbered in the case's pre-order (a
// construct before the ops of its body), the number the case's op sites are listed under.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "core/case.h"
#include "core/value.h"

namespace recheck {

// One execution of an op: a forward one, or inside a recomputation (of its own checkpoint or of
// one around it); or one call of a checkpoint's body (`body`: what the body got and returned).
// `started` and `ended` number the moments a run's executions began and returned, in one count.
struct OpExecution {
  int op = 0;  // OpSite number
  int iteration = 0;
  bool recomputation = false;
  bool body = false;
  uint64_t inputs = 0;        // fingerprint of the tensors it read, as it began
  uint64_t outputs = 0;       // of the tensors it made
  uint64_t inputs_after = 0;  // of the tensors it read, as it returned: an op that changed them
  int64_t started = 0;
  int64_t ended = -1;         // -1: it raised
};

// An op and where it sits: "root.ops[2].body.ops[0]", and the constructs around it, outermost
// first (each a Checkpoint, Fork or Autocast op).
struct OpSite {
  std::string path;
  const Op* op = nullptr;
  std::vector<const Op*> enclosing;
};

// Every op of `c`, in pre-order.
std::vector<OpSite> op_sites(const Case& c);
// Each op's number in that order, without its site's text (for a run's trace).
std::unordered_map<const Op*, int> op_numbers(const Case& c);

// A fingerprint of tensors' dtypes, shapes and bytes (non-tensors count as their kind only):
// equal values give equal fingerprints; a difference almost surely gives different ones. Reads
// CPU tensors only; any other device gives 0, and a trace on such a device says nothing.
uint64_t fingerprint(const std::vector<Value>& values);
// The same for the values `refs` names among `values` (an op's inputs), without copying them.
uint64_t fingerprint(const std::vector<Value>& values, const std::vector<int>& refs);

}  // namespace recheck
