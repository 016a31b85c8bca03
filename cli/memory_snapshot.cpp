#include "cli/memory_snapshot.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>

namespace recheck::cli {

using nlohmann::json;

namespace {

// Where the viewer puts the bytes held before the timeline began: above any user-space address
// (x86-64 and AArch64 keep them under 2^48) and exact as a JavaScript number.
constexpr uint64_t kHeldBeforeAddress = uint64_t{1} << 50;

json frame(const std::string& name) { return json::array({{{"filename", "recheck"}, {"line", 0}, {"name", name}}}); }

json segment(uint64_t address, int64_t bytes, const json& frames) {
  return {{"device", 0},
          {"address", address},
          {"total_size", bytes},
          {"allocated_size", bytes},
          {"active_size", bytes},
          {"requested_size", bytes},
          {"stream", 0},
          {"segment_type", "large"},
          {"segment_pool_id", json::array({0, 0})},
          {"is_expandable", false},
          {"frames", json::array()},
          {"blocks", json::array({{{"size", bytes}, {"requested_size", bytes}, {"state", "active_allocated"},
                                   {"frames", frames}}})}};
}

void put_int(std::string& out, int64_t x) {
  if (x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max()) {
    out += 'J';  // BININT: 4 bytes, little-endian, signed
    const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(x));
    for (int i = 0; i < 4; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
    return;
  }
  out += '\x8a';  // LONG1: a length byte, then two's complement, little-endian
  out += '\x08';
  const uint64_t u = static_cast<uint64_t>(x);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
}

void put(std::string& out, const json& value) {
  switch (value.type()) {
    case json::value_t::null: out += 'N'; break;
    case json::value_t::boolean: out += value.get<bool>() ? '\x88' : '\x89'; break;
    case json::value_t::number_integer: put_int(out, value.get<int64_t>()); break;
    case json::value_t::number_unsigned: {
      const uint64_t u = value.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw std::invalid_argument("pickle: an integer above 2^63 - 1");
      }
      put_int(out, static_cast<int64_t>(u));
      break;
    }
    case json::value_t::number_float: {
      out += 'G';  // BINFLOAT: 8 bytes, big-endian
      const double d = value.get<double>();
      uint64_t u;
      std::memcpy(&u, &d, sizeof u);
      for (int i = 7; i >= 0; --i) out += static_cast<char>((u >> (8 * i)) & 0xff);
      break;
    }
    case json::value_t::string: {
      const std::string& s = value.get_ref<const std::string&>();
      out += 'X';  // BINUNICODE: a 4-byte length, then UTF-8
      const uint32_t n = static_cast<uint32_t>(s.size());
      for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
      out += s;
      break;
    }
    case json::value_t::array:
      out += ']';  // EMPTY_LIST, then MARK items APPENDS
      if (!value.empty()) {
        out += '(';
        for (const json& item : value) put(out, item);
        out += 'e';
      }
      break;
    case json::value_t::object:
      out += '}';  // EMPTY_DICT, then MARK key value ... SETITEMS
      if (!value.empty()) {
        out += '(';
        for (const auto& [key, item] : value.items()) {
          put(out, json(key));
          put(out, item);
        }
        out += 'u';
      }
      break;
    default: throw std::invalid_argument("pickle: a value of JSON type " + std::string(value.type_name()));
  }
}

}  // namespace

std::string pickle(const json& value) {
  std::string out = "\x80\x02";  // PROTO 2
  put(out, value);
  out += '.';  // STOP
  return out;
}

json memory_snapshot(const memory::Timeline& timeline, const std::string& run_name,
                     std::string (*phase_label)(const std::string& mark)) {
  json trace = json::array();
  std::map<uintptr_t, std::pair<int64_t, std::string>> alive;  // made in the timeline, not yet freed
  int64_t held_before_and_freed = 0;
  size_t next_mark = 0;
  std::string phase = "before the first mark";
  for (size_t i = 0; i < timeline.events.size(); ++i) {
    while (next_mark < timeline.marks.size() && timeline.marks[next_mark].event <= i) {
      phase = phase_label(timeline.marks[next_mark++].label);
    }
    const memory::TimelineEvent& e = timeline.events[i];
    const json base = {{"addr", e.address}, {"stream", 0}, {"time_us", i}};
    if (e.bytes > 0) {
      json event = base;
      event["action"] = "alloc";
      event["size"] = e.bytes;
      event["frames"] = frame(run_name + ": " + phase);
      trace.push_back(std::move(event));
      alive[e.address] = {e.bytes, phase};
      continue;
    }
    const auto it = alive.find(e.address);
    if (it != alive.end()) alive.erase(it);
    else held_before_and_freed += -e.bytes;
    for (const char* action : {"free_requested", "free_completed"}) {
      json event = base;
      event["action"] = action;
      event["size"] = -e.bytes;
      event["frames"] = frame(run_name + ": freed in " + phase);
      trace.push_back(std::move(event));
    }
  }
  json segments = json::array();
  const int64_t held_throughout = timeline.start - held_before_and_freed;
  if (held_throughout > 0) {
    segments.push_back(segment(kHeldBeforeAddress, held_throughout,
                               frame(run_name + ": held before the iteration and throughout it (parameters, "
                                                "inputs, what the previous iteration left)")));
  }
  for (const auto& [address, block] : alive) {
    segments.push_back(segment(address, block.first, frame(run_name + ": " + block.second + ", still held at the end")));
  }
  return {{"segments", segments}, {"device_traces", json::array({trace})}};
}

}  // namespace recheck::cli
