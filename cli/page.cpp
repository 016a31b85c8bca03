// recheck page: one self-contained HTML page for a run or a campaign: throughput and coverage
// over time, the buckets with their minimized cases and replay lines, and memory figures.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "properties/buckets.h"

namespace recheck::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const char* kPageHelp = R"(usage: recheck page INPUT... --out FILE [--title TEXT]

Writes one self-contained HTML page (no network needed to view it) for a run or a campaign:
the throughput and the coverage over time, the buckets with their counts (alarms first), each
minimized case as `recheck show` prints it, the replay lines with a button to copy them, and
the memory figures where measured. INPUT is a JSON report written by `recheck run`, `recheck
triage` or `recheck memory`, or a campaign's folder (tools/campaign's OUT_DIR, a SLURM campaign's
CAMPAIGN_DIR: summary.json, buckets.json and libFuzzer's logs), or a folder of reports (the
tasks of an array). Several inputs make one page: their buckets merged, one line each over
time. An input that cannot be read (a report cut short) is named on the page as incomplete.
Exit codes: 0 written; 2 bad usage, or no input could be read.
)";

struct Point {
  double seconds;
  double value;
};

// One line over time: a run's cases, a fuzzing task's executions...
struct Series {
  std::string source;
  std::string quantity;  // the chart it belongs to
  std::vector<Point> points;
};

struct Page {
  std::vector<std::string> sources;  // what each input was
  std::vector<std::string> incomplete;
  std::vector<Series> series;
  Buckets buckets;
  std::vector<json> memory;  // recheck memory reports
  int64_t cases = 0;
  int64_t executions = 0;
  double run_seconds = 0;   // the runs' time, added up (their throughput)
  double fuzz_seconds = 0;  // the fuzzing tasks' time, added up
  double seconds = 0;       // the longest input's
};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double x, int decimals = 0) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << x;
  return out.str();
}

json read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  try {
    return json::parse(in);
  } catch (const json::parse_error&) {
    throw std::runtime_error(path + ": not JSON (a half-written file?)");
  }
}

// libFuzzer's fork-mode status lines: "#N: cov: C ft: F corp: K exec/s: E ... time: Ts".
void add_fuzz_log(Page& page, const std::string& path, const std::string& label) {
  std::ifstream in(path);
  if (!in) return;
  static const std::regex line_pattern(R"(^#(\d+):?\s.*\bft: (\d+)\b.*\btime: (\d+)s)");
  Series executions{label, "executions (libFuzzer)", {}};
  Series features{label, "coverage: libFuzzer features", {}};
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!std::regex_search(line, m, line_pattern)) continue;
    const double at = std::stod(m[3]);
    executions.points.push_back({at, std::stod(m[1])});
    features.points.push_back({at, std::stod(m[2])});
  }
  if (executions.points.empty()) return;
  page.executions += static_cast<int64_t>(executions.points.back().value);
  page.fuzz_seconds += executions.points.back().seconds;
  page.seconds = std::max(page.seconds, executions.points.back().seconds);
  page.series.push_back(std::move(executions));
  page.series.push_back(std::move(features));
}

void add_report(Page& page, const json& report, const std::string& path) {
  const std::string command = report.value("command", "");
  const fs::path parent = fs::path(path).parent_path().filename();
  const std::string label = (parent.empty() ? "" : parent.string() + "/") + fs::path(path).filename().string();
  if (command == "memory") {
    page.memory.push_back(report);
    page.sources.push_back(path + ": recheck memory, " + report.value("sut", "?") + " against " + report.value("oracle", "?"));
    return;
  }
  if (!report.contains("buckets")) throw std::runtime_error(path + ": not a report of recheck run, triage or memory");
  Buckets theirs = Buckets::from_json(report.at("buckets"));
  for (Bucket* b : theirs.ordered()) {
    if (b->found_in.empty()) b->found_in = path;
  }
  page.buckets.merge(theirs);
  if (command == "run") {
    page.cases += report.value("cases", int64_t{0});
    page.run_seconds += report.value("seconds", 0.0);
    page.seconds = std::max(page.seconds, report.value("seconds", 0.0));
    Series checked{label, "cases checked (recheck run)", {}};
    Series covered{label, "coverage: the generator's corner labels reached", {}};
    Series found{label, "buckets (causes found)", {}};
    for (const json& s : report.value("progress", json::array())) {
      const double at = s.at("seconds").get<double>();
      checked.points.push_back({at, s.at("cases").get<double>()});
      covered.points.push_back({at, s.at("coverage").get<double>()});
      found.points.push_back({at, s.at("buckets").get<double>()});
    }
    for (Series* s : {&checked, &covered, &found}) {
      if (!s->points.empty()) page.series.push_back(std::move(*s));
    }
    page.sources.push_back(path + ": recheck run, " + report.value("sut", "?") + " against " + report.value("oracle", "?") +
                           ", seed " + std::to_string(report.value("seed", uint64_t{0})) + ", " +
                           std::to_string(report.value("cases", int64_t{0})) + " cases in " +
                           number(report.value("seconds", 0.0), 1) + " s");
  } else {
    page.sources.push_back(path + ": recheck " + command + ", " + std::to_string(theirs.size()) + " buckets");
  }
}

void add_input(Page& page, const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    const bool campaign = fs::exists(fs::path(path) / "summary.json");
    if (campaign) {
      const json summary = read_report((fs::path(path) / "summary.json").string());
      page.sources.push_back(path + ": a fuzzing campaign of " + summary.value("target", "?") + " on " +
                             summary.value("sut", "?") + " (" + summary.value("device", "?") + "), " +
                             std::to_string(summary.value("findings", 0)) + " crash files");
      if (fs::exists(fs::path(path) / "fuzz.log")) add_fuzz_log(page, (fs::path(path) / "fuzz.log").string(), path);
      std::vector<std::string> logs;
      for (const auto& entry : fs::directory_iterator(fs::path(path) / "logs", error)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("task-", 0) == 0 && entry.path().extension() == ".log") logs.push_back(entry.path().string());
      }
      std::sort(logs.begin(), logs.end());
      for (const std::string& log : logs) add_fuzz_log(page, log, fs::path(log).stem().string());
      const fs::path buckets = fs::path(path) / "buckets.json";
      if (fs::exists(buckets)) add_report(page, read_report(buckets.string()), buckets.string());
      return;
    }
    std::vector<std::string> reports;
    for (const auto& entry : fs::directory_iterator(path, error)) {
      if (entry.path().extension() == ".json") reports.push_back(entry.path().string());
    }
    if (reports.empty()) throw UsageError(path + ": not a campaign (no summary.json) and holds no report (*.json)");
    std::sort(reports.begin(), reports.end());
    for (const std::string& report : reports) {
      try {
        add_report(page, read_report(report), report);
      } catch (const std::runtime_error& e) {
        page.incomplete.push_back(e.what());
      }
    }
    return;
  }
  if (!fs::exists(path, error)) throw UsageError(path + ": no such file or folder");
  try {
    add_report(page, read_report(path), path);
  } catch (const std::runtime_error& e) {
    page.incomplete.push_back(e.what());
  }
}

const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

// A chart of the series of one quantity: seconds across, the quantity up, a line per source.
std::string chart(const std::string& quantity, const std::vector<const Series*>& lines) {
  constexpr double kWidth = 900, kHeight = 200, kLeft = 80, kRight = 20, kTop = 30, kBottom = 40;
  double most_seconds = 0.1, most = 1;
  for (const Series* s : lines) {
    for (const Point& p : s->points) {
      most_seconds = std::max(most_seconds, p.seconds);
      most = std::max(most, p.value);
    }
  }
  auto x = [&](double seconds) { return kLeft + (kWidth - kLeft - kRight) * seconds / most_seconds; };
  auto y = [&](double value) { return kHeight - kBottom - (kHeight - kTop - kBottom) * value / most; };
  std::ostringstream svg;
  svg << "<svg class=\"chart\" data-quantity=\"" << escape(quantity) << "\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" xmlns=\"http://www.w3.org/2000/svg\">\n"
      << "<text x=\"" << kLeft << "\" y=\"18\" class=\"title\">" << escape(quantity) << "</text>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << y(0) << "\" x2=\"" << kWidth - kRight << "\" y2=\"" << y(0)
      << "\" class=\"axis\"/>\n<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\"" << y(0)
      << "\" class=\"axis\"/>\n";
  for (double f : {0.0, 0.5, 1.0}) {
    svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << y(most * f) + 4 << "\" text-anchor=\"end\" class=\"tick\">"
        << number(most * f) << "</text>\n"
        << "<text x=\"" << x(most_seconds * f) << "\" y=\"" << kHeight - kBottom + 16
        << "\" text-anchor=\"middle\" class=\"tick\">" << number(most_seconds * f, most_seconds < 10 ? 1 : 0)
        << " s</text>\n";
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const char* colour = kColours[i % (sizeof(kColours) / sizeof(kColours[0]))];
    svg << "<polyline class=\"series\" data-source=\"" << escape(lines[i]->source) << "\" fill=\"none\" stroke=\"" << colour
        << "\" stroke-width=\"2\" points=\"";
    for (const Point& p : lines[i]->points) svg << number(x(p.seconds), 1) << "," << number(y(p.value), 1) << " ";
    svg << "\"/>\n<text x=\"" << kLeft + 10 + 200 * (i % 4) << "\" y=\"" << kHeight - 6 << "\" fill=\"" << colour
        << "\" class=\"legend\">" << escape(lines[i]->source) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string table_of(const json& rows) {
  if (!rows.is_array() || rows.empty() || !rows[0].is_object()) return "<pre>" + escape(rows.dump(2)) + "</pre>";
  std::vector<std::string> columns;
  for (const json& row : rows) {
    for (const auto& [key, value] : row.items()) {
      if (std::find(columns.begin(), columns.end(), key) == columns.end()) columns.push_back(key);
    }
  }
  std::ostringstream out;
  out << "<table class=\"memory\"><tr>";
  for (const std::string& c : columns) out << "<th>" << escape(c) << "</th>";
  out << "</tr>\n";
  for (const json& row : rows) {
    out << "<tr>";
    for (const std::string& c : columns) {
      const json v = row.value(c, json());
      out << "<td>" << escape(v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump()) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n";
  return out.str();
}

std::string bytes(const json& value) {
  if (!value.is_number()) return "";
  const double b = value.get<double>();
  return b >= (1 << 20) ? number(b / (1 << 20), 2) + " MiB" : b >= 1024 ? number(b / 1024, 1) + " KiB" : number(b) + " B";
}

// A recheck memory report: the model, each iteration's floor and peak of both runs (and the
// sut's floor as a share of the oracle's), and the recomputation inputs each keeps alive.
std::string memory_section(const json& m) {
  std::ostringstream out;
  out << "<p class=\"memory-model\">" << escape(m.value("sut", "?")) << " against " << escape(m.value("oracle", "?"))
      << ", model " << escape(m.value("model", json()).dump()) << ": <b>" << (m.value("ok", false) ? "OK" : "FAIL")
      << "</b></p>\n<table class=\"memory\"><tr><th>iteration</th><th>floor, oracle</th><th>floor, sut</th>"
      << "<th>sut / oracle</th><th>freed</th><th>predicted</th><th>peak, oracle</th><th>peak, sut</th></tr>\n";
  for (const json& row : m.value("iterations", json::array())) {
    const double oracle_floor = row.value("floor_oracle", 0.0);
    out << "<tr><td>" << row.value("iteration", json()).dump() << "</td><td>" << bytes(row.value("floor_oracle", json()))
        << "</td><td>" << bytes(row.value("floor_sut", json())) << "</td><td>"
        << (oracle_floor > 0 ? number(row.value("floor_sut", 0.0) / oracle_floor, 3) : "") << "</td><td>"
        << bytes(row.value("freed", json())) << "</td><td>" << bytes(row.value("predicted", json())) << "</td><td>"
        << bytes(row.value("peak_oracle", json())) << "</td><td>" << bytes(row.value("peak_sut", json())) << "</td></tr>\n";
  }
  out << "</table>\n";
  const json alive = m.value("alive_inputs", json::object());
  for (const auto& [role, inputs] : alive.items()) {
    out << "<p>recomputation inputs alive in the " << escape(role) << " after backward:</p>\n" << table_of(inputs);
  }
  return out.str();
}

// The case a bucket's minimized file holds, as recheck show prints it, or why it cannot be shown.
std::string shown_case(const std::string& file) {
  try {
    return show(load_case_file(file));
  } catch (const std::exception& e) {
    return std::string("(cannot be shown: ") + e.what() + ")";
  }
}

std::string html(const Page& page, const std::string& title) {
  std::ostringstream out;
  const std::time_t now = std::time(nullptr);
  char stamp[64];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  int64_t findings = 0, alarms = 0, causes = 0;
  for (const Bucket* b : page.buckets.ordered()) {
    findings += b->count;
    if (b->count > 0) ++causes;
    if (b->alarm && b->count > 0) ++alarms;
  }
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << escape(title) << "</title>\n<style>\n"
      << "body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}"
      << "h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}"
      << "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}"
      << "tr.alarm td{background:#fde8e8}.badge{font-weight:bold}.alarm .badge{color:#b00}"
      << "pre{background:#f6f6f6;padding:8px;font-size:12px;overflow-x:auto}code{font-size:12px}"
      << ".chart .axis{stroke:#444}.chart .tick,.chart .legend{font-size:11px}.chart .title{font-size:13px;font-weight:bold}"
      << ".incomplete{color:#b00}button{font-size:11px}\n</style></head><body>\n"
      << "<h1>" << escape(title) << "</h1>\n<p id=\"summary\" data-findings=\"" << findings << "\" data-causes=\"" << causes
      << "\" data-alarms=\"" << alarms << "\">" << page.sources.size() << " inputs, " << page.cases << " cases"
      << (page.run_seconds > 0 ? " (" + number(page.cases / page.run_seconds, 1) + " cases/s)" : "")
      << (page.executions > 0 ? ", " + std::to_string(page.executions) + " fuzzer executions" : "")
      << (page.fuzz_seconds > 0 ? " (" + number(page.executions / page.fuzz_seconds, 1) + " exec/s per task)" : "")
      << ", the longest input " << number(page.seconds, 1) << " s; "
      << findings << " findings in " << causes << " causes, " << alarms << " of them alarms. Made " << stamp << ".</p>\n";

  out << "<h2>Over time</h2>\n";
  std::vector<std::string> quantities;
  for (const Series& s : page.series) {
    if (std::find(quantities.begin(), quantities.end(), s.quantity) == quantities.end()) quantities.push_back(s.quantity);
  }
  if (quantities.empty()) out << "<p>No input recorded its progress (recheck run writes it with --json).</p>\n";
  for (const std::string& q : quantities) {
    std::vector<const Series*> lines;
    for (const Series& s : page.series) {
      if (s.quantity == q) lines.push_back(&s);
    }
    out << chart(q, lines);
  }

  out << "<h2>Buckets</h2>\n";
  if (page.buckets.size() == 0) out << "<p>No findings.</p>\n";
  if (page.buckets.size() > 0) {
    out << "<table id=\"buckets\"><tr><th></th><th>count</th><th>cause</th><th>first case</th><th>minimized</th>"
        << "<th>replay</th></tr>\n";
  }
  int row = 0;
  for (const Bucket* b : page.buckets.ordered()) {
    ++row;
    out << "<tr class=\"bucket" << (b->alarm ? " alarm" : "") << "\" data-count=\"" << b->count << "\" data-signature=\""
        << escape(b->signature) << "\"><td class=\"badge\">" << (b->alarm ? "ALARM" : "pre-existing")
        << (b->status.empty() ? "" : " [" + escape(b->status) + "]") << "</td><td>" << b->count << "</td><td>"
        << escape(b->signature) << "</td><td>" << escape(b->file.empty() ? b->found_in : b->file) << "</td><td>"
        << (b->minimized.empty() ? "" : "<a href=\"#case-" + std::to_string(row) + "\">" + escape(b->minimized) + "</a> (" +
                                           std::to_string(b->minimized_ops) + " ops)")
        << "</td><td>";
    if (!b->replay.empty()) {
      out << "<code id=\"replay-" << row << "\">" << escape(b->replay) << "</code> <button onclick=\"copy('replay-" << row
          << "')\">copy</button>";
    }
    out << "</td></tr>\n";
  }
  if (page.buckets.size() > 0) out << "</table>\n";
  out << "<h2>Minimized cases</h2>\n";
  row = 0;
  for (const Bucket* b : page.buckets.ordered()) {
    ++row;
    if (b->minimized.empty()) continue;
    out << "<h3 id=\"case-" << row << "\" style=\"font-size:14px\">" << escape(b->minimized) << "</h3>\n<p>"
        << escape(b->signature) << "</p>\n<pre class=\"case\">" << escape(shown_case(b->minimized)) << "</pre>\n";
  }
  if (!page.memory.empty()) {
    out << "<h2>Memory</h2>\n";
    for (const json& m : page.memory) out << memory_section(m);
  }
  out << "<h2>Inputs</h2>\n<ul>\n";
  for (const std::string& s : page.sources) out << "<li>" << escape(s) << "</li>\n";
  for (const std::string& s : page.incomplete) out << "<li class=\"incomplete\">incomplete: " << escape(s) << "</li>\n";
  out << "</ul>\n<script>\nfunction copy(id){const t=document.getElementById(id).textContent;"
      << "if(navigator.clipboard){navigator.clipboard.writeText(t);}}\n</script>\n</body></html>\n";
  return out.str();
}

int command_page(const Args& args) {
  if (args.positional().empty()) throw UsageError("page takes one or more reports or campaign folders");
  if (!args.has("out")) throw UsageError("page needs --out FILE, the page to write");
  const std::string out = args.get("out", "");
  check_output_file(out, "--out");
  Page page;
  for (const std::string& input : args.positional()) add_input(page, input);
  for (const std::string& line : page.incomplete) std::cerr << "recheck page: incomplete: " << line << "\n";
  if (page.sources.empty()) throw UsageError("no input could be read: " + page.incomplete.front());
  const std::string title = args.get("title", "recheck: " + std::to_string(page.sources.size()) + " inputs");
  write_file_atomically(out, html(page, title));
  std::cout << "recheck page: " << out << " (" << page.sources.size() << " inputs, " << page.buckets.size() << " buckets"
            << (page.incomplete.empty() ? "" : ", " + std::to_string(page.incomplete.size()) + " incomplete") << ")\n";
  return 0;
}

}  // namespace

const Command kPage{"page", "one self-contained HTML page for a run or a campaign (reports, campaign folders)", kPageHelp,
                    {}, {"out", "title"}, command_page, false};

}  // namespace recheck::cli
