// The catalogue report (index.html, catalogue.md, catalogue.json): the verdict and the counts
// follow from the entries' outcomes, there is one row per entry, every string is escaped, a
// report link with a scheme never becomes a link, and write_catalogue_report writes the three
// files or says which path it could not write.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "catalogue_content.h"
#include "escape.h"
#include "parity/reports/catalogue.h"
#include "parity/reports/reports.h"
#include "report_test_util.h"
#include "sample_catalogue.h"
#include "sample_results.h"
#include "test_files.h"

namespace parity::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::count_of;
using testing::kHostileLink;
using testing::passing_catalogue;
using testing::sample_catalogue;
using testing::TempDir;

using Catalogues = std::vector<std::vector<CatalogueEntry>>;

constexpr CaseOutcome kOutcomes[] = {CaseOutcome::kAsExpected, CaseOutcome::kDiffers,
                                     CaseOutcome::kNotSupported};

size_t count_outcome(const std::vector<CatalogueEntry>& entries, CaseOutcome outcome) {
  return static_cast<size_t>(
      std::count_if(entries.begin(), entries.end(),
                    [&](const CatalogueEntry& entry) { return entry.outcome == outcome; }));
}

bool any_differs(const std::vector<CatalogueEntry>& entries) {
  return count_outcome(entries, CaseOutcome::kDiffers) > 0;
}

// Entries whose report link is a plain relative path (the sample's only other kind of link is
// kHostileLink).
size_t count_safe_links(const std::vector<CatalogueEntry>& entries) {
  return static_cast<size_t>(
      std::count_if(entries.begin(), entries.end(), [](const CatalogueEntry& entry) {
        return !entry.report_link.empty() && entry.report_link != kHostileLink;
      }));
}

TEST(CatalogueReport, SampleHasEveryOutcomeAndHostileStrings) {
  // The tests below derive their expectations from the sample; this keeps it worth testing.
  const auto entries = sample_catalogue();
  for (CaseOutcome outcome : kOutcomes) EXPECT_GT(count_outcome(entries, outcome), 0u);
  EXPECT_FALSE(any_differs(passing_catalogue()));
  EXPECT_EQ(std::count_if(entries.begin(), entries.end(),
                          [](const CatalogueEntry& e) { return e.report_link == kHostileLink; }),
            1);
}

TEST(CatalogueReport, OutcomeWords) {
  EXPECT_STREQ(to_string(CaseOutcome::kAsExpected), "as expected");
  EXPECT_STREQ(to_string(CaseOutcome::kDiffers), "differs");
  EXPECT_STREQ(to_string(CaseOutcome::kNotSupported), "not yet supported");
}

TEST(CatalogueReport, HeadlineNamesTheCasesThatDiffer) {
  const auto entries = sample_catalogue();
  std::vector<std::string> differing;
  for (const CatalogueEntry& entry : entries) {
    if (entry.outcome == CaseOutcome::kDiffers) differing.push_back(entry.id);
  }
  ASSERT_EQ(differing.size(), 1u);
  EXPECT_EQ(catalogue_headline(entries), "1 of " + std::to_string(entries.size()) +
                                             " cases did not behave as expected: " + differing[0] +
                                             ".");
  const auto passing = passing_catalogue();
  const size_t unsupported = count_outcome(passing, CaseOutcome::kNotSupported);
  EXPECT_EQ(catalogue_headline(passing),
            std::to_string(passing.size() - unsupported) + " of " + std::to_string(passing.size()) +
                " cases behave as expected; " + std::to_string(unsupported) +
                " need an engine feature not built yet.");
  EXPECT_EQ(catalogue_headline({passing[0]}), "The one case behaves as expected.");
  EXPECT_EQ(catalogue_headline({}), "No scenario case was run.");
}

TEST(CatalogueReport, SafeReportLinkKeepsRelativePathsOnly) {
  EXPECT_EQ(safe_report_link("../p2-psum-not-pmean/report/report.html"),
            "../p2-psum-not-pmean/report/report.html");
  EXPECT_EQ(safe_report_link("report.html#check-loss"), "report.html#check-loss");
  EXPECT_EQ(safe_report_link("./a:b/report.html"), "./a:b/report.html");  // ':' after a '/'
  // Whatever could end an attribute, a Markdown link or a table cell is percent-encoded.
  EXPECT_EQ(safe_report_link("a b/(x)|y<z>\"'\\&.html"),
            "a%20b/%28x%29%7Cy%3Cz%3E%22%27%5C%26.html");
  EXPECT_EQ(safe_report_link("caf\xC3\xA9/r.html"), "caf%C3%A9/r.html");
  for (const std::string& refused :
       {std::string(""), kHostileLink, std::string("JavaScript:alert(1)"),
        std::string(" javascript:alert(1)"), std::string("java\tscript:alert(1)"),
        std::string("data:text/html,x"), std::string("https://example.com/report.html"),
        std::string("//example.com/report.html"), std::string("/etc/passwd"),
        std::string("\\\\example.com\\x"), std::string("C:/report.html")}) {
    EXPECT_FALSE(safe_report_link(refused).has_value()) << refused;
  }
}

TEST(CatalogueHtml, IsWellFormedAndLoadsNothing) {
  TempDir dir;
  for (const auto& entries : Catalogues{sample_catalogue(), passing_catalogue(), {}}) {
    const std::string html = render_catalogue_html(entries);
    testing::expect_well_formed_xml(html, dir.path(), kCatalogueHtmlFile);
    EXPECT_TRUE(contains(html, "<meta name=\"viewport\""));
    EXPECT_TRUE(contains(html, "@media print"));
    EXPECT_TRUE(contains(html, "@media (max-width"));
    for (const char* load : {"<script", "<link", "src=", "url(", "@import", "@font-face"}) {
      EXPECT_FALSE(contains(html, load)) << load;
    }
    // Every link is a relative path: no scheme, no leading '/'.
    const std::regex href("href=\"([^\"]*)\"");
    for (std::sregex_iterator it(html.begin(), html.end(), href), end; it != end; ++it) {
      const std::string target = (*it)[1];
      EXPECT_FALSE(contains(target, ":")) << target;
      EXPECT_NE(target.front(), '/') << target;
    }
  }
}

TEST(CatalogueHtml, ShowsTheVerdictAndACountPillPerOutcome) {
  for (const auto& entries : Catalogues{sample_catalogue(), passing_catalogue()}) {
    const std::string html = render_catalogue_html(entries);
    const bool fails = any_differs(entries);
    EXPECT_TRUE(contains(html, fails ? "CATALOGUE FAILS" : "CATALOGUE PASSES"));
    EXPECT_FALSE(contains(html, fails ? "CATALOGUE PASSES" : "CATALOGUE FAILS"));
    EXPECT_TRUE(contains(html, fails ? "<header class=\"verdict tone-fail\">"
                                     : "<header class=\"verdict tone-pass\">"));
    EXPECT_TRUE(contains(html, "<h1>" + markup_escape(catalogue_headline(entries)) + "</h1>"));
    for (CaseOutcome outcome : kOutcomes) {
      const std::string pill = std::to_string(count_outcome(entries, outcome)) + " " +
                               to_string(outcome) + "</span></li>";
      EXPECT_EQ(count_of(html, pill), 1u) << pill;
    }
  }
  EXPECT_TRUE(contains(render_catalogue_html({}), "CATALOGUE PASSES"));
  EXPECT_TRUE(contains(render_catalogue_html({}), "No scenario case was run."));
}

TEST(CatalogueHtml, HasOneRowPerEntryAndTheRowsThatDifferStandOut) {
  const auto entries = sample_catalogue();
  const std::string html = render_catalogue_html(entries);
  EXPECT_EQ(count_of(html, "<tr class=\"case-"), entries.size());
  EXPECT_EQ(count_of(html, "<tr class=\"case-differs\">"),
            count_outcome(entries, CaseOutcome::kDiffers));
  EXPECT_EQ(count_of(html, "<td class=\"case-outcome\"><span class=\"status tone-fail\">✗ differs"),
            count_outcome(entries, CaseOutcome::kDiffers));
  // Rows in the entries' order, each with its title and the case file's name.
  size_t previous = 0;
  for (const CatalogueEntry& entry : entries) {
    const size_t row = html.find("<td class=\"case-id\">" + markup_escape(entry.id) + "</td>");
    ASSERT_NE(row, std::string::npos) << entry.id;
    EXPECT_GT(row, previous) << entry.id;
    previous = row;
    // The case file's name and the source under the title.
    EXPECT_TRUE(contains(html, "<strong>" + markup_escape(entry.title) +
                                   "</strong><span class=\"case-meta\"><code>" +
                                   markup_escape(entry.case_name) + "</code> · " +
                                   markup_escape(entry.source) + "</span>"));
  }
  // A link per case with a report, to that report, under the outcome.
  EXPECT_EQ(count_of(html, "href="), count_safe_links(entries));
  for (const CatalogueEntry& entry : entries) {
    if (entry.report_link.empty() || entry.report_link == kHostileLink) continue;
    EXPECT_TRUE(contains(
        html, "<a class=\"case-report\" href=\"" + entry.report_link + "\">report</a></td></tr>"));
  }
}

TEST(CatalogueHtml, ShowsEachCasesVerdictOnItsClaimAndTheirTally) {
  const auto entries = sample_catalogue();
  const std::string html = render_catalogue_html(entries);
  for (const CatalogueEntry& entry : entries) {
    EXPECT_TRUE(contains(html, "<td class=\"case-verdict\" data-label=\"verdict\"><span "
                               "class=\"claim-verdict " +
                                   markup_attribute_escape(verdict_class(entry.verdict)) + "\">" +
                                   markup_escape(entry.verdict) + "</span></td>"))
        << entry.id;
  }
  // In order of first appearance, each verdict with its count.
  EXPECT_EQ(verdict_tally(entries),
            "2 confirmed · 2 not checked · 1 unsettled · 1 partly · 1 confirmed " +
                testing::kScript);
  EXPECT_TRUE(contains(html, "Verdicts on the documents' claims: " +
                                 markup_escape(verdict_tally(entries))));
  EXPECT_EQ(verdict_class("not reproducible here"), "verdict-not-reproducible-here");
}

TEST(CasePage, ShowsTheVerdictWhatWasObservedEveryFigureAndTheCaseFile) {
  TempDir dir;
  const auto entries = sample_catalogue();
  const CatalogueEntry& p1 = entries[2];
  ASSERT_EQ(p1.id, "P1");
  const std::string toml = "[scenario]\nid = \"P1\" # <b>&</b>\n";
  const std::string html = render_case_page(p1, toml);
  testing::expect_well_formed_xml(html, dir.path(), kHtmlFile);
  EXPECT_TRUE(contains(html, "<header class=\"verdict tone-pass\">"));
  EXPECT_TRUE(contains(html, "<span class=\"claim-verdict verdict-confirmed\">confirmed</span>"));
  EXPECT_TRUE(contains(html, "<dt>observed</dt><dd>" + markup_escape(p1.observed) + "</dd>"));
  EXPECT_TRUE(contains(html, "<dt>fact check</dt><dd>" + markup_escape(p1.fact_check) + "</dd>"));
  EXPECT_TRUE(contains(html, "<tr><td class=\"figure-name\"><code>error</code></td><td>" +
                                 markup_escape(p1.figures.front().second) + "</td></tr>"));
  EXPECT_TRUE(contains(html, "id = &quot;P1&quot; # &lt;b&gt;&amp;&lt;/b&gt;") ||
              contains(html, "id = \"P1\" # &lt;b&gt;&amp;&lt;/b&gt;"));
  for (const char* load : {"<script", "<link", "src=", "url(", "@import"}) {
    EXPECT_FALSE(contains(html, load)) << load;
  }
  // The hostile entry: every string escaped, figures too.
  const std::string hostile = render_case_page(entries.back(), testing::kScript);
  testing::expect_well_formed_xml(hostile, dir.path(), kHtmlFile);
  EXPECT_FALSE(contains(hostile, testing::kScript));
  EXPECT_FALSE(contains(hostile, "\xff"));

  write_case_page(p1, toml, dir.path("P1/report"));
  EXPECT_EQ(testing::read_bytes(dir.path("P1/report") / kHtmlFile), html);
}

TEST(CatalogueHtml, EscapesEveryStringAndRefusesTheJavascriptLink) {
  const std::string html = render_catalogue_html(sample_catalogue());
  EXPECT_FALSE(contains(html, testing::kScript));
  EXPECT_TRUE(contains(html, "hostile &lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_TRUE(contains(html, "expected Q&amp;A ]]&gt;"));
  EXPECT_TRUE(contains(html, "bell\\x07here"));
  EXPECT_FALSE(contains(html, "\x07"));
  EXPECT_FALSE(contains(html, "\xff"));
  EXPECT_TRUE(contains(html,
                       "bad\xEF\xBF\xBD"
                       "byte"));
  EXPECT_FALSE(contains(html, "javascript"));
  EXPECT_EQ(count_of(html, std::string("<span class=\"case-report refused\" title=\"") +
                               kRefusedLinkReason + "\">" + kRefusedLinkNote + "</span>"),
            1u);
}

TEST(CatalogueMarkdown, StartsWithTheBannerAndTheCounts) {
  for (const auto& entries : Catalogues{sample_catalogue(), passing_catalogue()}) {
    const std::string markdown = render_catalogue_markdown(entries);
    const bool fails = any_differs(entries);
    EXPECT_EQ(markdown.rfind(fails ? "## ❌ CATALOGUE FAILS\n" : "## ✅ CATALOGUE PASSES\n", 0), 0u)
        << markdown;
    EXPECT_TRUE(contains(markdown, "**" + markdown_escape(catalogue_headline(entries)) + "**"));
    const std::string counts =
        "✅ " + std::to_string(count_outcome(entries, CaseOutcome::kAsExpected)) +
        " as expected · ❌ " + std::to_string(count_outcome(entries, CaseOutcome::kDiffers)) +
        " differs · ➖ " + std::to_string(count_outcome(entries, CaseOutcome::kNotSupported)) +
        " not yet supported\n";
    EXPECT_TRUE(contains(markdown, counts)) << markdown;
  }
}

constexpr const char* kCatalogueHeader =
    "| case | title | claim | verdict | observed | fact check | expected | outcome |";

TEST(CatalogueMarkdown, HasOneRowOfEightCellsPerEntry) {
  const auto entries = sample_catalogue();
  const std::string markdown = render_catalogue_markdown(entries);
  const auto rows = testing::table_rows(markdown, kCatalogueHeader);
  ASSERT_EQ(rows.size(), entries.size()) << markdown;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(testing::num_cells(rows[i]), 8u) << rows[i];
    EXPECT_TRUE(contains(rows[i], "| " + markdown_escape(entries[i].verdict) + " |")) << rows[i];
    const bool differs = entries[i].outcome == CaseOutcome::kDiffers;
    const std::string id = markdown_escape(entries[i].id);
    EXPECT_EQ(rows[i].rfind(differs ? "| **" + id + "** |" : "| " + id + " |", 0), 0u) << rows[i];
    EXPECT_TRUE(contains(rows[i], to_string(entries[i].outcome))) << rows[i];
  }
  EXPECT_EQ(count_of(markdown, "[report]("), count_safe_links(entries));
  EXPECT_TRUE(contains(markdown, "[report](../p2-psum-not-pmean/report/report.html)"));
  EXPECT_TRUE(contains(render_catalogue_markdown({}), "No scenario case was run."));
}

TEST(CatalogueMarkdown, EscapesEveryString) {
  const std::string markdown = render_catalogue_markdown(sample_catalogue());
  EXPECT_FALSE(contains(markdown, "<script"));
  EXPECT_TRUE(contains(markdown, "&lt;script\\>alert(1)&lt;/script\\>"));
  EXPECT_TRUE(contains(markdown, "source a\\|b"));
  EXPECT_TRUE(contains(markdown, "line one line two \\| \\*bold\\*"));
  EXPECT_TRUE(contains(markdown, "fact  check"));  // \r\n: two spaces, no line break
  EXPECT_FALSE(contains(markdown, "\xff"));
  EXPECT_FALSE(contains(markdown, "\x07"));
  EXPECT_FALSE(contains(markdown, "javascript"));
  EXPECT_TRUE(contains(markdown,
                       std::string("<br>") + kRefusedLinkNote + " (" + kRefusedLinkReason + ") |"));
}

TEST(CatalogueJson, HoldsTheVerdictTheCountsAndEveryField) {
  for (const auto& entries : Catalogues{sample_catalogue(), passing_catalogue(), {}}) {
    const json catalogue = json::parse(render_catalogue_json(entries));
    EXPECT_EQ(catalogue["schema"], "parity-catalogue");
    EXPECT_EQ(catalogue["schema_version"], kCatalogueSchemaVersion);
    EXPECT_EQ(catalogue["verdict"], any_differs(entries) ? "fails" : "passes");
    for (CaseOutcome outcome : kOutcomes) {
      EXPECT_EQ(catalogue["counts"][to_string(outcome)], count_outcome(entries, outcome));
    }
    EXPECT_EQ(catalogue["counts"]["total"], entries.size());
    ASSERT_EQ(catalogue["entries"].size(), entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      const CatalogueEntry& entry = entries[i];
      const json& written = catalogue["entries"][i];
      EXPECT_EQ(written["id"], entry.id);
      EXPECT_EQ(written["title"], utf8_repair(entry.title));
      EXPECT_EQ(written["case"], utf8_repair(entry.case_name));
      EXPECT_EQ(written["source"], utf8_repair(entry.source));
      EXPECT_EQ(written["claim"], utf8_repair(entry.claim));
      EXPECT_EQ(written["expected"], utf8_repair(entry.expected));
      EXPECT_EQ(written["observed"], utf8_repair(entry.observed));
      EXPECT_EQ(written["verdict"], utf8_repair(entry.verdict));
      EXPECT_EQ(written["summary"], utf8_repair(entry.summary));
      EXPECT_EQ(written["fact_check"], utf8_repair(entry.fact_check));
      ASSERT_EQ(written["figures"].size(), entry.figures.size()) << entry.id;
      for (const auto& [name, value] : entry.figures) {
        EXPECT_EQ(written["figures"][utf8_repair(name)], utf8_repair(value)) << entry.id;
      }
      EXPECT_EQ(written["outcome"], to_string(entry.outcome));
      EXPECT_EQ(catalogue["counts"][written["outcome"].get<std::string>()].get<size_t>(),
                count_outcome(entries, entry.outcome));
      // Data for tools, as given: the link is a string (null when there is none), not a link.
      if (entry.report_link.empty()) {
        EXPECT_TRUE(written["report"].is_null()) << entry.id;
      } else {
        EXPECT_EQ(written["report"], entry.report_link);
      }
    }
  }
}

TEST(CatalogueJson, ReplacesInvalidUtf8AndKeepsControlCharactersEscaped) {
  const std::string text = render_catalogue_json(sample_catalogue());
  EXPECT_FALSE(contains(text, "\xff"));
  EXPECT_FALSE(contains(text, "\x07"));
  const json catalogue = json::parse(text);
  const json& hostile = catalogue["entries"].back();
  EXPECT_EQ(hostile["id"], "X1");
  const std::string observed = hostile["observed"];
  EXPECT_TRUE(contains(observed,
                       "bad\xEF\xBF\xBD"
                       "byte"));
  EXPECT_TRUE(contains(observed, "bell\x07here"));  // written as \u0007
  EXPECT_EQ(hostile["title"], "hostile " + testing::kScript);
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(WriteCatalogue, WritesTheThreeFilesAndNothingElse) {
  TempDir temp;
  const fs::path dir = temp.path("out/catalogue");  // created with its parents
  const auto entries = sample_catalogue();
  write_catalogue_report(entries, dir);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{kCatalogueJsonFile, kCatalogueMarkdownFile,
                                                     kCatalogueHtmlFile}));
  EXPECT_EQ(testing::read_bytes(dir / kCatalogueHtmlFile), render_catalogue_html(entries));
  EXPECT_EQ(testing::read_bytes(dir / kCatalogueMarkdownFile), render_catalogue_markdown(entries));
  EXPECT_EQ(testing::read_bytes(dir / kCatalogueJsonFile), render_catalogue_json(entries));
  // Written again, each file is replaced and no temporary file is left.
  write_catalogue_report(passing_catalogue(), dir);
  EXPECT_EQ(json::parse(testing::read_bytes(dir / kCatalogueJsonFile))["verdict"], "passes");
  EXPECT_EQ(names_in(dir).size(), 3u);
}

TEST(WriteCatalogue, ADirectoryThatCannotBeWrittenIsAnInputErrorNamingIt) {
  // A file where a directory should be: refused for root too, unlike permissions.
  TempDir temp;
  testing::write_bytes(temp.path("file"), "not a directory");
  const fs::path dir = temp.path("file") / "catalogue";
  testing::expect_input_error([&] { write_catalogue_report(sample_catalogue(), dir); },
                              {"cannot create the report directory", dir.string()});
  // index.html is a directory that is not empty: removing the old one fails.
  fs::create_directories(temp.path("out") / kCatalogueHtmlFile / "inside");
  testing::expect_input_error(
      [&] { write_catalogue_report(sample_catalogue(), temp.path("out")); },
      {"cannot remove the old report", (temp.path("out") / kCatalogueHtmlFile).string()});
}

}  // namespace
}  // namespace parity::reports
