// Cases to and from their JSON form (version 1): every error names the field path.
#include "core/case.h"

#include <array>
#include <cmath>
#include <optional>
#include <utility>
#include <variant>
#include <set>

#include <nlohmann/json.hpp>

#include "core/case_detail.h"

namespace recheck {

using nlohmann::json;
using namespace case_detail;

namespace {

// Reads one JSON node, knowing where it sits, so every error names the field path. The path is
// put together only for an error: a reader is a node and a link to its parent, and a file of
// millions of array items must not cost a string each (3.5 GB for a 64 MiB file of outputs).
// A reader must not outlive its parent: loop over an array's items with each().
class Reader {
 public:
  Reader(const json& node, const char* root) : node_(node), root_(root) {}

  [[noreturn]] void fail(const std::string& expected) const {
    std::string found = node_.is_null() ? "null" : node_.dump(-1, ' ', false, json::error_handler_t::replace);
    if (found.size() > 60) found = found.substr(0, 57) + "...";
    throw CaseError(path() + ": expected " + expected + ", found " + found);
  }

  std::string path() const {
    if (parent_ == nullptr) return root_;
    if (key_ != nullptr) return parent_->path() + "." + key_;
    return parent_->path() + "[" + std::to_string(index_) + "]";
  }
  const json& node() const { return node_; }

  Reader field(const char* key) const {
    object();
    auto it = node_.find(key);
    if (it == node_.end()) throw CaseError(path() + ": missing field \"" + key + "\"");
    return Reader(*it, this, key, 0);
  }
  bool has(const char* key) const { return object().contains(key); }

  // Refuses keys outside `known`: a misspelt field is an error, not a default.
  void only(std::initializer_list<const char*> known) const {
    for (const auto& item : object().items()) {
      bool ok = false;
      for (const char* key : known) ok = ok || item.key() == key;
      if (!ok) throw CaseError(path() + ": unknown field \"" + item.key() + "\"");
    }
  }

  int64_t integer(int64_t min, int64_t max) const {
    if (!node_.is_number_integer()) fail("an integer");
    if (node_.is_number_unsigned() && node_.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail("an integer from " + std::to_string(min) + " to " + std::to_string(max));
    }
    const int64_t value = node_.get<int64_t>();
    if (value < min || value > max) {
      fail("an integer from " + std::to_string(min) + " to " + std::to_string(max));
    }
    return value;
  }
  uint64_t unsigned_integer() const {
    if (!node_.is_number_integer() || (node_.is_number_integer() && !node_.is_number_unsigned() && node_.get<int64_t>() < 0)) {
      fail("a non-negative integer");
    }
    return node_.get<uint64_t>();
  }
  double number() const {
    if (!node_.is_number()) fail("a number");
    const double value = node_.get<double>();
    if (!std::isfinite(value)) fail("a finite number");
    return value;
  }
  bool boolean() const {
    if (!node_.is_boolean()) fail("true or false");
    return node_.get<bool>();
  }
  std::string string() const {
    if (!node_.is_string()) fail("a string");
    return node_.get<std::string>();
  }
  template <typename E, size_t N>
  E choice(const Names<E> (&table)[N]) const {
    if (node_.is_string()) {
      const std::string text = node_.get<std::string>();
      for (const auto& entry : table) {
        if (text == entry.name) return entry.value;
      }
    }
    fail(one_of(table));
  }
  // Calls visit(name, value) for each field of an object, in the order of their names.
  template <typename Visit>
  void members(Visit&& visit) const {
    for (auto it = object().begin(); it != object().end(); ++it) visit(it.key(), Reader(*it, this, it.key().c_str(), 0));
  }
  // The number of items of an array.
  size_t size() const {
    if (!node_.is_array()) fail("an array");
    return node_.size();
  }
  // Calls visit(item) for each item of an array, in order.
  template <typename Visit>
  void each(Visit&& visit) const {
    const size_t n = size();
    for (size_t i = 0; i < n; ++i) visit(Reader(node_[i], this, nullptr, i));
  }

 private:
  Reader(const json& node, const Reader* parent, const char* key, size_t index)
      : node_(node), parent_(parent), key_(key), index_(index) {}
  const json& object() const {
    if (!node_.is_object()) fail("an object");
    return node_;
  }
  const json& node_;
  const Reader* parent_ = nullptr;
  const char* key_ = nullptr;  // a field of an object; else an item of an array
  size_t index_ = 0;
  const char* root_ = nullptr;
};

constexpr int kMaxValueNumber = 1 << 20;

int value_ref(const Reader& r) { return static_cast<int>(r.integer(0, kMaxValueNumber)); }

struct OpToJson {
  json& j;
  void operator()(const Unary& op) { j["fn"] = name_of(kUnaryFns, op.fn); j["x"] = op.x; }
  void operator()(const Binary& op) { j["fn"] = name_of(kBinaryFns, op.fn); j["a"] = op.a; j["b"] = op.b; }
  void operator()(const Matmul& op) { j["a"] = op.a; j["b"] = op.b; }
  void operator()(const View& op) { j["fn"] = name_of(kViewFns, op.fn); j["x"] = op.x; }
  void operator()(const InPlace& op) { j["fn"] = name_of(kInPlaceFns, op.fn); j["scalar"] = op.scalar; j["x"] = op.x; }
  void operator()(const Reduce& op) { j["fn"] = name_of(kReduceFns, op.fn); j["x"] = op.x; }
  void operator()(const Argmax& op) { j["x"] = op.x; }
  void operator()(const Random& op) {
    j["fn"] = name_of(kRandomFns, op.fn);
    j["source"] = name_of(kSources, op.source);
    if (op.source == RngSource::tracker) j["tracker_state"] = op.tracker_state;
    j["p"] = op.p;
    j["x"] = op.x;
  }
  void operator()(const Stash& op) { j["x"] = op.x; }
  void operator()(const Raise& op) {
    j["x"] = op.x;
    if (op.when != Raise::When::always) j["when"] = name_of(kRaiseWhens, op.when);
  }
  void operator()(const Checkpoint& op);
  void operator()(const Fork& op);
  void operator()(const Autocast& op);
  void operator()(const Discard& op) {
    j["checkpoints"] = op.checkpoints;
    j["hook"] = op.hook;
  }
  void operator()(const Capture& op) { j["leaf"] = op.leaf; }
  void operator()(const Hook& op) {
    j["kind"] = name_of(kHookKinds, op.kind);
    if (op.scale != 1.0) j["scale"] = op.scale;
    j["x"] = op.x;
  }
  void operator()(const ModuleState& op) {
    j["fn"] = name_of(kModuleStateFns, op.fn);
    j["module"] = op.module;
    j["x"] = op.x;
  }
};

json segment_to_json(const Segment& segment);

json arg_to_json(const Arg& arg) {
  struct Visit {
    json operator()(const Ref& r) const { return {{"ref", r.value}}; }
    json operator()(None) const { return nullptr; }
    json operator()(int64_t v) const { return {{"int", v}}; }
    json operator()(double v) const { return {{"float", v}}; }
    json operator()(bool v) const { return {{"bool", v}}; }
    json operator()(const std::string& v) const { return {{"str", v}}; }
  };
  return std::visit(Visit{}, arg);
}

void OpToJson::operator()(const Checkpoint& op) {
  j["distribute"] = op.distribute;
  // Written only when set: every other checkpoint reads as before.
  if (op.without_output) j["without_output"] = true;
  // Written only when there are any: a function that takes none (Megatron's) reads as before.
  if (!op.options.empty()) j["options"] = op.options;
  j["args"] = json::array();
  for (const Arg& arg : op.args) j["args"].push_back(arg_to_json(arg));
  j["body"] = segment_to_json(*op.body);
}

void OpToJson::operator()(const Fork& op) {
  j["tracker_state"] = op.tracker_state;
  j["args"] = op.args;
  j["body"] = segment_to_json(*op.body);
}

void OpToJson::operator()(const Autocast& op) {
  j["enabled"] = op.enabled;
  j["device_type"] = op.device_type;
  j["dtype"] = name_of(kPrecisions, op.dtype);
  j["args"] = op.args;
  j["body"] = segment_to_json(*op.body);
}

json segment_to_json(const Segment& segment) {
  json ops = json::array();
  for (const Op& op : segment.ops) {
    json j = {{"op", op_name(op)}};
    std::visit(OpToJson{j}, op);
    ops.push_back(std::move(j));
  }
  return {{"ops", std::move(ops)}, {"outputs", segment.outputs}};
}

// What reading one case has counted so far, against its limits.
struct ParseContext {
  const Limits& limits;
  int64_t ops = 0;
};

Segment segment_from_json(const Reader& r, ParseContext& context, int depth);

Arg arg_from_json(const Reader& r) {
  if (r.node().is_null()) return None{};
  if (!r.node().is_object() || r.node().size() != 1) {
    r.fail("null or an object with one of \"ref\", \"int\", \"float\", \"bool\", \"str\"");
  }
  if (r.has("ref")) return Ref{value_ref(r.field("ref"))};
  if (r.has("int")) return r.field("int").integer(INT64_MIN, INT64_MAX);
  if (r.has("float")) return r.field("float").number();
  if (r.has("bool")) return r.field("bool").boolean();
  if (r.has("str")) return r.field("str").string();
  r.fail("null or an object with one of \"ref\", \"int\", \"float\", \"bool\", \"str\"");
}

// Reads an op of the kind its "op" field names: one overload per op, no catch-all, so that a
// new op does not build until it is read.
struct OpFromJson {
  const Reader& r;
  ParseContext& context;
  int depth;

  int x() const { return value_ref(r.field("x")); }
  int module() const { return static_cast<int>(r.field("module").integer(0, kMaxModules - 1)); }
  std::vector<int> refs(const char* field) const {
    std::vector<int> out;
    r.field(field).each([&](const Reader& ref) { out.push_back(value_ref(ref)); });
    return out;
  }

  Unary operator()(std::in_place_type_t<Unary>) const {
    r.only({"op", "fn", "x"});
    return Unary{r.field("fn").choice(kUnaryFns), x()};
  }
  Binary operator()(std::in_place_type_t<Binary>) const {
    r.only({"op", "fn", "a", "b"});
    return Binary{r.field("fn").choice(kBinaryFns), value_ref(r.field("a")), value_ref(r.field("b"))};
  }
  Matmul operator()(std::in_place_type_t<Matmul>) const {
    r.only({"op", "a", "b"});
    return Matmul{value_ref(r.field("a")), value_ref(r.field("b"))};
  }
  View operator()(std::in_place_type_t<View>) const {
    r.only({"op", "fn", "x"});
    return View{r.field("fn").choice(kViewFns), x()};
  }
  InPlace operator()(std::in_place_type_t<InPlace>) const {
    r.only({"op", "fn", "scalar", "x"});
    return InPlace{r.field("fn").choice(kInPlaceFns), r.field("scalar").number(), x()};
  }
  Reduce operator()(std::in_place_type_t<Reduce>) const {
    r.only({"op", "fn", "x"});
    return Reduce{r.field("fn").choice(kReduceFns), x()};
  }
  Argmax operator()(std::in_place_type_t<Argmax>) const {
    r.only({"op", "x"});
    return Argmax{x()};
  }
  Random operator()(std::in_place_type_t<Random>) const {
    r.only({"op", "fn", "source", "tracker_state", "p", "x"});
    Random op;
    op.fn = r.field("fn").choice(kRandomFns);
    op.source = r.field("source").choice(kSources);
    if (op.source == RngSource::tracker) op.tracker_state = r.field("tracker_state").string();
    else if (r.has("tracker_state")) throw CaseError(r.path() + ".tracker_state: only allowed with \"source\": \"tracker\"");
    op.p = r.field("p").number();
    if (const std::string expected = random_p_expected(op); !expected.empty()) r.field("p").fail(expected);
    op.x = x();
    return op;
  }
  Stash operator()(std::in_place_type_t<Stash>) const {
    r.only({"op", "x"});
    return Stash{x()};
  }
  Raise operator()(std::in_place_type_t<Raise>) const {
    r.only({"op", "x", "when"});
    Raise op{x()};
    if (r.has("when")) op.when = r.field("when").choice(kRaiseWhens);
    return op;
  }
  Fork operator()(std::in_place_type_t<Fork>) const {
    r.only({"op", "tracker_state", "args", "body"});
    Fork op;
    op.tracker_state = r.field("tracker_state").string();
    op.args = refs("args");
    op.body = segment_from_json(r.field("body"), context, depth + 1);
    return op;
  }
  Autocast operator()(std::in_place_type_t<Autocast>) const {
    r.only({"op", "enabled", "device_type", "dtype", "args", "body"});
    Autocast op;
    op.enabled = r.field("enabled").boolean();
    op.device_type = r.field("device_type").string();
    if (op.device_type != "cpu" && op.device_type != "cuda") r.field("device_type").fail("\"cpu\" or \"cuda\"");
    op.dtype = r.field("dtype").choice(kPrecisions);
    op.args = refs("args");
    op.body = segment_from_json(r.field("body"), context, depth + 1);
    return op;
  }
  Checkpoint operator()(std::in_place_type_t<Checkpoint>) const {
    r.only({"op", "distribute", "without_output", "options", "args", "body"});
    Checkpoint op;
    op.distribute = r.field("distribute").boolean();
    if (r.has("without_output")) op.without_output = r.field("without_output").boolean();
    if (r.has("options")) {
      r.field("options").members([&](const std::string& name, const Reader& value) {
        if (name.empty()) throw CaseError(r.path() + ".options: an option's name is empty");
        op.options[name] = value.string();
      });
    }
    r.field("args").each([&](const Reader& arg) { op.args.push_back(arg_from_json(arg)); });
    op.body = segment_from_json(r.field("body"), context, depth + 1);
    return op;
  }
  Discard operator()(std::in_place_type_t<Discard>) const {
    r.only({"op", "checkpoints", "hook"});
    Discard op;
    op.checkpoints = refs("checkpoints");
    if (op.checkpoints.empty()) r.field("checkpoints").fail("the first output of at least one checkpoint without output");
    op.hook = value_ref(r.field("hook"));
    return op;
  }
  Capture operator()(std::in_place_type_t<Capture>) const {
    r.only({"op", "leaf"});
    return Capture{value_ref(r.field("leaf"))};
  }
  Hook operator()(std::in_place_type_t<Hook>) const {
    r.only({"op", "kind", "scale", "x"});
    Hook op;
    op.kind = r.field("kind").choice(kHookKinds);
    if (r.has("scale")) op.scale = r.field("scale").number();
    op.x = x();
    return op;
  }
  ModuleState operator()(std::in_place_type_t<ModuleState>) const {
    r.only({"op", "fn", "module", "x"});
    ModuleState op;
    op.fn = r.field("fn").choice(kModuleStateFns);
    op.module = module();
    op.x = x();
    return op;
  }
};

// Each op's name (op_name), in Op's order.
template <size_t... I>
std::array<std::string, sizeof...(I)> op_names(std::index_sequence<I...>) {
  return {op_name(Op(std::in_place_index<I>))...};
}
const auto& all_op_names() {
  static const auto names = op_names(std::make_index_sequence<std::variant_size_v<Op>>{});
  return names;
}

template <size_t... I>
std::optional<Op> read_op_of_kind(const std::string& kind, const OpFromJson& read, std::index_sequence<I...>) {
  std::optional<Op> op;
  ((!op && kind == all_op_names()[I] ? (void)op.emplace(std::in_place_index<I>, read(std::in_place_type<std::variant_alternative_t<I, Op>>))
                                     : void()),
   ...);
  return op;
}

Op op_from_json(const Reader& r, ParseContext& context, int depth) {
  const Reader kind_reader = r.field("op");
  const std::string kind = kind_reader.node().is_string() ? kind_reader.string() : "";
  std::optional<Op> op = read_op_of_kind(kind, OpFromJson{r, context, depth}, std::make_index_sequence<std::variant_size_v<Op>>{});
  if (op) return std::move(*op);
  std::string expected = "one of ";
  for (const std::string& name : all_op_names()) expected += (&name == &all_op_names().front() ? "\"" : ", \"") + name + "\"";
  kind_reader.fail(expected);
}

Segment segment_from_json(const Reader& r, ParseContext& context, int depth) {
  // Checked before reading further, so that deep nesting cannot exhaust the stack.
  if (depth > context.limits.depth) {
    throw CaseError(r.path() + ": " + over_limit("nesting depth", depth, "depth", context.limits.depth));
  }
  r.only({"ops", "outputs"});
  Segment segment;
  r.field("ops").each([&](const Reader& op) {
    if (++context.ops > context.limits.ops) {
      throw CaseError(op.path() + ": " + over_limit("op count", context.ops, "ops", context.limits.ops));
    }
    segment.ops.push_back(op_from_json(op, context, depth));
  });
  r.field("outputs").each([&](const Reader& out) { segment.outputs.push_back(value_ref(out)); });
  return segment;
}

}  // namespace

json to_json(const Case& c) {
  json leaves = json::array();
  for (const Leaf& leaf : c.leaves) {
    json j = {{"shape", leaf.shape}, {"requires_grad", leaf.requires_grad}, {"fill", name_of(kFills, leaf.fill)}};
    if (leaf.dtype) j["dtype"] = to_string(*leaf.dtype);
    leaves.push_back(std::move(j));
  }
  json j = {{"format", "recheck-case"},
          {"version", kCaseFormatVersion},
          {"seed", c.seed},
          {"dtype", to_string(c.dtype)},
          {"device", c.device},
          {"iterations", c.iterations},
          {"leaves", std::move(leaves)},
          {"root", segment_to_json(c.root)}};
  if (c.continue_after_error) j["continue_after_error"] = true;
  if (!c.backward.is_default()) {
    json backward = {{"call", to_string(c.backward.call)}};
    if (!c.backward.inputs.empty()) backward["inputs"] = c.backward.inputs;
    if (c.backward.twice) backward["twice"] = true;
    j["backward"] = std::move(backward);
  }
  if (!c.note.empty()) j["note"] = c.note;
  if (!c.expect.empty()) {
    json expect = json::array();
    for (const Expectation& e : c.expect) {
      expect.push_back({{"sut", e.sut}, {"property", e.property}, {"classification", e.classification}});
    }
    j["expect"] = std::move(expect);
  }
  return j;
}

Case case_from_json(const json& j, const Limits& limits) {
  const Reader r(j, "case");
  r.only({"format", "version", "seed", "dtype", "device", "iterations", "continue_after_error", "backward", "leaves", "root",
          "note", "expect"});
  if (r.field("format").string() != "recheck-case") r.field("format").fail("\"recheck-case\"");
  const int64_t version = r.field("version").integer(INT64_MIN, INT64_MAX);
  if (version != kCaseFormatVersion) {
    throw CaseError("case.version: this recheck reads version " + std::to_string(kCaseFormatVersion) +
                    ", the file has version " + std::to_string(version));
  }
  Case c;
  if (r.has("note")) c.note = r.field("note").string();
  if (r.has("expect")) {
    r.field("expect").each([&](const Reader& e) {
      e.only({"sut", "property", "classification"});
      c.expect.push_back(Expectation{e.field("sut").string(), e.field("property").string(),
                                     e.field("classification").string()});
    });
  }
  c.seed = r.field("seed").unsigned_integer();
  c.dtype = r.field("dtype").choice(kDTypes);
  if (c.dtype != DType::float32 && c.dtype != DType::float64 && c.dtype != DType::bfloat16) {
    r.field("dtype").fail("a floating dtype: \"float32\", \"float64\" or \"bfloat16\"");
  }
  c.device = r.field("device").string();
  if (c.device != "cpu" && c.device != "cuda") r.field("device").fail("\"cpu\" or \"cuda\"");
  const int64_t iterations = r.field("iterations").integer(1, INT32_MAX);
  if (iterations > limits.iterations) {
    throw CaseError("case.iterations: " + over_limit("iteration count", iterations, "iterations", limits.iterations));
  }
  c.iterations = static_cast<int>(iterations);
  if (r.has("continue_after_error")) c.continue_after_error = r.field("continue_after_error").boolean();
  if (r.has("backward")) {
    const Reader b = r.field("backward");
    b.only({"call", "inputs", "twice"});
    c.backward.call = b.field("call").choice(kBackwardCalls);
    if (b.has("inputs")) {
      const Reader inputs = b.field("inputs");
      inputs.each([&](const Reader& n) { c.backward.inputs.push_back(static_cast<int>(n.integer(0, INT32_MAX))); });
    }
    if (b.has("twice")) c.backward.twice = b.field("twice").boolean();
  }
  // The leaves' element and byte counts are checked by validate() below, once: no tensor is
  // made while reading. A shape's length is checked before its sizes are read.
  r.field("leaves").each([&](const Reader& leaf_reader) {
    leaf_reader.only({"shape", "dtype", "requires_grad", "fill"});
    Leaf leaf;
    const Reader shape = leaf_reader.field("shape");
    if (shape.size() > kMaxDimensions) throw CaseError(too_many_dimensions(shape.path(), shape.size()));
    shape.each([&](const Reader& dim) { leaf.shape.push_back(dim.integer(0, INT64_MAX)); });
    if (leaf_reader.has("dtype")) leaf.dtype = leaf_reader.field("dtype").choice(kDTypes);
    leaf.requires_grad = leaf_reader.field("requires_grad").boolean();
    leaf.fill = leaf_reader.field("fill").choice(kFills);
    c.leaves.push_back(std::move(leaf));
  });
  ParseContext context{limits};
  c.root = segment_from_json(r.field("root"), context, 0);
  validate(c, limits);
  return c;
}

namespace {

// The deepest nesting of arrays and objects in JSON text, strings skipped. The parser and the
// destructor of nlohmann::json recurse per level: text nested 100,000 deep would overflow the
// stack before any field could be checked, so the depth is measured on the text first.
int64_t json_nesting(const std::string& text) {
  int64_t depth = 0;
  int64_t deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return deepest;
}

// At most `size` characters of `text`: an error quoting 100,000 digits stays one readable line.
std::string clip(const std::string& text, std::size_t size = 200) {
  return text.size() <= size ? text : text.substr(0, size - 3) + "...";
}

// nlohmann::json keeps the last of two equal keys. A case file naming a field twice is
// ambiguous (which seed did its author mean?), so the parse refuses it, naming the field path.
class DuplicateKeyCheck {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        frames_.push_back(Frame{false, 0, {}, {}});
        break;
      case json::parse_event_t::array_start:
        frames_.push_back(Frame{true, 0, {}, {}});
        break;
      case json::parse_event_t::key: {
        Frame& frame = frames_.back();
        frame.key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.key).second) {
          throw CaseError(clip(path()) + ": the field appears twice in its object");
        }
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        element_done();
        break;
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool array;
    int64_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };
  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::string path() const {
    std::string text = "case";
    for (const Frame& frame : frames_) text += frame.array ? "[" + std::to_string(frame.index) + "]" : "." + frame.key;
    return text;
  }
  std::vector<Frame> frames_;
};

}  // namespace

Case parse_case_text(const std::string& text, const std::string& origin, const Limits& limits) {
  const int64_t size = static_cast<int64_t>(text.size());
  if (size > limits.file_bytes) throw CaseError(origin + ": " + over_limit("file size", size, "file_bytes", limits.file_bytes));
  // A checkpoint body nests three levels of JSON (body, ops, op): four a level leaves room.
  const int64_t json_limit = 4 * limits.depth + 16;
  if (const int64_t nesting = json_nesting(text); nesting > json_limit) {
    throw CaseError(origin + ": JSON nested " + std::to_string(nesting) + " levels deep, over the " +
                    std::to_string(json_limit) + " that the limit depth=" + std::to_string(limits.depth) +
                    " allows (raise it with --limits depth=N)");
  }
  json j;
  try {
    DuplicateKeyCheck duplicates;
    j = json::parse(text, [&duplicates](int depth, json::parse_event_t event, json& parsed) {
      return duplicates(depth, event, parsed);
    });
  } catch (const json::exception& error) {
    throw CaseError(origin + ": not valid JSON: " + clip(error.what()));
  } catch (const CaseError& error) {
    throw CaseError(origin + ": " + error.what());
  }
  try {
    return case_from_json(j, limits);
  } catch (const CaseError& error) {
    throw CaseError(origin + ": " + error.what());
  }
}

}  // namespace recheck
