// Who holds a tensor the run has let go of: the attribution of a recomputation input still alive
// after an iteration, for recheck memory's report and a memory finding's evidence. The Python
// counterpart for Megatron's own model is tools/model.d/holders.py.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace recheck {

// What keeps `target` alive among what a case keeps: each stash (site, tensor kept) directly, as
// the base of a view it keeps, or through the graph behind the tensor it keeps (an
// AccumulateGrad node holds its variable, and a graph lives as long as a tensor it made). The
// first found, as "the stash root.ops[1].body.ops[0]"; when nothing the case keeps reaches it,
// the implementation under test holds it, and the answer says so.
std::string who_holds(const at::Tensor& target, const std::vector<std::pair<std::string, at::Tensor>>& stashes);

}  // namespace recheck
