#include "runner/triage_session.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "core/errors.h"
#include "properties/corpus.h"
#include "properties/report.h"
#include "runner/case_worker.h"
#include "runner/interrupts.h"
#include "runner/isolated_check.h"

namespace recheck::runner {

using nlohmann::json;

namespace {

// A JSON file's object, when it is a report (it has "buckets"); nullopt for a case. Throws
// CaseError saying what it is not.
std::optional<json> report_in(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw CaseError(path + ": cannot be read");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error&) {
    throw CaseError(path + ": not JSON (a half-written file?)");
  }
  if (!j.is_object()) throw CaseError(path + ": not a case nor a report (not a JSON object)");
  if (j.contains("buckets")) return j;
  if (j.contains("root")) return std::nullopt;
  throw CaseError(path + ": not a case (no \"root\") nor a report (no \"buckets\")");
}

}  // namespace

TriagedInputs triage_inputs(const std::vector<std::string>& files,
                            const std::function<Case(const std::string& file)>& load_case, const Limits& limits,
                            CheckpointImplementation& oracle, CheckpointImplementation& sut, const ClaimChoice& claims) {
  TriagedInputs out;
  std::unique_ptr<CaseWorker> worker;
  std::string worker_device;
  for (size_t i = 0; i < files.size() && !interrupted(); ++i) {
    const std::string& file = files[i];
    json input = {{"file", file}};
    try {
      const bool json_name = std::filesystem::path(file).extension() == ".json";
      const std::optional<json> report = json_name ? report_in(file) : std::nullopt;
      if (report) {
        Buckets theirs = Buckets::from_json(report->at("buckets"));
        for (Bucket* b : theirs.ordered()) {
          if (b->found_in.empty()) b->found_in = file;
          out.findings += b->count;
        }
        out.buckets.merge(theirs);
        ++out.reports;
        input["kind"] = "report";
        input["buckets"] = theirs.size();
        out.inputs.push_back(std::move(input));
        continue;
      }
      const Case c = load_case(file);
      ++out.cases;
      input["kind"] = "case";
      if (!worker || worker_device != c.device) {  // a worker checks the cases of one device
        if (worker) worker->stop();
        worker_device = c.device;
        worker = std::make_unique<CaseWorker>(file, c.device, oracle, sut, limits);
        worker->hold_to_claims(claims);
      }
      const IsolatedCheck checked = worker->check(c);
      auto add = [&](const std::string& signature, const std::string& property, const std::string& classification,
                     bool alarm, const std::string& example) {
        const bool first = !out.buckets.contains(signature);
        out.buckets.add(signature, property, classification, alarm, static_cast<int64_t>(i), 0, example);
        if (first) {
          out.buckets.at(signature).found_in = file;
          out.buckets.at(signature).file = file;
        }
        ++out.findings;
      };
      if (!checked.result) {
        // Killed checking it: the released function's own crash when the oracle dies on it too.
        worker.reset();
        const Crash crash = classify_crash(c, "the worker process " + checked.crash, oracle);
        add(crash.signature(), kCrashProperty, kCrash, !crash.pre_existing(),
            "sut: " + crash.how + (crash.pre_existing() ? " | oracle: " + crash.oracle_end : ""));
        input["crash"] = checked.crash;
      } else if (!checked.result->skipped.empty()) {
        input["skipped"] = checked.result->skipped;
      } else {
        json found = json::array();
        for (const PropertyResult& r : checked.result->results) {
          if (r.classification == Classification::pass) continue;
          add(r.cause, r.property, to_string(r.classification), is_alarm(r.classification),
              "sut: " + r.sut.describe() + (r.oracle.describe().empty() ? "" : " | oracle: " + r.oracle.describe()));
          found.push_back(r.cause);
        }
        input["causes"] = found;
      }
    } catch (const CaseError& error) {
      ++out.incomplete;
      input["kind"] = "incomplete";
      input["error"] = error.what();
      std::cerr << "recheck triage: incomplete: " << error.what() << "\n";
    } catch (const std::runtime_error& error) {  // a report whose buckets are not what they should be
      ++out.incomplete;
      input["kind"] = "incomplete";
      input["error"] = file + ": " + error.what();
      std::cerr << "recheck triage: incomplete: " << file << ": " << error.what() << "\n";
    }
    out.inputs.push_back(std::move(input));
  }
  if (worker) worker->stop();
  return out;
}

}  // namespace recheck::runner
