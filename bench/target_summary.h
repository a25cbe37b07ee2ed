// The issue-20 targets a suite measures, as one table: each row a ratio measured in this run,
// the target it is held to and whether it is met. Printed after Google Benchmark's own table,
// and written as JSON where the command line asks (--parity_summary_out=FILE, which `make bench`
// passes next to the suite's --benchmark_out), so a CI job can read the verdicts.
#pragma once

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace parity::bench {

struct TargetRow {
  std::string name;    // "engine step / LibTorch eager step, mlp2-fmnist"
  double value = 0;    // the measured ratio (or rate)
  std::string target;  // "<= 1.0"
  std::optional<bool> met;  // unset: reported, not held to a target
  std::string detail;  // what the ratio is made of: "engine 4.1 ms, LibTorch 4.0 ms"
};

class TargetSummary {
 public:
  void add(TargetRow row) { rows_.push_back(std::move(row)); }

  // `cpu`: the CPU the run measured on (cpu_info.h).
  void print(std::ostream& out, const std::string& cpu) const {
    if (rows_.empty()) return;
    out << "\ntargets (ratios measured in this run, on " << cpu << ")\n";
    for (const TargetRow& row : rows_) {
      const char* verdict = !row.met ? "" : (*row.met ? "met" : "NOT MET");
      out << fmt::format("  {:<58} {:>8.3g}  target {:<8} {:<7}  {}\n", row.name, row.value,
                         row.target.empty() ? "-" : row.target, verdict, row.detail);
    }
  }

  void write_json(const std::string& path, const std::string& cpu) const {
    nlohmann::json rows = nlohmann::json::array();
    for (const TargetRow& row : rows_) {
      nlohmann::json entry = {
          {"name", row.name}, {"value", row.value}, {"target", row.target}, {"detail", row.detail}};
      entry["met"] = row.met ? nlohmann::json(*row.met) : nlohmann::json(nullptr);
      rows.push_back(std::move(entry));
    }
    std::ofstream file(path);
    file << nlohmann::json{{"cpu", cpu}, {"targets", rows}}.dump(2) << "\n";
    if (!file) std::cerr << "cannot write the target summary to " << path << "\n";
  }

 private:
  std::vector<TargetRow> rows_;
};

}  // namespace parity::bench
