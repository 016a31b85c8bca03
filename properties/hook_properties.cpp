// The hook properties: what the hooks a case hung saw, compared with eager mode's and the
// oracle's calls.
#include "properties/hook_properties.h"

#include <map>
#include <string>
#include <vector>

#include "properties/records.h"

namespace recheck {

namespace {

// One hook's calls, by its op's site, in the order they came; the sites in the order of their
// first call.
struct CallsBySite {
  std::vector<std::string> sites;
  std::map<std::string, std::vector<const HookCall*>> calls;
  explicit CallsBySite(const std::vector<HookCall>& all) {
    for (const HookCall& call : all) {
      auto& mine = calls[call.site];
      if (mine.empty()) sites.push_back(call.site);
      mine.push_back(&call);
    }
  }
  const std::vector<const HookCall*>& of(const std::string& site) const {
    static const std::vector<const HookCall*> none;
    auto found = calls.find(site);
    return found == calls.end() ? none : found->second;
  }
};

// Where the hooks whose calls these are were hung: "hung in forward", "hung in a recomputation",
// "hung in forward and in a recomputation" (the same op ran in both).
std::string where_hung(const std::vector<const HookCall*>& calls) {
  bool forward = false;
  bool recomputation = false;
  for (const HookCall* call : calls) (call->hung_in_recomputation ? recomputation : forward) = true;
  if (forward && recomputation) return "hung in forward and in a recomputation";
  return recomputation ? "hung in a recomputation" : "hung in forward";
}

}  // namespace

bool same_hook_calls(const std::vector<HookCall>& a, const std::vector<HookCall>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].site != b[k].site || bitwise_difference(a[k].grad, b[k].grad)) return false;
  }
  return true;
}

// As grads-match-eager, after an error in backward the calls are not compared with eager mode's:
// which hooks the engine had reached depends on the order it ran the graph, which checkpointing
// changes (hooks-bitwise compares them with the oracle's).
Verdict hook_calls_match_eager(const Observations& subject, const Runs& runs) {
  const Observations& eager = runs.eager;
  for (size_t i = 0; i < common_iterations(subject, eager); ++i) {
    const IterationRecord& sr = subject.iterations[i];
    const IterationRecord& er = eager.iterations[i];
    if (!comparable(sr, er) || (sr.error && sr.error->phase != "forward")) continue;
    const CallsBySite s(sr.hook_calls);
    const CallsBySite e(er.hook_calls);
    std::vector<std::string> sites = e.sites;
    for (const std::string& site : s.sites) {
      if (e.of(site).empty()) sites.push_back(site);
    }
    for (const std::string& site : sites) {
      const auto& mine = s.of(site);
      const auto& eager_calls = e.of(site);
      const std::string where = at_record(i, sr) + ", the hook at " + site;
      if (mine.size() != eager_calls.size()) {
        const std::string how = mine.size() > eager_calls.size() ? "more" : "fewer";
        const std::string hung = mine.empty() ? "never hung or never reached" : where_hung(mine);
        return fail_at(i, sr, where, std::nullopt,
                       "called " + how + " times than eager mode's (" + std::to_string(mine.size()) + " vs " +
                           std::to_string(eager_calls.size()) + "), " + hung);
      }
      for (size_t k = 0; k < mine.size(); ++k) {
        const at::Tensor& reference = eager_calls[k]->grad;
        const int64_t bound = reference.defined() ? grad_ulp_bound(reference.scalar_type()) : 0;
        if (auto d = scaled_ulp_difference(mine[k]->grad, reference, bound)) {
          return fail_at(i, sr, where + ", call " + std::to_string(k) + " (" + where_hung({mine[k]}) + "), its gradient", d);
        }
      }
    }
  }
  return Verdict::pass();
}

Verdict hook_calls_bitwise(const Observations& subject, const Runs& runs) {
  const Observations& oracle = runs.oracle;
  for (size_t i = 0; i < common_iterations(subject, oracle); ++i) {
    const IterationRecord& sr = subject.iterations[i];
    if (!comparable(sr, oracle.iterations[i])) continue;
    const auto& s = sr.hook_calls;
    const auto& o = oracle.iterations[i].hook_calls;
    for (size_t k = 0; k < s.size() || k < o.size(); ++k) {
      const std::string where = at_record(i, sr) + ", hook call " + std::to_string(k);
      if (k >= s.size() || k >= o.size()) {
        const auto& longer = k < s.size() ? s : o;
        return fail_at(i, sr, where, std::nullopt,
                       std::string(k < s.size() ? "one more" : "one fewer") + " than the oracle's: the hook at " +
                           longer[k].site + " (" + where_hung({&longer[k]}) + ")");
      }
      if (s[k].site != o[k].site) {
        return fail_at(i, sr, where, std::nullopt, "the hook at " + s[k].site + ", the oracle's at " + o[k].site);
      }
      if (auto d = bitwise_difference(s[k].grad, o[k].grad)) return fail_at(i, sr, where + " (the hook at " + s[k].site + "), its gradient", d);
    }
  }
  return Verdict::pass();
}

}  // namespace recheck
