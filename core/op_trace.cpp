#include "core/op_trace.h"

#include <cstring>
#include <functional>
#include <unordered_map>

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

namespace {

void number(const Segment& segment, std::unordered_map<const Op*, int>& numbers) {
  for (const Op& op : segment.ops) {
    numbers.emplace(&op, static_cast<int>(numbers.size()));
    if (const Segment* body = op_body(op)) number(*body, numbers);
  }
}

}  // namespace

std::unordered_map<const Op*, int> op_numbers(const Case& c) {
  std::unordered_map<const Op*, int> numbers;
  number(c.root, numbers);
  return numbers;
}

std::vector<OpSite> op_sites(const Case& c) {
  std::vector<OpSite> sites;
  std::vector<const Op*> around;
  collect(c.root, "root", around, sites);
  return sites;
}

namespace {

// The bytes of a tensor, eight at a time (a multiply-xorshift per word). Measured against
// std::hash it did not change what the trace costs (docs/triage.md, "What it costs").
uint64_t hash_bytes(const char* data, size_t size) {
  uint64_t h = 0x9ae16a3b2f90404fULL ^ size;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    h = (h ^ word) * 0x9fb21c651e98df25ULL;
    h ^= h >> 29;
  }
  if (i < size) {
    uint64_t word = 0;
    std::memcpy(&word, data + i, size - i);
    h = (h ^ word) * 0x9fb21c651e98df25ULL;
    h ^= h >> 29;
  }
  return h;
}

uint64_t add_value(uint64_t h, const Value& value) {
  if (!is_tensor(value)) return mix(h, value.index() + 1);
  const at::Tensor& t = as_tensor(value);
  if (!t.defined()) return mix(h, 0x5eed);
  h = mix(h, static_cast<uint64_t>(t.scalar_type()));
  for (int64_t size : t.sizes()) h = mix(h, static_cast<uint64_t>(size));
  // A discarded output (no storage) is told by its empty bytes.
  if (t.numel() == 0 || !t.has_storage() || t.storage().nbytes() == 0) return h;
  if (t.is_contiguous()) {
    return mix(h, hash_bytes(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size()));
  }
  // A view: its elements in order, copied. The harness's read: not the run's allocation, nor a
  // node in its graph.
  memory::Uncounted uncounted;
  const at::NoGradGuard no_grad;
  const at::Tensor bytes = t.detach().contiguous();
  return mix(h, hash_bytes(static_cast<const char*>(bytes.data_ptr()), bytes.numel() * bytes.element_size()));
}

bool on_cpu(const Value& value) { return !is_tensor(value) || !as_tensor(value).defined() || as_tensor(value).device().is_cpu(); }

constexpr uint64_t kStart = 0x84222325cbf29ce4ULL;

}  // namespace

uint64_t fingerprint(const std::vector<Value>& values) {
  uint64_t h = kStart;
  for (const Value& value : values) {
    if (!on_cpu(value)) return 0;
    h = add_value(h, value);
  }
  return h;
}

uint64_t fingerprint(const std::vector<Value>& values, const std::vector<int>& refs) {
  uint64_t h = kStart;
  for (int ref : refs) {
    if (ref < 0 || static_cast<size_t>(ref) >= values.size()) continue;
    if (!on_cpu(values[ref])) return 0;
    h = add_value(h, values[ref]);
  }
  return h;
}

}  // namespace recheck
