#include "properties/export_python.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "core/interpreter.h"
#include "oracles/compare.h"
#include "oracles/eager.h"

namespace recheck {

// The PR's change around a Megatron-style Function, in Python: the bridge's python-clearing
// variants and exported scripts use this one text.
const char* const kPrWrapperPy = R"PY(
# The PR's change, without editing Megatron's file: backward's detach_variable is watched, each
# backward call keeps its own record (a nested checkpoint's backward runs inside its parent's),
# and once a call has returned the .grad of every tensor it detached is reset.
_records = []
_watched = set()


def clearing(function, module):
    if module.__name__ not in _watched:
        detach = module.detach_variable

        def recording_detach(inputs):
            detached = detach(inputs)
            if _records:
                _records[-1].extend(t for t in detached if isinstance(t, torch.Tensor))
            return detached

        module.detach_variable = recording_detach
        _watched.add(module.__name__)

    def backward(ctx, *grad_outputs):
        _records.append([])
        try:
            grads = function.backward(ctx, *grad_outputs)
        finally:
            detached = _records.pop()
        for tensor in detached:
            tensor.grad = None
        return grads

    # The same name as the function wrapped: autograd names the node after it, and error
    # messages quote that name.
    return type(function.__name__, (function,), {"backward": staticmethod(backward)})
)PY";

namespace {

// What every exported script runs: the RNG set-up, the runner and the property checks. The case
// itself (data and segment functions) comes after it.
constexpr const char* kRuntimePy = R"PY(
import argparse
import sys
import warnings
import weakref

import torch

megatron_random = None  # megatron.core.tensor_parallel.random, imported only when the run needs it
ON_CUDA = DEVICE == "cuda"
# The device generator: CUDA's on a GPU; on CPU a separate generator standing in for it, which
# Megatron reaches through the shim below (recheck's own set-up, so that values match its run).
if ON_CUDA:
    torch.cuda.init()  # torch.cuda.default_generators is empty until torch.cuda has started
DEVICE_GEN = torch.cuda.default_generators[0] if ON_CUDA else torch.Generator()
if not ON_CUDA:
    torch.cuda.get_rng_state = torch.cuda.random.get_rng_state = lambda device="cuda": DEVICE_GEN.get_state()
    torch.cuda.set_rng_state = torch.cuda.random.set_rng_state = lambda s, device="cuda": DEVICE_GEN.set_state(s)
    torch.cuda.manual_seed = torch.cuda.random.manual_seed = lambda seed: DEVICE_GEN.manual_seed(seed)


def need_megatron(what):
    global megatron_random
    if megatron_random is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # megatron-core warns about missing Apex and TE on import
                import megatron.core.tensor_parallel.random as module
        except ImportError as error:
            sys.exit(f"this script needs megatron-core ({what}): pip install megatron-core ({error})")
        if not ON_CUDA:
            module._get_cuda_rng_state = lambda device="cuda", clone=False, graph_safe=False: DEVICE_GEN.get_state()
            module._set_cuda_rng_state = lambda s, device=-1, graph_safe=False: DEVICE_GEN.set_state(s)
        megatron_random = module
    return megatron_random


DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "int64": torch.int64, "bool": torch.bool}


def tracker():
    return need_megatron("the case forks Megatron's RNG tracker").get_cuda_rng_tracker()


def seed_all():
    torch.manual_seed(CPU_SEED)
    if megatron_random is not None:
        megatron_random.model_parallel_cuda_manual_seed(TRACKER_SEED, tp_rank=0, ep_rank=0, etp_rank=0)
        megatron_random.IS_CHECKPOINTING = False
    else:
        DEVICE_GEN.manual_seed(TRACKER_SEED)


def state_bytes(state):
    return bytes(state.cpu().tolist())


def rng_snapshot():
    snap = {"CPU generator": state_bytes(torch.get_rng_state()), "device generator": state_bytes(DEVICE_GEN.get_state())}
    if megatron_random is not None:
        t = megatron_random.get_cuda_rng_tracker()
        for name, state in t.states_.items():
            snap[f"tracker state '{name}'"] = state_bytes(state)
        snap["tracker current state"] = t._current_state_name
    return snap


def rng_difference(a, b):
    return ", ".join(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def make_leaves():
    leaves = []
    for shape, dtype, requires_grad, values in LEAVES:
        data_type = {"int64": torch.int64, "bool": torch.bool}.get(dtype, torch.float64)
        leaf = torch.tensor(values, dtype=data_type).reshape(shape).to(DEVICE, DTYPES[dtype])
        leaves.append(leaf.requires_grad_(requires_grad))
    return leaves


def keep(t):
    return t.detach().clone() if torch.is_tensor(t) else None


class Run:
    """One run of the case: the checkpoint function, and what the properties read."""

    def __init__(self, checkpoint):
        self.checkpoint = checkpoint
        self.recomputing = 0
        self.stash = {}
        self.calls = []
        self.detached = []
        self.iteration = 0

    def call_checkpoint(self, site, body, distribute, args):
        started, calls = [0], []
        self.calls.append({"site": site, "iteration": self.iteration, "calls": calls})

        def run_function(*inputs):
            recompute = started[0] > 0
            started[0] += 1
            if recompute:
                for i, t in enumerate(inputs):
                    if torch.is_tensor(t):
                        self.detached.append((f"{site} input {i}", weakref.ref(t)))
                self.recomputing += 1
            try:
                outputs = body(self, *inputs)
            finally:
                if recompute:
                    self.recomputing -= 1
            calls.append([keep(o) for o in outputs])
            return outputs

        outputs = self.checkpoint(run_function, distribute, *args)
        return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]

    def random(self, x, fn, source, state, p):
        def draw(generator, where):
            sample = torch.empty(x.shape, dtype=torch.float32, device=where)
            if fn == "dropout":
                sample.bernoulli_(1.0 - p, generator=generator)
            else:
                sample.normal_(0.0, 1.0, generator=generator)
            return sample.to(x.device, x.dtype)

        if source == "cpu":
            sample = draw(torch.default_generator, "cpu")
        elif source == "device":
            sample = draw(DEVICE_GEN, x.device)
        else:
            with tracker().fork(state):
                sample = draw(DEVICE_GEN, x.device)
        return x * sample / (1.0 - p) if fn == "dropout" else x + sample * p

    def raise_op(self, x, when_recompute):
        if when_recompute and self.recomputing == 0:
            return x
        torch.mm(x.reshape(1, -1), torch.zeros(x.numel() + 1, 1, dtype=x.dtype, device=x.device))
        return x  # not reached: the shapes never match


def run_case(checkpoint):
    seed_all()
    leaves = make_leaves()
    run = Run(checkpoint)
    seen = {"iterations": [], "error": None, "calls": run.calls}
    for iteration in range(ITERATIONS):
        run.iteration = iteration
        run.detached = []
        record = {}
        phase, start = "forward", rng_snapshot()
        try:
            outputs = seg_0(run, *leaves)
            loss = None
            record["outputs"] = [keep(o) for o in outputs]
            for i, o in enumerate(outputs):
                if not torch.is_tensor(o) or not o.requires_grad:
                    continue
                # recheck's loss weights; ones where recheck's eager run made no such output
                weight = torch.tensor(LOSS_WEIGHTS[i][1], dtype=torch.float64).reshape(LOSS_WEIGHTS[i][0]) \
                    if i in LOSS_WEIGHTS else torch.ones(o.shape, dtype=torch.float64)
                term = (o * weight.to(o.device, o.dtype)).sum()
                loss = term if loss is None else loss + term
            record["loss"] = keep(loss)
            phase, start = "backward", rng_snapshot()
            if loss is not None:
                loss.backward()
        except Exception as error:  # what the case raised is an observation, as in recheck
            seen["error"] = {"iteration": iteration, "phase": phase, "type": type(error).__name__,
                             "message": str(error), "rng": rng_snapshot(), "rng_at_start": start}
            break
        record["leaf_grads"] = [keep(leaf.grad) for leaf in leaves]
        record["leaf_data"] = [keep(leaf) for leaf in leaves]
        record["rng"] = rng_snapshot()
        record["flag"] = bool(getattr(megatron_random, "IS_CHECKPOINTING", False))
        record["holding_grad"] = [site for site, ref in run.detached if ref() is not None and ref().grad is not None]
        seen["iterations"].append(record)
    return seen


def bitwise_difference(a, b):
    if (a is None) != (b is None):
        return f"defined: {'a tensor' if a is not None else 'None'} vs {'a tensor' if b is not None else 'None'}"
    if a is None:
        return None
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)}"
    if a.dtype.is_floating_point:
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        same = torch.equal(a.contiguous().view(bits), b.contiguous().view(bits))
    else:
        same = torch.equal(a, b)
    if same:
        return None
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    i = next(i for i in range(flat_a.numel()) if not torch.equal(flat_a[i:i + 1], flat_b[i:i + 1]))
    return f"element {i}: {flat_a[i].item()!r} vs {flat_b[i].item()!r}"


def ulp_difference(a, b, bound):
    """recheck's grads-match-eager comparison: bitwise, or within `bound` units in the last place
    at the reference's scale (its largest magnitude)."""
    d = bitwise_difference(a, b)
    if d is None or a is None or b is None or not a.dtype.is_floating_point or a.dtype != b.dtype \
            or a.shape != b.shape:
        return d
    x, y = a.double().reshape(-1), b.double().reshape(-1)
    scale = y.abs().max().item() if y.numel() else 0.0
    s = torch.tensor(scale, dtype=torch.float32 if a.dtype != torch.float64 else torch.float64)
    unit = (torch.nextafter(s, torch.tensor(float("inf"), dtype=s.dtype)) - s).item()
    if a.dtype == torch.bfloat16:
        unit *= 65536.0
    for i in range(x.numel()):
        u, v = x[i].item(), y[i].item()
        if u != u and v != v:
            continue
        if not (u != u or v != v) and abs(u - v) <= bound * unit:
            continue
        return f"element {i}: {u!r} vs {v!r}, beyond {bound} ulp of scale {scale!r}"
    return None


def check(prop, subject, eager, oracle):
    """The evidence that `prop` fails for `subject` (a run), or None when it holds."""
    common = lambda a, b: zip(range(min(len(a["iterations"]), len(b["iterations"]))), a["iterations"], b["iterations"])
    if prop == "outputs-bitwise":
        for i, s, e in common(subject, eager):
            for o, (x, y) in enumerate(zip(s["outputs"], e["outputs"])):
                if (d := bitwise_difference(x, y)):
                    return f"iteration {i}, output {o}: {d}"
            if (d := bitwise_difference(s["loss"], e["loss"])):
                return f"iteration {i}, loss: {d}"
    elif prop in ("grads-bitwise", "grads-match-eager"):
        reference = oracle if prop == "grads-bitwise" else eager
        for i, s, e in common(subject, reference):
            for leaf, (x, y) in enumerate(zip(s["leaf_grads"], e["leaf_grads"])):
                d = bitwise_difference(x, y) if prop == "grads-bitwise" else ulp_difference(x, y, GRAD_ULP_BOUND)
                if d:
                    return f"iteration {i}, leaf v{leaf} .grad: {d}"
    elif prop == "recompute-fidelity":
        for call in subject["calls"]:
            for k, recomputed in enumerate(call["calls"][1:], 1):
                for o, (x, y) in enumerate(zip(recomputed, call["calls"][0])):
                    if (d := bitwise_difference(x, y)):
                        return f"{call['site']} at iteration {call['iteration']}, recomputed output {o} vs forward: {d}"
    elif prop == "rng-restored":
        for i, s, e in common(subject, eager):
            if (d := rng_difference(s["rng"], e["rng"])):
                return f"after iteration {i}: differs from eager: {d}"
    elif prop == "errors-match":
        s, e = subject["error"], eager["error"]
        describe = lambda x: "no error" if x is None else \
            f"{x['type']} in iteration {x['iteration']} {x['phase']}: {x['message']}"
        if s is not None and s["phase"] == "backward" and (d := rng_difference(s["rng"], s["rng_at_start"])):
            return f"{describe(s)}; RNG not restored when the error reached the caller: {d}"
        key = lambda x: None if x is None else (x["type"], x["message"], x["iteration"])
        if key(s) != key(e):
            return f"{describe(s)} | eager: {describe(e)}"
        if s is not None and (d := rng_difference(s["rng"], e["rng"])):
            return f"RNG after the error differs from eager: {d}"
    elif prop == "no-side-effects":
        for i, s, e in common(subject, eager):
            for leaf, (x, y) in enumerate(zip(s["leaf_data"], e["leaf_data"])):
                if (d := bitwise_difference(x, y)):
                    return f"iteration {i}, leaf v{leaf} data: {d}"
            if s["flag"] != e["flag"]:
                return f"after iteration {i}: is-checkpointing flag {s['flag']}, eager {e['flag']}"
    elif prop == "grad-released":
        for i, s in enumerate(subject["iterations"]):
            if s["holding_grad"]:
                return f"after iteration {i}: recomputation inputs still holding .grad: {', '.join(s['holding_grad'])}"
    return None


def checkpoint_function(name):
    if name == "torch":
        import torch.utils.checkpoint
        return lambda f, distribute, *args: torch.utils.checkpoint.checkpoint(f, *args, use_reentrant=True)
    module = need_megatron(f"--checkpoint {name}")
    function = module.CheckpointFunction if name == "megatron" else clearing(module.CheckpointFunction, module)
    return lambda f, distribute, *args: function.apply(f, distribute, *args)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", choices=["megatron", "megatron-clearing", "torch"], default=CHECKPOINT)
    parser.add_argument("--property", default=PROPERTY,
                        help="a property, or several separated by commas: " + ", ".join(PROPERTIES))
    args = parser.parse_args()
    wanted = args.property.split(",")
    for name in wanted:
        if name not in PROPERTIES:
            parser.error(f"--property: no property named {name!r} (known: {', '.join(PROPERTIES)})")
    if args.checkpoint != "torch" or USES_TRACKER or "grads-bitwise" in wanted:
        need_megatron("Megatron's checkpoint, its RNG tracker, or grads-bitwise against it")
    eager = run_case(lambda f, distribute, *a: f(*a))
    subject = run_case(checkpoint_function(args.checkpoint))
    oracle = run_case(checkpoint_function("megatron")) if "grads-bitwise" in wanted else None
    failures = []
    for name in wanted:
        evidence = check(name, subject, eager, oracle)
        print(f"torch {torch.__version__}, checkpoint {args.checkpoint}, {name}: "
              + ("holds" if evidence is None else "FAILS: " + evidence))
        if evidence is not None:
            failures.append(f"{name}: {evidence}")
    assert not failures, "; ".join(failures)


)PY";

const char* const kProperties[] = {"grads-bitwise",     "outputs-bitwise", "recompute-fidelity", "grads-match-eager",
                                   "rng-restored",      "errors-match",    "no-side-effects",    "grad-released"};

std::string py_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '\\' || ch == '"') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20 || ch == 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", ch);
      out += buffer;
    } else {
      out += static_cast<char>(ch);  // UTF-8 passes through: the script is UTF-8
    }
  }
  return out + "\"";
}

// Text for the script's docstring: a case's note and `str` arguments are the case author's, and
// must not end the docstring (a note holding three quotes and code ran that code) or make the
// script invalid (a backslash escape, bytes that are not UTF-8). Quotes, backslashes, control
// characters and bytes over 0x7f are escaped; newlines stay.
std::string py_docstring_text(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch == '\\' || ch == '"') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if ((ch < 0x20 && ch != '\n') || ch >= 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", ch);
      out += buffer;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string py_float(double x) {
  if (std::isnan(x)) return "float(\"nan\")";
  if (std::isinf(x)) return x > 0 ? "float(\"inf\")" : "float(\"-inf\")";
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", x);
  std::string s = buffer;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string py_shape(at::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

// A tensor's values, flat, as a Python list (floating values in double precision, exactly).
std::string py_values(const at::Tensor& t) {
  const at::Tensor flat = t.detach().to(at::kCPU).contiguous().reshape({-1});
  std::string out = "[";
  if (flat.scalar_type() == at::kBool) {
    const auto* p = flat.data_ptr<bool>();
    for (int64_t i = 0; i < flat.numel(); ++i) out += std::string(i ? ", " : "") + (p[i] ? "True" : "False");
  } else if (flat.scalar_type() == at::kLong) {
    const auto* p = flat.data_ptr<int64_t>();
    for (int64_t i = 0; i < flat.numel(); ++i) out += (i ? ", " : "") + std::to_string(p[i]);
  } else {
    const at::Tensor d = flat.to(at::kDouble);
    const auto* p = d.data_ptr<double>();
    for (int64_t i = 0; i < d.numel(); ++i) out += (i ? ", " : "") + py_float(p[i]);
  }
  return out + "]";
}

std::string py_arg(const Arg& arg) {
  struct Visit {
    std::string operator()(const Ref& r) const { return "v[" + std::to_string(r.value) + "]"; }
    std::string operator()(None) const { return "None"; }
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const { return py_float(x); }
    std::string operator()(bool x) const { return x ? "True" : "False"; }
    std::string operator()(const std::string& x) const { return py_string(x); }
  };
  return std::visit(Visit{}, arg);
}

// Writes one Python function per segment: seg_0 is the root.
class SegmentWriter {
 public:
  std::string functions;

  int write(const Segment& segment, const std::string& site) {
    const int id = next_++;
    std::ostringstream body;
    body << "def seg_" << id << "(run, *inputs):\n";
    body << "    v = list(inputs)\n";
    for (size_t i = 0; i < segment.ops.size(); ++i) {
      const std::string op_site = site + ".ops[" + std::to_string(i) + "]";
      body << "    " << line(segment.ops[i], op_site) << "\n";
    }
    body << "    return (";
    for (int o : segment.outputs) body << "v[" << o << "], ";
    body << ")\n\n\n";
    functions += body.str();
    return id;
  }

 private:
  std::string line(const Op& op, const std::string& site) {
    auto x = [](int i) { return "v[" + std::to_string(i) + "]"; };
    if (const auto* o = std::get_if<Unary>(&op)) {
      switch (o->fn) {
        case Unary::Fn::tanh: return "v.append(torch.tanh(" + x(o->x) + "))";
        case Unary::Fn::sigmoid: return "v.append(torch.sigmoid(" + x(o->x) + "))";
        case Unary::Fn::neg: return "v.append(torch.neg(" + x(o->x) + "))";
        case Unary::Fn::square: return "v.append(torch.mul(" + x(o->x) + ", " + x(o->x) + "))";
        case Unary::Fn::relu: return "v.append(torch.relu(" + x(o->x) + "))";
      }
    }
    if (const auto* o = std::get_if<Binary>(&op)) {
      const char* fn = o->fn == Binary::Fn::add ? "add" : o->fn == Binary::Fn::sub ? "sub" : "mul";
      return std::string("v.append(torch.") + fn + "(" + x(o->a) + ", " + x(o->b) + "))";
    }
    if (const auto* o = std::get_if<Matmul>(&op)) return "v.append(torch.matmul(" + x(o->a) + ", " + x(o->b) + "))";
    if (const auto* o = std::get_if<View>(&op)) {
      const std::string t = x(o->x);
      switch (o->fn) {
        case View::Fn::transpose:
          return "v.append(" + t + ".transpose(-2, -1) if " + t + ".dim() >= 2 else " + t + ".view(" + t + ".shape))";
        case View::Fn::narrow:
          return "v.append(" + t + ".narrow(0, 0, max(1, " + t + ".shape[0] // 2)) if " + t + ".dim() >= 1 else " + t +
                 ".view(" + t + ".shape))";
        case View::Fn::flatten: return "v.append(" + t + ".reshape(-1))";
      }
    }
    if (const auto* o = std::get_if<InPlace>(&op)) {
      return "v.append(" + x(o->x) + (o->fn == InPlace::Fn::mul ? ".mul_(" : ".add_(") + py_float(o->scalar) + "))";
    }
    if (const auto* o = std::get_if<Reduce>(&op)) {
      return "v.append(" + x(o->x) + (o->fn == Reduce::Fn::sum ? ".sum())" : ".mean())");
    }
    if (const auto* o = std::get_if<Argmax>(&op)) return "v.append(torch.argmax(" + x(o->x) + "))";
    if (const auto* o = std::get_if<Random>(&op)) {
      return "v.append(run.random(" + x(o->x) + ", " + py_string(o->fn == Random::Fn::dropout ? "dropout" : "noise") +
             ", " + py_string(to_string(o->source)) + ", " +
             (o->source == RngSource::tracker ? py_string(o->tracker_state) : std::string("None")) + ", " +
             py_float(o->p) + "))";
    }
    if (const auto* o = std::get_if<Stash>(&op)) return "run.stash[" + py_string(site) + "] = " + x(o->x);
    if (const auto* o = std::get_if<Raise>(&op)) {
      return "v.append(run.raise_op(" + x(o->x) + ", " + (o->when == Raise::When::recompute ? "True" : "False") + "))";
    }
    if (const auto* o = std::get_if<Fork>(&op)) {
      const int body = write(*o->body, site + ".body");
      std::string args;
      for (int a : o->args) args += x(a) + ", ";
      return "with tracker().fork(" + py_string(o->tracker_state) + "):\n        v.extend(seg_" + std::to_string(body) +
             "(run, " + args + "))";
    }
    const auto& c = std::get<Checkpoint>(op);
    const int body = write(*c.body, site + ".body");
    std::string args;
    for (const Arg& a : c.args) args += py_arg(a) + ", ";
    return "v.extend(run.call_checkpoint(" + py_string(site) + ", seg_" + std::to_string(body) + ", " +
           (c.distribute ? "True" : "False") + ", [" + args + "]))";
  }

  int next_ = 0;
};

bool uses_tracker(const Segment& segment) {
  for (const Op& op : segment.ops) {
    if (std::holds_alternative<Fork>(op)) return true;
    if (const auto* r = std::get_if<Random>(&op); r && r->source == RngSource::tracker) return true;
    if (const Segment* body = op_body(op); body && uses_tracker(*body)) return true;
  }
  return false;
}

}  // namespace

std::string export_python(const Case& c, const ExportOptions& options) {
  if (options.checkpoint != "megatron" && options.checkpoint != "megatron-clearing" && options.checkpoint != "torch") {
    throw std::invalid_argument("--checkpoint: expected megatron, megatron-clearing or torch, got '" +
                                options.checkpoint + "'");
  }
  std::string names;
  for (const char* p : kProperties) names += (names.empty() ? "" : ", ") + std::string(p);
  // Every comma-separated name known, an empty one too ("grads-bitwise," is refused: the
  // script's own split would keep the empty name and refuse it only when run).
  bool known = true;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = options.property.find(',', begin);
    const std::string name = options.property.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    bool found = false;
    for (const char* p : kProperties) found = found || name == p;
    known = known && found;
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (!known) {
    throw std::invalid_argument("--property: expected one of " + names + " (memory-floor needs recheck itself), got '" +
                                options.property + "'");
  }

  // The data recheck's run starts from: the leaves, and the loss weights of the outputs its
  // eager run made.
  const std::vector<at::Tensor> leaves = make_leaves(c);
  EagerExecution eager;
  RunOptions run_options;
  run_options.measure_memory = false;
  const Observations eager_run = run_case(c, eager, run_options);

  std::ostringstream out;
  out << "#!/usr/bin/env python3\n\"\"\"A recheck case as a standalone script (written by recheck export-python).\n\n";
  if (!c.note.empty()) out << py_docstring_text(c.note) << "\n\n";
  out << "It rebuilds the case with torch ops, runs it eagerly and through a checkpoint function, and\n"
         "asserts a property: an AssertionError with the evidence means the property fails.\n\n"
         "    python3 THIS_SCRIPT [--checkpoint megatron|megatron-clearing|torch] [--property NAME]\n\n"
         "megatron needs megatron-core; on CPU, Megatron's CUDA RNG calls go to a stand-in generator.\n\n"
         "The case, as `recheck show` prints it:\n\n";
  std::istringstream listing(show(c));
  for (std::string line; std::getline(listing, line);) out << "    " << py_docstring_text(line) << "\n";
  out << "\"\"\"\n\n";
  out << "DEVICE = " << py_string(c.device) << "\n";
  out << "CHECKPOINT = " << py_string(options.checkpoint) << "\n";
  out << "PROPERTY = " << py_string(options.property) << "\n";
  out << "PROPERTIES = [";
  for (const char* p : kProperties) out << py_string(p) << ", ";
  out << "]\n";
  out << "ITERATIONS = " << c.iterations << "\n";
  out << "USES_TRACKER = " << (uses_tracker(c.root) ? "True" : "False") << "\n";
  out << "CPU_SEED = " << (c.seed ^ 0x9E3779B97F4A7C15ULL) << "\n";
  out << "TRACKER_SEED = " << static_cast<int64_t>(c.seed) << "\n";
  out << "GRAD_ULP_BOUND = " << grad_ulp_bound(scalar_type(c.dtype)) << "\n";
  out << "LEAVES = [  # shape, dtype, requires_grad, values\n";
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    out << "    (" << py_shape(leaves[i].sizes()) << ", " << py_string(to_string(leaf_dtype(c, c.leaves[i]))) << ", "
        << (c.leaves[i].requires_grad ? "True" : "False") << ", " << py_values(leaves[i]) << "),\n";
  }
  out << "]\n";
  out << "LOSS_WEIGHTS = {  # output: (shape, values), recheck's weights\n";
  if (!eager_run.iterations.empty()) {
    const auto& outputs = eager_run.iterations.front().outputs;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].defined() || !at::isFloatingType(outputs[i].scalar_type())) continue;
      const at::Tensor weight = loss_weight(c, i, outputs[i]).to(at::kDouble);
      out << "    " << i << ": (" << py_shape(weight.sizes()) << ", " << py_values(weight) << "),\n";
    }
  }
  out << "}\n";
  out << kRuntimePy;
  out << kPrWrapperPy << "\n\n";
  SegmentWriter writer;
  writer.write(c.root, "root");
  out << writer.functions;
  out << "if __name__ == \"__main__\":\n    main()\n";
  return out.str();
}

}  // namespace recheck
