#include "properties/buckets.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedded/known_causes_json.h"

namespace recheck {

using nlohmann::json;

void Buckets::add(const std::string& signature, const std::string& property, const std::string& classification,
                  bool alarm, int64_t case_index, uint64_t draw_seed, const std::string& example) {
  auto [it, inserted] = buckets_.try_emplace(signature);
  Bucket& b = it->second;
  if (inserted) {
    b.signature = signature;
    b.property = property;
    b.classification = classification;
    b.alarm = alarm;
    b.first_case = case_index;
    b.draw_seed = draw_seed;
    b.example = example;
  }
  ++b.count;
}

namespace {

bool before(const Bucket& a, const Bucket& b) {
  if (a.alarm != b.alarm) return a.alarm;
  if ((a.count > 0) != (b.count > 0)) return a.count > 0;  // gone ones last
  if (a.count != b.count) return a.count > b.count;
  return a.signature < b.signature;
}

}  // namespace

std::vector<const Bucket*> Buckets::ordered() const {
  std::vector<const Bucket*> list;
  for (const auto& [signature, bucket] : buckets_) list.push_back(&bucket);
  std::sort(list.begin(), list.end(), [](const Bucket* a, const Bucket* b) { return before(*a, *b); });
  return list;
}

std::vector<Bucket*> Buckets::ordered() {
  std::vector<Bucket*> list;
  for (auto& [signature, bucket] : buckets_) list.push_back(&bucket);
  std::sort(list.begin(), list.end(), [](const Bucket* a, const Bucket* b) { return before(*a, *b); });
  return list;
}

void Buckets::merge(const Buckets& other) {
  for (const auto& [signature, theirs] : other.buckets_) {
    auto [it, inserted] = buckets_.try_emplace(signature, theirs);
    if (inserted) continue;
    Bucket& ours = it->second;
    ours.count += theirs.count;
    ours.alarm = ours.alarm || theirs.alarm;
    if (ours.minimized.empty() && !theirs.minimized.empty()) {
      ours.minimized = theirs.minimized;
      ours.minimized_ops = theirs.minimized_ops;
      ours.replay = theirs.replay;
    }
  }
}

void Buckets::compare_with(const Buckets& previous) {
  for (auto& [signature, bucket] : buckets_) {
    const auto found = previous.buckets_.find(signature);
    bucket.status = found != previous.buckets_.end() && found->second.count > 0 ? "still" : "new";
  }
  for (const auto& [signature, old] : previous.buckets_) {
    if (old.count == 0 || buckets_.count(signature) > 0) continue;
    Bucket gone = old;
    gone.count = 0;
    gone.status = "gone";
    buckets_.emplace(signature, std::move(gone));
  }
}

int64_t Buckets::count(const std::string& status) const {
  return std::count_if(buckets_.begin(), buckets_.end(), [&](const auto& entry) { return entry.second.status == status; });
}

json Buckets::to_json() const {
  json list = json::array();
  for (const Bucket* b : ordered()) {
    json j = {{"signature", b->signature},   {"property", b->property}, {"classification", b->classification},
              {"alarm", b->alarm},           {"count", b->count},       {"first_case", b->first_case},
              {"draw_seed", b->draw_seed},   {"example", b->example},   {"file", b->file},
              {"minimized", b->minimized},   {"minimized_ops", b->minimized_ops},
              {"replay", b->replay}};
    if (!b->found_in.empty()) j["found_in"] = b->found_in;
    if (!b->status.empty()) j["status"] = b->status;
    list.push_back(std::move(j));
  }
  return list;
}

Buckets Buckets::from_json(const json& j) {
  if (!j.is_array()) throw std::runtime_error("\"buckets\" is not an array");
  Buckets buckets;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    const std::string at = "buckets[" + std::to_string(i) + "]";
    try {
      Bucket b;
      b.signature = e.at("signature").get<std::string>();
      b.property = e.at("property").get<std::string>();
      b.classification = e.at("classification").get<std::string>();
      b.alarm = e.value("alarm", false);
      b.count = e.at("count").get<int64_t>();
      if (b.count < 0) throw std::runtime_error("count is negative");
      b.first_case = e.value("first_case", int64_t{-1});
      b.draw_seed = e.value("draw_seed", uint64_t{0});
      b.example = e.value("example", "");
      b.file = e.value("file", "");
      b.minimized = e.value("minimized", "");
      b.minimized_ops = e.value("minimized_ops", -1);
      b.replay = e.value("replay", "");
      b.found_in = e.value("found_in", "");
      b.status = e.value("status", "");
      const std::string signature = b.signature;
      if (!buckets.buckets_.emplace(signature, std::move(b)).second) {
        throw std::runtime_error("a second bucket with the same signature");
      }
    } catch (const json::exception& error) {
      throw std::runtime_error(at + ": " + error.what());
    } catch (const std::runtime_error& error) {
      throw std::runtime_error(at + ": " + error.what());
    }
  }
  return buckets;
}

namespace {

// One bucket's line: ALARM or not, new/still/gone, its count and signature.
void describe_line(std::ostringstream& out, const Bucket& b) {
  out << (b.alarm ? " ALARM " : "       ") << (b.status.empty() ? "" : "[" + b.status + "] ") << b.count << "  "
      << b.signature << "\n";
}

// One bucket's first case, minimized case and replay line, as describe() prints them.
void describe_cases(std::ostringstream& out, const Bucket& b) {
  if (!b.file.empty() && b.found_in == b.file) {
    out << "         first: " << b.file << "\n";  // an input of its own (recheck triage)
  } else {
    out << "         first: case " << b.first_case << " (draw seed " << b.draw_seed << ")"
        << (b.found_in.empty() ? "" : " of " + b.found_in) << (b.file.empty() ? "" : ", " + b.file) << "\n";
  }
  if (!b.minimized.empty()) out << "         minimized: " << b.minimized << " (" << b.minimized_ops << " ops)\n";
  if (!b.replay.empty()) out << "         replay: " << b.replay << "\n";
}

struct KnownCause {
  std::string id;
  std::vector<std::regex> patterns;
};

const std::vector<KnownCause>& known_causes() {
  static const std::vector<KnownCause> causes = [] {
    std::vector<KnownCause> list;
    const json catalogue = json::parse(embedded::kKnownCausesJson);
    for (const json& cause : catalogue.at("causes")) {
      KnownCause c{cause.at("id").get<std::string>(), {}};
      for (const json& pattern : cause.at("signatures")) c.patterns.emplace_back(pattern.get<std::string>());
      list.push_back(std::move(c));
    }
    return list;
  }();
  return causes;
}

}  // namespace

std::string known_cause_of(const std::string& signature) {
  for (const KnownCause& cause : known_causes()) {
    for (const std::regex& pattern : cause.patterns) {
      if (std::regex_search(signature, pattern)) return cause.id;
    }
  }
  return "";
}

std::string Buckets::describe_by_cause(size_t detailed) const {
  std::ostringstream out;
  const std::vector<const Bucket*> list = ordered();
  describe_count(out, list);
  std::map<std::string, int64_t> by_cause;  // findings
  std::vector<const Bucket*> unexplained;
  int64_t others = 0;
  int64_t other_buckets = 0;
  for (const Bucket* b : list) {
    if (b->count == 0) continue;
    if (b->alarm) {
      describe_line(out, *b);
      describe_cases(out, *b);
      continue;
    }
    others += b->count;
    ++other_buckets;
    const std::string cause = known_cause_of(b->signature);
    if (cause.empty()) {
      unexplained.push_back(b);
    } else {
      by_cause[cause] += b->count;
    }
  }
  if (other_buckets == 0) return out.str();
  std::vector<std::pair<std::string, int64_t>> causes(by_cause.begin(), by_cause.end());
  std::sort(causes.begin(), causes.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  out << "  " << others << " other findings (pre-existing, fixed, unreached) in " << other_buckets
      << " buckets, by known cause (docs/known-causes.md; the --json report lists every bucket):";
  for (size_t i = 0; i < causes.size(); ++i) {
    out << (i == 0 ? " " : ", ") << causes[i].first << " " << causes[i].second;
  }
  if (causes.empty()) out << " none";
  out << "\n";
  if (!unexplained.empty()) {
    int64_t count = 0;
    for (const Bucket* b : unexplained) count += b->count;
    out << "  no known cause: " << count << " findings in " << unexplained.size() << " buckets\n";
    for (size_t i = 0; i < unexplained.size(); ++i) {
      describe_line(out, *unexplained[i]);
      if (i < detailed) describe_cases(out, *unexplained[i]);
    }
  }
  return out.str();
}

void Buckets::describe_count(std::ostringstream& out, const std::vector<const Bucket*>& list) const {
  int64_t findings = 0;
  for (const Bucket* b : list) findings += b->count;
  out << "buckets: " << findings << " findings in " << std::count_if(list.begin(), list.end(), [](const Bucket* b) { return b->count > 0; })
      << " causes";
  if (count("new") + count("still") + count("gone") > 0) {
    out << " (against the previous result: " << count("new") << " new, " << count("still") << " still present, "
        << count("gone") << " gone)";
  }
  out << "\n";
}

std::string Buckets::describe(size_t detailed) const {
  std::ostringstream out;
  const std::vector<const Bucket*> list = ordered();
  describe_count(out, list);
  size_t shown = 0;
  for (const Bucket* b : list) {
    describe_line(out, *b);
    if (b->count == 0) continue;
    if (!b->alarm && shown >= detailed) continue;
    if (!b->alarm) ++shown;
    describe_cases(out, *b);
  }
  return out.str();
}

Buckets buckets_of_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  json report;
  try {
    report = json::parse(in);
  } catch (const json::exception&) {
    throw std::runtime_error(path + ": not a JSON report (a half-written file?)");
  }
  if (!report.is_object() || !report.contains("buckets")) {
    throw std::runtime_error(path + ": not a recheck report with buckets (no \"buckets\"; written by recheck run --json?)");
  }
  try {
    return Buckets::from_json(report.at("buckets"));
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(path + ": " + error.what());
  }
}

}  // namespace recheck
