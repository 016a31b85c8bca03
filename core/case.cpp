#include "core/case.h"

#include <algorithm>
#include <sstream>

#include "core/case_detail.h"

namespace recheck {

using namespace case_detail;

namespace {

void stats_of(const Segment& segment, int depth, CaseStats& s) {
  s.max_depth = std::max(s.max_depth, depth);
  for (const Op& op : segment.ops) {
    ++s.ops;
    if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) {
      ++s.checkpoints;
      stats_of(*checkpoint->body, depth + 1, s);
    } else if (const auto* fork = std::get_if<Fork>(&op)) {
      stats_of(*fork->body, depth, s);  // depth counts checkpoints only
    } else if (const auto* autocast = std::get_if<Autocast>(&op)) {
      stats_of(*autocast->body, depth, s);
    }
  }
}

}  // namespace

const char* op_name(const Op& op) {
  struct Visit {
    const char* operator()(const Unary&) const { return "unary"; }
    const char* operator()(const Binary&) const { return "binary"; }
    const char* operator()(const Matmul&) const { return "matmul"; }
    const char* operator()(const View&) const { return "view"; }
    const char* operator()(const InPlace&) const { return "inplace"; }
    const char* operator()(const Reduce&) const { return "reduce"; }
    const char* operator()(const Argmax&) const { return "argmax"; }
    const char* operator()(const Random&) const { return "random"; }
    const char* operator()(const Stash&) const { return "stash"; }
    const char* operator()(const Raise&) const { return "raise"; }
    const char* operator()(const Checkpoint&) const { return "checkpoint"; }
    const char* operator()(const Fork&) const { return "fork"; }
    const char* operator()(const Autocast&) const { return "autocast"; }
    const char* operator()(const Discard&) const { return "discard"; }
    const char* operator()(const Capture&) const { return "capture"; }
    const char* operator()(const Hook&) const { return "hook"; }
    const char* operator()(const ModuleState&) const { return "state"; }
  };
  return std::visit(Visit{}, op);
}

namespace {
struct OpInputs {
  std::vector<int> operator()(const Binary& o) const { return {o.a, o.b}; }
  std::vector<int> operator()(const Matmul& o) const { return {o.a, o.b}; }
  std::vector<int> operator()(const Checkpoint& o) const {
    std::vector<int> refs;
    for (const Arg& arg : o.args) {
      if (const auto* ref = std::get_if<Ref>(&arg)) refs.push_back(ref->value);
    }
    return refs;
  }
  std::vector<int> operator()(const Fork& o) const { return o.args; }
  std::vector<int> operator()(const Autocast& o) const { return o.args; }
  // One overload per op, no catch-all: a new op says what it reads.
  std::vector<int> operator()(const Unary& o) const { return {o.x}; }
  std::vector<int> operator()(const View& o) const { return {o.x}; }
  std::vector<int> operator()(const InPlace& o) const { return {o.x}; }
  std::vector<int> operator()(const Reduce& o) const { return {o.x}; }
  std::vector<int> operator()(const Argmax& o) const { return {o.x}; }
  std::vector<int> operator()(const Random& o) const { return {o.x}; }
  std::vector<int> operator()(const Stash& o) const { return {o.x}; }
  std::vector<int> operator()(const Raise& o) const { return {o.x}; }
  std::vector<int> operator()(const Hook& o) const { return {o.x}; }
  std::vector<int> operator()(const ModuleState& o) const { return {o.x}; }
  std::vector<int> operator()(const Discard& o) const {
    std::vector<int> refs = o.checkpoints;
    refs.push_back(o.hook);
    return refs;
  }
  // A root leaf, not a value of its segment.
  std::vector<int> operator()(const Capture&) const { return {}; }
};
}  // namespace

std::vector<int> op_inputs(const Op& op) { return std::visit(OpInputs{}, op); }

int op_output_count(const Op& op) {
  if (std::holds_alternative<Stash>(op) || std::holds_alternative<Discard>(op)) return 0;
  if (const Segment* body = op_body(op)) return static_cast<int>(body->outputs.size());
  return 1;
}

const Segment* op_body(const Op& op) {
  if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) return &*checkpoint->body;
  if (const auto* fork = std::get_if<Fork>(&op)) return &*fork->body;
  if (const auto* autocast = std::get_if<Autocast>(&op)) return &*autocast->body;
  return nullptr;
}

bool any_op(const Segment& segment, const std::function<bool(const Op&)>& predicate) {
  for (const Op& op : segment.ops) {
    if (predicate(op)) return true;
    if (const Segment* body = op_body(op); body != nullptr && any_op(*body, predicate)) return true;
  }
  return false;
}

int segment_value_count(const Segment& segment, int input_count) {
  int count = input_count;
  for (const Op& op : segment.ops) count += op_output_count(op);
  return count;
}

const char* to_string(DType dtype) { return name_of(kDTypes, dtype); }
const char* to_string(RngSource source) { return name_of(kSources, source); }
const char* to_string(Random::Fn fn) { return name_of(kRandomFns, fn); }
const char* to_string(Hook::Kind kind) { return name_of(kHookKinds, kind); }
const char* to_string(Backward::Call call) { return name_of(kBackwardCalls, call); }
const char* to_string(ModuleState::Fn fn) { return name_of(kModuleStateFns, fn); }

DType leaf_dtype(const Case& c, const Leaf& leaf) { return leaf.dtype.value_or(c.dtype); }

at::ScalarType scalar_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return at::kFloat;
    case DType::float64: return at::kDouble;
    case DType::bfloat16: return at::kBFloat16;
    case DType::int64: return at::kLong;
    case DType::boolean: return at::kBool;
  }
  return at::kFloat;
}

CaseStats stats(const Case& c) {
  CaseStats s;
  stats_of(c.root, 0, s);
  return s;
}

namespace {
struct LimitField {
  const char* name;
  int64_t Limits::*field;
  int64_t ceiling;  // the most `--limits` may set it to
};
// depth: the readers, the interpreter and nlohmann::json's copy and dump recurse once per level
// (a checkpoint nests four JSON levels), and 256 levels stay far inside an 8 MB stack under
// AddressSanitizer too; a case ten thousand deep crashed recheck before the ceiling. The others
// keep every count the readers add up inside int64_t and the file inside memory.
constexpr LimitField kLimitFields[] = {
    {"file_bytes", &Limits::file_bytes, int64_t{1} << 34},
    {"ops", &Limits::ops, int64_t{100000000}},
    {"depth", &Limits::depth, 256},
    {"leaf_elements", &Limits::leaf_elements, int64_t{1} << 40},
    {"leaf_bytes", &Limits::leaf_bytes, int64_t{1} << 44},
    {"value_bytes", &Limits::value_bytes, int64_t{1} << 50},
    {"iterations", &Limits::iterations, 1000000}};
}  // namespace

Limits limits_at_ceilings() {
  Limits limits;
  for (const LimitField& f : kLimitFields) limits.*(f.field) = f.ceiling;
  return limits;
}

Limits parse_limits(const std::string& text, Limits base) {
  std::string names;
  for (const LimitField& f : kLimitFields) names += (names.empty() ? "" : ", ") + std::string(f.name);
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const LimitField* field = nullptr;
    for (const LimitField& f : kLimitFields) {
      if (name == f.name) field = &f;
    }
    if (!field) throw CaseError("--limits: unknown limit '" + name + "' (known: " + names + ")");
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    try {
      size_t used = 0;
      const long long parsed = std::stoll(value, &used);
      if (used != value.size() || parsed < 1 || parsed > field->ceiling) throw std::invalid_argument(value);
      base.*(field->field) = parsed;
    } catch (const std::exception&) {
      throw CaseError("--limits: " + name + " needs a whole number from 1 to " + std::to_string(field->ceiling) +
                      ", got '" + value + "'");
    }
  }
  return base;
}

std::string describe(const Limits& limits) {
  std::string text;
  for (const LimitField& f : kLimitFields) {
    text += (text.empty() ? "" : ",") + std::string(f.name) + "=" + std::to_string(limits.*(f.field));
  }
  return text;
}

}  // namespace recheck
