// The README and docs/ pages, as a reader follows them: every relative link reaches a file, every
// anchor a heading of that file (GitHub's heading slugs), and the README links every docs/ page.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;
const fs::path kSource = PARITY_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The page's lines outside fenced code blocks: a link or heading inside ``` is example text.
std::vector<std::string> prose_lines(const fs::path& page) {
  std::vector<std::string> lines;
  std::istringstream in(read_text(page));
  bool in_code = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      in_code = !in_code;
    } else if (!in_code) {
      lines.push_back(line);
    }
  }
  return lines;
}

// GitHub's anchor for a heading: lower case; letters, digits, '_', '-' and non-ASCII bytes kept,
// other punctuation dropped; each space a '-'.
std::string heading_slug(const std::string& heading) {
  std::string slug;
  for (const unsigned char c : heading) {
    if (c == ' ') {
      slug += '-';
    } else if (std::isalnum(c) || c == '_' || c == '-' || c >= 0x80) {
      slug += static_cast<char>(std::tolower(c));
    }
  }
  return slug;
}

std::set<std::string> anchors_of(const fs::path& page) {
  static const std::regex heading(R"(^#{1,6} +(.*?)\s*$)");
  std::set<std::string> anchors;
  for (const std::string& line : prose_lines(page)) {
    std::smatch match;
    if (std::regex_match(line, match, heading)) anchors.insert(heading_slug(match[1]));
  }
  return anchors;
}

std::vector<fs::path> pages() {
  std::vector<fs::path> pages{kSource / "README.md"};
  for (const auto& entry : fs::directory_iterator(kSource / "docs")) {
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  std::sort(pages.begin() + 1, pages.end());
  return pages;
}

// The relative link targets of a page's prose ("docs/x.md#anchor", "#anchor", "../cases/").
std::vector<std::string> relative_links(const fs::path& page) {
  static const std::regex link(R"(\]\(([^)\s]+)\))");
  static const std::regex absolute("^[a-z]+://");
  std::vector<std::string> targets;
  for (const std::string& line : prose_lines(page)) {
    for (auto it = std::sregex_iterator(line.begin(), line.end(), link);
         it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1];
      if (!std::regex_search(target, absolute)) targets.push_back(target);
    }
  }
  return targets;
}

TEST(DocsLinks, EveryRelativeLinkReachesAFileAndItsHeading) {
  int checked = 0;
  for (const fs::path& page : pages()) {
    for (const std::string& target : relative_links(page)) {
      const std::string file = target.substr(0, target.find('#'));
      const std::string anchor =
          target.find('#') == std::string::npos ? "" : target.substr(target.find('#') + 1);
      const fs::path dest = file.empty() ? page : (page.parent_path() / file).lexically_normal();
      ++checked;
      if (!fs::exists(dest)) {
        ADD_FAILURE() << page << ": link " << target << " names no file (" << dest << ")";
      } else if (!anchor.empty() && dest.extension() == ".md" &&
                 anchors_of(dest).count(anchor) == 0) {
        ADD_FAILURE() << page << ": link " << target << " names no heading of " << dest;
      }
    }
  }
  EXPECT_GT(checked, 50) << "the README and docs/ hold far fewer links than they do";
}

TEST(DocsLinks, TheReadmeLinksEveryDocsPage) {
  std::set<std::string> linked;
  for (const std::string& target : relative_links(kSource / "README.md")) {
    linked.insert(fs::path(target.substr(0, target.find('#'))).lexically_normal().string());
  }
  for (const fs::path& page : pages()) {
    if (page.filename() == "README.md") continue;
    const std::string relative = fs::relative(page, kSource).string();
    EXPECT_EQ(linked.count(relative), 1u) << "README.md does not link " << relative;
  }
}

TEST(DocsLinks, HeadingSlugsAreGithubs) {
  // GitHub's rendering of these headings (their anchors as github.com links them).
  EXPECT_EQ(heading_slug("Run directory (format `parity-run`, schema 3)"),
            "run-directory-format-parity-run-schema-3");
  EXPECT_EQ(heading_slug("One verdict on every CPU"), "one-verdict-on-every-cpu");
  EXPECT_EQ(heading_slug("jit with shardings (GSPMD)"), "jit-with-shardings-gspmd");
}
}  // namespace
