#include "core/case.h"
#include "core/shapes.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace recheck {

using nlohmann::json;

namespace {

template <typename E>
struct Names {
  E value;
  const char* name;
};

constexpr Names<DType> kDTypes[] = {{DType::float32, "float32"}, {DType::float64, "float64"},
                                    {DType::bfloat16, "bfloat16"}, {DType::int64, "int64"},
                                    {DType::boolean, "bool"}};
constexpr Names<Fill> kFills[] = {{Fill::randn, "randn"}, {Fill::ones, "ones"}, {Fill::arange, "arange"}};
constexpr Names<RngSource> kSources[] = {
    {RngSource::cpu, "cpu"}, {RngSource::device, "device"}, {RngSource::tracker, "tracker"}};
constexpr Names<Unary::Fn> kUnaryFns[] = {{Unary::Fn::tanh, "tanh"}, {Unary::Fn::sigmoid, "sigmoid"},
                                          {Unary::Fn::neg, "neg"}, {Unary::Fn::square, "square"},
                                          {Unary::Fn::relu, "relu"}};
constexpr Names<Binary::Fn> kBinaryFns[] = {
    {Binary::Fn::add, "add"}, {Binary::Fn::sub, "sub"}, {Binary::Fn::mul, "mul"}};
constexpr Names<View::Fn> kViewFns[] = {
    {View::Fn::transpose, "transpose"}, {View::Fn::narrow, "narrow"}, {View::Fn::flatten, "flatten"}};
constexpr Names<InPlace::Fn> kInPlaceFns[] = {{InPlace::Fn::mul, "mul"}, {InPlace::Fn::add, "add"}};
constexpr Names<Reduce::Fn> kReduceFns[] = {{Reduce::Fn::sum, "sum"}, {Reduce::Fn::mean, "mean"}};
constexpr Names<Raise::When> kRaiseWhens[] = {{Raise::When::always, "always"}, {Raise::When::recompute, "recompute"}};
constexpr Names<Random::Fn> kRandomFns[] = {{Random::Fn::dropout, "dropout"}, {Random::Fn::noise, "noise"}};

template <typename E, size_t N>
const char* name_of(const Names<E> (&table)[N], E value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

template <typename E, size_t N>
std::string one_of(const Names<E> (&table)[N]) {
  std::string names;
  for (const auto& entry : table) names += (names.empty() ? "" : ", ") + std::string("\"") + entry.name + "\"";
  return "one of " + names;
}

// The most dimensions a leaf may have. Validation works out the shape of every value, and a
// hostile file could otherwise make it hold 100,000 copies of a shape millions of dimensions
// long; libtorch's own kernels (TensorIterator) take at most 25.
constexpr std::size_t kMaxDimensions = 64;

std::string too_many_dimensions(const std::string& path, std::size_t dimensions) {
  return path + ": " + std::to_string(dimensions) + " dimensions, more than " + std::to_string(kMaxDimensions) +
         " (a fixed bound: every value's shape is worked out before the case runs)";
}

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

// ---- ops to and from JSON ----

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
  j["args"] = json::array();
  for (const Arg& arg : op.args) j["args"].push_back(arg_to_json(arg));
  j["body"] = segment_to_json(*op.body);
}

void OpToJson::operator()(const Fork& op) {
  j["tracker_state"] = op.tracker_state;
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

// `value` is the count reached; INT64_MAX where the count went past what int64_t holds, and
// then the message says "more than the limit" rather than a number that was never counted.
std::string over_limit(const std::string& what, int64_t value, const char* limit, int64_t bound) {
  const std::string count = value == INT64_MAX ? "more than " + std::to_string(bound) : std::to_string(value);
  return what + " " + count + " is over the limit " + limit + "=" + std::to_string(bound) +
         " (raise it with --limits " + limit + "=N)";
}

// a * b and a + b for non-negative a and b, INT64_MAX where the result would not fit: a shape
// like [2^32, 2^32] must not wrap around to an element count of 0.
int64_t saturating_times(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? INT64_MAX : product;
}
int64_t saturating_plus(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

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

Op op_from_json(const Reader& r, ParseContext& context, int depth) {
  static const char* const kOpNames =
      "one of \"unary\", \"binary\", \"matmul\", \"view\", \"inplace\", \"reduce\", \"argmax\", "
      "\"random\", \"stash\", \"raise\", \"checkpoint\", \"fork\"";
  const Reader kind_reader = r.field("op");
  const std::string kind = kind_reader.node().is_string() ? kind_reader.string() : "";
  auto x = [&] { return value_ref(r.field("x")); };
  if (kind == "unary") {
    r.only({"op", "fn", "x"});
    return Unary{r.field("fn").choice(kUnaryFns), x()};
  }
  if (kind == "binary") {
    r.only({"op", "fn", "a", "b"});
    return Binary{r.field("fn").choice(kBinaryFns), value_ref(r.field("a")), value_ref(r.field("b"))};
  }
  if (kind == "matmul") {
    r.only({"op", "a", "b"});
    return Matmul{value_ref(r.field("a")), value_ref(r.field("b"))};
  }
  if (kind == "view") {
    r.only({"op", "fn", "x"});
    return View{r.field("fn").choice(kViewFns), x()};
  }
  if (kind == "inplace") {
    r.only({"op", "fn", "scalar", "x"});
    return InPlace{r.field("fn").choice(kInPlaceFns), r.field("scalar").number(), x()};
  }
  if (kind == "reduce") {
    r.only({"op", "fn", "x"});
    return Reduce{r.field("fn").choice(kReduceFns), x()};
  }
  if (kind == "argmax") {
    r.only({"op", "x"});
    return Argmax{x()};
  }
  if (kind == "random") {
    r.only({"op", "fn", "source", "tracker_state", "p", "x"});
    Random op;
    op.fn = r.field("fn").choice(kRandomFns);
    op.source = r.field("source").choice(kSources);
    if (op.source == RngSource::tracker) op.tracker_state = r.field("tracker_state").string();
    else if (r.has("tracker_state")) throw CaseError(r.path() + ".tracker_state: only allowed with \"source\": \"tracker\"");
    op.p = r.field("p").number();
    if (op.fn == Random::Fn::dropout && !(op.p >= 0.0 && op.p < 1.0)) {
      r.field("p").fail("a dropout probability in [0, 1)");
    }
    op.x = x();
    return op;
  }
  if (kind == "stash") {
    r.only({"op", "x"});
    return Stash{x()};
  }
  if (kind == "raise") {
    r.only({"op", "x", "when"});
    Raise op{x()};
    if (r.has("when")) op.when = r.field("when").choice(kRaiseWhens);
    return op;
  }
  if (kind == "fork") {
    r.only({"op", "tracker_state", "args", "body"});
    Fork op;
    op.tracker_state = r.field("tracker_state").string();
    r.field("args").each([&](const Reader& arg) { op.args.push_back(value_ref(arg)); });
    op.body = segment_from_json(r.field("body"), context, depth + 1);
    return op;
  }
  if (kind == "checkpoint") {
    r.only({"op", "distribute", "args", "body"});
    Checkpoint op;
    op.distribute = r.field("distribute").boolean();
    r.field("args").each([&](const Reader& arg) { op.args.push_back(arg_from_json(arg)); });
    op.body = segment_from_json(r.field("body"), context, depth + 1);
    return op;
  }
  kind_reader.fail(kOpNames);
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

// ---- validation ----

void validate_ref(int ref, int available, const std::string& path) {
  if (ref < 0 || ref >= available) {
    throw CaseError(path + ": value v" + std::to_string(ref) + " is not defined here (v0..v" +
                    std::to_string(available - 1) + " are)");
  }
}

// What validation knows of a value: a tensor's shape, or nothing (null: not a tensor, or made by
// an op whose inputs do not fit together, which raises when it runs). The ops follow libtorch's
// rules, so that a value's size is known before anything is allocated for it. Shared, not
// copied: a hostile file's fork of millions of arguments must not copy a shape per argument.
using Shape = std::shared_ptr<const std::vector<int64_t>>;

Shape make_shape(std::vector<int64_t> dims) { return std::make_shared<const std::vector<int64_t>>(std::move(dims)); }

}  // namespace

namespace shapes {

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t elements = 1;
  for (int64_t d : shape) elements = saturating_times(elements, d);
  return elements;
}

std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()));
  for (std::size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

std::optional<std::vector<int64_t>> matmul(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                           int64_t* copies) {
  *copies = 0;
  if (a.empty() || b.empty()) return std::nullopt;
  const int64_t k = a.back();
  if (k != (b.size() == 1 ? b[0] : b[b.size() - 2])) return std::nullopt;
  if (a.size() <= 2 && b.size() <= 2) {
    std::vector<int64_t> out;
    if (a.size() == 2) out.push_back(a[0]);
    if (b.size() == 2) out.push_back(b[1]);
    return out;
  }
  const auto batch_of = [](const std::vector<int64_t>& x) {
    return std::vector<int64_t>(x.begin(), x.end() - std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(x.size())));
  };
  std::optional<std::vector<int64_t>> out = broadcast(batch_of(a), batch_of(b));
  if (!out) return std::nullopt;
  const int64_t batch = element_count(*out);
  const int64_t n = a.size() >= 2 ? a[a.size() - 2] : 1;
  const int64_t m = b.size() >= 2 ? b.back() : 1;
  *copies = std::max(saturating_times(batch, saturating_times(n, k)), saturating_times(batch, saturating_times(k, m)));
  if (a.size() >= 2) out->push_back(n);
  if (b.size() >= 2) out->push_back(m);
  return out;
}

}  // namespace shapes

namespace {

using shapes::element_count;

// The shape of the value `op` makes from values of shapes `in` (the ops of one output), and in
// `copies` the elements of the largest temporary it makes on the way (matmul's batches).
Shape output_shape(const Op& op, const std::vector<Shape>& in, int64_t* copies) {
  *copies = 0;
  if (const auto* binary = std::get_if<Binary>(&op)) {
    const Shape& a = in[binary->a];
    const Shape& b = in[binary->b];
    if (!a || !b) return nullptr;
    auto dims = shapes::broadcast(*a, *b);
    return dims ? make_shape(std::move(*dims)) : nullptr;
  }
  if (const auto* matmul = std::get_if<Matmul>(&op)) {
    const Shape& a = in[matmul->a];
    const Shape& b = in[matmul->b];
    if (!a || !b) return nullptr;
    auto dims = shapes::matmul(*a, *b, copies);
    return dims ? make_shape(std::move(*dims)) : nullptr;
  }
  const Shape& x = in[op_inputs(op)[0]];
  if (!x) return nullptr;
  if (std::holds_alternative<Reduce>(op) || std::holds_alternative<Argmax>(op)) return make_shape({});
  const auto* view = std::get_if<View>(&op);
  if (view == nullptr) return x;  // unary, in-place, random, raise: the input's shape
  std::vector<int64_t> dims = *x;
  switch (view->fn) {
    case View::Fn::transpose:
      if (dims.size() >= 2) std::swap(dims[dims.size() - 2], dims.back());
      break;
    case View::Fn::narrow:
      if (!dims.empty()) {
        if (dims[0] == 0) return nullptr;  // narrow(0, 0, 1) of nothing raises
        dims[0] = std::max<int64_t>(1, dims[0] / 2);
      }
      break;
    case View::Fn::flatten: dims = {element_count(dims)}; break;
  }
  return make_shape(std::move(dims));
}

// Bytes a case holds while it is checked, added up as validation goes, at 8 bytes an element
// whatever the dtype: a bound, before anything runs. The path of what went over is put
// together only for the error.
struct ValueBytes {
  const Limits& limits;
  int64_t bytes = 0;
  template <typename Where>
  void add(int64_t elements, int64_t times, const Where& where) {
    bytes = saturating_plus(bytes, saturating_times(saturating_times(elements, times), 8));
    if (bytes > limits.value_bytes) {
      throw CaseError(where() + ": " + over_limit("value bytes", bytes, "value_bytes", limits.value_bytes));
    }
  }
};

// The field of a plain op that holds its `k`th input: x, or a and b.
const char* input_field(const Op& op, std::size_t k) {
  if (std::holds_alternative<Binary>(op) || std::holds_alternative<Matmul>(op)) return k == 0 ? ".a" : ".b";
  return ".x";
}

// Checks a segment whose inputs have shapes `inputs`; gives its outputs' shapes.
std::vector<Shape> validate_segment(const Segment& segment, std::vector<Shape> values, int depth,
                                    const std::string& path, ValueBytes& value_bytes) {
  const Limits& limits = value_bytes.limits;
  if (depth > limits.depth) throw CaseError(path + ": " + over_limit("nesting depth", depth, "depth", limits.depth));
  for (size_t i = 0; i < segment.ops.size(); ++i) {
    const Op& op = segment.ops[i];
    const int available = static_cast<int>(values.size());
    const std::string op_path = path + ".ops[" + std::to_string(i) + "]";
    std::vector<Shape> made;
    if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) {
      std::vector<Shape> args;
      for (size_t a = 0; a < checkpoint->args.size(); ++a) {
        if (const auto* ref = std::get_if<Ref>(&checkpoint->args[a])) {
          validate_ref(ref->value, available, op_path + ".args[" + std::to_string(a) + "].ref");
          args.push_back(values[ref->value]);
        } else {
          args.push_back(nullptr);  // a literal
        }
      }
      made = validate_segment(*checkpoint->body, std::move(args), depth + 1, op_path + ".body", value_bytes);
    } else if (const auto* fork = std::get_if<Fork>(&op)) {
      std::vector<Shape> args;
      for (size_t a = 0; a < fork->args.size(); ++a) {
        validate_ref(fork->args[a], available, op_path + ".args[" + std::to_string(a) + "]");
        args.push_back(values[fork->args[a]]);
      }
      made = validate_segment(*fork->body, std::move(args), depth + 1, op_path + ".body", value_bytes);
    } else {
      const auto inputs = op_inputs(op);
      for (std::size_t k = 0; k < inputs.size(); ++k) validate_ref(inputs[k], available, op_path + input_field(op, k));
      if (op_output_count(op) == 1) {
        int64_t copies = 0;
        made.push_back(output_shape(op, values, &copies));
        // A leaf within the limits can still make a value far over them ([n, 1] + [1, n]):
        // each value an op makes, and each temporary on the way, is held to the leaves'
        // element limit too.
        const int64_t elements = made.back() ? element_count(*made.back()) : 0;
        if (elements > limits.leaf_elements) {
          throw CaseError(op_path + ": makes a tensor whose " +
                          over_limit("element count", elements, "leaf_elements", limits.leaf_elements));
        }
        if (copies > limits.leaf_elements) {
          throw CaseError(op_path + ": expands an operand to the batch sizes, a tensor whose " +
                          over_limit("element count", copies, "leaf_elements", limits.leaf_elements));
        }
        // What one iteration makes, each op counted once (not per run of its body), twice
        // over: the value, and its gradient in flight during backward.
        if (made.back()) value_bytes.add(saturating_plus(elements, copies), 2, [&] { return op_path; });
      }
    }
    if (const auto* random = std::get_if<Random>(&op)) {
      if (random->fn == Random::Fn::dropout && !(random->p >= 0.0 && random->p < 1.0)) {
        throw CaseError(op_path + ".p: expected a dropout probability in [0, 1)");
      }
    }
    values.insert(values.end(), made.begin(), made.end());
  }
  std::vector<Shape> outputs;
  for (size_t o = 0; o < segment.outputs.size(); ++o) {
    validate_ref(segment.outputs[o], static_cast<int>(values.size()), path + ".outputs[" + std::to_string(o) + "]");
    outputs.push_back(values[segment.outputs[o]]);
  }
  return outputs;
}

void stats_of(const Segment& segment, int depth, CaseStats& s) {
  s.max_depth = std::max(s.max_depth, depth);
  for (const Op& op : segment.ops) {
    ++s.ops;
    if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) {
      ++s.checkpoints;
      stats_of(*checkpoint->body, depth + 1, s);
    } else if (const auto* fork = std::get_if<Fork>(&op)) {
      stats_of(*fork->body, depth, s);  // depth counts checkpoints only
    }
  }
}

// ---- show ----

std::string v(int n) { return "v" + std::to_string(n); }

std::string format_double(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string python_string_literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

struct OpShow {
  std::string operator()(const Unary& op) const { return std::string(name_of(kUnaryFns, op.fn)) + "(" + v(op.x) + ")"; }
  std::string operator()(const Binary& op) const {
    return std::string(name_of(kBinaryFns, op.fn)) + "(" + v(op.a) + ", " + v(op.b) + ")";
  }
  std::string operator()(const Matmul& op) const { return "matmul(" + v(op.a) + ", " + v(op.b) + ")"; }
  std::string operator()(const View& op) const { return std::string(name_of(kViewFns, op.fn)) + "(" + v(op.x) + ")  # view"; }
  std::string operator()(const InPlace& op) const {
    return v(op.x) + "." + name_of(kInPlaceFns, op.fn) + "_(" + format_double(op.scalar) + ")";
  }
  std::string operator()(const Reduce& op) const { return std::string(name_of(kReduceFns, op.fn)) + "(" + v(op.x) + ")"; }
  std::string operator()(const Argmax& op) const { return "argmax(" + v(op.x) + ")"; }
  std::string operator()(const Random& op) const {
    std::string source = name_of(kSources, op.source);
    if (op.source == RngSource::tracker) source += ":" + op.tracker_state;
    return std::string(name_of(kRandomFns, op.fn)) + "(" + v(op.x) + ", p=" + format_double(op.p) + ", rng=" + source + ")";
  }
  std::string operator()(const Stash& op) const { return "stash(" + v(op.x) + ")"; }
  std::string operator()(const Raise& op) const {
    return "raise_shape_mismatch(" + v(op.x) + (op.when == Raise::When::recompute ? ", when=recompute" : "") + ")";
  }
  std::string operator()(const Fork& op) const {
    std::string text = "fork(" + python_string_literal(op.tracker_state);
    for (int arg : op.args) text += ", " + v(arg);
    return text + ")";
  }
  std::string operator()(const Checkpoint& op) const {
    std::string args;
    for (const Arg& arg : op.args) args += (args.empty() ? "" : ", ") + show_arg(arg);
    return std::string("checkpoint(") + (op.distribute ? "distribute=True" : "distribute=False") +
           (args.empty() ? "" : ", ") + args + ")";
  }
};

void show_segment(const Segment& segment, int input_count, const std::string& indent, std::ostringstream& out) {
  int next = input_count;
  for (const Op& op : segment.ops) {
    const int outputs = op_output_count(op);
    out << indent;
    for (int k = 0; k < outputs; ++k) out << (k ? ", " : "") << v(next + k);
    if (outputs > 0) out << " = ";
    out << std::visit(OpShow{}, op) << "\n";
    if (const Segment* body = op_body(op)) {
      const auto* checkpoint = std::get_if<Checkpoint>(&op);
      const int args = static_cast<int>(checkpoint ? checkpoint->args.size() : std::get<Fork>(op).args.size());
      out << indent << "  | ";
      for (int k = 0; k < args; ++k) out << (k ? ", " : "") << v(k);
      out << (args ? " = inputs\n" : "(no inputs)\n");
      show_segment(*body, args, indent + "  | ", out);
    }
    next += outputs;
  }
  out << indent << "return";
  for (size_t k = 0; k < segment.outputs.size(); ++k) out << (k ? ", " : " ") << v(segment.outputs[k]);
  out << "\n";
}

}  // namespace

// ---- per-op facts ----

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
  // Every other op reads one value, `x`.
  template <typename T>
  std::vector<int> operator()(const T& o) const { return {o.x}; }
};
}  // namespace

std::vector<int> op_inputs(const Op& op) { return std::visit(OpInputs{}, op); }

int op_output_count(const Op& op) {
  if (std::holds_alternative<Stash>(op)) return 0;
  if (const Segment* body = op_body(op)) return static_cast<int>(body->outputs.size());
  return 1;
}

const Segment* op_body(const Op& op) {
  if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) return &*checkpoint->body;
  if (const auto* fork = std::get_if<Fork>(&op)) return &*fork->body;
  return nullptr;
}

int segment_value_count(const Segment& segment, int input_count) {
  int count = input_count;
  for (const Op& op : segment.ops) count += op_output_count(op);
  return count;
}

const char* to_string(DType dtype) { return name_of(kDTypes, dtype); }
const char* to_string(RngSource source) { return name_of(kSources, source); }

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

std::string show_arg(const Arg& arg) {
  struct Visit {
    std::string operator()(const Ref& r) const { return v(r.value); }
    std::string operator()(None) const { return "None"; }
    std::string operator()(int64_t value) const { return std::to_string(value); }
    std::string operator()(double value) const {
      std::string text = format_double(value);
      return text.find_first_of(".e") == std::string::npos ? text + ".0" : text;
    }
    std::string operator()(bool value) const { return value ? "True" : "False"; }
    std::string operator()(const std::string& value) const { return python_string_literal(value); }
  };
  return std::visit(Visit{}, arg);
}

std::string show(const Case& c) {
  std::ostringstream out;
  out << "case: seed " << c.seed << ", " << to_string(c.dtype) << " on " << c.device << ", "
      << c.iterations << (c.iterations == 1 ? " iteration" : " iterations") << "\n";
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    const Leaf& leaf = c.leaves[i];
    out << "  " << v(static_cast<int>(i)) << " = leaf [";
    for (size_t d = 0; d < leaf.shape.size(); ++d) out << (d ? ", " : "") << leaf.shape[d];
    out << "] " << to_string(leaf_dtype(c, leaf)) << " " << name_of(kFills, leaf.fill)
        << (leaf.requires_grad ? " requires_grad" : "") << "\n";
  }
  show_segment(c.root, static_cast<int>(c.leaves.size()), "  ", out);
  return out.str();
}

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
  r.only({"format", "version", "seed", "dtype", "device", "iterations", "leaves", "root", "note", "expect"});
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

void validate(const Case& c, const Limits& limits) {
  if (c.iterations < 1 || c.iterations > limits.iterations) {
    throw CaseError("case.iterations: " + over_limit("iteration count", c.iterations, "iterations", limits.iterations));
  }
  int64_t leaf_bytes = 0;
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    const Leaf& leaf = c.leaves[i];
    const std::string path = "case.leaves[" + std::to_string(i) + "]";
    const DType dtype = leaf_dtype(c, leaf);
    if (leaf.requires_grad && (dtype == DType::int64 || dtype == DType::boolean)) {
      throw CaseError(path + ".requires_grad: only floating leaves can require grad");
    }
    if (leaf.shape.size() > kMaxDimensions) throw CaseError(too_many_dimensions(path + ".shape", leaf.shape.size()));
    int64_t elements = 1;
    for (int64_t d : leaf.shape) {
      if (d < 0) throw CaseError(path + ".shape: a negative size");
      elements = saturating_times(elements, d);
      if (elements > limits.leaf_elements) {
        throw CaseError(path + ".shape: " +
                        over_limit("element count", elements, "leaf_elements", limits.leaf_elements));
      }
    }
    // A size over the limit is refused where another size is 0 too, in whatever order.
    for (int64_t d : leaf.shape) {
      if (d > limits.leaf_elements) {
        throw CaseError(path + ".shape: " + over_limit("size", d, "leaf_elements", limits.leaf_elements));
      }
    }
    leaf_bytes = saturating_plus(leaf_bytes, saturating_times(elements, static_cast<int64_t>(at::elementSize(scalar_type(dtype)))));
    if (leaf_bytes > limits.leaf_bytes) {
      throw CaseError(path + ": " + over_limit("leaf bytes", leaf_bytes, "leaf_bytes", limits.leaf_bytes));
    }
  }
  const CaseStats s = stats(c);
  if (s.ops > limits.ops) throw CaseError("case: " + over_limit("op count", s.ops, "ops", limits.ops));
  std::vector<Shape> leaves;
  for (const Leaf& leaf : c.leaves) leaves.push_back(make_shape(leaf.shape));
  // Every run of a case (up to three at once: eager, oracle, sut) keeps a record of each
  // iteration, which holds a copy of each leaf's data and gradient and of each root output.
  const int64_t records = saturating_times(3, c.iterations);
  ValueBytes value_bytes{limits};
  // A leaf: its double-precision draw, kept for the case, the leaf itself, its gradient, and
  // its records.
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    value_bytes.add(element_count(c.leaves[i].shape), saturating_plus(3, saturating_times(2, records)),
                    [&] { return "case.leaves[" + std::to_string(i) + "]"; });
  }
  const std::vector<Shape> outputs = validate_segment(c.root, std::move(leaves), 0, "case.root", value_bytes);
  // A root output: its double-precision loss weight, kept for the case, the weight's copy in
  // the output's dtype, which backward keeps, and its records.
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o]) continue;
    value_bytes.add(element_count(*outputs[o]), saturating_plus(2, records),
                    [&] { return "case.root.outputs[" + std::to_string(o) + "]"; });
  }
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

CaseStats stats(const Case& c) {
  CaseStats s;
  stats_of(c.root, 0, s);
  return s;
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

std::string read_case_file_text(const std::string& path, const Limits& limits) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) throw CaseError(path + ": cannot open the file: no such file");
  if (error) throw CaseError(path + ": cannot open the file: " + error.message());
  if (status.type() == fs::file_type::directory) throw CaseError(path + ": a folder, not a case file");
  // A pipe would block the read and a device like /dev/zero never ends.
  if (status.type() != fs::file_type::regular) throw CaseError(path + ": not a regular file");
  const auto size = fs::file_size(path, error);
  if (error) throw CaseError(path + ": cannot open the file: " + error.message());
  if (size > static_cast<std::uintmax_t>(limits.file_bytes)) {
    throw CaseError(path + ": " + over_limit("file size", static_cast<int64_t>(size), "file_bytes", limits.file_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CaseError(path + ": cannot open the file: " + std::strerror(errno));
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

Case load_case_file(const std::string& path, const Limits& limits) {
  return parse_case_text(read_case_file_text(path, limits), path, limits);
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  static std::atomic<int> counter{0};
  const std::filesystem::path target(path);
  if (path.empty()) throw OutputError("cannot write a file with an empty name");
  std::error_code error;
  if (std::filesystem::is_directory(target, error)) throw OutputError(path + ": cannot write: a folder is in the way");
  // A short, hidden name in the same folder (a rename across file systems would not be
  // atomic): not NAME.tmp, which can be over the 255-byte limit when NAME is just under it.
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temporary = (folder / (".recheck-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp")).string();
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw OutputError(path + ": cannot write: " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    const int saved = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    throw OutputError(path + ": " + what + ": " + std::strerror(saved));
  };
  for (std::size_t done = 0; done < contents.size();) {
    const ssize_t wrote = ::write(fd, contents.data() + done, contents.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) fail("write failed");
    done += static_cast<std::size_t>(wrote);
  }
  if (::close(fd) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw OutputError(path + ": write failed: " + std::strerror(saved));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw OutputError(path + ": cannot put the file in place: " + std::strerror(saved));
  }
}

void save_case_file(const Case& c, const std::string& path) {
  // A note that is not UTF-8 (a file name's bytes) is written with U+FFFD in its place.
  write_file_atomically(path, to_json(c).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace recheck
