// recheck memory's outputs for people and for PyTorch's viewer: the picture (cli/memory_picture.h)
// and the snapshot in torch's memory snapshot form, pickled (cli/memory_snapshot.h). The picture
// in a real browser: tests/picture_in_browser.py.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "cli/memory_picture.h"
#include "cli/memory_snapshot.h"
#include "core/interpreter.h"
#include "properties/generator.h"
#include "suts/subject.h"
#include "tests/shell.h"

namespace recheck {
namespace {

using nlohmann::json;

std::string same_label(const std::string& mark) { return mark; }

// The bytes PyTorch's trace viewer stacks after each event, replayed as its process_alloc_data
// does: what is freed without having been allocated in the trace, and every active block of the
// snapshot's segments that the trace did not allocate, are there from the start.
std::vector<int64_t> viewer_totals(const json& snapshot) {
  const json& trace = snapshot["device_traces"][0];
  std::map<uint64_t, int64_t> allocated_in_trace;
  int64_t total = 0;
  for (const json& e : trace) {
    if (e["action"] == "alloc") allocated_in_trace[e["addr"].get<uint64_t>()] = e["size"].get<int64_t>();
    if (e["action"] == "free_completed") {
      const auto it = allocated_in_trace.find(e["addr"].get<uint64_t>());
      if (it != allocated_in_trace.end()) allocated_in_trace.erase(it);
      else total += e["size"].get<int64_t>();
    }
  }
  for (const json& segment : snapshot["segments"]) {
    uint64_t address = segment["address"].get<uint64_t>();
    for (const json& block : segment["blocks"]) {
      if (block["state"] == "active_allocated" && !allocated_in_trace.count(address)) {
        total += block["requested_size"].get<int64_t>();
      }
      address += block["size"].get<uint64_t>();
    }
  }
  std::vector<int64_t> totals{total};
  for (const json& e : trace) {
    if (e["action"] == "alloc") totals.push_back(total += e["size"].get<int64_t>());
    if (e["action"] == "free_completed") totals.push_back(total -= e["size"].get<int64_t>());
  }
  return totals;
}

memory::Timeline small_timeline() {
  memory::Timeline t;
  t.start = 1000;
  t.marks = {{0, "forward"}, {2, "backward"}};
  t.events = {{0x100, 100, 1100}, {0x900, -300, 800}, {0x200, 50, 850}, {0x100, -100, 750}};
  return t;
}

TEST(MemorySnapshot, the_viewer_stacks_exactly_what_the_probe_counted_after_every_event) {
  const memory::Timeline t = small_timeline();
  const std::vector<int64_t> totals = viewer_totals(cli::memory_snapshot(t, "run", same_label));
  ASSERT_EQ(totals.size(), t.events.size() + 1);
  EXPECT_EQ(totals[0], t.start);
  for (size_t i = 0; i < t.events.size(); ++i) EXPECT_EQ(totals[i + 1], t.events[i].held) << "event " << i;
}

TEST(MemorySnapshot, a_real_run_of_the_residual_stream_model_replays_to_the_probe_count) {
  ResidualStreamOptions model;
  model.layers = 2;
  model.streams = 2;
  model.seq = 8;
  model.hidden = 4;
  const Case c = residual_stream_case(model);
  RunOptions options;
  options.record_segment_calls = false;
  options.record_timeline = true;
  const Observations o = run_case(c, *make_checkpoint("nonclearing"), options);
  ASSERT_FALSE(o.error);
  ASSERT_FALSE(o.timeline.events.empty());
  const std::vector<int64_t> totals = viewer_totals(cli::memory_snapshot(o.timeline, "nonclearing", same_label));
  ASSERT_EQ(totals.size(), o.timeline.events.size() + 1);
  for (size_t i = 0; i < o.timeline.events.size(); ++i) ASSERT_EQ(totals[i + 1], o.timeline.events[i].held) << i;
  // Forward, the loss's backward, and each layer's recomputation, the last layer's first.
  std::vector<std::string> labels;
  for (const memory::TimelineMark& m : o.timeline.marks) labels.push_back(m.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"forward", "backward", "recompute root.ops[1]", "recompute root.ops[0]"}));
}

TEST(MemorySnapshot, each_event_names_the_phase_it_was_made_in) {
  const json snapshot = cli::memory_snapshot(small_timeline(), "run", same_label);
  const json& trace = snapshot["device_traces"][0];
  ASSERT_EQ(trace.size(), 6u);  // two allocations, two frees of two events each
  EXPECT_EQ(trace[0]["frames"][0]["name"], "run: forward");
  EXPECT_EQ(trace[3]["action"], "alloc");
  EXPECT_EQ(trace[3]["frames"][0]["name"], "run: backward");
  EXPECT_EQ(trace[4]["action"], "free_requested");
  EXPECT_EQ(trace[5]["action"], "free_completed");
}

TEST(Pickle, python_reads_back_the_same_values) {
  if (test_shell::run_shell("command -v python3").exit_code != 0) GTEST_SKIP() << "no python3 on PATH";
  const json value = {{"segments", json::array()},
                      {"ints", {0, -1, 127, 2147483647, -2147483648LL, 4294967296LL, -9007199254740993LL,
                                uint64_t{1} << 50}},
                      {"floats", {0.5, -2.25, 1e300}},
                      {"flags", {true, false, nullptr}},
                      {"text", "phase: layer 2 \u00e9"},
                      {"nested", {{"a", json::array({json::object()})}}}};
  const std::string path = ::testing::TempDir() + "/values.pickle";
  {
    std::ofstream out(path, std::ios::binary);
    out << cli::pickle(value);
  }
  const test_shell::Result r = test_shell::run_shell(
      "python3 -c 'import json, pickle, sys; print(json.dumps(pickle.load(open(sys.argv[1], \"rb\")), sort_keys=True, "
      "separators=(\",\", \":\"), ensure_ascii=False))' " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(json::parse(r.output), value) << r.output;
}

TEST(MemoryPicture, formats_bytes_in_binary_units) {
  EXPECT_EQ(cli::format_bytes(512), "512 B");
  EXPECT_EQ(cli::format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(cli::format_bytes(3.0 * 1024 * 1024 * 1024), "3.00 GiB");
}

struct Drawn {
  std::vector<std::pair<double, double>> points;  // every polyline point
  std::vector<double> legend_y;                   // the legend's text rows
  std::string svg;
};

Drawn draw(const memory::Timeline& a, const memory::Timeline& b, int64_t floor_a, int64_t floor_b) {
  Drawn d;
  d.svg = cli::memory_picture({cli::PictureSeries{"oracle", &a, floor_a, 1100, "#1f77b4"},
                               cli::PictureSeries{"sut", &b, floor_b, 1100, "#d62728"}},
                              "title", "", same_label);
  const std::regex polyline("points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(d.svg.begin(), d.svg.end(), polyline); it != std::sregex_iterator(); ++it) {
    std::istringstream points((*it)[1].str());
    std::string point;
    while (points >> point) {
      const size_t comma = point.find(',');
      d.points.emplace_back(std::stod(point.substr(0, comma)), std::stod(point.substr(comma + 1)));
    }
  }
  const std::regex legend("<text x=\"[0-9.]+\" y=\"([0-9.]+)\" font-size=\"12\">[a-z]+: floor");
  for (auto it = std::sregex_iterator(d.svg.begin(), d.svg.end(), legend); it != std::sregex_iterator(); ++it) {
    d.legend_y.push_back(std::stod((*it)[1].str()));
  }
  return d;
}

TEST(MemoryPicture, keeps_the_legend_above_every_line_and_marks_phases_and_floors_with_units) {
  memory::Timeline b = small_timeline();
  b.events.push_back({0x200, -50, 700});  // the sut frees one more block in backward
  const Drawn d = draw(small_timeline(), b, 750, 700);
  ASSERT_FALSE(d.points.empty());
  ASSERT_EQ(d.legend_y.size(), 2u);
  double highest_line = 1e9;
  for (const auto& [x, y] : d.points) highest_line = std::min(highest_line, y);
  for (double y : d.legend_y) EXPECT_LT(y, highest_line) << d.svg;
  EXPECT_NE(d.svg.find(">forward</text>"), std::string::npos);
  EXPECT_NE(d.svg.find(">backward</text>"), std::string::npos);
  EXPECT_NE(d.svg.find("floor of oracle: 750 B"), std::string::npos) << d.svg;
  EXPECT_NE(d.svg.find("floor of sut: 700 B"), std::string::npos) << d.svg;
  EXPECT_NE(d.svg.find("each phase as wide for both runs"), std::string::npos);
  // The byte axis is in the largest unit the most held reaches (1100 B: KiB), to a round top.
  EXPECT_NE(d.svg.find(">1.2 KiB</text>"), std::string::npos) << d.svg;
}

TEST(MemoryPicture, equal_floors_get_one_label_and_runs_whose_phases_differ_are_said_to) {
  memory::Timeline b = small_timeline();
  b.marks = {{0, "forward"}};
  const Drawn d = draw(small_timeline(), b, 750, 750);
  EXPECT_NE(d.svg.find("floor of oracle and sut: 750 B"), std::string::npos) << d.svg;
  EXPECT_NE(d.svg.find("the runs' phases differ"), std::string::npos);
}

}  // namespace
}  // namespace recheck
