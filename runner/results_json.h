// A case's results as JSON, in the one shape that crosses a process boundary and that `repro
// --json` writes: each property's name, classification, and both verdicts as text with whether
// they hold. A worker sends it to its parent, which reads back what it needs to count, classify
// and report (not the evidence behind a verdict's text: the worker classified already).
#pragma once

#include <nlohmann/json.hpp>

#include "properties/report.h"

namespace recheck::runner {

// {"property", "classification", "sut", "oracle", "sut_holds", "oracle_holds"}
nlohmann::json to_json(const PropertyResult& result);
// {"op_executions", "skipped" (null when the case was checked), "properties": [...]}
nlohmann::json to_json(const CaseResult& result);
// Throws std::runtime_error (nlohmann's errors) for JSON of another shape.
CaseResult case_result_from_json(const nlohmann::json& j);
Classification classification_from(const std::string& name);

}  // namespace recheck::runner
