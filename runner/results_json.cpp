#include "runner/results_json.h"

#include <stdexcept>

namespace recheck::runner {

using nlohmann::json;

namespace {

Verdict verdict_from(bool holds, const std::string& text) {
  Verdict v;
  v.holds = holds;
  v.detail = text;  // describe() gives it back unchanged
  return v;
}

}  // namespace

Classification classification_from(const std::string& name) {
  if (const std::optional<Classification> c = classification_named(name)) return *c;
  throw std::runtime_error("unknown classification: " + name);
}

json to_json(const PropertyResult& result) {
  return {{"property", result.property},    {"classification", to_string(result.classification)},
          {"sut", result.sut.describe()},   {"oracle", result.oracle.describe()},
          {"sut_holds", result.sut.holds},  {"oracle_holds", result.oracle.holds},
          {"cause", result.cause}};
}

json to_json(const CaseResult& result) {
  json properties = json::array();
  for (const PropertyResult& r : result.results) properties.push_back(to_json(r));
  json out = {{"op_executions", result.op_executions},
              {"skipped", result.skipped.empty() ? json() : json(result.skipped)},
              {"properties", properties}};
  if (!result.logged.empty()) out["logged"] = result.logged;
  if (!result.eager_ran) out["eager_ran"] = false;
  return out;
}

CaseResult case_result_from_json(const json& j) {
  CaseResult result;
  result.op_executions = j.at("op_executions").get<int64_t>();
  if (!j.at("skipped").is_null()) result.skipped = j.at("skipped").get<std::string>();
  if (j.contains("logged")) result.logged = j.at("logged").get<LoggedCounts>();
  result.eager_ran = j.value("eager_ran", true);
  for (const json& r : j.at("properties")) {
    result.results.push_back({r.at("property").get<std::string>(),
                              verdict_from(r.at("oracle_holds").get<bool>(), r.at("oracle").get<std::string>()),
                              verdict_from(r.at("sut_holds").get<bool>(), r.at("sut").get<std::string>()),
                              classification_from(r.at("classification").get<std::string>()),
                              r.value("cause", std::string())});
  }
  return result;
}

}  // namespace recheck::runner
