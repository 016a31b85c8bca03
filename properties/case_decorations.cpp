#include "properties/case_decorations.h"

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/torch_version.h"
#include "properties/choices.h"

namespace recheck {

using namespace choices;

namespace {

bool raises(const Segment& segment) {
  return any_op(segment, [](const Op& op) { return std::holds_alternative<Raise>(op); });
}

void raise_in_first_iteration_only(Segment& segment) {
  for (Op& op : segment.ops) {
    if (auto* raise = std::get_if<Raise>(&op); raise != nullptr && raise->when == Raise::When::always) {
      raise->when = Raise::When::first_iteration;
    }
    if (auto* checkpoint = std::get_if<Checkpoint>(&op)) raise_in_first_iteration_only(*checkpoint->body);
    if (auto* fork = std::get_if<Fork>(&op)) raise_in_first_iteration_only(*fork->body);
  }
}

// Wraps all of `segment`'s ops in an autocast region: the region's body takes the segment's
// inputs in order, so every value keeps its number inside it, and the segment returns what the
// region returns.
void wrap_in_autocast(Segment& segment, int input_count, bool enabled, const std::string& device_type,
                      Autocast::Precision dtype) {
  Autocast region;
  region.enabled = enabled;
  region.device_type = device_type;
  region.dtype = dtype;
  for (int i = 0; i < input_count; ++i) region.args.push_back(i);
  *region.body = segment;
  segment.ops.clear();
  segment.outputs.clear();
  for (size_t k = 0; k < region.body->outputs.size(); ++k) segment.outputs.push_back(input_count + static_cast<int>(k));
  segment.ops.push_back(std::move(region));
}

bool contains_checkpoint(const Segment& segment) {
  return any_op(segment, [](const Op& op) { return std::holds_alternative<Checkpoint>(op); });
}

// Every checkpoint body of `segment`, outermost first, with its input count.
void checkpoint_bodies(Segment& segment, std::vector<std::pair<Segment*, int>>& out) {
  for (Op& op : segment.ops) {
    if (auto* checkpoint = std::get_if<Checkpoint>(&op)) {
      out.emplace_back(&*checkpoint->body, static_cast<int>(checkpoint->args.size()));
      checkpoint_bodies(*checkpoint->body, out);
    } else if (auto* fork = std::get_if<Fork>(&op)) {
      checkpoint_bodies(*fork->body, out);
    }
  }
}

}  // namespace

void draw_decorations(Case& c) {
  // A loop that goes on after an error (one that skips the batch), for a case that can raise
  // and has an iteration after the first. Drawn last, so that the graph is the one drawn without
  // it; mostly a batch that fails once: the raises in forward then raise in the first iteration.
  if (c.iterations > 1 && raises(c.root) && choose_in_range(0, 2) == 1) {
    c.continue_after_error = true;
    if (choose_in_range(0, 4) != 0) raise_in_first_iteration_only(c.root);
  }
  // Autocast, also drawn after the graph: one case in five runs its forward in an autocast
  // region (bfloat16, or float16 half the time where the device has it), backward outside it as
  // training loops do; three in ten toggle it inside a checkpoint's body (off inside an autocast
  // forward, on inside a plain one), preferably a body with checkpoints inside: they record a
  // state their caller did not.
  const int64_t region = choose_in_range(0, 10);
  const bool around = region >= 8;
  std::vector<std::pair<Segment*, int>> bodies;
  checkpoint_bodies(c.root, bodies);
  std::vector<std::pair<Segment*, int>> nesting;
  for (const auto& entry : bodies) {
    if (contains_checkpoint(*entry.first)) nesting.push_back(entry);
  }
  if (!nesting.empty()) bodies = std::move(nesting);
  if (region >= 6 && region != 8 && !bodies.empty()) {
    const auto& [body, inputs] = bodies[choose_in_range<size_t>(0, bodies.size())];
    wrap_in_autocast(*body, inputs, /*enabled=*/!around, c.device, Autocast::Precision::bfloat16);
  }
  if (around) {
    // Drawn on every build; float16 where this libtorch's autocast has it on the device.
    const bool half = choose_in_range(0, 2) == 1;
    const Autocast::Precision dtype =
        half && compat::autocast_has_float16(c.device) ? Autocast::Precision::float16 : Autocast::Precision::bfloat16;
    wrap_in_autocast(c.root, static_cast<int>(c.leaves.size()), /*enabled=*/true, c.device, dtype);
  }
}

}  // namespace recheck
