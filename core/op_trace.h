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
  uint64_t drawn = 0;         // a random op's: of the numbers it took from its generator
  // Bit k: the op's kth output (of its first 32) requires grad as it returned. Eager mode and a
  // checkpoint agree on it outside every checkpoint's body; a checkpoint that decides otherwise
  // (an autograd.Function's outputs all require grad when an input does) parts there.
  uint32_t requires_grad = 0;
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

// The same fingerprints of a segment's values (by value number), each tensor's bytes hashed once:
// a value read again is hashed again only when autograd's version counter, its data pointer or
// its shape says it changed (an in-place op; distribute's `.data`). A write that bypasses the
// version counter (through a Python `.data` alias) is not seen; such a trace may locate a cause
// at a later op. Holds no tensor: its values are the segment's, alive while it runs.
class ValuePrints {
 public:
  // Of the values `refs` names among `values`.
  uint64_t of(const std::vector<Value>& values, const std::vector<int>& refs);
  // Of values[first..].
  uint64_t of_from(const std::vector<Value>& values, size_t first);
  // Of `outputs`, outputs[k] being the segment's value refs[k].
  uint64_t of_outputs(const std::vector<Value>& outputs, const std::vector<int>& refs);

 private:
  struct Entry {
    const c10::TensorImpl* impl = nullptr;
    const void* data = nullptr;
    int64_t version = -1;
    uint64_t shape = 0;
    uint64_t print = 0;
  };
  uint64_t add(uint64_t h, size_t index, const Value& value);
  std::vector<Entry> entries_;
};

// A case's ops as its traces number them, and what each reads: computed once for the runs of a
// case (RunOptions::trace_index).
struct TraceIndex {
  explicit TraceIndex(const Case& c);
  std::unordered_map<const Op*, int> numbers;
  std::unordered_map<const Checkpoint*, int> checkpoints;
  std::vector<std::vector<int>> refs;  // each op's inputs (op_inputs), by number
  // Whether an op may change what it read: an in-place op, a Discard, a construct (its body, the
  // checkpoint function around it). Any other op is a pure function of its inputs, whose prints
  // after it returns are those it began with, not read again.
  std::vector<bool> may_write;
};

// Records a run's trace as its interpreter reports each op execution; records nothing when
// `index` is null.
class TraceRecorder {
 public:
  TraceRecorder(const TraceIndex* index, std::vector<OpExecution>& trace);

  int number(const Op& op) const;  // its OpSite number; -1 when off

  // An op of a segment begins, reading the segment's `values`; returns its place in the trace.
  size_t op_began(const Op& op, ValuePrints& prints, const std::vector<Value>& values, int iteration, bool recomputation);
  // It returned, its outputs appended to `values` from `first_output` on; `drawn`: the print of
  // what a random op took from its generator (0 for any other op).
  void op_returned(size_t at, ValuePrints& prints, const std::vector<Value>& values, size_t first_output,
                   uint64_t drawn = 0);
  // A checkpoint's body is called with `inputs` (the first values of its segment, whose prints
  // `prints` keeps), and returns `outputs` (its segment's values `output_refs`).
  size_t body_began(const Checkpoint& checkpoint, ValuePrints& prints, const std::vector<Value>& inputs, int iteration,
                    bool recomputation);
  void body_returned(size_t at, ValuePrints& prints, const std::vector<Value>& inputs, const std::vector<Value>& outputs,
                     const std::vector<int>& output_refs);

 private:
  static constexpr size_t kOff = static_cast<size_t>(-1);
  size_t began(int number, int iteration, bool recomputation, bool body, uint64_t inputs);
  void returned(size_t at, uint64_t outputs, uint64_t inputs_after);

  const TraceIndex* index_;
  std::vector<OpExecution>& trace_;
  int64_t moment_ = 0;
};

}  // namespace recheck
