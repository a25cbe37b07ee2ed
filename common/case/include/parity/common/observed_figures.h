// What a scenario case's run computed, by name, and what the case file says of it.
//
// A scenario case (cases/*.toml with a [scenario]) states the document's claim and the verdict
// on it. The verdict holds only when the run behaves as the case expects, and the numbers its
// fact-check quotes come from the run that just happened, never from the case file:
//   figures      named values the run computed: "grad_norm_ratio.first" 8.0, "error" "...".
//   placeholder  "{grad_norm_ratio.first}" or "{grad_norm_ratio.first:.3g}" in a fact-check,
//                replaced by the figure (numbers default to 4 significant digits).
//   condition    "grad_norm_ratio.first = 8 ± 0.01", "grad_norm_ratio.last > 9" in
//                scenario.expect_figures: part of what the case expects of the run.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace parity {

class ObservedFigures {
 public:
  // Replaces a figure of the same name; names keep the order they were first set in.
  void set(const std::string& name, double value);
  void set_text(const std::string& name, const std::string& text);
  // Every figure of `other`, set here in its order.
  void merge(const ObservedFigures& other);

  std::optional<double> number(const std::string& name) const;
  // The figure as a fact-check prints it: numbers with `spec` (fmt's, e.g. ".3g"; empty: 4
  // significant digits), texts as they are; nullopt when the run computed no such figure.
  std::optional<std::string> formatted(const std::string& name, const std::string& spec = "") const;
  // (name, formatted value), in order: the case page's table.
  std::vector<std::pair<std::string, std::string>> listing() const;
  std::vector<std::string> names() const;

  // `text` with every placeholder replaced. Throws InputError naming each figure the run did
  // not compute and the ones it did.
  std::string fill(const std::string& text) const;

 private:
  struct Entry {
    std::string name;
    std::optional<double> number;
    std::string text;
  };
  const Entry* find(const std::string& name) const;
  Entry& slot(const std::string& name);
  std::vector<Entry> entries_;
};

// A fact-check cut into literal text and placeholders, in order ("{{" and "}}" become literal
// braces). Throws InputError for an unbalanced brace or an empty name.
struct TextPiece {
  bool is_placeholder = false;
  std::string literal;     // a literal piece
  std::string name, spec;  // a placeholder: the figure and its format spec ("" or ".3g")
};
std::vector<TextPiece> split_placeholders(const std::string& text);

// The placeholders of `text` in order, as (name, format spec), as split_placeholders finds them.
std::vector<std::pair<std::string, std::string>> placeholders(const std::string& text);

struct FigureCondition {
  std::string name;
  char op = '=';         // '<', '>', '=' (within tolerance)
  double value = 0;
  double tolerance = 0;  // '=' only: |figure - value| <= tolerance
  std::string text;      // as written, for messages
};

// "name < 1", "name > 8.5", "name = 8 ± 0.01" (or "+-"). Throws InputError saying the form.
FigureCondition parse_figure_condition(const std::string& text);

// Whether the figures satisfy the condition; false (with the reason in `why`) when the figure
// is missing or not a number.
bool condition_holds(const FigureCondition& condition, const ObservedFigures& figures,
                     std::string* why = nullptr);

}  // namespace parity
