#include "properties/junit.h"

#include <sstream>

#include "properties/corpus.h"
#include "properties/properties.h"

namespace recheck {

namespace {

std::string escaped(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no other control character than tab, newline and carriage return.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += '?';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

// A finding that fails the gate: a regression, a divergence (is_alarm) or a crash the oracle does
// not make alone (a pre-existing one is marked so).
bool fails_the_gate(const nlohmann::json& finding) {
  const std::string classification = finding.value("classification", "");
  const std::optional<Classification> c = classification_named(classification);
  return (classification == kCrash && !finding.value("pre_existing", false)) || (c && is_alarm(*c));
}

}  // namespace

std::string junit_xml(const nlohmann::json& report) {
  const std::string suite = "recheck run: sut " + report.at("sut").get<std::string>() + ", oracle " +
                            report.at("oracle").get<std::string>() + ", seed " + report.at("seed").dump();
  std::vector<std::string> properties;
  for (const auto& item : report.at("summary").items()) properties.push_back(item.key());
  properties.push_back(kCrashProperty);
  std::ostringstream cases;
  int failures = 0;
  for (const std::string& property : properties) {
    std::ostringstream failure_text;
    int alarms = 0;
    for (const nlohmann::json& f : report.at("findings")) {
      if (f.value("property", "") != property || !fails_the_gate(f)) continue;
      ++alarms;
      failure_text << f.value("classification", "") << " in case " << f.value("case", int64_t{0}) << " (draw seed "
                   << f.value("draw_seed", uint64_t{0}) << ")\n  sut: " << f.value("sut", "")
                   << "\n  oracle: " << f.value("oracle", "") << "\n  case: " << f.value("file", "(not written)")
                   << "\n";
    }
    cases << "  <testcase classname=\"recheck\" name=\"" << escaped(property) << "\">\n";
    const nlohmann::json row = report.at("summary").value(property, nlohmann::json::object());
    if (row.contains("not_checked")) {
      cases << "    <skipped message=\"" << escaped(row.at("not_checked").get<std::string>()) << "\"/>\n";
    }
    if (alarms > 0) {
      ++failures;
      cases << "    <failure message=\"" << alarms << " regression, divergence or crash finding"
            << (alarms == 1 ? "" : "s") << "\">" << escaped(failure_text.str()) << "</failure>\n";
    }
    cases << "  </testcase>\n";
  }
  std::ostringstream xml;
  xml << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuite name=\"" << escaped(suite) << "\" tests=\"" << properties.size() << "\" failures=\"" << failures
      << "\" errors=\"" << (report.value("error", nlohmann::json()).is_null() ? 0 : 1) << "\" time=\""
      << report.value("seconds", 0.0) << "\">\n"
      << "  <properties>\n"
      << "    <property name=\"cases\" value=\"" << report.value("cases", int64_t{0}) << "\"/>\n"
      << "    <property name=\"interrupted\" value=\"" << (report.value("interrupted", false) ? "true" : "false")
      << "\"/>\n"
      << (report.contains("claims") ? "    <property name=\"claims held\" value=\"" +
                                          escaped(report.at("claims").at("held").dump()) + "\"/>\n"
                                    : std::string())
      << "  </properties>\n"
      << cases.str() << "</testsuite>\n";
  return xml.str();
}

}  // namespace recheck
