// Helpers for the reports' tests: searching rendered text, reading a Markdown table back, and
// checking that the XML the reports write (junit.xml, report.html, SVG charts) is well-formed
// with a real parser, Python's xml.etree (expat).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "test_files.h"

namespace parity::testing {

inline bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Occurrences of `what` in `text`, overlapping ones included.
inline size_t count_of(const std::string& text, const std::string& what) {
  size_t found = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++found;
  return found;
}

// The rows of the Markdown table that follows the line `header` (the header and separator
// excluded).
inline std::vector<std::string> table_rows(const std::string& markdown, const std::string& header) {
  std::istringstream lines(markdown);
  std::string line;
  while (std::getline(lines, line) && line != header) {
  }
  std::vector<std::string> rows;
  std::getline(lines, line);  // | --- | --- |
  while (std::getline(lines, line) && !line.empty()) rows.push_back(line);
  return rows;
}

// Cells of a Markdown table row: split at '|' not preceded by a backslash.
inline size_t num_cells(const std::string& row) {
  size_t separators = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] == '|' && (i == 0 || row[i - 1] != '\\')) ++separators;
  }
  return separators - 1;
}

inline void expect_well_formed_xml_file(const std::filesystem::path& path) {
  const CommandResult result = run_command(
      "command -v python3 >/dev/null || { echo 'python3 not found: run scripts/install-deps.sh'; "
      "exit 99; }; python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' " +
          shell_quote(path.string()),
      60);
  EXPECT_EQ(result.exit_code, 0) << path << " is not well-formed XML:\n" << result.output;
}

// `text` written to `dir`/`name`, then checked as above.
inline void expect_well_formed_xml(const std::string& text, const std::filesystem::path& dir,
                                   const std::string& name) {
  write_bytes(dir / name, text);
  expect_well_formed_xml_file(dir / name);
}

}  // namespace parity::testing
