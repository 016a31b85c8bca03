// recheck memory's picture: the bytes two runs held over one iteration, on one byte axis, with
// the phases (forward, each layer's recomputation and backward, the rest of backward) aligned
// between the two and their floors marked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory.h"

namespace recheck::cli {

// One run's line: its timeline, the floor it settled at after the iteration, its peak, and how
// the legend names it.
struct PictureSeries {
  std::string name;
  const memory::Timeline* timeline = nullptr;
  int64_t floor = 0;
  int64_t peak = 0;
  std::string colour;
};

// "1.50 MiB": bytes in the largest binary unit that keeps the number at 1 or more.
std::string format_bytes(double bytes);

// The SVG of the series (the first is drawn underneath). Phases come from the timelines' marks,
// their labels passed through `phase_label`; where the series' marks name the same phases in the
// same order, each phase spans the same width for all (sized by the most events any series has
// in it), so that forward, each recomputation and backward line up; otherwise each series is
// spread over the width by its own event count and the phases shown are the first series'.
// `phase_note` says under the picture what the phase labels mean.
std::string memory_picture(const std::vector<PictureSeries>& series, const std::string& title,
                           const std::string& phase_note, std::string (*phase_label)(const std::string& mark));

}  // namespace recheck::cli
