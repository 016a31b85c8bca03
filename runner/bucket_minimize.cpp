#include "runner/bucket_minimize.h"

#include <algorithm>
#include <chrono>

#include "properties/corpus.h"
#include "properties/reduce.h"
#include "properties/report.h"
#include "runner/case_worker.h"
#include "runner/interrupts.h"

namespace recheck::runner {

int minimize_buckets(Buckets& buckets, const BucketMinimizing& how) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(how.seconds));
  std::vector<Bucket*> todo;
  for (Bucket* b : buckets.ordered()) {
    if (b->count > 0 && b->first_case >= 0 && b->minimized.empty() && (b->alarm || !how.alarms_only)) todo.push_back(b);
  }
  // ordered() puts the alarms first.
  size_t alarms = 0;
  for (const Bucket* b : todo) alarms += b->alarm ? 1 : 0;
  int minimized = 0;
  for (size_t i = 0; i < todo.size() && !runner::interrupted(); ++i) {
    Bucket& b = *todo[i];
    const auto now = Clock::now();
    if (now >= deadline) break;
    // An equal share of what is left for each bucket still to do in its group (alarms, others).
    const size_t left = i < alarms ? alarms - i : todo.size() - i;
    const auto until = now + (deadline - now) / static_cast<int64_t>(left);
    const bool crash = b.property == kCrashProperty;
    Case original;
    try {
      original = how.first_case(b);
    } catch (const CaseError&) {
      continue;  // its file went away or changed: the report still names it
    }
    runner::CaseWorker worker("bucket " + std::to_string(i + 1), original.device, how.oracle, how.sut, Limits{});
    worker.hold_to_claims(how.claims);
    // A candidate that hangs costs no more than this bucket's share (and at least a second).
    worker.limit_case_seconds(std::max(1.0, std::chrono::duration<double>(until - now).count()));
    FailureSignature signature;
    signature.property = b.property;
    if (!crash) {
      const std::optional<Classification> c = classification_named(b.classification);
      if (!c) continue;
      signature.classification = *c;
      signature.cause = b.signature;
    }
    auto still_fails = [&](const Case& candidate) {
      try {
        const runner::IsolatedCheck checked = worker.check(candidate);
        // A crash bucket keeps its kind: a hang stays a hang, a signal a signal.
        if (crash) return !checked.result.has_value() && checked.hung == is_hang(b.signature);
        return checked.result && shows(*checked.result, signature);
      } catch (const CaseError&) {
        return false;
      }
    };
    // The first case shows it (the run said so); a crash is kept only from a fresh worker.
    if (!still_fails(original)) continue;
    Case smallest = reduce_case(original, still_fails, nullptr,
                                [&] { return runner::interrupted() || Clock::now() >= until; });
    worker.stop();
    const CaseStats before = stats(original);
    const CaseStats after = stats(smallest);
    smallest.note = how.sut.name() + ": " + b.property + " " + b.classification + " against " + how.oracle.name() +
                    ", cause: " + b.signature + " (minimized by " + how.by + " from " +
                    (b.found_in.empty() ? "case " + std::to_string(b.first_case) + ", draw seed " + std::to_string(b.draw_seed)
                                        : b.found_in) +
                    ", " + std::to_string(before.ops) + " ops)";
    smallest.expect = {Expectation{how.sut.name(), b.property, b.classification}};
    const std::string file = how.out_dir + "/bucket-" + std::to_string(i + 1) + ".min.json";
    try {
      save_case_file(smallest, file);
    } catch (const OutputError&) {
      continue;  // the run's report still names the first case
    }
    b.minimized = file;
    b.minimized_ops = after.ops;
    b.replay = how.replay_prefix + " repro " + file + how.replay_suffix;
    ++minimized;
  }
  // A bucket not minimized replays its first case.
  for (Bucket* b : todo) {
    if (b->minimized.empty() && !b->file.empty()) b->replay = how.replay_prefix + " repro " + b->file + how.replay_suffix;
  }
  return minimized;
}

}  // namespace recheck::runner
