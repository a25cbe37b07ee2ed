#include "parity/common/observed_figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "parity/common/error.h"

namespace parity {

void ObservedFigures::set(const std::string& name, double value) {
  Entry& entry = slot(name);
  entry.number = value;
  entry.text.clear();
}

void ObservedFigures::set_text(const std::string& name, const std::string& text) {
  Entry& entry = slot(name);
  entry.number.reset();
  entry.text = text;
}

void ObservedFigures::merge(const ObservedFigures& other) {
  for (const Entry& entry : other.entries_) slot(entry.name) = entry;
}

std::optional<double> ObservedFigures::number(const std::string& name) const {
  const Entry* entry = find(name);
  return entry ? entry->number : std::nullopt;
}

std::optional<std::string> ObservedFigures::formatted(const std::string& name,
                                                      const std::string& spec) const {
  const Entry* entry = find(name);
  if (!entry) return std::nullopt;
  if (!entry->number) return entry->text;
  try {
    return fmt::format(fmt::runtime("{:" + (spec.empty() ? std::string(".4g") : spec) + "}"),
                       *entry->number);
  } catch (const fmt::format_error& error) {
    throw InputError(fmt::format("placeholder {{{}:{}}}: '{}' is not a format for a number ({}); "
                                 "write e.g. {{{}:.3g}}",
                                 name, spec, spec, error.what(), name));
  }
}

std::vector<std::pair<std::string, std::string>> ObservedFigures::listing() const {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const Entry& entry : entries_) rows.emplace_back(entry.name, *formatted(entry.name));
  return rows;
}

std::vector<std::string> ObservedFigures::names() const {
  std::vector<std::string> names;
  for (const Entry& entry : entries_) names.push_back(entry.name);
  return names;
}

std::string ObservedFigures::fill(const std::string& text) const {
  const std::vector<TextPiece> pieces = split_placeholders(text);
  std::vector<std::string> missing;
  for (const TextPiece& piece : pieces) {
    if (piece.is_placeholder && !find(piece.name)) missing.push_back(piece.name);
  }
  if (!missing.empty()) {
    throw InputError(fmt::format(
        "the run computed no figure {}; it computed: {}", fmt::join(missing, ", "),
        entries_.empty() ? std::string("none") : fmt::format("{}", fmt::join(names(), ", "))));
  }
  std::string out;
  for (const TextPiece& piece : pieces) {
    out += piece.is_placeholder ? *formatted(piece.name, piece.spec) : piece.literal;
  }
  return out;
}

const ObservedFigures::Entry* ObservedFigures::find(const std::string& name) const {
  const auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const Entry& entry) { return entry.name == name; });
  return it == entries_.end() ? nullptr : &*it;
}

ObservedFigures::Entry& ObservedFigures::slot(const std::string& name) {
  if (const Entry* entry = find(name)) return const_cast<Entry&>(*entry);
  entries_.push_back({name, std::nullopt, ""});
  return entries_.back();
}

std::vector<TextPiece> split_placeholders(const std::string& text) {
  std::vector<TextPiece> pieces;
  std::string literal;
  const auto end_literal = [&] {
    if (!literal.empty()) pieces.push_back({false, std::move(literal), "", ""});
    literal.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if ((text[i] == '{' || text[i] == '}') && i + 1 < text.size() && text[i + 1] == text[i]) {
      literal += text[i++];  // "{{" or "}}": a literal brace
      continue;
    }
    if (text[i] == '}') {
      throw InputError(fmt::format("a '}}' at character {} closes no placeholder; write '}}}}' "
                                   "for a literal brace",
                                   i + 1));
    }
    if (text[i] != '{') {
      literal += text[i];
      continue;
    }
    const size_t close = text.find_first_of("{}", i + 1);
    if (close == std::string::npos || text[close] != '}') {
      throw InputError(fmt::format("the placeholder opened at character {} is not closed; write "
                                   "{{figure}} or '{{{{' for a literal brace",
                                   i + 1));
    }
    const std::string inside = text.substr(i + 1, close - i - 1);
    const size_t colon = inside.find(':');
    const std::string name = inside.substr(0, colon);
    if (name.empty()) {
      throw InputError(fmt::format("the placeholder at character {} names no figure", i + 1));
    }
    end_literal();
    pieces.push_back(
        {true, "", name, colon == std::string::npos ? "" : inside.substr(colon + 1)});
    i = close;
  }
  end_literal();
  return pieces;
}

std::vector<std::pair<std::string, std::string>> placeholders(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> found;
  for (const TextPiece& piece : split_placeholders(text)) {
    if (piece.is_placeholder) found.emplace_back(piece.name, piece.spec);
  }
  return found;
}

namespace {

// A number in a condition, all of `text` (surrounding blanks allowed).
std::optional<double> parse_number(const std::string& text) {
  const size_t begin = text.find_first_not_of(' ');
  const size_t end = text.find_last_not_of(' ');
  if (begin == std::string::npos) return std::nullopt;
  const std::string trimmed = text.substr(begin, end - begin + 1);
  char* stop = nullptr;
  const double value = std::strtod(trimmed.c_str(), &stop);
  if (stop != trimmed.c_str() + trimmed.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

FigureCondition parse_figure_condition(const std::string& text) {
  const auto refuse = [&text]() -> FigureCondition {
    throw InputError(fmt::format(
        "'{}' is not a figure condition; write 'name < number', 'name > number' or "
        "'name = number ± tolerance' (or +-)",
        text));
  };
  const size_t at = text.find_first_of("<>=");
  if (at == std::string::npos) return refuse();
  FigureCondition condition;
  condition.text = text;
  condition.op = text[at];
  const std::string name = text.substr(0, at);
  const size_t name_begin = name.find_first_not_of(' ');
  if (name_begin == std::string::npos) return refuse();
  condition.name = name.substr(name_begin, name.find_last_not_of(' ') - name_begin + 1);
  if (condition.name.find(' ') != std::string::npos) return refuse();
  std::string rest = text.substr(at + 1);
  if (condition.op == '=') {
    // "±" (two bytes in UTF-8) or "+-".
    size_t plus_minus = rest.find("±");
    if (plus_minus == std::string::npos) plus_minus = rest.find("+-");
    if (plus_minus == std::string::npos) return refuse();
    const std::optional<double> tolerance = parse_number(rest.substr(plus_minus + 2));
    if (!tolerance || *tolerance < 0) return refuse();
    condition.tolerance = *tolerance;
    rest = rest.substr(0, plus_minus);
  }
  const std::optional<double> value = parse_number(rest);
  if (!value) return refuse();
  condition.value = *value;
  return condition;
}

bool condition_holds(const FigureCondition& condition, const ObservedFigures& figures,
                     std::string* why) {
  const std::optional<double> value = figures.number(condition.name);
  const auto explain = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (!value) {
    return explain(figures.formatted(condition.name)
                       ? fmt::format("{} is not a number", condition.name)
                       : fmt::format("the run computed no {}", condition.name));
  }
  bool holds = false;
  switch (condition.op) {
    case '<':
      holds = *value < condition.value;
      break;
    case '>':
      holds = *value > condition.value;
      break;
    default:
      holds = std::abs(*value - condition.value) <= condition.tolerance;
  }
  if (!holds) return explain(fmt::format("{} is {:.6g}, not {}", condition.name, *value,
                                         condition.text.substr(condition.text.find_first_of("<>="))));
  return true;
}

}  // namespace parity
