#include "cli/memory_picture.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace recheck::cli {

namespace {

constexpr double kWidth = 960, kHeight = 470;
constexpr double kLeft = 86, kRight = 24, kTop = 92, kBottom = 86;
constexpr double kCharWidth = 6.4;  // of the 11 px sans-serif labels, for fitting them

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", x);
  return buffer;
}

// A phase of one timeline: its label and its events [first, last).
struct Phase {
  std::string label;
  size_t first = 0, last = 0;
};

std::vector<Phase> phases_of(const memory::Timeline& timeline) {
  std::vector<Phase> phases;
  const size_t n = timeline.events.size();
  if (timeline.marks.empty() || timeline.marks.front().event > 0) phases.push_back(Phase{"", 0, 0});
  for (const memory::TimelineMark& mark : timeline.marks) phases.push_back(Phase{mark.label, std::min(mark.event, n), n});
  for (size_t j = 0; j + 1 < phases.size(); ++j) phases[j].last = phases[j + 1].first;
  phases.back().last = n;
  return phases;
}

// The y axis: from 0 to a round top, in one unit, with 4 to 8 steps.
struct Axis {
  double top = 1, step = 1, unit = 1;
  std::string unit_name = "B";
};

Axis axis_for(double most) {
  static const std::pair<double, const char*> kUnits[] = {
      {1024.0 * 1024 * 1024, "GiB"}, {1024.0 * 1024, "MiB"}, {1024.0, "KiB"}, {1.0, "B"}};
  Axis axis;
  most = std::max(most, 1.0);
  for (const auto& [size, name] : kUnits) {
    if (most >= size) {
      axis.unit = size;
      axis.unit_name = name;
      break;
    }
  }
  const double in_units = most / axis.unit;
  const double magnitude = std::pow(10.0, std::floor(std::log10(in_units)));
  for (double m : {0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0}) {
    const double step = m * magnitude;
    if (in_units / step <= 7.0) {
      axis.step = step;
      break;
    }
  }
  axis.top = std::ceil(in_units / axis.step - 1e-9) * axis.step;
  if (axis.top <= 0) axis.top = axis.step;
  return axis;
}

std::string tick_label(double value, const Axis& axis) {
  std::ostringstream out;
  out << value << " " << axis.unit_name;
  return out.str();
}

}  // namespace

std::string format_bytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = bytes;
  while (std::fabs(value) >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[48];
  if (unit == 0) std::snprintf(buffer, sizeof buffer, "%.0f B", value);
  else std::snprintf(buffer, sizeof buffer, "%.2f %s", value, kUnits[unit]);
  return buffer;
}

std::string memory_picture(const std::vector<PictureSeries>& series, const std::string& title,
                           const std::string& phase_note, std::string (*phase_label)(const std::string& mark)) {
  std::vector<std::vector<Phase>> phases;
  for (const PictureSeries& s : series) phases.push_back(phases_of(*s.timeline));
  bool aligned = !series.empty();
  for (const std::vector<Phase>& p : phases) {
    aligned = aligned && p.size() == phases.front().size();
    for (size_t j = 0; aligned && j < p.size(); ++j) aligned = p[j].label == phases.front()[j].label;
  }

  // Each phase's share of the width: the most events any series has in it (all of a series'
  // events where the phases do not line up), and at least 4% of the whole, so that a short
  // phase stays readable.
  const double plot_width = kWidth - kLeft - kRight, plot_height = kHeight - kTop - kBottom;
  const std::vector<Phase>& shown = phases.empty() ? std::vector<Phase>{} : phases.front();
  std::vector<double> share(shown.size(), 1.0);
  for (size_t j = 0; j < shown.size(); ++j) {
    for (const std::vector<Phase>& p : phases) {
      const Phase& phase = aligned ? p[j] : shown[j];
      share[j] = std::max(share[j], double(phase.last - phase.first) + 1.0);
    }
  }
  double total = 0;
  for (double s : share) total += s;
  for (double& s : share) s = std::max(s, 0.04 * total);
  total = 0;
  for (double s : share) total += s;
  std::vector<double> phase_x{kLeft};
  for (double s : share) phase_x.push_back(phase_x.back() + plot_width * s / std::max(total, 1.0));

  // Where event i of series k is drawn.
  auto event_x = [&](size_t k, size_t i) {
    const std::vector<Phase>& p = phases[k];
    if (!aligned) {
      const double n = double(series[k].timeline->events.size()) + 1.0;
      return kLeft + plot_width * (double(i) + 1.0) / n;
    }
    size_t j = 0;
    while (j + 1 < p.size() && i >= p[j].last) ++j;
    const double n = double(p[j].last - p[j].first) + 1.0;
    return phase_x[j] + (phase_x[j + 1] - phase_x[j]) * (double(i - p[j].first) + 1.0) / n;
  };

  double most = 1;
  for (const PictureSeries& s : series) {
    most = std::max({most, double(s.timeline->start), double(s.floor), double(s.peak)});
    for (const memory::TimelineEvent& e : s.timeline->events) most = std::max(most, double(e.held));
  }
  const Axis axis = axis_for(most);
  auto y_of = [&](double bytes) { return kTop + plot_height * (1.0 - bytes / (axis.top * axis.unit)); };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"14\" font-weight=\"bold\">" << escape(title) << "</text>\n";
  // The legend, in its own rows above the plot: never over a line.
  for (size_t k = 0; k < series.size(); ++k) {
    const double y = 44 + 17.0 * double(k);
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << y - 4 << "\" x2=\"" << kLeft + 24 << "\" y2=\"" << y - 4
        << "\" stroke=\"" << series[k].colour << "\" stroke-width=\"2.5\"/>\n"
        << "<text x=\"" << kLeft + 32 << "\" y=\"" << y << "\" font-size=\"12\">" << escape(series[k].name)
        << ": floor " << format_bytes(double(series[k].floor)) << ", peak " << format_bytes(double(series[k].peak))
        << "</text>\n";
  }
  // The phases: bands, their borders, and their labels under the axis (a second row where a
  // label is wider than its band, cut short where it is wider still).
  for (size_t j = 0; j < shown.size(); ++j) {
    const double x0 = phase_x[j], x1 = phase_x[j + 1];
    if (j % 2 == 1) {
      svg << "<rect x=\"" << number(x0) << "\" y=\"" << kTop << "\" width=\"" << number(x1 - x0) << "\" height=\""
          << plot_height << "\" fill=\"#f2f2f2\"/>\n";
    }
    if (j > 0) {
      svg << "<line x1=\"" << number(x0) << "\" y1=\"" << kTop << "\" x2=\"" << number(x0) << "\" y2=\""
          << kTop + plot_height << "\" stroke=\"#b0b0b0\" stroke-dasharray=\"2,3\"/>\n";
    }
    std::string label = phase_label(shown[j].label);
    const bool second_row = j % 2 == 1 && double(label.size()) * kCharWidth > (x1 - x0) - 4;
    const double row = second_row ? 15 : 0;
    // A label in the second row has its neighbours' room too: theirs are in the first.
    const double room = (second_row ? std::max((x1 - x0) * 1.9, 150.0) : x1 - x0) - 4;
    const size_t fits = static_cast<size_t>(std::max(1.0, room / kCharWidth));
    if (label.size() > fits) label = label.substr(0, fits > 1 ? fits - 1 : 1) + "\u2026";
    svg << "<text x=\"" << number((x0 + x1) / 2) << "\" y=\"" << kTop + plot_height + 16 + row
        << "\" text-anchor=\"middle\" fill=\"#404040\">" << escape(label) << "</text>\n";
  }
  // The byte axis: ticks, grid and units.
  for (double v = 0; v <= axis.top + 1e-9; v += axis.step) {
    const double y = y_of(v * axis.unit);
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << number(y) << "\" x2=\"" << kLeft + plot_width << "\" y2=\""
        << number(y) << "\" stroke=\"#e0e0e0\"/>\n"
        << "<text x=\"" << kLeft - 6 << "\" y=\"" << number(y + 4) << "\" text-anchor=\"end\">"
        << tick_label(v, axis) << "</text>\n";
  }
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\"" << kTop + plot_height
      << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + plot_height << "\" x2=\"" << kLeft + plot_width << "\" y2=\""
      << kTop + plot_height << "\" stroke=\"black\"/>\n"
      << "<text transform=\"translate(16," << number(kTop + plot_height / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
      << "bytes held</text>\n"
      << "<text x=\"" << kLeft << "\" y=\"" << kHeight - 14 << "\" fill=\"#404040\">"
      << (aligned ? "every allocation and free of the iteration in order, each phase as wide for both runs"
                  : "every allocation and free of the iteration in order (the runs' phases differ: each spread "
                    "over the width)")
      << (phase_note.empty() ? "" : "; " + escape(phase_note)) << "</text>\n";
  // The lines: bytes held after each event, a step at each; events that land in one pixel
  // column are drawn as that column's lowest, highest and last value.
  for (size_t k = 0; k < series.size(); ++k) {
    const memory::Timeline& t = *series[k].timeline;
    std::ostringstream points;
    double held = double(t.start);
    points << number(kLeft) << "," << number(y_of(held));
    size_t i = 0;
    while (i < t.events.size()) {
      const long column = std::lround(event_x(k, i));
      double low = held, high = held;
      const double before = held;
      while (i < t.events.size() && std::lround(event_x(k, i)) == column) {
        held = double(t.events[i].held);
        low = std::min(low, held);
        high = std::max(high, held);
        ++i;
      }
      const std::string x = std::to_string(column);
      points << " " << x << "," << number(y_of(before)) << " " << x << "," << number(y_of(low)) << " " << x << ","
             << number(y_of(high)) << " " << x << "," << number(y_of(held));
    }
    points << " " << number(kLeft + plot_width) << "," << number(y_of(held));
    svg << "<polyline fill=\"none\" stroke=\"" << series[k].colour << "\" stroke-width=\"1.6\" stroke-linejoin=\"round\""
        << " opacity=\"0.9\" points=\"" << points.str() << "\"/>\n";
  }
  // The floors: a dashed line each, labelled at the right, above the line; a floor with a higher
  // one less than a line of text above has its label below its line.
  std::map<int64_t, std::vector<size_t>> by_floor;
  for (size_t k = 0; k < series.size(); ++k) by_floor[series[k].floor].push_back(k);
  for (auto it = by_floor.begin(); it != by_floor.end(); ++it) {
    const double y = y_of(double(it->first));
    const std::string colour = it->second.size() == 1 ? series[it->second.front()].colour : "#404040";
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << number(y) << "\" x2=\"" << kLeft + plot_width << "\" y2=\""
        << number(y) << "\" stroke=\"" << colour << "\" stroke-dasharray=\"6,4\" stroke-width=\"1.2\"/>\n";
    std::string who;
    for (size_t k : it->second) who += (who.empty() ? "" : " and ") + series[k].name;
    const bool below = std::next(it) != by_floor.end() && y - y_of(double(std::next(it)->first)) < 14;
    const double label_y = below ? y + 13 : y - 4;
    svg << "<text x=\"" << kLeft + plot_width - 4 << "\" y=\"" << number(label_y) << "\" text-anchor=\"end\" fill=\""
        << colour << "\" stroke=\"white\" stroke-width=\"4\" paint-order=\"stroke\">floor of " << escape(who) << ": " << format_bytes(double(it->first)) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace recheck::cli
