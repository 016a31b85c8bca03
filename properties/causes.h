// Cause signatures: one line per failing verdict, made from what the runs observed, that names the
// kind of failure without the case's incidental shape, so that findings with one cause fall into
// one bucket (properties/buckets.h) whatever the seed or the size of the case. docs/triage.md
// says how it is made, and which different bugs it can still merge or split.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/case.h"
#include "core/interpreter.h"
#include "properties/partings.h"
#include "properties/properties.h"

namespace recheck {

// The signature of `result` (a verdict that is not a pass) on case `c`, from the runs checked:
// "PROPERTY CLASSIFICATION: EVIDENCE [@ LOCATION]". EVIDENCE is the failing verdict (the sut's,
// else the oracle's; both where a divergence differs) with numbers, shapes, iterations, leaves
// and sites abstracted away. LOCATION is where it arises: for an error, where the run parted
// before it, else the op that raised it; for flag-in-body, whether a checkpoint ran in the body
// before the reading; for a value, the first op whose fingerprints part from eager mode's
// (in forward) or from its own forward (in a recomputation), or "in backward" where every op
// agrees. `eager` may be null (a check that did not run it): values are then located by the
// recomputation alone.
std::string cause_signature(const PropertyResult& result, const Case& c, const Observations* eager,
                            const Observations& oracle, const Observations& sut);

// The same for every verdict of one case, what they share (the case's op sites, where each run
// parts) worked out once. Holds references: the case and the runs outlive it.
class CauseSignatures {
 public:
  CauseSignatures(const Case& c, const Observations* eager, const Observations& oracle, const Observations& sut);
  std::string of(const PropertyResult& result);

 private:
  const std::vector<OpSite>& sites();
  // Where `run` first parts, searched up to iteration `last_iteration` (-1: every one); kept for
  // the case's other verdicts.
  const std::string& difference(const Observations& run, bool recomputation_only, int last_iteration);

  const Case& case_;
  const Observations* eager_;
  const Observations& oracle_;
  const Observations& sut_;
  std::optional<std::vector<OpSite>> sites_;
  std::map<std::tuple<const Observations*, bool, int>, std::string> differences_;
};

// The signature of a case that ended its worker process: how it ended ("was killed by signal 11
// (Segmentation fault)", abstracted), and whether the oracle alone ends one too.
std::string crash_signature(const std::string& how_it_ended, bool oracle_too);

// `text` with numbers as '#', a list of them ("[4, 6]") as "[…]", a leaf name ("v2") as "v#" and
// an op site ("root.ops[2].body.ops[0]") as "@": the evidence of a verdict without its case's
// particulars. Identifiers keep their digits ("mat1", "AddBackward0").
std::string abstract_text(const std::string& text);

// How an op is named in a signature: its kind with what matters about it ("random (tracker)",
// "raise (when recomputing)", "checkpoint (distribute)"), and "under autocast" where the
// innermost autocast region around it is on. Nothing else of where it sits: the constructs
// around an op are mostly the case's shape, not the cause.
std::string describe_op_site(const OpSite& site);

}  // namespace recheck
