#include "properties/buckets.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

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

std::string Buckets::describe(size_t detailed) const {
  std::ostringstream out;
  const std::vector<const Bucket*> list = ordered();
  int64_t findings = 0;
  for (const Bucket* b : list) findings += b->count;
  out << "buckets: " << findings << " findings in " << std::count_if(list.begin(), list.end(), [](const Bucket* b) { return b->count > 0; })
      << " causes";
  if (count("new") + count("still") + count("gone") > 0) {
    out << " (against the previous result: " << count("new") << " new, " << count("still") << " still present, "
        << count("gone") << " gone)";
  }
  out << "\n";
  size_t shown = 0;
  for (const Bucket* b : list) {
    out << (b->alarm ? " ALARM " : "       ") << (b->status.empty() ? "" : "[" + b->status + "] ") << b->count << "  "
        << b->signature << "\n";
    if (b->count == 0) continue;
    if (!b->alarm && shown >= detailed) continue;
    if (!b->alarm) ++shown;
    if (!b->file.empty() && b->found_in == b->file) {
      out << "         first: " << b->file << "\n";  // an input of its own (recheck triage)
    } else {
      out << "         first: case " << b->first_case << " (draw seed " << b->draw_seed << ")"
          << (b->found_in.empty() ? "" : " of " + b->found_in) << (b->file.empty() ? "" : ", " + b->file) << "\n";
    }
    if (!b->minimized.empty()) {
      out << "         minimized: " << b->minimized << " (" << b->minimized_ops << " ops)\n";
    }
    if (!b->replay.empty()) out << "         replay: " << b->replay << "\n";
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
