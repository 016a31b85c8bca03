// The synthetic model of the PR's memory measurement (`recheck memory`): checkpointed layers
// over residual streams whose inputs each layer stashes.
#include "properties/generator.h"

namespace recheck {

Case residual_stream_case(const ResidualStreamOptions& o) {
  Case c;
  c.note = "residual streams: " + std::to_string(o.layers) + " checkpointed layers, " + std::to_string(o.streams) +
           " streams of [" + std::to_string(o.seq) + ", " + std::to_string(o.hidden) + "]";
  c.seed = 6117;
  c.dtype = o.dtype;
  c.device = o.device;
  c.iterations = o.iterations;
  c.leaves.push_back(Leaf{{o.seq, o.hidden}, std::nullopt, true, Fill::randn});  // v0: the embedding
  for (int l = 0; l < o.layers; ++l) c.leaves.push_back(Leaf{{o.hidden, o.hidden}, std::nullopt, true, Fill::randn});
  std::vector<int> streams(static_cast<size_t>(o.streams), 0);
  int next = static_cast<int>(c.leaves.size());
  for (int l = 0; l < o.layers; ++l) {
    Checkpoint layer;
    for (int s : streams) layer.args.push_back(Ref{s});
    layer.args.push_back(Ref{1 + l});
    Segment& body = *layer.body;
    const int w = o.streams;  // body inputs: v0..v{S-1} the streams, vS the weight
    for (int k = 0; k < o.streams; ++k) body.ops.push_back(Stash{k});
    body.ops.push_back(Matmul{0, w});                    // v{S+1}
    body.ops.push_back(Unary{Unary::Fn::tanh, w + 1});   // v{S+2}
    for (int k = 0; k < o.streams; ++k) {
      body.ops.push_back(Binary{Binary::Fn::add, k, w + 2});
      body.outputs.push_back(w + 3 + k);
    }
    c.root.ops.push_back(std::move(layer));
    for (int k = 0; k < o.streams; ++k) streams[static_cast<size_t>(k)] = next + k;
    next += o.streams;
  }
  c.root.outputs = streams;
  validate(c, limits_at_ceilings());  // the size asked for, not a file's
  return c;
}

}  // namespace recheck
