// What crosses between recheck's C++ and the embedded Python: values (tensors, None, ints,
// floats, bools, strings) and errors, each way, so that an exception raised on one side arrives
// on the other as the exception it was. Everything here runs with the GIL held unless it says
// otherwise.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "core/errors.h"
#include "core/value.h"

namespace recheck::python {

pybind11::object wrap(const at::Tensor& tensor);
// The tensor `object` is; TypeError naming `what` otherwise.
const at::Tensor& unpack(pybind11::handle object, const char* what);
pybind11::object to_python(const Value& value);
// TypeError for anything a checkpoint body cannot take or return.
Value from_python(pybind11::handle object);

// A Python exception as recheck's PythonError (its short type name: "OutOfMemoryError").
PythonError to_cpp(const pybind11::error_already_set& error);
// A C++ error raised in Python as the Python exception it names, so that it crosses Megatron's
// Python code unchanged.
[[noreturn]] void raise_in_python(const RaisedError& error);
// A Python exception that crossed the autograd engine (Megatron's backward raised) arrives as
// torch's python_error: the exception in flight described, or nothing if it is not Python's.
// Takes the GIL itself (an exception describer: core/errors.h).
std::optional<RaisedError> describe_python_exception();

// A Python exception on its way through recheck's C++ (out of a nested checkpoint's call, then
// through the body around it): a PythonError for recheck's records that keeps the exception
// object, so that the body it crosses raises that object again. Made with the GIL held; the
// object is let go of with the GIL, wherever the error ends.
class CrossingPythonError : public PythonError {
 public:
  explicit CrossingPythonError(const pybind11::error_already_set& error);
  [[noreturn]] void raise_again() const;

 private:
  struct Held {
    pybind11::object type, value, trace;
  };
  std::shared_ptr<Held> held_;
};

// An error that ended a body's run, raised in Python. A Python exception that crossed the body
// (raised by a hook its ops called) is raised again as the same object, so that the code that
// raised it can catch it: PyTorch's non-reentrant checkpoint stops a recomputation early by
// raising its own exception from a saved-tensor hook, through the body (and the bodies and calls
// of checkpoints nested in it), and catching it outside: seen as an empty RuntimeError in
// backward while it was turned into a new one. Any other error as the Python exception it names.
[[noreturn]] void reraise_in_python(const std::exception_ptr& raised);

}  // namespace recheck::python
