#include "core/errors.h"

#include <cstdio>

#include <functional>
#include <regex>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "core/case.h"

namespace recheck {

void skip_libtorch_backtraces() {
  c10::SetStackTraceFetcher(std::function<std::string()>([] { return std::string(); }));
}

namespace {

// libtorch's messages spelled as Python's torch spells them, so that an error raised through a
// Python variant and the same error raised through the C++ port compare equal:
//   "[CPUFloatType [2, 1]]" -> "[torch.FloatTensor [2, 1]]" (CUDA: torch.cuda.FloatTensor) for
//   the dtypes that have a legacy tensor type (Python's torch 2.11 still writes CPUBFloat16Type), and
//   "torch::autograd::CppNode<recheck::(anonymous namespace)::CheckpointFunction>" ->
//   "CheckpointFunctionBackward", the name of a Python Function's node.
std::string pythonic(std::string message) {
  if (message.find("Type") != std::string::npos) {
    static const std::regex cpu(R"(\bCPU(Float|Double|Half|Long|Int|Short|Char|Byte|Bool)Type\b)");
    static const std::regex cuda(R"(\bCUDA(Float|Double|Half|Long|Int|Short|Char|Byte|Bool)Type\b)");
    message = std::regex_replace(std::regex_replace(message, cpu, "torch.$1Tensor"), cuda, "torch.cuda.$1Tensor");
  }
  if (message.find("CppNode<") != std::string::npos) {
    static const std::regex node(R"(torch::autograd::CppNode<(?:[^<>]*::)?(\w+)>)");
    message = std::regex_replace(message, node, "$1Backward");
  }
  return message;
}

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
    const std::string message = pythonic(error.what_without_backtrace());
    // libtorch's CPU allocator reports a failed allocation as a plain error (RuntimeError in
    // Python too): it is the machine's memory running out, so it is named as such, and a case
    // too large for the memory is skipped, not compared as if the ops had raised.
    if (message.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos ||
        message.find("DefaultCPUAllocator: not enough memory") != std::string::npos) {
      return {"MemoryError", message};
    }
    return {"RuntimeError", message};
  } catch (const std::bad_alloc&) {
    return {"MemoryError", "out of memory"};
  } catch (const std::exception& error) {
    return {"RuntimeError", error.what()};
  } catch (...) {
    return {"RuntimeError", "unknown C++ exception"};
  }
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

std::string one_line(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string error_line(const std::exception& error) {
  if (dynamic_cast<const UsageError*>(&error) != nullptr || dynamic_cast<const CaseError*>(&error) != nullptr ||
      dynamic_cast<const OutputError*>(&error) != nullptr) {
    return one_line(error.what());
  }
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) {
    return one_line(first_line(torch_error->what_without_backtrace()));
  }
  return one_line(first_line(error.what()));
}

}  // namespace recheck
