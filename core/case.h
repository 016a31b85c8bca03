// A case: a small program over numbered values, plain data, serialisable to JSON and back
// without loss. Generators, the fuzzer's byte decoder and the JSON loader all end in a Case.
//
// Numbering: inside a segment, values 0..n-1 are the segment's inputs (the leaves for the root
// segment, the checkpoint arguments for a child), and every op appends its outputs in order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/value.h"

namespace recheck {

constexpr int kCaseFormatVersion = 1;

enum class DType { float32, float64, bfloat16, int64, boolean };
enum class Fill { randn, ones, arange };
enum class RngSource { cpu, device, tracker };

// A heap-held value with value semantics, so that a Segment can hold Segments.
template <typename T>
class Box {
 public:
  Box() : ptr_(std::make_unique<T>()) {}
  Box(T value) : ptr_(std::make_unique<T>(std::move(value))) {}  // NOLINT: implicit on purpose
  Box(const Box& other) : ptr_(std::make_unique<T>(*other.ptr_)) {}
  Box(Box&&) noexcept = default;
  // A Box moved from holds nothing, and std::vector copy-assigns into elements it moved from
  // (a range inserted in the middle): it takes a copy of its own then.
  Box& operator=(const Box& other) {
    if (this == &other) return *this;
    if (ptr_) {
      *ptr_ = *other.ptr_;
    } else {
      ptr_ = std::make_unique<T>(*other.ptr_);
    }
    return *this;
  }
  Box& operator=(Box&&) noexcept = default;
  T& operator*() { return *ptr_; }
  const T& operator*() const { return *ptr_; }
  T* operator->() { return ptr_.get(); }
  const T* operator->() const { return ptr_.get(); }

 private:
  std::unique_ptr<T> ptr_;
};

struct Segment;

// ---- the ops: plain data; what each reads, does, shows and writes is in the visitors that
// docs/adding-an-op.md lists (the compiler finds each for a new op) -------------------------

struct Unary {
  enum class Fn { tanh, sigmoid, neg, square, relu };
  Fn fn = Fn::tanh;
  int x = 0;
};

struct Binary {
  enum class Fn { add, sub, mul };
  Fn fn = Fn::add;
  int a = 0;
  int b = 0;
};

struct Matmul {
  int a = 0;
  int b = 0;
};

// A view of its input: the output shares the input's storage.
struct View {
  enum class Fn { transpose, narrow, flatten };
  Fn fn = Fn::transpose;
  int x = 0;
};

// Modifies an intermediate in place and yields it again as a new value number.
struct InPlace {
  enum class Fn { mul, add };
  Fn fn = Fn::mul;
  double scalar = 1.0;
  int x = 0;
};

struct Reduce {
  enum class Fn { sum, mean };
  Fn fn = Fn::sum;
  int x = 0;
};

// Not differentiable: an int64 scalar tensor.
struct Argmax {
  int x = 0;
};

// Draws from one RNG source, as the random layers and samplers of models do:
//   dropout          x * mask / (1 - p), one Bernoulli(1 - p) draw per element (nn.Dropout)
//   feature-dropout  the same with one draw per row (x's first dimension): nn.Dropout1d/2d on
//                    an unbatched input, and drop-path (stochastic depth) per sample
//   alpha-dropout    nn.AlphaDropout's affine mix of x and its SELU saturation, per element
//   noise            x + p * N(0, 1) (normal_, randn_like)
//   uniform-noise    x + p * (U[0, 1) - 1/2) (uniform_, rand_like)
//   gumbel           x + p * -log(E), E ~ Exp(1) (exponential_: Gumbel-softmax's noise)
//   bernoulli        a straight-through Bernoulli sample of sigmoid(x / p) (the sample forward,
//                    sigmoid's gradient backward: binary and stochastic neurons)
//   rrelu            nn.RReLU in training mode (rrelu_with_noise: each negative element scaled by
//                    a slope drawn from U(1/8, p), kept in a noise tensor its gradient reads)
//   multinomial      x's elements resampled with replacement, weighted by softmax(x / p) (token
//                    sampling with a temperature): an index its backward scatters through
//   randperm         x's elements shuffled by randperm (p unused: 0)
struct Random {
  enum class Fn { dropout, noise, rrelu, feature_dropout, alpha_dropout, uniform_noise, gumbel, bernoulli, multinomial, randperm };
  Fn fn = Fn::dropout;
  RngSource source = RngSource::cpu;
  std::string tracker_state;  // with source tracker: the state forked around the draw
  double p = 0.5;             // as each fn says above
  int x = 0;
};
// rrelu's lower slope (nn.RReLU's default; its default upper is 1/3).
inline constexpr double kRreluLower = 1.0 / 8.0;
// nn.AlphaDropout's saturation magnitude: SELU's scale times its alpha.
inline constexpr double kAlphaDropoutSaturation = 1.7580993408473766;

// Keeps a reference to its input past backward, the way a module caching its input does; no
// output. Each run of the op replaces what the previous run kept.
struct Stash {
  int x = 0;
};

// Raises a shape mismatch error, to exercise error paths: always, only while a checkpoint
// recomputes (a body that is not a pure function of its inputs; eager mode never recomputes),
// or only in the first iteration (a batch that fails once, which a loop going on after errors
// skips).
struct Raise {
  enum class When { always, recompute, first_iteration };
  int x = 0;
  When when = When::always;
};

struct Ref {
  int value = 0;
};
// A checkpoint argument: a value of the segment, or a literal.
using Arg = std::variant<Ref, None, int64_t, double, bool, std::string>;

struct Checkpoint {
  bool distribute = false;
  // Megatron's CheckpointWithoutOutput: the body runs without a graph, its outputs stay with the
  // caller for later ops to read and save, until a Discard op frees their storage and registers
  // the recomputation on a later tensor's gradient. Eager mode runs it as any body.
  bool without_output = false;
  // The checkpoint function's own per-call options, by name, each value as its module spells
  // it (CheckpointImplementation::call_options): PyTorch's preserve_rng_state, early_stop, ...
  // Empty for a function that declares none (Megatron's).
  std::map<std::string, std::string> options;
  std::vector<Arg> args;
  Box<Segment> body;
};

// Runs its body inline inside `with tracker.fork(tracker_state):` (Megatron's
// CudaRNGStatesTracker), so that checkpoints can sit inside a fork.
struct Fork {
  std::string tracker_state;
  std::vector<int> args;  // the body's inputs, in order
  Box<Segment> body;
};

// Runs its body inline inside `with torch.autocast(device_type, dtype=dtype, enabled=enabled):`:
// an autocast region (enabled) or a region with autocast turned off inside one (not enabled),
// around any ops, checkpoints included, or inside a checkpoint's body. Backward runs outside,
// as training loops run it.
struct Autocast {
  enum class Precision { bfloat16, float16 };
  bool enabled = true;
  std::string device_type = "cpu";  // "cpu" or "cuda"
  Precision dtype = Precision::bfloat16;
  std::vector<int> args;  // the body's inputs, in order
  Box<Segment> body;
};

// Frees the outputs of checkpoints without output (each named by its first output, a value of
// this segment) and registers their recomputation on `hook`'s gradient: one hook for them all
// (Megatron's discard_output_and_register_recompute, one call per checkpoint; a manager's one
// hook). Nothing in eager mode. No output.
struct Discard {
  std::vector<int> checkpoints;
  int hook = 0;
};

// A parameter a body captures instead of receiving it, as a layer's weight: the root's leaf
// `leaf` itself (the same tensor, not a copy, and not detached by any checkpoint around it),
// wherever the op sits. A reentrant checkpoint sees only its arguments: when none of them
// requires grad, the parameter gets no gradient through it.
struct Capture {
  int leaf = 0;
};

// Hangs a hook on its input and yields it again (the same tensor), as layers, training loops and
// gradient-scaling code do, and records every call of it: which hook, and the gradient it saw.
//   tensor       x.register_hook(h): h sees x's gradient and, with a scale other than 1, returns
//                it times scale (a hook that scales or clips); with scale 1 it returns nothing
//   accumulator  a post hook on the gradient accumulator of parameter x (a leaf), as DDP and
//                FSDP hang theirs: called each time backward accumulates into x.grad, it sees
//                x.grad as it is then; it cannot scale (scale 1 only)
//   post-accumulate  x.register_post_accumulate_grad_hook(h) (PyTorch 2.1 on), as optimizers
//                that step in backward and FSDP2 hang theirs: as an accumulator hook, but hung on
//                the parameter itself, called before its accumulator's own post hooks
// It hangs the hook only on a tensor that requires grad (the last two kinds: on a leaf that
// does), as code guarding `if x.requires_grad` does: nothing in a reentrant checkpoint's forward
// (run under no_grad) but on its arguments and parameters. A hook stops recording, and stops
// scaling, when its iteration ends.
struct Hook {
  enum class Kind { tensor, accumulator, post_accumulate };
  Kind kind = Kind::tensor;
  double scale = 1.0;
  int x = 0;
};

// Reads and writes the state of module `module`, as layers keep state across calls: each module
// of a case has a running mean and a step counter, both starting at 0 in every run and carried
// from one iteration to the next.
//   running-mean  a normalization layer's running statistic in training mode (BatchNorm's
//                 running_mean): mean = (1 - 0.1) * mean + 0.1 * x.mean(), in float64, out of
//                 autograd; yields x itself
//   count         a step counter a layer increments and reads (`self.step += 1`; a schedule read
//                 from num_batches_tracked): step += 1, then yields x * (1 + (step % 4) / 4), a
//                 new tensor
// Eager mode runs each once per forward; a checkpoint that recomputes runs them again.
struct ModuleState {
  enum class Fn { running_mean, count };
  Fn fn = Fn::running_mean;
  int module = 0;
  int x = 0;
};
// The running mean's momentum (nn.BatchNorm's default).
inline constexpr double kRunningMeanMomentum = 0.1;
// How many modules a case may name (ModuleState::module below it).
inline constexpr int kMaxModules = 16;

using Op = std::variant<Unary, Binary, Matmul, View, InPlace, Reduce, Argmax, Random, Stash, Raise,
                        Checkpoint, Fork, Autocast, Discard, Capture, Hook, ModuleState>;

struct Segment {
  std::vector<Op> ops;
  std::vector<int> outputs;
};

struct Leaf {
  std::vector<int64_t> shape;
  std::optional<DType> dtype;  // the case's dtype when absent
  bool requires_grad = true;
  Fill fill = Fill::randn;
};

// What a corpus case records it shows: `property` is classified `classification` ("pass",
// "regression", "pre-existing", ...) when variant `sut` is checked against the oracle.
// `recheck replay` checks every expectation of every case it is given.
struct Expectation {
  std::string sut;
  std::string property;
  std::string classification;
  bool operator==(const Expectation& o) const {
    return sut == o.sut && property == o.property && classification == o.classification;
  }
};

// How the training loop differentiates the loss in every iteration. By default loss.backward():
// every leaf that requires grad accumulates its gradient into .grad.
//   backward  torch.autograd.backward(loss, inputs=...): only the leaves `inputs` name accumulate
//   grad      torch.autograd.grad(loss, inputs, allow_unused=True): the gradients are returned,
//             and the loop keeps them as the leaves' gradients (IterationRecord::leaf_grads);
//             no .grad is written, no gradient accumulator runs
// `inputs`: numbers of leaves that require grad, each once; empty: none given (backward only).
// `twice`: the graph retained (retain_graph=True), then the same call again, as a loop that
// differentiates twice (a gradient penalty, a check) does: backward accumulates both, grad
// keeps the sum of both calls' gradients. A reentrant checkpoint refuses both `grad` and
// `inputs` (PyTorch documents it: it is not compatible with .grad() nor with `inputs`).
struct Backward {
  enum class Call { backward, grad };
  Call call = Call::backward;
  std::vector<int> inputs;
  bool twice = false;
  bool is_default() const { return call == Call::backward && inputs.empty() && !twice; }
};

struct Case {
  std::string note;  // free text: what a corpus case found or exercises
  std::vector<Expectation> expect;
  uint64_t seed = 0;
  DType dtype = DType::float32;
  std::string device = "cpu";
  int iterations = 1;
  // After an iteration raises, the next ones run (a training loop that skips the batch), from
  // the state the error left; by default the run stops at the error.
  bool continue_after_error = false;
  Backward backward;
  std::vector<Leaf> leaves;
  Segment root;
};

// ---- per-op facts ------------------------------------------------------------------------

const char* op_name(const Op& op);
std::vector<int> op_inputs(const Op& op);  // value numbers read (checkpoint: its Ref args)
int op_output_count(const Op& op);
const Segment* op_body(const Op& op);  // a checkpoint's or fork's body; null for other ops
// Whether `predicate` holds for an op of `segment` or of any body it nests, at any depth.
bool any_op(const Segment& segment, const std::function<bool(const Op&)>& predicate);
int segment_value_count(const Segment& segment, int input_count);

// ---- text and JSON -----------------------------------------------------------------------

const char* to_string(DType dtype);
const char* to_string(RngSource source);
const char* to_string(Random::Fn fn);
const char* to_string(Hook::Kind kind);
const char* to_string(Backward::Call call);
const char* to_string(ModuleState::Fn fn);
DType leaf_dtype(const Case& c, const Leaf& leaf);
at::ScalarType scalar_type(DType dtype);

// An indented, readable listing of the graph.
std::string show(const Case& c);
std::string show_arg(const Arg& arg);

// What a case may hold. Every case read from a file is checked against these while it is read,
// before anything is allocated for it, and a case over one is refused with an error naming
// the limit. The commands that read cases take `--limits name=value,...`; each limit has a
// ceiling `--limits` cannot raise it past (depth: the readers recurse once per level).
struct Limits {
  int64_t file_bytes = int64_t{64} << 20;         // size of a case file
  int64_t ops = 100000;                           // ops in all segments together
  int64_t depth = 64;                             // nesting of checkpoint and fork bodies
  int64_t leaf_elements = int64_t{1} << 24;       // elements of one leaf
  int64_t leaf_bytes = int64_t{1} << 30;          // bytes of all leaves together
  int64_t value_bytes = int64_t{1} << 34;         // bytes a case holds while checked (8 an element)
  int64_t iterations = 100;
};
// "ops=1000,depth=8": the named limits changed, the others as in `base`. Throws CaseError
// naming a bad item, or a value over the limit's ceiling.
Limits parse_limits(const std::string& text, Limits base = {});
std::string describe(const Limits& limits);  // "file_bytes=67108864,ops=100000,..."
// Every limit at its ceiling: for the cases recheck builds to a size asked for (`memory`'s
// models), which the limits for files and fuzzer bytes are not meant to refuse.
Limits limits_at_ceilings();

nlohmann::json to_json(const Case& c);
// Throws CaseError naming the field path and what was expected, or the limit exceeded.
Case case_from_json(const nlohmann::json& j, const Limits& limits = {});

class CaseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses and validates the text of a case file; errors start with `origin` (the file's name).
// Throws only CaseError, whatever the text (recheck_fuzz_inputs holds it to that).
Case parse_case_text(const std::string& text, const std::string& origin, const Limits& limits = {});
// The bytes of a case file: a regular file (not a folder, pipe or device) of at most
// limits.file_bytes, read without reading more. Throws CaseError naming the file.
std::string read_case_file_text(const std::string& path, const Limits& limits = {});
// Parses and validates `path`; errors name the file.
Case load_case_file(const std::string& path, const Limits& limits = {});

// An output file that could not be written: the message names it and the reason.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Writes to a temporary name in the same folder and renames, so no half-written file remains.
// Throws OutputError, leaving no temporary file behind.
void save_case_file(const Case& c, const std::string& path);
void write_file_atomically(const std::string& path, const std::string& contents);

// Checks references, arities and limits; throws CaseError naming the field path or the limit.
void validate(const Case& c, const Limits& limits = {});

// Counts, for reports.
struct CaseStats {
  int ops = 0;
  int checkpoints = 0;
  int max_depth = 0;
};
CaseStats stats(const Case& c);

}  // namespace recheck
