#pragma once

// Where a run parts from another: from eager mode in forward, or from its own forward in a
// recomputation, found by comparing the op traces (core/op_trace.h) execution by execution. The
// cause signatures (properties/causes.h) and the classification read them.

#include <climits>
#include <string>
#include <vector>

#include "core/interpreter.h"

namespace recheck {

// Where a run first parts from eager mode (in forward, before the iteration where their errors
// part, if they do) or from its own forward (in a recomputation), in iterations up to
// `last_iteration`; "" when it does not, or when no trace was recorded.
std::string first_difference(const Observations& run, const Observations* eager, const std::vector<OpSite>& sites,
                             bool recomputation_only, int last_iteration);

// Where, outside every checkpoint's body, an op's output first requires grad otherwise than eager
// mode's (in forward, in iterations up to `last_iteration`), with which way: values that agree
// reach the loss otherwise (an autograd.Function's outputs all require grad when an input does,
// and none does when no input does, whatever its body captured). `symptom`: what the run has
// that eager mode lacks (+1: a gradient or loss eager mode has none of) or lacks (-1), 0 where
// neither: a parting that way is preferred, the first of either way otherwise. "" where none.
std::string requires_grad_parting(const Observations& run, const Observations& eager, const std::vector<OpSite>& sites,
                                  int last_iteration, int symptom);

// Where a hook's calls part from eager mode's in iterations up to `last_iteration`: a hook called
// more or fewer times than eager mode's, and where it was hung ("a hook is called more times than
// eager mode's, hung in forward and in a recomputation"); a gradient it scaled is then scaled as
// often. "" where every hook is called as often as eager mode's.
std::string hook_parting(const Observations& run, const Observations& eager, int last_iteration);
// Where a module's state parts from eager mode's in iterations up to `last_iteration`: a module
// updated more or fewer times ("a module is updated more times than eager mode's (# vs #)"); a
// step counter a recomputation read one step on then scaled what backward differentiated. ""
// where every module was updated as often as eager mode's.
std::string module_parting(const Observations& run, const Observations& eager, int last_iteration);

// How the two runs' recomputations part from their forwards, by their traces: the op executions
// each recomputes otherwise than its forward ran them (read, made or left other values), and
// the random ops each recomputes drawing other numbers than its forward drew.
struct RecomputationsCompared {
  enum class How {
    unknown,        // a run has no trace (another device than the CPU), or the oracle parts nowhere
    alike,          // both part at the same executions
    oracle_beyond,  // the oracle at every one the sut parts at, and at one more the sut recomputed
                    // as its forward ran it: the oracle's backward ran on values its forward did
                    // not make, where the sut's did not
    other,          // the sut at one the oracle does not (or the oracle at one the sut never ran)
  } how = How::unknown;
  int first_iteration = -1;  // the oracle's first iteration that parts
};
RecomputationsCompared compare_recomputations(const Observations& oracle, const Observations& sut);

// Whether, by `run`'s trace, the last recomputation of op `op` in iteration `iteration` read
// other values than the op's forward execution did (what a stash op recomputed keeps is then not
// what its forward kept); false where the op was not recomputed there or the run has no trace.
bool recomputed_from_other_values(const Observations& run, int op, int iteration);

}  // namespace recheck
