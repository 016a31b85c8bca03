// A CPU timeline in PyTorch's memory snapshot form (what torch.cuda.memory._snapshot() returns,
// pickled), so that the field's viewer draws recheck's runs as it draws a GPU's:
//   python -m torch.cuda._memory_viz trace_plot FILE -o OUT.html
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/memory.h"

namespace recheck::cli {

// The snapshot of one run's timeline, device 0: every allocation and free as the trace's
// "alloc", "free_requested" and "free_completed" events, each with one frame naming the phase it
// was made in (the timeline's marks, through `phase_label`); the blocks alive at the end as
// segments of one block each; and the bytes held before the timeline began that it never frees
// (parameters, the last floor), whose addresses a timeline does not know, as one block of a
// segment of their own, so that the viewer's total at every point is the probe's count.
nlohmann::json memory_snapshot(const memory::Timeline& timeline, const std::string& run_name,
                               std::string (*phase_label)(const std::string& mark));

// Python's pickle, protocol 2, of a JSON value (objects, arrays, strings, integers, floats,
// booleans, null): what pickle.load reads back as the same dicts, lists and values.
std::string pickle(const nlohmann::json& value);

}  // namespace recheck::cli
