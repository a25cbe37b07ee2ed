// junit.xml: the checks as test cases, for CI systems that show JUnit results (GitLab, Jenkins,
// GitHub test reporters).
//
//   <testsuite name="parity compare" tests failures errors skipped timestamp>
//     <properties> verdict, headline, the runs, each diagnosis </properties>
//     <testcase classname="parity.compare" name="<check id>">       a pass
//       <failure message="<summary>" type="fail"> summary, figures, details, worst tensors
//       <skipped message="<summary>"/>                             not recorded
//       <system-out> summary and figures </system-out>             a pass or a warning
//     </testcase>
//     <system-out> headline and diagnoses </system-out>
//   </testsuite>
//
// A warning is not a failure (the verdict can still be "equivalent"), so it is a passing test
// case whose output starts with "warning:". Every string goes through markup_escape, which also
// replaces the control characters XML 1.0 cannot carry at all.
#include <fmt/format.h>

#include "escape.h"
#include "number_format.h"
#include "parity/reports/reports.h"
#include "report_content.h"

namespace parity::reports {
namespace {

using compare::Check;
using compare::CheckStatus;
using compare::ComparisonResult;

std::string attribute(const std::string& text) { return markup_attribute_escape(text); }

// The check in plain text: summary, figures, details, worst tensors (all of them: junit.xml is
// read by tools, and CI shows it folded).
std::string check_text(const Check& check) {
  std::string text = check.summary + "\n";
  if (check.first_failing_step) {
    text += "first failing step: " + std::to_string(*check.first_failing_step) + "\n";
  }
  for (const compare::Figure& figure : check.figures) {
    text += figure_label(figure.name) + ": " + format_figure_value(figure) + "\n";
  }
  for (const std::string& detail : check.details) text += detail + "\n";
  for (const compare::TensorDelta& tensor : check.tensors) {
    const std::vector<std::string> cells = tensor_cells(tensor);
    const auto& columns = tensor_columns();
    text += "tensor";
    for (size_t c = 0; c < cells.size(); ++c) text += " " + columns[c] + "=" + cells[c];
    text += "\n";
  }
  return text;
}

std::string testcase_xml(const Check& check) {
  std::string out = fmt::format("  <testcase classname=\"parity.compare\" name=\"{}\">\n",
                                attribute(check.id.empty() ? check.title : check.id));
  switch (check.status) {
    case CheckStatus::kFail:
      out += fmt::format("    <failure message=\"{}\" type=\"fail\">{}</failure>\n",
                         attribute(check.summary), markup_escape(check_text(check)));
      break;
    case CheckStatus::kNotRecorded:
      out += fmt::format("    <skipped message=\"{}\"/>\n",
                         attribute("not recorded: " + check.summary));
      break;
    case CheckStatus::kWarn:
      out +=
          "    <system-out>" + markup_escape("warning: " + check_text(check)) + "</system-out>\n";
      break;
    case CheckStatus::kPass:
      out += "    <system-out>" + markup_escape(check_text(check)) + "</system-out>\n";
      break;
  }
  return out + "  </testcase>\n";
}

std::string property_xml(const std::string& name, const std::string& value) {
  return fmt::format("    <property name=\"{}\" value=\"{}\"/>\n", attribute(name),
                     attribute(value));
}

}  // namespace

std::string render_junit(const ComparisonResult& result) {
  size_t num_failures = 0;
  size_t num_skipped = 0;
  for (const Check& check : result.checks) {
    num_failures += check.status == CheckStatus::kFail ? 1 : 0;
    num_skipped += check.status == CheckStatus::kNotRecorded ? 1 : 0;
  }
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuite name=\"parity compare\" tests=\"{}\" failures=\"{}\" errors=\"0\" "
      "skipped=\"{}\" timestamp=\"{}\">\n  <properties>\n",
      result.checks.size(), num_failures, num_skipped, attribute(result.generated_at));
  out += property_xml("verdict", compare::to_string(result.verdict));
  out += property_xml("headline", result.headline);
  for (const compare::RunSummary* run : {&result.a, &result.b}) {
    out += property_xml("run " + run->label, run->producer + " " + run->dir);
  }
  std::string diagnoses;
  for (const compare::Diagnosis& diagnosis : result.diagnoses) {
    out += property_xml("diagnosis " + diagnosis.pitfall, diagnosis.title);
    diagnoses += diagnosis.pitfall + " " + diagnosis.title + ": " + diagnosis.evidence +
                 "\n  fix: " + diagnosis.fix + "\n";
  }
  out += "  </properties>\n";
  for (const Check& check : result.checks) out += testcase_xml(check);
  out += "  <system-out>" +
         markup_escape(std::string(compare::to_string(result.verdict)) + ": " + result.headline +
                       "\n" + diagnoses) +
         "</system-out>\n</testsuite>\n";
  return out;
}

}  // namespace parity::reports
