#include "core/op_trace.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>
#include <unordered_map>

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

// The bytes of a tensor: eight words at a time in eight independent lanes (a multiply-xorshift
// per word), so that the multiplies overlap; the lanes and the tail are folded at the end. On a
// CPU with AVX-512 the lanes are one vector (about three times the bytes per second, most of
// triage's cost): the clone is picked when the program loads, and both give the same hash.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "default")))
#endif
uint64_t hash_bytes(const char* data, size_t size) {
  constexpr uint64_t kMultiplier = 0x9fb21c651e98df25ULL;
  const auto step = [](uint64_t h, uint64_t word) {
    h = (h ^ word) * kMultiplier;
    return h ^ (h >> 29);
  };
  constexpr int kLanes = 8;
  uint64_t lanes[kLanes];
  for (int lane = 0; lane < kLanes; ++lane) lanes[lane] = (0x9ae16a3b2f90404fULL ^ size) + lane * 0xc3a5c85c97cb3127ULL;
  size_t i = 0;
  for (; i + 8 * kLanes <= size; i += 8 * kLanes) {
    uint64_t words[kLanes];
    std::memcpy(words, data + i, 8 * kLanes);
    for (int lane = 0; lane < kLanes; ++lane) lanes[lane] = step(lanes[lane], words[lane]);
  }
  uint64_t h = lanes[0];
  for (int lane = 1; lane < kLanes; ++lane) h = step(h, lanes[lane]);
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    h = step(h, word);
  }
  if (i < size) {
    uint64_t word = 0;
    std::memcpy(&word, data + i, size - i);
    h = step(h, word);
  }
  return h;
}

// Copies a strided tensor's elements, in order, to `out`: runs of the innermost dimension at a
// time when it is dense.
void gather(const at::Tensor& t, char* out) {
  const int64_t element = t.element_size();
  const auto* base = static_cast<const char*>(t.data_ptr());
  const int64_t dims = t.dim();
  if (dims == 0) {
    std::memcpy(out, base, element);
    return;
  }
  const at::IntArrayRef sizes = t.sizes();
  const at::IntArrayRef strides = t.strides();
  const int64_t inner = sizes[dims - 1];
  const int64_t inner_stride = strides[dims - 1];
  std::vector<int64_t> index(dims - 1, 0);
  while (true) {
    int64_t offset = 0;
    for (int64_t d = 0; d + 1 < dims; ++d) offset += index[d] * strides[d];
    const char* row = base + offset * element;
    if (inner_stride == 1) {
      std::memcpy(out, row, inner * element);
      out += inner * element;
    } else {
      for (int64_t k = 0; k < inner; ++k, out += element) std::memcpy(out, row + k * inner_stride * element, element);
    }
    int64_t d = dims - 2;
    for (; d >= 0; --d) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

uint64_t shape_of(const at::Tensor& t) {
  uint64_t h = static_cast<uint64_t>(t.scalar_type());
  for (int64_t size : t.sizes()) h = mix(h, static_cast<uint64_t>(size));
  return h;
}

// A defined tensor's print, `h` its shape_of: its dtype, shape and bytes.
uint64_t print_tensor(const at::Tensor& t, uint64_t h) {
  // A discarded output (no storage) is told by its empty bytes.
  if (t.numel() == 0 || !t.has_storage() || t.storage().nbytes() == 0) return h;
  if (t.is_contiguous()) {
    return mix(h, hash_bytes(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size()));
  }
  // A view: its elements in order, gathered into a buffer this thread keeps (a copy through ATen
  // would cost a dispatch and an allocation per view, several times the hash).
  thread_local std::vector<char> gathered;
  gathered.resize(static_cast<size_t>(t.numel() * t.element_size()));
  gather(t, gathered.data());
  return mix(h, hash_bytes(gathered.data(), gathered.size()));
}

// One value's print: its kind, or a tensor's dtype, shape and bytes.
uint64_t print_value(const Value& value) {
  if (!is_tensor(value)) return mix(0, value.index() + 1);
  const at::Tensor& t = as_tensor(value);
  if (!t.defined()) return mix(0, 0x5eed);
  return print_tensor(t, shape_of(t));
}

bool on_cpu(const Value& value) { return !is_tensor(value) || !as_tensor(value).defined() || as_tensor(value).device().is_cpu(); }

constexpr uint64_t kStart = 0x84222325cbf29ce4ULL;

const void* data_of(const at::Tensor& t) { return t.has_storage() ? t.storage().data() : nullptr; }

}  // namespace

uint64_t fingerprint(const std::vector<Value>& values) {
  uint64_t h = kStart;
  for (const Value& value : values) {
    if (!on_cpu(value)) return 0;
    h = mix(h, print_value(value));
  }
  return h;
}

uint64_t ValuePrints::add(uint64_t h, size_t index, const Value& value) {
  if (!is_tensor(value) || !as_tensor(value).defined() || as_tensor(value).is_inference()) return mix(h, print_value(value));
  const at::Tensor& t = as_tensor(value);
  if (entries_.size() <= index) entries_.resize(std::max(index + 1, 2 * entries_.size()));
  Entry& entry = entries_[index];
  const void* data = data_of(t);
  const int64_t version = t._version();
  const uint64_t dtype_and_shape = shape_of(t);
  const uint64_t shape = mix(dtype_and_shape, static_cast<uint64_t>(t.storage_offset()));
  if (entry.impl != t.unsafeGetTensorImpl() || entry.data != data || entry.version != version || entry.shape != shape) {
    entry = {t.unsafeGetTensorImpl(), data, version, shape, print_tensor(t, dtype_and_shape)};
  }
  return mix(h, entry.print);
}

uint64_t ValuePrints::of(const std::vector<Value>& values, const std::vector<int>& refs) {
  uint64_t h = kStart;
  for (int ref : refs) {
    if (ref < 0 || static_cast<size_t>(ref) >= values.size()) continue;
    if (!on_cpu(values[ref])) return 0;
    h = add(h, ref, values[ref]);
  }
  return h;
}

uint64_t ValuePrints::of_from(const std::vector<Value>& values, size_t first) {
  uint64_t h = kStart;
  for (size_t i = first; i < values.size(); ++i) {
    if (!on_cpu(values[i])) return 0;
    h = add(h, i, values[i]);
  }
  return h;
}

uint64_t ValuePrints::of_outputs(const std::vector<Value>& outputs, const std::vector<int>& refs) {
  uint64_t h = kStart;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!on_cpu(outputs[k])) return 0;
    h = k < refs.size() && refs[k] >= 0 ? add(h, refs[k], outputs[k]) : mix(h, print_value(outputs[k]));
  }
  return h;
}

namespace {

// Whether an op may change a value it reads (so that what it read is hashed again once it
// returned): one overload per op, no catch-all, so that a new op says.
struct MayWrite {
  bool operator()(const InPlace&) const { return true; }
  bool operator()(const Discard&) const { return true; }  // the outputs it frees
  // A body may update its inputs in place.
  bool operator()(const Checkpoint&) const { return true; }
  bool operator()(const Fork&) const { return true; }
  bool operator()(const Autocast&) const { return true; }
  bool operator()(const Unary&) const { return false; }
  bool operator()(const Binary&) const { return false; }
  bool operator()(const Matmul&) const { return false; }
  bool operator()(const View&) const { return false; }
  bool operator()(const Reduce&) const { return false; }
  bool operator()(const Argmax&) const { return false; }
  bool operator()(const Random&) const { return false; }
  bool operator()(const Stash&) const { return false; }
  bool operator()(const Raise&) const { return false; }
  bool operator()(const Capture&) const { return false; }
  bool operator()(const Hook&) const { return false; }
  bool operator()(const ModuleState&) const { return false; }
};

}  // namespace

TraceIndex::TraceIndex(const Case& c) : numbers(op_numbers(c)) {
  refs.resize(numbers.size());
  may_write.resize(numbers.size());
  for (const auto& [op, number] : numbers) {
    refs[number] = op_inputs(*op);
    may_write[number] = std::visit(MayWrite{}, *op);
    if (const auto* checkpoint = std::get_if<Checkpoint>(op)) checkpoints[checkpoint] = number;
  }
}

TraceRecorder::TraceRecorder(const TraceIndex* index, std::vector<OpExecution>& trace) : index_(index), trace_(trace) {}

int TraceRecorder::number(const Op& op) const {
  if (index_ == nullptr) return -1;
  const auto found = index_->numbers.find(&op);
  return found == index_->numbers.end() ? -1 : found->second;
}

size_t TraceRecorder::began(int number, int iteration, bool recomputation, bool body, uint64_t inputs) {
  OpExecution e;
  e.op = number;
  e.iteration = iteration;
  e.recomputation = recomputation;
  e.body = body;
  e.inputs = inputs;
  e.started = moment_++;
  trace_.push_back(e);
  return trace_.size() - 1;
}

void TraceRecorder::returned(size_t at, uint64_t outputs, uint64_t inputs_after) {
  OpExecution& e = trace_[at];
  e.outputs = outputs;
  e.inputs_after = inputs_after;
  e.ended = moment_++;
}

size_t TraceRecorder::op_began(const Op& op, ValuePrints& prints, const std::vector<Value>& values, int iteration,
                               bool recomputation) {
  const int n = number(op);
  if (n < 0) return kOff;
  return began(n, iteration, recomputation, false, prints.of(values, index_->refs[n]));
}

void TraceRecorder::op_returned(size_t at, ValuePrints& prints, const std::vector<Value>& values, size_t first_output,
                                uint64_t drawn) {
  if (at == kOff) return;
  const int n = trace_[at].op;
  returned(at, prints.of_from(values, first_output), index_->may_write[n] ? prints.of(values, index_->refs[n]) : trace_[at].inputs);
  trace_[at].drawn = drawn;
  uint32_t requires_grad = 0;
  for (size_t k = first_output; k < values.size() && k - first_output < 32; ++k) {
    if (is_tensor(values[k]) && as_tensor(values[k]).defined() && as_tensor(values[k]).requires_grad()) {
      requires_grad |= uint32_t{1} << (k - first_output);
    }
  }
  trace_[at].requires_grad = requires_grad;
}

size_t TraceRecorder::body_began(const Checkpoint& checkpoint, ValuePrints& prints, const std::vector<Value>& inputs,
                                 int iteration, bool recomputation) {
  if (index_ == nullptr) return kOff;
  const auto found = index_->checkpoints.find(&checkpoint);
  if (found == index_->checkpoints.end()) return kOff;
  return began(found->second, iteration, recomputation, true, prints.of_from(inputs, 0));
}

void TraceRecorder::body_returned(size_t at, ValuePrints& prints, const std::vector<Value>& inputs,
                                  const std::vector<Value>& outputs, const std::vector<int>& output_refs) {
  if (at == kOff) return;
  returned(at, prints.of_outputs(outputs, output_refs), prints.of_from(inputs, 0));
}

}  // namespace recheck
