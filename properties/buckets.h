// Findings grouped by cause signature (properties/causes.h): per bucket a count, the first case,
// a minimized case once one is made, and the line that replays it. `recheck run` prints them
// after its table and writes them in its --json report; a run's buckets are compared with a
// previous run's (new, still present, gone), and the buckets of several results (the tasks of a
// campaign) merge into one list.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace recheck {

struct Bucket {
  std::string signature;
  std::string property;
  std::string classification;
  bool alarm = false;  // regression or divergent (or a crash the oracle does not make)
  int64_t count = 0;
  // The first finding: its case number and draw seed in the run that found it, the run's own
  // label (a campaign's task), the case file written, and its evidence as reported.
  int64_t first_case = -1;
  uint64_t draw_seed = 0;
  std::string found_in;
  std::string file;
  std::string example;
  std::string minimized;  // the minimized case's file, "" until one is made
  int minimized_ops = -1;
  std::string replay;     // the command that replays the smallest case there is
  // Against a previous result: "new", "still" (present in both) or "gone" (count 0 here); ""
  // when not compared.
  std::string status;
};

class Buckets {
 public:
  // One finding. The first of its bucket names the case; later ones only count.
  void add(const std::string& signature, const std::string& property, const std::string& classification, bool alarm,
           int64_t case_index, uint64_t draw_seed, const std::string& example);
  bool contains(const std::string& signature) const { return buckets_.count(signature) > 0; }
  Bucket& at(const std::string& signature) { return buckets_.at(signature); }
  size_t size() const { return buckets_.size(); }
  // Alarms first, then the largest counts; ties by signature.
  std::vector<const Bucket*> ordered() const;
  std::vector<Bucket*> ordered();
  // Adds another result's buckets: counts add up, the first finding stays the one already kept
  // (or the other's, for a bucket new here), and each keeps its minimized case.
  void merge(const Buckets& other);
  // Marks each bucket new or still against `previous`, and adds those only `previous` has as gone.
  void compare_with(const Buckets& previous);
  int64_t count(const std::string& status) const;

  nlohmann::json to_json() const;
  // From a report's "buckets" array. Throws std::runtime_error naming the field that is wrong.
  static Buckets from_json(const nlohmann::json& j);

  // The list a report prints after its table: one line per bucket (count, signature), and under
  // the alarms and the `detailed` largest others, the first case, the minimized one and replay.
  std::string describe(size_t detailed = 10) const;
  // The same, readable at a glance for a run's end: the alarms as describe() shows them, then the
  // other findings counted by known cause (known_cause_of), and only the buckets no known cause
  // covers listed, the `detailed` largest with their cases. The report's JSON lists every bucket.
  std::string describe_by_cause(size_t detailed = 10) const;

 private:
  // The line that counts the findings and buckets (and, compared, new, still and gone).
  void describe_count(std::ostringstream& out, const std::vector<const Bucket*>& list) const;

  std::map<std::string, Bucket> buckets_;
};

// The id of the first cause of docs/known-causes.json (embedded at build time) whose signature
// patterns match `signature` (searched, as tools/explain-buckets does), "" when none does.
std::string known_cause_of(const std::string& signature);

// The buckets of a report written by `recheck run --json` (its "buckets"), or of a campaign's
// merged report; throws std::runtime_error with one line saying what the file is not.
Buckets buckets_of_report(const std::string& path);

}  // namespace recheck
