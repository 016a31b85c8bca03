// Errors as Python would name them. The checkpoint port raises the errors Megatron raises
// (TypeError, ValueError, AssertionError, ...); libtorch's own errors map to the Python types
// libtorch maps them to. Properties compare the (type, message) pair, never C++ exception types.
#pragma once

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

namespace recheck {

class PythonError : public std::runtime_error {
 public:
  PythonError(std::string type, const std::string& message)
      : std::runtime_error(message), type_(std::move(type)) {}
  const std::string& type() const { return type_; }

 private:
  std::string type_;
};

struct RaisedError {
  std::string type;     // "TypeError", "RuntimeError", ...
  std::string message;  // without any C++ backtrace
  // The device, or the CPU budget, ran out of memory: the case is too large, not wrong.
  bool out_of_memory() const { return type == "OutOfMemoryError" || type == "MemoryError"; }
  friend bool operator==(const RaisedError& a, const RaisedError& b) {
    return a.type == b.type && a.message == b.message;
  }
};

// libtorch 1.13 captures and symbolizes a C++ backtrace for every c10::Error it throws (about a
// millisecond each, more than a whole case costs); recheck reports errors without backtraces, so
// its programs turn the capture off at start. Process-wide; libtorch 2.x captures lazily anyway.
void skip_libtorch_backtraces();

// Names the exception currently being handled, the way Python would see it.
RaisedError describe_current_exception();

// Names another library's exceptions (the Python bridge: a Python exception that crossed the
// autograd engine). Called inside a catch block; rethrows with `throw;` to look, and returns
// nothing for an exception it does not know.
using ExceptionDescriber = std::optional<RaisedError> (*)();
void add_exception_describer(ExceptionDescriber describer);

// Bad command-line usage: an unknown option, a value out of range, a variant that does not exist.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The first line of an error's text, at most 300 characters: recheck's errors are one line.
std::string first_line(const std::string& text);
// recheck's own error messages in one line: a control character (a newline in a file name) is
// written escaped, "\n", instead of splitting the message or cutting it at the name.
std::string one_line(const std::string& text);
// The one line recheck prints for an error that ends a command, in its own process or in a
// worker (which sends it to its parent as is): recheck's own errors (UsageError, CaseError,
// OutputError) whole, control characters escaped; libtorch's and the library's cut to their
// first line, without libtorch's backtrace.
std::string error_line(const std::exception& error);

}  // namespace recheck
