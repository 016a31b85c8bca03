#include "core/errors.h"

#include <functional>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

namespace recheck {

void skip_libtorch_backtraces() {
  c10::SetStackTraceFetcher(std::function<std::string()>([] { return std::string(); }));
}

namespace {
std::vector<ExceptionDescriber>& describers() {
  static std::vector<ExceptionDescriber> all;
  return all;
}
}  // namespace

void add_exception_describer(ExceptionDescriber describer) { describers().push_back(describer); }

RaisedError describe_current_exception() {
  for (ExceptionDescriber describer : describers()) {
    if (std::optional<RaisedError> described = describer()) return *described;
  }
  try {
    throw;
  } catch (const PythonError& error) {
    return {error.type(), error.what()};
  } catch (const c10::IndexError& error) {
    return {"IndexError", error.what_without_backtrace()};
  } catch (const c10::ValueError& error) {
    return {"ValueError", error.what_without_backtrace()};
  } catch (const c10::TypeError& error) {
    return {"TypeError", error.what_without_backtrace()};
  } catch (const c10::OutOfMemoryError& error) {
    return {"OutOfMemoryError", error.what_without_backtrace()};
  } catch (const c10::NotImplementedError& error) {
    return {"NotImplementedError", error.what_without_backtrace()};
  } catch (const c10::Error& error) {
    return {"RuntimeError", error.what_without_backtrace()};
  } catch (const std::bad_alloc&) {
    return {"MemoryError", "out of memory"};
  } catch (const std::exception& error) {
    return {"RuntimeError", error.what()};
  } catch (...) {
    return {"RuntimeError", "unknown C++ exception"};
  }
}

}  // namespace recheck
