// recheck triage: the findings of many inputs (a campaign's crash files, cases, the reports of
// several runs) grouped into buckets by cause, each bucket's first case minimized once.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "properties/buckets.h"
#include "properties/corpus.h"
#include "runner/bucket_minimize.h"
#include "runner/interrupts.h"
#include "runner/triage_session.h"

namespace recheck::cli {

namespace {

using nlohmann::json;

const char* kTriageHelp = R"(usage: recheck triage PATH... [--sut NAME] [--oracle NAME] [--out DIR] [--json FILE]
                      [--previous FILE] [--minimize-seconds S] [--device D] [--limits LIST]

Groups findings into buckets by cause signature (docs/triage.md), as `recheck run` does for its
own cases, for inputs found elsewhere: a campaign's crash files (libFuzzer's crash-*, timeout-*,
oom-*: decoded as the check target decodes them), JSON cases, and the --json reports of
`recheck run` and `recheck triage` (a SLURM array's tasks), whose buckets are merged as they
are. A folder is searched for all of them. Each case is checked against the oracle in a worker
process; each verdict that is not a pass counts in its cause's bucket, and a case that kills the
worker is a crash (pre-existing when the oracle dies on it too, alone or checked against itself).
After that, each bucket's first case is minimized once (alarms first) within --minimize-seconds
in all (default 60; 0: none), written to --out (default triage-findings) as bucket-N.min.json
with the expectation `recheck replay` checks. The bucket list is printed; --json writes it,
with the inputs read; --previous marks each bucket new, still present or gone against an
earlier report.
An input that cannot be read (a report cut short by a killed task, a case file that is not
one) is listed as incomplete and counted; the others are triaged all the same.
--sut, --oracle, --subject, --device, --limits and --claims as for `recheck run` and `minimize`.
Exit codes: 0 no alarm bucket; 1 an alarm bucket; 2 bad usage (a path that is not there, a
folder with nothing to triage, a --previous that is not a report).
)";

bool fuzzer_artifact(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  for (const char* prefix : {"crash-", "timeout-", "oom-", "leak-", "slow-unit-"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Every input under the paths, each folder's sorted: crash files and JSON files.
std::vector<std::string> inputs_under(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (fs::is_directory(path, error)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(path, error); !error && it != fs::recursive_directory_iterator();
           it.increment(error)) {
        std::error_code status_error;
        if (!it->is_regular_file(status_error)) continue;
        if (it->path().extension() == ".json" || fuzzer_artifact(it->path())) found.push_back(it->path().string());
      }
      if (error) throw UsageError(path + ": cannot read the folder: " + error.message());
      if (found.empty()) {
        throw UsageError(path + ": holds no crash file (crash-*, timeout-*, oom-*), case or report (*.json) to triage");
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(path, error)) {
      files.push_back(path);
    } else {
      throw UsageError(path + ": no such file or folder");
    }
  }
  return files;
}

int command_triage(const Args& args) {
  if (args.positional().empty()) throw UsageError("triage takes one or more files or folders");
  const std::vector<std::string> files = inputs_under(args.positional());
  const auto sut = make_variant(sut_option(args));
  const auto oracle = make_variant(oracle_option(args));
  const ClaimChoice claims = claims_option(args);
  const Limits limits = limits_of(args);
  const std::string device = device_option(args);
  const std::string out_dir = args.get("out", "triage-findings");
  check_output_folder(out_dir, "--out");
  check_output_files(args, {"json"});
  const double minimize_seconds = static_cast<double>(args.number("minimize-seconds", 60, 0, 7 * 24 * 3600));
  std::optional<Buckets> previous;
  if (args.has("previous")) {
    try {
      previous = buckets_of_report(args.get("previous", ""));
    } catch (const std::runtime_error& error) {
      throw UsageError(std::string("--previous: ") + error.what());
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::cerr << "recheck triage: " << files.size() << " inputs, sut " << sut->name() << " against oracle "
            << oracle->name() << "\n";

  const std::string replay = replay_command(*sut, *oracle);
  const std::string replay_suffix = " --sut " + sut->name() + " --oracle " + oracle->name() + claims_argument(claims);
  runner::TriagedInputs triaged = runner::triage_inputs(
      files, [&](const std::string& file) { return load_case_or_fuzz_input(file, limits, false, device); }, limits,
      *oracle, *sut, claims);
  Buckets& buckets = triaged.buckets;
  const double triage_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Each bucket's first case, minimized once; a bucket merged from a report keeps the minimized
  // case its run made.
  int minimized = 0;
  const auto first_case = [&](const Bucket& b) { return load_case_or_fuzz_input(b.file, limits, false, device); };
  if (buckets.size() > 0) {
    const double seconds = runner::interrupted() ? 0 : minimize_seconds;
    if (seconds > 0) make_output_folder(out_dir);
    minimized = runner::minimize_buckets(buckets, {first_case, "recheck triage", *oracle, *sut, claims, out_dir, seconds, replay,
                                           replay_suffix});
  }
  if (previous) buckets.compare_with(*previous);

  std::cout << "recheck triage: " << files.size() << " inputs (" << triaged.cases << " cases, " << triaged.reports << " reports"
            << (triaged.incomplete > 0 ? ", " + std::to_string(triaged.incomplete) + " incomplete" : "") << ") in " << std::fixed
            << std::setprecision(1) << triage_seconds << " s, sut " << sut->name() << ", oracle " << oracle->name()
            << (runner::interrupted() ? ", interrupted" : "") << "\n";
  if (buckets.size() > 0) std::cout << minimized << " buckets' first cases minimized now, into " << out_dir << "/\n";
  if (buckets.size() > 0) std::cout << buckets.describe();
  for (const json& input : triaged.inputs) {
    if (input.at("kind") == "incomplete") std::cout << "incomplete: " << input.at("error").get<std::string>() << "\n";
  }
  bool alarm = false;
  for (const Bucket* b : buckets.ordered()) alarm = alarm || (b->alarm && b->count > 0);
  if (args.has("json")) {
    write_json_report(args.get("json", "-"), {{"tool", "recheck"},
                                              {"command", "triage"},
                                              {"sut", sut->name()},
                                              {"oracle", oracle->name()},
                                              {"seconds", triage_seconds},
                                              {"cases", triaged.cases},
                                              {"reports", triaged.reports},
                                              {"incomplete", triaged.incomplete},
                                              {"findings", triaged.findings},
                                              {"inputs", triaged.inputs},
                                              {"buckets", buckets.to_json()}});
  }
  return alarm ? 1 : 0;
}

}  // namespace

const Command kTriage{"triage",
                      "group the findings of crash files, cases and run reports into buckets by cause, minimized once each",
                      kTriageHelp,
                      {},
                      {"subject", "sut", "oracle", "claims", "out", "json", "previous", "minimize-seconds", "device", "limits"},
                      command_triage,
                      true};

}  // namespace recheck::cli
