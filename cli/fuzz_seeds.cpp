// recheck fuzz-seeds: a seed corpus for recheck_fuzz_check that reaches every op and corner.
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "cli/command.h"
#include <cstdio>
#include <random>

#include "properties/corpus.h"
#include "properties/generator.h"

namespace recheck::cli {

namespace {

const char* kFuzzSeedsHelp = R"(usage: recheck fuzz-seeds DIR [--seed N] [--tries N]

Writes a seed corpus for the fuzz target recheck_fuzz_check into DIR: random byte strings (16 to
200 bytes, from --seed, default 1), each kept when the case it decodes to reaches an op kind or a
corner (case_features: argument kinds, RNG sources, nesting, ...) that no kept input reached
before. Stops after --tries inputs (default 20000). A campaign needs seeds when its targets are
built with gcc (no coverage instrumentation) and starts faster with them in any case.
)";

// The labels a seed input is kept for: the op kinds its case holds and its corners.
std::set<std::string> seed_labels(const Case& c) {
  std::set<std::string> labels;
  std::function<void(const Segment&)> walk = [&](const Segment& segment) {
    for (const Op& op : segment.ops) {
      labels.insert(std::string("op: ") + op_name(op));
      if (const Segment* body = op_body(op)) walk(*body);
    }
  };
  walk(c.root);
  for (const std::string& f : case_features(c)) labels.insert(f);
  return labels;
}

int command_fuzz_seeds(const Args& args) {
  if (args.positional().size() != 1) throw UsageError("fuzz-seeds takes one folder");
  const std::string dir = args.positional()[0];
  const auto seed = static_cast<uint64_t>(args.number("seed", 1, 0, INT64_MAX));
  const int64_t tries = args.number("tries", 20000, 1, 100000000);
  make_output_folder(dir);
  std::mt19937_64 random(seed);
  std::set<std::string> covered;
  int written = 0;
  for (int64_t i = 0; i < tries; ++i) {
    std::string bytes(16 + random() % 185, '\0');
    for (char& b : bytes) b = static_cast<char>(random() & 0xff);
    const Case c = decode_case(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    bool adds = false;
    for (const std::string& label : seed_labels(c)) adds |= covered.insert(label).second;
    if (!adds) continue;
    char name[32];
    std::snprintf(name, sizeof name, "seed-%03d", written++);
    write_file_atomically((std::filesystem::path(dir) / name).string(), bytes);
  }
  std::cout << "wrote " << written << " seed inputs to " << dir << ", reaching " << covered.size()
            << " op kinds and corners:\n";
  for (const std::string& label : covered) std::cout << "  " << label << "\n";
  return 0;
}

}  // namespace

const Command kFuzzSeeds{"fuzz-seeds", "write a seed corpus for recheck_fuzz_check that reaches every op and argument kind", kFuzzSeedsHelp, {}, {"seed", "tries"}, command_fuzz_seeds, false};

}  // namespace recheck::cli
