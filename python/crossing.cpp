#include "python/crossing.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

namespace py = pybind11;

namespace recheck::python {

py::object wrap(const at::Tensor& tensor) { return py::reinterpret_steal<py::object>(THPVariable_Wrap(tensor)); }

const at::Tensor& unpack(py::handle object, const char* what) {
  if (!THPVariable_Check(object.ptr())) {
    throw PythonError("TypeError", std::string(what) + ": expected a tensor, got " + Py_TYPE(object.ptr())->tp_name);
  }
  return THPVariable_Unpack(object.ptr());
}

py::object to_python(const Value& value) {
  switch (value.index()) {
    case 0: return py::none();
    case 1: return wrap(as_tensor(value));
    case 2: return py::int_(std::get<int64_t>(value));
    case 3: return py::float_(std::get<double>(value));
    case 4: return py::bool_(std::get<bool>(value));
    default: return py::str(std::get<std::string>(value));
  }
}

Value from_python(py::handle object) {
  PyObject* o = object.ptr();
  if (o == Py_None) return None{};
  if (THPVariable_Check(o)) return THPVariable_Unpack(o);
  if (PyBool_Check(o)) return o == Py_True;
  if (PyLong_Check(o)) return object.cast<int64_t>();
  if (PyFloat_Check(o)) return object.cast<double>();
  if (PyUnicode_Check(o)) return object.cast<std::string>();
  throw PythonError("TypeError", std::string("a checkpoint body cannot take or return a ") + Py_TYPE(o)->tp_name);
}

namespace {

// "torch.OutOfMemoryError" -> "OutOfMemoryError": properties compare Python's short names.
std::string short_type_name(PyObject* type) {
  const std::string name = reinterpret_cast<PyTypeObject*>(type)->tp_name;
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

PythonError to_cpp(const py::error_already_set& error) {
  const std::string message = error.value() ? std::string(py::str(error.value())) : std::string(error.what());
  return PythonError(error.type() ? short_type_name(error.type().ptr()) : "RuntimeError", message);
}

[[noreturn]] void raise_in_python(const RaisedError& error) {
  py::object type = py::getattr(py::module_::import("builtins"), error.type.c_str(), py::none());
  if (type.is_none()) type = py::getattr(py::module_::import("torch"), error.type.c_str(), py::none());
  if (type.is_none() || !PyType_Check(type.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type.ptr()),
                                                                         reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
    type = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  }
  PyErr_SetString(type.ptr(), error.message.c_str());
  throw py::error_already_set();
}

std::optional<RaisedError> describe_python_exception() {
  try {
    throw;
  } catch (const python_error& error) {
    py::gil_scoped_acquire gil;
    const std::string type = error.type ? short_type_name(error.type) : "RuntimeError";
    const std::string message = error.value ? std::string(py::str(py::handle(error.value))) : std::string(error.what());
    return RaisedError{type, message};
  } catch (const py::error_already_set& error) {
    py::gil_scoped_acquire gil;
    const PythonError e = to_cpp(error);
    return RaisedError{e.type(), e.what()};
  } catch (...) {
    return std::nullopt;
  }
}

CrossingPythonError::CrossingPythonError(const py::error_already_set& error)
    : PythonError(to_cpp(error)), held_(new Held{error.type(), error.value(), error.trace()}, [](Held* held) {
        py::gil_scoped_acquire gil;
        delete held;
      }) {}

void CrossingPythonError::raise_again() const {
  PyErr_Restore(held_->type.inc_ref().ptr(), held_->value.inc_ref().ptr(), held_->trace.inc_ref().ptr());
  throw py::error_already_set();
}

[[noreturn]] void reraise_in_python(const std::exception_ptr& raised) {
  try {
    std::rethrow_exception(raised);
  } catch (python_error& error) {
    error.persist();  // fetches the exception still pending in this thread, unless it was
    if (error.type == nullptr) raise_in_python(RaisedError{"RuntimeError", error.what()});
    error.restore();
    throw py::error_already_set();
  } catch (const py::error_already_set&) {
    throw;
  } catch (const CrossingPythonError& error) {
    error.raise_again();
  } catch (...) {
    raise_in_python(describe_current_exception());
  }
}

}  // namespace recheck::python
