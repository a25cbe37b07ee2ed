// report.html: one self-contained page, top to bottom in the order a person asks the questions.
//   1. the verdict: a badge, the headline, which runs, a tally of the checks;
//   2. the diagnoses: the pitfall, its evidence and the fix;
//   3. the checks: status and summary, then each check's figures, details and worst tensors;
//   4. the charts, step by step;
//   5. the two runs: metadata, versions, tolerances.
// The markup is also well-formed XML (void elements closed, only XML's five named references),
// so tests and tools can parse it as such.
#include <fmt/format.h>

#include <algorithm>

#include "escape.h"
#include "html_charts.h"
#include "html_parts.h"
#include "number_format.h"
#include "parity/reports/reports.h"
#include "report_content.h"
#include "report_limits.h"

namespace parity::reports {
namespace {

using compare::Check;
using compare::CheckStatus;
using compare::ComparisonResult;
using compare::Verdict;

std::string e(const std::string& text) { return markup_escape(text); }

std::string run_line(const compare::RunSummary& run) {
  return fmt::format("{} <code>{}</code>", e(run.label), e(run.producer));
}

std::string verdict_html(const ComparisonResult& result) {
  const CheckStatus tone = compare::verdict_tone(result.verdict);
  std::string out = fmt::format(
      "<header class=\"verdict {}\"><div class=\"kicker\">parity comparison · case "
      "<strong>{}</strong></div><div class=\"badge\"><span class=\"mark\">{}</span>{}</div>"
      "<h1>{}</h1><p class=\"meta\">{} against {} (reference) · {} · {}</p>",
      status_tone(tone), e(result.a.case_name), status_mark(tone),
      compare::to_string(result.verdict), e(result.headline), run_line(result.a),
      run_line(result.b), e(compared_text(result)), e(result.generated_at));
  out += "<ul class=\"tally\">";
  for (const auto& [status, count] : status_tally(result.checks)) {
    out += fmt::format("<li><span class=\"status {}\">{} {}</span></li>", status_tone(status),
                       count, compare::to_string(status));
  }
  return out + "</ul></header>";
}

std::string diagnoses_html(const ComparisonResult& result) {
  if (result.diagnoses.empty()) return "";
  std::string out = "<section><h2>Diagnosis</h2>";
  for (const compare::Diagnosis& diagnosis : result.diagnoses) {
    out += fmt::format(
        "<article class=\"diagnosis\"><header><span class=\"pitfall\">{}</span><h3>{}</h3>"
        "</header><p>{}</p><p class=\"fix\"><strong>Fix:</strong> {}</p></article>",
        e(diagnosis.pitfall), e(diagnosis.title), e(diagnosis.evidence), e(diagnosis.fix));
  }
  return out + "</section>";
}

std::string figures_html(const Check& check) {
  if (check.figures.empty()) return "";
  std::string out = "<dl class=\"figures\">";
  for (const compare::Figure& figure : check.figures) {
    out += fmt::format("<div><dt>{}</dt><dd>{}</dd></div>", e(figure_label(figure.name)),
                       e(format_figure_value(figure)));
  }
  return out + "</dl>";
}

std::string more_html(size_t shown, size_t total, const char* what) {
  if (total <= shown) return "";
  return fmt::format("<p class=\"more\">{} more {} in report.json.</p>", total - shown, what);
}

std::string details_html(const Check& check) {
  if (check.details.empty()) return "";
  const size_t shown = std::min(check.details.size(), kMaxListedDetails);
  std::string out = "<ul class=\"details\">";
  for (size_t i = 0; i < shown; ++i) out += "<li>" + e(check.details[i]) + "</li>";
  return out + "</ul>" + more_html(shown, check.details.size(), "lines");
}

std::string tensors_html(const Check& check) {
  if (check.tensors.empty()) return "";
  // Column 1 is the tensor's name; the others are numbers.
  const auto cell_class = [](size_t column) {
    return column == 1 ? " class=\"name\"" : " class=\"num\"";
  };
  std::string out = "<div class=\"scroll\"><table class=\"tensors\"><thead><tr>";
  const auto& columns = tensor_columns();
  for (size_t c = 0; c < columns.size(); ++c) {
    out += fmt::format("<th{}>{}</th>", cell_class(c), e(columns[c]));
  }
  out += "</tr></thead><tbody>";
  const size_t shown = std::min(check.tensors.size(), kMaxListedTensors);
  for (size_t i = 0; i < shown; ++i) {
    const compare::TensorDelta& tensor = check.tensors[i];
    out += tensor.within_tolerance || !tensor.gradient_signal ? "<tr>" : "<tr class=\"out\">";
    const std::vector<std::string> cells = tensor_cells(tensor);
    for (size_t c = 0; c < cells.size(); ++c) {
      out += fmt::format("<td{}>{}</td>", cell_class(c), e(cells[c]));
    }
    out += "</tr>";
  }
  return out + "</tbody></table></div>" + more_html(shown, check.tensors.size(), "tensors");
}

std::string checks_html(const ComparisonResult& result) {
  std::string out = "<section><h2>Checks</h2>";
  if (result.checks.empty()) return out + "<p class=\"muted\">No check was run.</p></section>";
  out +=
      "<div class=\"card scroll\"><table class=\"checks\"><thead><tr><th>status</th>"
      "<th>check</th><th>result</th><th class=\"num\">first failing step</th></tr></thead>";
  for (const Check& check : result.checks) {
    // One tbody per check keeps its detail row with it (borders, page breaks).
    out += fmt::format(
        "<tbody id=\"check-{}\"><tr><td>{}</td><td class=\"check-title\">{}</td><td>{}</td>"
        "<td class=\"num{}\">{}</td></tr>",
        e(check.id), status_pill(check.status, compare::to_string(check.status)), e(check.title),
        e(check.summary), check.first_failing_step ? " failing-step" : "",
        check.first_failing_step ? std::to_string(*check.first_failing_step) : "–");
    const std::string detail = figures_html(check) + details_html(check) + tensors_html(check);
    if (!detail.empty()) {
      out += "<tr class=\"check-detail\"><td></td><td colspan=\"3\">" + detail + "</td></tr>";
    }
    out += "</tbody>";
  }
  return out + "</table></div></section>";
}

// A table of rows with a value for each run; `should_match` rows are highlighted when they
// differ.
std::string rows_html(const std::vector<RunRow>& rows) {
  std::string out;
  for (const RunRow& row : rows) {
    out += fmt::format("<tr{}><th scope=\"row\">{}</th><td>{}</td><td>{}</td></tr>",
                       row.should_match && row.a != row.b ? " class=\"differs\"" : "", e(row.name),
                       e(row.a), e(row.b));
  }
  return out;
}

std::string runs_html(const ComparisonResult& result) {
  const std::string a = e(result.a.label);
  const std::string b = e(result.b.label);
  std::string out = fmt::format(
      "<section><h2>Runs</h2><div class=\"card scroll\"><table class=\"runs\"><thead><tr>"
      "<th></th><th>run {} (under test)</th><th>run {} (reference)</th></tr></thead><tbody>{}"
      "</tbody></table></div>",
      a, b, rows_html(run_rows(result.a, result.b)));
  const std::vector<RunRow> versions = version_rows(result.a, result.b);
  if (!versions.empty()) {
    out += fmt::format(
        "<h2>Versions</h2><div class=\"card scroll\"><table class=\"runs\"><thead><tr>"
        "<th>component</th><th>run {}</th><th>run {}</th></tr></thead><tbody>{}</tbody></table>"
        "</div>",
        a, b, rows_html(versions));
  }
  return out + "</section>";
}

std::string tolerance_html(const char* what, const compare::Tolerance& tolerance) {
  return fmt::format("<dt>{}</dt><dd>{} · <span class=\"muted\">{}</span></dd>", what,
                     tolerance_text(tolerance), e(tolerance.source));
}

std::string tolerances_html(const ComparisonResult& result) {
  return "<section><h2>Tolerances</h2><dl class=\"tolerances\">" +
         tolerance_html("Loss", result.loss_tolerance) +
         tolerance_html("Gradients and parameters", result.tensor_tolerance) + "</dl></section>";
}

}  // namespace

std::string render_html(const ComparisonResult& result) {
  std::string page = page_start(fmt::format("parity: {} · {}", compare::to_string(result.verdict),
                                            e(result.a.case_name))) +
                     "<main>";
  page += verdict_html(result);
  page += diagnoses_html(result);
  page += checks_html(result);
  if (result.seed_distributions.empty()) {
    page += "<section><h2>Step by step</h2>" + charts_html(result) + "</section>";
    page += runs_html(result);
    page += tolerances_html(result);
  } else {
    page += "<section><h2>Over seeds</h2>" + seed_charts_html(result) + "</section>";
    page += runs_html(result);
  }
  page += fmt::format(
      "<footer>parity {} · report schema {} · generated {} · this page loads nothing from the "
      "network.</footer></main></body></html>\n",
      e(result.parity_version), result.schema_version, e(result.generated_at));
  return page;
}

}  // namespace parity::reports
