#include "core/op_trace.h"

#include <functional>
#include <string_view>

#include <ATen/core/grad_mode.h>

#include "core/memory.h"

namespace recheck {

namespace {

void collect(const Segment& segment, const std::string& path, std::vector<const Op*>& around,
             std::vector<OpSite>& sites) {
  for (size_t i = 0; i < segment.ops.size(); ++i) {
    const Op& op = segment.ops[i];
    const std::string site = path + ".ops[" + std::to_string(i) + "]";
    sites.push_back({site, &op, around});
    if (const Segment* body = op_body(op)) {
      around.push_back(&op);
      collect(*body, site + ".body", around, sites);
      around.pop_back();
    }
  }
}

uint64_t mix(uint64_t h, uint64_t x) {
  // boost::hash_combine's 64-bit form.
  return h ^ (x + 0x9e3779b97f4a7c15ULL + (h << 12) + (h >> 4));
}

}  // namespace

std::vector<OpSite> op_sites(const Case& c) {
  std::vector<OpSite> sites;
  std::vector<const Op*> around;
  collect(c.root, "root", around, sites);
  return sites;
}

uint64_t fingerprint(const std::vector<Value>& values) {
  uint64_t h = 0x84222325cbf29ce4ULL;
  for (const Value& value : values) {
    if (!is_tensor(value)) {
      h = mix(h, value.index() + 1);
      continue;
    }
    const at::Tensor& t = as_tensor(value);
    if (!t.defined()) {
      h = mix(h, 0x5eed);
      continue;
    }
    if (!t.device().is_cpu()) return 0;
    h = mix(h, static_cast<uint64_t>(t.scalar_type()));
    for (int64_t size : t.sizes()) h = mix(h, static_cast<uint64_t>(size));
    // A discarded output (no storage) is told by its empty bytes.
    if (t.numel() == 0 || !t.has_storage() || t.storage().nbytes() == 0) continue;
    // The harness's read: not the run's allocation, nor a node in its graph.
    memory::Uncounted uncounted;
    const at::NoGradGuard no_grad;
    const at::Tensor bytes = t.detach().contiguous();
    const std::string_view view(static_cast<const char*>(bytes.data_ptr()), bytes.numel() * bytes.element_size());
    h = mix(h, std::hash<std::string_view>{}(view));
  }
  return h;
}

}  // namespace recheck
