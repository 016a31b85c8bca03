#include "python/bridge.h"

#include <pthread.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include <pybind11/embed.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/version.h>

#include "core/errors.h"
#include "core/logged.h"
#include "core/memory.h"
#include "embedded/bridge_py.h"
#include "embedded/lines_run_py.h"
#include "embedded/conventions_py.h"
#include "embedded/loading_py.h"
#include "embedded/megatron_entry_points_py.h"
#include "embedded/pr_wrapper_py.h"
#include "python/crossing.h"
#include "python/subjects.h"
#include "suts/subject.h"
#include "core/rng.h"
#include "core/tensor_parallel.h"

namespace py = pybind11;

namespace recheck::python {

namespace {

// The options a module's functions take with each call: its CALL_OPTIONS, a dict from each
// option's name to {"values": [...], "only_without_rng": [...]} (python/torch_non_reentrant/variants.py).
// With the GIL held.
std::vector<CallOption> read_call_options(const py::object& module) {
  std::vector<CallOption> options;
  if (!py::hasattr(module, "CALL_OPTIONS")) return options;
  for (auto [name, declared] : py::dict(module.attr("CALL_OPTIONS"))) {
    CallOption option{py::str(name), {}, {}};
    const py::dict fields = py::reinterpret_borrow<py::dict>(declared);
    for (py::handle value : fields["values"]) option.values.push_back(py::str(value));
    if (fields.contains("only_without_rng")) {
      for (py::handle value : fields["only_without_rng"]) option.only_without_rng.push_back(py::str(value));
    }
    if (option.values.empty()) throw std::invalid_argument("CALL_OPTIONS[" + option.name + "] lists no values");
    options.push_back(std::move(option));
  }
  return options;
}

// A checkpoint body as a Python callable: Python's arguments in, the interpreter run with the
// GIL released, its outputs back as a tuple.
struct Body {
  RunFunction run;

  py::object call(const py::args& args) const {
    Values inputs;
    std::optional<RaisedError> error;
    try {
      for (py::handle arg : args) inputs.push_back(from_python(arg));
    } catch (...) {
      error = describe_current_exception();
    }
    Values outputs;
    std::exception_ptr raised;
    if (!error) {
      py::gil_scoped_release release;
      try {
        outputs = run(inputs);
      } catch (...) {
        raised = std::current_exception();
      }
    }
    if (raised) reraise_in_python(raised);
    if (error) raise_in_python(*error);
    py::tuple result(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) result[i] = to_python(outputs[i]);
    return std::move(result);
  }
};

std::string compiled_torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// Every libtorch_cpu mapped into this process.
std::set<std::string> mapped_libtorch() {
  std::set<std::string> found;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find("/libtorch_cpu.so") != std::string::npos) found.insert(path);
  }
  return found;
}

class Interpreter {
 public:
  // Starts it on first use; a failed start is reported again on every later use.
  static Interpreter& get() {
    static std::string failed;
    static Interpreter* interpreter = nullptr;  // never finalized: torch does not survive it
    if (interpreter == nullptr && failed.empty()) {
      try {
        interpreter = new Interpreter();
      } catch (const std::exception& e) {
        failed = e.what();
      }
    }
    if (interpreter == nullptr) throw std::invalid_argument(failed);
    return *interpreter;
  }

  py::module_& bridge() { return bridge_; }

 private:
  Interpreter() {
    // recheck run imports the variant's module here and forks its workers after. An import that
    // asks torch.cuda.is_available() (megatron-core's does, through torch.compile and
    // cpp_extension) would otherwise initialise CUDA in this process and poison the fork: the
    // worker's first torch.cuda call would raise "Cannot re-initialize CUDA in forked
    // subprocess". With NVML's device count, torch leaves CUDA alone. A user's setting wins.
    setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1", /*overwrite=*/0);
    py::initialize_interpreter(/*init_signal_handlers=*/false);
    {
      // The site-packages of the torch recheck was built against comes first, PYTHONPATH before it.
      py::module_::import("site").attr("addsitedir")(RECHECK_PYTHON_SITE);
      py::module_ sys = py::module_::import("sys");
      py::object torch;
      try {
        torch = py::module_::import("torch");
      } catch (const py::error_already_set& e) {
        throw std::runtime_error(std::string("the Python bridge cannot import torch (") + e.what() +
                                 "); recheck was built against the torch in " RECHECK_PYTHON_SITE);
      }
      const std::string version = py::str(torch.attr("__version__"));
      const std::string base = version.substr(0, version.find('+'));
      const std::set<std::string> libraries = mapped_libtorch();
      if (base != compiled_torch_version() || libraries.size() != 1) {
        std::string mapped;
        for (const std::string& l : libraries) mapped += (mapped.empty() ? "" : ", ") + l;
        throw std::runtime_error("the Python bridge refuses to start: recheck was built against libtorch " +
                                 compiled_torch_version() + ", the Python torch it embeds is " + version + " at " +
                                 std::string(py::str(torch.attr("__file__"))) + ", and the process maps " + mapped +
                                 " (one libtorch per process: build recheck against this torch, see docs/python.md)");
      }
      py::object module = py::module_::import("types").attr("ModuleType")("recheck_bridge");
      // The Python half, embedded at build time: python/bridge.py (the CPU shim for Megatron's
      // CUDA RNG calls, the calling conventions, the tracker and flag accessors), lines_run.py
      // (which lines of the code under test ran), loading.py (loading that code, and why it
      // could not be), conventions.py (a function's calling convention given with its spec),
      // megatron_entry_points.py (Megatron's checkpoint classes given by name), pr_wrapper.py
      // (the PR's change as a wrapper).
      py::exec(embedded::kBridgePy, module.attr("__dict__"));
      py::exec(embedded::kLinesRunPy, module.attr("__dict__"));
      py::exec(embedded::kLoadingPy, module.attr("__dict__"));
      py::exec(embedded::kConventionsPy, module.attr("__dict__"));
      py::exec(embedded::kMegatronEntryPointsPy, module.attr("__dict__"));
      py::exec(embedded::kPrWrapperPy, module.attr("__dict__"));
      sys.attr("modules")["recheck_bridge"] = module;
      // The modules subjects carry (their variants), each under the name their variant specs use.
      for (const EmbeddedModule& carried : embedded_modules()) {
        py::object subject = py::module_::import("types").attr("ModuleType")(carried.name);
        subject.attr("__file__") = carried.file + " (embedded in recheck)";
        py::exec(carried.source, subject.attr("__dict__"));
        sys.attr("modules")[carried.name.c_str()] = subject;
      }
      bridge_ = py::reinterpret_borrow<py::module_>(module);
    }
    // recheck run forks its workers: the child must find Python's state consistent.
    pthread_atfork([] { fork_state_ = PyGILState_Ensure(); PyOS_BeforeFork(); },
                   [] { PyOS_AfterFork_Parent(); PyGILState_Release(fork_state_); },
                   [] { PyOS_AfterFork_Child(); PyGILState_Release(fork_state_); });
    add_exception_describer(describe_python_exception);
    saved_ = PyEval_SaveThread();  // the GIL is taken only when Python runs
  }

  py::module_ bridge_;
  PyThreadState* saved_ = nullptr;
  static inline PyGILState_STATE fork_state_;
};

// A Python object a checkpoint without output left (Megatron's CheckpointWithoutOutput), let go
// of with the GIL.
struct PythonKept : KeptOutputs {
  explicit PythonKept(py::object kept) : object(std::move(kept)) {}
  ~PythonKept() override {
    py::gil_scoped_acquire gil;
    object = py::object();
  }
  // A weak reference, where the object takes one (a class with __slots__ may not: then none).
  struct WeakWatch : Watch {
    explicit WeakWatch(py::weakref r) : ref(std::move(r)) {}
    ~WeakWatch() override {
      py::gil_scoped_acquire gil;
      ref = py::weakref();
    }
    bool alive() const override {
      py::gil_scoped_acquire gil;
      return !ref().is_none();
    }
    py::weakref ref;
  };
  std::shared_ptr<Watch> watch() const override {
    py::gil_scoped_acquire gil;
    try {
      return std::make_shared<WeakWatch>(py::weakref(object));
    } catch (const py::error_already_set&) {
      return nullptr;
    }
  }
  py::object object;
};

class PythonCheckpoint : public CheckpointImplementation {
 public:
  // `claims`: the code is the change itself (python-change:), held to its claims with no wrapper.
  PythonCheckpoint(std::string name, const std::string& module_name, const std::string& attr, bool clearing,
                   bool claims)
      : name_(std::move(name)), code_("Python " + module_name + ":" + attr), clearing_(clearing), claims_(claims) {
    Interpreter& interpreter = Interpreter::get();
    py::gil_scoped_acquire gil;
    try {
      py::tuple resolved = interpreter.bridge().attr("resolve")(module_name, attr);
      module_ = resolved[0];
      function_ = resolved[1];
      style_ = py::str(resolved[2]);
      has_tracker_ = resolved[3].cast<bool>();
      distributes_ = resolved[5].cast<bool>();
      keeps_flag_ = py::hasattr(module_, "IS_CHECKPOINTING");
      // A subject's variants module says whether its checkpoints without output take arguments
      // that are not tensors (takes_non_tensor_arguments()).
      if (style_ == "without_output") {
        const py::object variants = function_.attr("module");
        takes_non_tensors_ = py::hasattr(variants, "takes_non_tensor_arguments") &&
                             variants.attr("takes_non_tensor_arguments")().cast<bool>();
      }
      call_options_ = read_call_options(module_);
      // A subject's module names the code its variants run ("MODULE:NAME", its CODE) where that is
      // not the function a spec names: then every variant of it is the same code.
      const std::string logical = py::str(resolved[4]);
      code_ = "Python " + (logical.find(':') == std::string::npos ? logical + ":" + attr : logical);
      if (clearing) {
        if (style_ != "megatron" || !py::hasattr(function_, "apply") || !py::hasattr(module_, "detach_variable")) {
          throw std::invalid_argument("python-clearing: " + module_name + ":" + attr +
                                      " is not a Megatron-style autograd Function in a module that uses detach_variable");
        }
        function_ = interpreter.bridge().attr("clearing")(function_, module_);
      }
    } catch (const py::error_already_set& e) {
      throw std::invalid_argument("variant '" + name_ + "': " + to_cpp(e).what());
    }
    if (has_tracker_) {
      hooks_.fork = [this](const std::string& state, const std::function<void()>& body) { fork(state, body); };
      hooks_.read = [this](rng::Snapshot& snapshot) {
        py::gil_scoped_acquire gil;
        py::tuple read = Interpreter::get().bridge().attr("tracker_read")(module_);
        for (auto [name, state] : py::dict(read[0])) {
          snapshot.tracker[py::str(name)] = rng::state_bytes(unpack(state, "tracker state"));
        }
        // None: a Megatron whose tracker keeps no current state name (before 2026-01).
        snapshot.tracker_current_known = !read[1].is_none();
        snapshot.tracker_current = snapshot.tracker_current_known ? std::string(py::str(read[1])) : "";
      };
      hooks_.seed = [this](uint64_t seed) {
        py::gil_scoped_acquire gil;
        try {
          Interpreter::get().bridge().attr("tracker_seed")(module_, seed, rng::current_device() == rng::Device::cpu);
        } catch (const py::error_already_set& e) {
          throw to_cpp(e);
        }
      };
    }
  }

  ~PythonCheckpoint() override {
    py::gil_scoped_acquire gil;
    module_ = py::object();
    function_ = py::object();
  }

  std::string name() const override { return name_; }
  std::string code() const override { return code_; }

  Provenance provenance() const override {
    py::gil_scoped_acquire gil;
    Provenance pairs;
    try {
      for (py::handle pair : Interpreter::get().bridge().attr("provenance")(module_)) {
        pairs.emplace_back(py::str(pair[py::int_(0)]), py::str(pair[py::int_(1)]));
      }
    } catch (const py::error_already_set& e) {
      pairs.emplace_back("provenance", std::string("unknown: ") + to_cpp(e).what());
    }
    return pairs;
  }

  std::string replay_environment() const override {
    const char* path = std::getenv("PYTHONPATH");
    return path != nullptr && *path != '\0' ? std::string("PYTHONPATH=") + path : "";
  }

  Values apply(const RunFunction& run_function, const CallSettings& settings, const Values& args) override {
    py::gil_scoped_acquire gil;
    try {
      // One rank's group starts here, with the first checkpoint that distributes (uncounted:
      // start_tensor_parallel); a wider group's ranks met before the first case
      // (check_process_ready).
      if (settings.distribute_saved_activations && distributes_ && !tensor_parallel_started_) start_tensor_parallel();
      py::tuple py_args(args.size());
      for (size_t i = 0; i < args.size(); ++i) py_args[i] = to_python(args[i]);
      py::object body = py::cast(Body{run_function});
      py::object result =
          Interpreter::get().bridge().attr("call")(function_, style_, body, settings.distribute_saved_activations, py_args,
                                                   py::cast(settings.options));
      Values outputs;
      for (py::handle output : result) outputs.push_back(from_python(output));
      return outputs;
    } catch (const py::error_already_set& e) {
      throw CrossingPythonError(e);
    }
  }

  bool runs_without_output() const override { return style_ == "without_output"; }
  bool without_output_takes_non_tensors() const override { return takes_non_tensors_; }

  std::pair<Values, std::shared_ptr<KeptOutputs>> apply_without_output(const RunFunction& run_function,
                                                                       const CallSettings& /*call*/,
                                                                       const Values& args) override {
    py::gil_scoped_acquire gil;
    try {
      py::tuple py_args(args.size());
      for (size_t i = 0; i < args.size(); ++i) py_args[i] = to_python(args[i]);
      py::object body = py::cast(Body{run_function});
      py::tuple result = Interpreter::get().bridge().attr("call_without_output")(function_, body, py_args);
      Values outputs;
      for (py::handle output : result[0]) outputs.push_back(from_python(output));
      return {std::move(outputs), std::make_shared<PythonKept>(result[1])};
    } catch (const py::error_already_set& e) {
      throw CrossingPythonError(e);
    }
  }

  void discard_outputs(const std::vector<std::shared_ptr<KeptOutputs>>& kept, const at::Tensor& hook) override {
    py::gil_scoped_acquire gil;
    try {
      py::list objects;
      for (const auto& one : kept) objects.append(static_cast<const PythonKept&>(*one).object);
      Interpreter::get().bridge().attr("discard")(function_, objects, wrap(hook));
    } catch (const py::error_already_set& e) {
      throw CrossingPythonError(e);
    }
  }

  std::vector<CallOption> call_options() const override { return call_options_; }

  RngSources rng_sources(bool on_cuda) const override {
    // PyTorch's checkpoint stashes the CPU state and the states of the devices its tensor
    // arguments are on: on CPU, not the stand-in. Megatron's manages all three.
    if (style_ != "megatron" && style_ != "without_output") return RngSources{true, on_cuda, false};
    return RngSources{true, true, has_tracker_};
  }

  ChangeClaims change_claims() const override {
    if (clearing_ || claims_) return ChangeClaims::made;
    // A subject's own variants ("function" style) are held to what its oracle does, as
    // released Megatron code is to the port's.
    return style_ == "torch" ? ChangeClaims::not_applicable : ChangeClaims::like_oracle;
  }

  // Megatron's split and gather, over a torch.distributed group that check_process_ready starts
  // (gloo, on CPU tensors); PyTorch's checkpoint has no such option. Not on a GPU: gloo's
  // all-gather of CUDA tensors has not been tried there (docs/python.md).
  bool distributes(bool on_cuda) const override { return distributes_ && !on_cuda; }

  void settle() override {
    if (!distributes_) return;
    const memory::Uncounted harness;  // what the all-reduce that settles allocates is recheck's
    py::gil_scoped_acquire gil;
    try {
      Interpreter::get().bridge().attr("settle")();
    } catch (const py::error_already_set& e) {
      throw to_cpp(e);
    }
  }

  const rng::TrackerHooks* tracker() const override { return has_tracker_ ? &hooks_ : nullptr; }

  bool checkpointing_flag() const override {
    py::gil_scoped_acquire gil;
    return Interpreter::get().bridge().attr("flag")(module_).cast<bool>();
  }

  bool keeps_checkpointing_flag() const override { return keeps_flag_; }

  void reset_checkpointing_flag() override {
    py::gil_scoped_acquire gil;
    Interpreter::get().bridge().attr("reset_flag")(module_);
  }

  void check_process_ready(bool on_cuda) const override {
    py::gil_scoped_acquire gil;
    try {
      if (on_cuda) Interpreter::get().bridge().attr("cuda_ready")();
      // Ranks of a wider group meet before any case. One rank's group starts with the first case
      // that distributes (apply): a fresh process per case (--fresh-process) would otherwise start
      // gloo again for every case, which costs more than most cases do.
      if (distributes(on_cuda) && tensor_parallel_rank().world_size > 1) start_tensor_parallel();
    } catch (const py::error_already_set& e) {
      throw std::runtime_error("variant '" + name_ + "': " + to_cpp(e).what());
    }
  }

 private:
  // With the GIL held. Recheck's own: nothing it allocates counts as a run's.
  void start_tensor_parallel() const {
    const memory::Uncounted harness;
    const TensorParallelRank& rank = tensor_parallel_rank();
    Interpreter::get().bridge().attr("start_tensor_parallel")(module_, rank.rank, rank.world_size, rank.rendezvous,
                                                               rank.timeout_seconds);
    tensor_parallel_started_ = true;
  }

  void fork(const std::string& state, const std::function<void()>& body) {
    PyObject* context = nullptr;
    {
      py::gil_scoped_acquire gil;
      try {
        context = Interpreter::get().bridge().attr("tracker_enter")(module_, state).release().ptr();
      } catch (const py::error_already_set& e) {
        throw to_cpp(e);
      }
    }
    std::exception_ptr failure;
    try {
      body();
    } catch (...) {
      failure = std::current_exception();
    }
    {
      py::gil_scoped_acquire gil;
      py::object owned = py::reinterpret_steal<py::object>(context);
      try {
        Interpreter::get().bridge().attr("tracker_exit")(owned);
      } catch (const py::error_already_set& e) {
        throw to_cpp(e);  // Python's finally raised: that replaces the body's error, as in Python
      }
    }
    if (failure) std::rethrow_exception(failure);
  }

  std::string name_;
  // "Python MODULE:ATTR", MODULE the module's name even when it came from a file: the same for
  // the clearing wrapper of it and for every revision of the file.
  std::string code_;
  bool clearing_ = false;
  bool claims_ = false;
  py::object module_;
  py::object function_;
  std::string style_;
  bool has_tracker_ = false;
  std::vector<CallOption> call_options_;
  bool keeps_flag_ = false;  // the module has Megatron's IS_CHECKPOINTING
  bool takes_non_tensors_ = false;
  bool distributes_ = false;
  mutable bool tensor_parallel_started_ = false;
  rng::TrackerHooks hooks_;
};

std::unique_ptr<CheckpointImplementation> make_python(const std::string& name) {
  const size_t first = name.find(':');
  const size_t second = name.find(':', first + 1);
  if (second == std::string::npos || second == first + 1 || second + 1 == name.size()) {
    throw std::invalid_argument("variant '" + name +
                                "': expected python:MODULE:ATTR, python-clearing:MODULE:ATTR or python-change:MODULE:ATTR "
                                "(MODULE: a module name, or a .py file)");
  }
  const std::string prefix = name.substr(0, first);
  return std::make_unique<PythonCheckpoint>(name, name.substr(first + 1, second - first - 1), name.substr(second + 1),
                                            prefix == "python-clearing", prefix == "python-change");
}

}  // namespace

void register_bridge() {
  // Once: a second call would replace the subjects, and references to them, in place.
  static std::once_flag once;
  std::call_once(once, [] {
    register_checkpoint_factory("python", make_python);
    register_checkpoint_factory("python-clearing", make_python);
    register_checkpoint_factory("python-change", make_python);
    register_bridge_subjects();
    for (const Alias& alias : aliases()) register_checkpoint_alias(alias.name, alias.spec);
  });
}

}  // namespace recheck::python

PYBIND11_EMBEDDED_MODULE(_recheck, m) {
  using namespace recheck;
  m.def("device_get_state", [] { return python::wrap(rng::get_state(rng::device_generator())); });
  m.def("device_set_state",
        [](py::object state) { rng::set_state(rng::device_generator(), python::unpack(state, "set_rng_state")); });
  m.def("device_manual_seed", [](uint64_t seed) { rng::manual_seed(rng::device_generator(), seed); });
  m.def("call_uncounted", [](const py::function& function, const py::args& args, const py::kwargs& kwargs) {
    const memory::Uncounted scope;
    return function(*args, **kwargs);
  });
  m.def("count_logged", [](const std::string& message) { count_logged(message); });
  py::class_<python::Body>(m, "Body").def("__call__", &python::Body::call);
}
