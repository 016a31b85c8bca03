#include "properties/corpus.h"

#include <filesystem>

#include "properties/properties.h"
#include "properties/reduce.h"
#include "suts/subject.h"

namespace recheck {

std::vector<Expectation> expectations_of(const Case& c) {
  if (!c.expect.empty()) return c.expect;
  // A case without expectations: the default subject's change raises no alarm on it.
  return {Expectation{default_subject().change, kAnyProperty, kNoAlarm}};
}

void check_expectation(const Expectation& e, const std::string& field) {
  if (e.property == kCrashProperty) {
    if (e.classification != kCrash) {
      throw CaseError(field + ": property \"" + kCrashProperty + "\" goes with classification \"" + kCrash +
                      "\", and only with it");
    }
  } else if (e.property != kAnyProperty && find_property(e.property) == nullptr) {
    throw CaseError(field + ".property: no property named '" + e.property + "'");
  }
  if ((e.property == kAnyProperty) != (e.classification == kNoAlarm)) {
    throw CaseError(field + ": property \"" + kAnyProperty + "\" goes with classification \"" + kNoAlarm +
                    "\", and only with it");
  }
}

std::string observed(const Expectation& e, const CaseResult* result) {
  if (result == nullptr) return kCrash;
  if (e.property == kCrashProperty) return "no crash";
  if (e.property == kAnyProperty) {
    const auto alarm = find_alarm(*result);
    return alarm ? alarm->property + " " + to_string(alarm->classification) : kNoAlarm;
  }
  std::string got;
  for (const PropertyResult& r : result->results) {
    if (r.property == e.property) got = to_string(r.classification);
  }
  return got;
}

void make_output_folder(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw OutputError(dir + ": cannot create the folder: " + error.message());
}

std::string save_finding(Case c, const std::string& dir, uint64_t seed, int64_t index, const std::string& sut,
                         const std::string& property, const std::string& classification, const std::string& note) {
  const std::string file = dir + "/seed-" + std::to_string(seed) + "-case-" + std::to_string(index) + "-" + property +
                           "-" + classification + ".json";
  c.note = note;
  c.expect = {Expectation{sut, property, classification}};
  save_case_file(c, file);
  return file;
}

}  // namespace recheck
