// Case files: load a TOML case, apply `section.key=value` overrides, validate, and print the
// canonical form that the case hash digests. The schema is documented in docs/case-schema.md.
//
// Vocabulary used below:
//   schema    the sections and keys a case may hold, each with its kind (string, integer, ...),
//             in canonical order (the order to_toml() prints).
//   origin    where a value came from: a position in the case file ("f.toml:12:6"), an
//             override ("--set train.lr=3e-4"), or nowhere (a default; then the file is named).
//   reading   converting the (overridden) TOML table into a CaseSpec, checking kinds.
//   checking  range and cross-field rules on the CaseSpec, after reading.
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "parity/common/case_limits.h"
#include "parity/common/case_spec.h"
#include "parity/common/digest.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"

#ifndef PARITY_SOURCE_CASES_DIR
#error "parity_common must be compiled with PARITY_SOURCE_CASES_DIR (see common/CMakeLists.txt)"
#endif

namespace parity {

namespace {

// ---------------------------------------------------------------------------------------------
// Schema

enum class Kind { kString, kInteger, kFloat, kBool, kIntegerList, kStringList };

struct KeySchema {
  const char* name;
  Kind kind;
};

struct SectionSchema {
  const char* name;
  std::vector<KeySchema> keys;
};

const std::vector<SectionSchema>& schema() {
  static const std::vector<SectionSchema> sections = {
      {"case", {{"name", Kind::kString}, {"description", Kind::kString}}},
      {"model",
       {{"widths", Kind::kIntegerList}, {"activation", Kind::kString}, {"loss", Kind::kString}}},
      {"data",
       {{"dataset", Kind::kString},
        {"per_replica_batch", Kind::kInteger},
        {"seed", Kind::kInteger},
        {"shuffle", Kind::kBool},
        {"drop_last", Kind::kBool},
        {"synthetic_num_samples", Kind::kInteger},
        {"synthetic_seed", Kind::kInteger}}},
      {"parallel", {{"replicas", Kind::kInteger}, {"processes", Kind::kInteger}}},
      {"train",
       {{"steps", Kind::kInteger},
        {"optimizer", Kind::kString},
        {"lr", Kind::kFloat},
        {"momentum", Kind::kFloat},
        {"nesterov", Kind::kBool},
        {"weight_decay", Kind::kFloat},
        {"beta1", Kind::kFloat},
        {"beta2", Kind::kFloat},
        {"eps", Kind::kFloat},
        {"eps_root", Kind::kFloat},
        {"clip_grad_norm", Kind::kFloat},
        {"grad_accum_steps", Kind::kInteger},
        {"dtype", Kind::kString},
        {"record_steps", Kind::kIntegerList}}},
      {"init", {{"scheme", Kind::kString}, {"seed", Kind::kInteger}, {"scale", Kind::kFloat}}},
      {"compare",
       {{"oracle", Kind::kBool}, {"tensor_rtol", Kind::kFloat}, {"tensor_atol", Kind::kFloat}}},
      {"scenario",
       {{"id", Kind::kString},
        {"title", Kind::kString},
        {"source", Kind::kString},
        {"claim", Kind::kString},
        {"fact_check", Kind::kString},
        {"expect", Kind::kString},
        {"expect_diagnoses", Kind::kStringList},
        {"expect_error", Kind::kString},
        {"missing", Kind::kString},
        {"engine_program", Kind::kString},
        {"reference", Kind::kString},
        {"quick", Kind::kStringList}}},
  };
  return sections;
}

const SectionSchema* find_section(std::string_view name) {
  for (const SectionSchema& section : schema()) {
    if (name == section.name) return &section;
  }
  return nullptr;
}

const KeySchema* find_key(const SectionSchema& section, std::string_view name) {
  for (const KeySchema& key : section.keys) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

const std::vector<std::string> kActivations = {"tanh", "relu", "gelu"};
const std::vector<std::string> kLosses = {"softmax_cross_entropy", "mse"};
const std::vector<std::string> kDatasets = {"fashion-mnist", "synthetic-linear"};
const std::vector<std::string> kOptimizers = {"sgd", "adam", "adamw"};
const std::vector<std::string> kDtypes = {"f32", "bf16", "f16"};
const std::vector<std::string> kExpectations = {"equivalent", "not equivalent", "error", "probe",
                                                "not supported"};
const std::vector<std::string> kInitSchemes = {"jax-normal"};

constexpr int64_t kFashionMnistFeatures = 784;
constexpr int64_t kFashionMnistClasses = 10;
constexpr int64_t kFashionMnistTrainSamples = 60000;

// ---------------------------------------------------------------------------------------------
// "Did you mean": optimal string alignment distance (Levenshtein plus adjacent transposition,
// so "trian" is one edit from "train").

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The closest candidate if it is a plausible typo: one edit for short words, a third of the
// word (at least two edits) for longer ones.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& names) {
  const size_t max_edits = word.size() <= 3 ? 1 : std::max<size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  size_t best_edits = max_edits + 1;
  for (const std::string& name : names) {
    const size_t edits = edit_distance(word, name);
    if (edits < best_edits) {
      best = name;
      best_edits = edits;
    }
  }
  return best;
}

std::string join(const std::vector<std::string>& names, const char* separator = ", ") {
  std::string text;
  for (const std::string& name : names) {
    if (!text.empty()) text += separator;
    text += name;
  }
  return text;
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const SectionSchema& section : schema()) names.emplace_back(section.name);
  return names;
}

std::vector<std::string> key_names(const SectionSchema& section) {
  std::vector<std::string> names;
  for (const KeySchema& key : section.keys) names.emplace_back(key.name);
  return names;
}

// ---------------------------------------------------------------------------------------------
// Origins and error messages

struct Origin {
  std::string file_position;  // "f.toml:12:6", or just "f.toml" for a default
  std::string override_text;  // "train.lr=3e-4" when the value came from --set
};

std::string position(const std::filesystem::path& file, const toml::source_region& region) {
  return file.string() + ":" + std::to_string(region.begin.line) + ":" +
         std::to_string(region.begin.column);
}

// Value errors read "train.lr: expected a float, found a string at f.toml:12:6"; an override
// puts its text first: "--set train.lr=x: train.lr: expected ...".
[[noreturn]] void fail_at(const Origin& origin, const std::string& problem,
                          const std::string& hint = "") {
  std::string message;
  if (!origin.override_text.empty()) {
    // A long override (200,000 widths) is cut: the message names it, it need not repeat it.
    constexpr size_t kShown = 100;
    const std::string& text = origin.override_text;
    message = "--set " +
              (text.size() <= kShown ? text
                                     : text.substr(0, kShown) + "... (" +
                                           std::to_string(text.size()) + " characters)") +
              ": " + problem;
  } else {
    message = problem + (origin.file_position.empty() ? "" : " at " + origin.file_position);
  }
  if (!hint.empty()) message += "; " + hint;
  throw InputError(message);
}

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::kString: return "a string";
    case Kind::kInteger: return "an integer";
    case Kind::kFloat: return "a float";
    case Kind::kBool: return "a boolean";
    case Kind::kIntegerList: return "an array of integers";
    case Kind::kStringList: return "an array of strings";
  }
  return "?";
}

std::string found_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& names,
                         const char* open = "'", const char* close = "'") {
  const std::optional<std::string> guess = closest(word, names);
  if (!guess) return "";
  return std::string("did you mean ") + open + *guess + close + "?";
}

// An unknown name gets a "did you mean" for a near miss, else the list of valid names.
[[noreturn]] void fail_unknown_section(const Origin& origin, const std::string& name) {
  const std::string guess = did_you_mean(name, section_names(), "[", "]");
  fail_at(origin, "unknown section [" + name + "]",
          guess.empty() ? "the sections are [" + join(section_names(), "], [") + "]" : guess);
}

[[noreturn]] void fail_unknown_key(const Origin& origin, const SectionSchema& section,
                                   const std::string& name) {
  const std::string guess = did_you_mean(name, key_names(section));
  fail_at(origin, "unknown key '" + name + "' in [" + section.name + "]",
          guess.empty() ? "the keys of [" + std::string(section.name) + "] are " +
                              join(key_names(section))
                        : guess);
}

// ---------------------------------------------------------------------------------------------
// Structure: every section and key of the file must be in the schema.

void check_structure(const toml::table& root, const std::filesystem::path& file) {
  for (auto&& [section_key, section_node] : root) {
    const Origin origin{position(file, section_key.source()), ""};
    const std::string section_name(section_key.str());
    const SectionSchema* section = find_section(section_name);
    if (section == nullptr) fail_unknown_section(origin, section_name);
    const toml::table* table = section_node.as_table();
    if (table == nullptr) {
      fail_at(origin, section_name + ": expected a table ([" + section_name + "]), found " +
                          found_name(section_node));
    }
    for (auto&& [key, node] : *table) {
      const std::string key_name(key.str());
      if (find_key(*section, key_name) == nullptr) {
        fail_unknown_key(Origin{position(file, key.source()), ""}, *section, key_name);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Overrides: "section.key=value", the value parsed as TOML; a value that is not valid TOML (a
// bare word like sgd) is taken as a string, and so is any value given to a string key.

struct Override {
  std::string text;
  std::string section;
  std::string key;
  std::string value_text;
};

Override parse_override(const std::string& text) {
  const size_t equals = text.find('=');
  const size_t dot = text.find('.');
  if (equals == std::string::npos || dot == std::string::npos || dot > equals || dot == 0 ||
      dot + 1 == equals) {
    throw InputError("--set " + text +
                     ": expected section.key=value (for example train.lr=3e-4)");
  }
  Override parsed{text, text.substr(0, dot), text.substr(dot + 1, equals - dot - 1),
                  text.substr(equals + 1)};
  const SectionSchema* section = find_section(parsed.section);
  if (section == nullptr) fail_unknown_section(Origin{"", text}, parsed.section);
  if (find_key(*section, parsed.key) == nullptr) {
    fail_unknown_key(Origin{"", text}, *section, parsed.key);
  }
  return parsed;
}

// Parses `value_text` as a TOML value by wrapping it in "v = ...". Returns the one-key table, or
// nothing when the text is not a single TOML value.
std::optional<toml::table> parse_value(const Override& override_) {
  try {
    toml::table wrapper = toml::parse("v = " + override_.value_text, "--set " + override_.text);
    if (wrapper.size() == 1 && wrapper.contains("v")) return wrapper;
  } catch (const toml::parse_error&) {
    // Not a TOML value: the caller treats it as a bare string.
  }
  return std::nullopt;
}

void apply_override(toml::table& root, const Override& override_) {
  if (!root.contains(override_.section)) root.insert(override_.section, toml::table{});
  toml::table& section = *root[override_.section].as_table();
  const Kind kind = find_key(*find_section(override_.section), override_.key)->kind;

  const std::optional<toml::table> wrapper = parse_value(override_);
  const toml::node* value = wrapper ? wrapper->get("v") : nullptr;
  if (value == nullptr || (kind == Kind::kString && !value->is_string())) {
    section.insert_or_assign(override_.key, override_.value_text);
    return;
  }
  value->visit([&](const auto& typed) { section.insert_or_assign(override_.key, typed); });
}

// ---------------------------------------------------------------------------------------------
// Reading: the overridden table into a CaseSpec, checking each value's kind.

class CaseReader {
 public:
  CaseReader(const toml::table& root, std::filesystem::path file,
             std::map<std::string, std::string> override_texts)
      : root_(root), file_(std::move(file)), override_texts_(std::move(override_texts)) {}

  // Where `section.key` came from; the bare file name when the key is absent (a default).
  Origin origin(const std::string& dotted) const {
    auto found = origins_.find(dotted);
    return found != origins_.end() ? found->second : Origin{file_.string(), ""};
  }

  void read(const char* section, const char* key, std::string& out) {
    if (const toml::node* node = lookup(section, key)) {
      if (!node->is_string()) fail_kind(section, key, Kind::kString, *node);
      out = node->as_string()->get();
    }
  }

  void read(const char* section, const char* key, int64_t& out) {
    if (const toml::node* node = lookup(section, key)) {
      if (!node->is_integer()) fail_kind(section, key, Kind::kInteger, *node);
      out = node->as_integer()->get();
    }
  }

  // Seeds: integers that must not be negative (they become uint64 seeds of both engines).
  void read(const char* section, const char* key, uint64_t& out) {
    int64_t value = static_cast<int64_t>(out);
    read(section, key, value);
    if (value < 0) {
      const std::string dotted = std::string(section) + "." + key;
      fail_at(origin(dotted), dotted + ": expected an integer >= 0, found " +
                                  std::to_string(value));
    }
    out = static_cast<uint64_t>(value);
  }

  // Integers are accepted where floats are expected (lr = 1 means 1.0).
  void read(const char* section, const char* key, double& out) {
    if (const toml::node* node = lookup(section, key)) {
      if (node->is_integer()) {
        out = static_cast<double>(node->as_integer()->get());
      } else if (node->is_floating_point()) {
        out = node->as_floating_point()->get();
      } else {
        fail_kind(section, key, Kind::kFloat, *node);
      }
    }
  }

  void read(const char* section, const char* key, bool& out) {
    if (const toml::node* node = lookup(section, key)) {
      if (!node->is_boolean()) fail_kind(section, key, Kind::kBool, *node);
      out = node->as_boolean()->get();
    }
  }

  void read(const char* section, const char* key, std::vector<int64_t>& out) {
    read_list<int64_t>(section, key, Kind::kIntegerList, "an integer", out);
  }

  void read(const char* section, const char* key, std::vector<std::string>& out) {
    read_list<std::string>(section, key, Kind::kStringList, "a string", out);
  }

 private:
  // An array whose elements are all T (int64_t or std::string).
  template <typename T>
  void read_list(const char* section, const char* key, Kind kind, const char* element_kind,
                 std::vector<T>& out) {
    const toml::node* node = lookup(section, key);
    if (node == nullptr) return;
    const toml::array* array = node->as_array();
    if (array == nullptr) fail_kind(section, key, kind, *node);
    out.clear();
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      const std::optional<T> value = element.value_exact<T>();
      if (!value) {
        const std::string dotted = std::string(section) + "." + key;
        fail_at(element_origin(dotted, element), dotted + "[" + std::to_string(i) +
                                                     "]: expected " + element_kind +
                                                     ", found " + found_name(element));
      }
      out.push_back(*value);
    }
  }

  const toml::node* lookup(const char* section, const char* key) {
    const toml::table* table = root_[section].as_table();
    const toml::node* node = table != nullptr ? table->get(key) : nullptr;
    if (node != nullptr) {
      const std::string dotted = std::string(section) + "." + key;
      origins_[dotted] = element_origin(dotted, *node);
    }
    return node;
  }

  Origin element_origin(const std::string& dotted, const toml::node& node) const {
    auto override_text = override_texts_.find(dotted);
    if (override_text != override_texts_.end()) return Origin{"", override_text->second};
    return Origin{position(file_, node.source()), ""};
  }

  [[noreturn]] void fail_kind(const char* section, const char* key, Kind expected,
                              const toml::node& node) {
    const std::string dotted = std::string(section) + "." + key;
    fail_at(origin(dotted),
            dotted + ": expected " + kind_name(expected) + ", found " + found_name(node));
  }

  const toml::table& root_;
  std::filesystem::path file_;
  std::map<std::string, std::string> override_texts_;  // "train.lr" -> "train.lr=3e-4"
  std::map<std::string, Origin> origins_;
};

CaseSpec read_case(CaseReader& reader) {
  CaseSpec spec;
  reader.read("case", "name", spec.name);
  reader.read("case", "description", spec.description);
  reader.read("model", "widths", spec.model.widths);
  reader.read("model", "activation", spec.model.activation);
  reader.read("model", "loss", spec.model.loss);
  reader.read("data", "dataset", spec.data.dataset);
  reader.read("data", "per_replica_batch", spec.data.per_replica_batch);
  reader.read("data", "seed", spec.data.seed);
  reader.read("data", "shuffle", spec.data.shuffle);
  reader.read("data", "drop_last", spec.data.drop_last);
  reader.read("data", "synthetic_num_samples", spec.data.synthetic_num_samples);
  reader.read("data", "synthetic_seed", spec.data.synthetic_seed);
  reader.read("parallel", "replicas", spec.parallel.replicas);
  reader.read("parallel", "processes", spec.parallel.processes);
  reader.read("train", "steps", spec.train.steps);
  reader.read("train", "optimizer", spec.train.optimizer);
  reader.read("train", "lr", spec.train.lr);
  reader.read("train", "momentum", spec.train.momentum);
  reader.read("train", "nesterov", spec.train.nesterov);
  reader.read("train", "weight_decay", spec.train.weight_decay);
  reader.read("train", "beta1", spec.train.beta1);
  reader.read("train", "beta2", spec.train.beta2);
  reader.read("train", "eps", spec.train.eps);
  reader.read("train", "eps_root", spec.train.eps_root);
  reader.read("train", "clip_grad_norm", spec.train.clip_grad_norm);
  reader.read("train", "grad_accum_steps", spec.train.grad_accum_steps);
  reader.read("train", "dtype", spec.train.dtype);
  reader.read("train", "record_steps", spec.train.record_steps);
  reader.read("init", "scheme", spec.init.scheme);
  reader.read("init", "seed", spec.init.seed);
  reader.read("init", "scale", spec.init.scale);
  reader.read("compare", "oracle", spec.compare.oracle);
  reader.read("compare", "tensor_rtol", spec.compare.tensor_rtol);
  reader.read("compare", "tensor_atol", spec.compare.tensor_atol);
  ScenarioSpec& scenario = spec.scenario;
  reader.read("scenario", "id", scenario.id);
  reader.read("scenario", "title", scenario.title);
  reader.read("scenario", "source", scenario.source);
  reader.read("scenario", "claim", scenario.claim);
  reader.read("scenario", "fact_check", scenario.fact_check);
  reader.read("scenario", "expect", scenario.expect);
  reader.read("scenario", "expect_diagnoses", scenario.expect_diagnoses);
  reader.read("scenario", "expect_error", scenario.expect_error);
  reader.read("scenario", "missing", scenario.missing);
  reader.read("scenario", "engine_program", scenario.engine_program);
  reader.read("scenario", "reference", scenario.reference);
  reader.read("scenario", "quick", scenario.quick);
  return spec;
}

// ---------------------------------------------------------------------------------------------
// Checking: ranges, allowed values, and rules that tie keys together.

std::string format_float(double value);

class CaseChecker {
 public:
  CaseChecker(const CaseSpec& spec, const CaseReader& reader) : spec_(spec), reader_(reader) {}

  void check_all() {
    check_values();
    check_model();
    check_data();
    check_parallel();
    check_train();
    check_scenario();
  }

 private:
  void check_values() {
    one_of("model.activation", spec_.model.activation, kActivations);
    one_of("model.loss", spec_.model.loss, kLosses);
    one_of("data.dataset", spec_.data.dataset, kDatasets);
    one_of("train.optimizer", spec_.train.optimizer, kOptimizers);
    one_of("train.dtype", spec_.train.dtype, kDtypes);
    one_of("init.scheme", spec_.init.scheme, kInitSchemes);
    at_least("data.per_replica_batch", spec_.data.per_replica_batch, 1);
    at_least("data.synthetic_num_samples", spec_.data.synthetic_num_samples, 1);
    at_least("parallel.replicas", spec_.parallel.replicas, 1);
    at_least("parallel.processes", spec_.parallel.processes, 1);
    at_least("train.steps", spec_.train.steps, 1);
    at_least("train.grad_accum_steps", spec_.train.grad_accum_steps, 1);
    positive("train.lr", spec_.train.lr);
    non_negative("train.eps", spec_.train.eps);  // torch and optax both accept eps = 0
    positive("init.scale", spec_.init.scale);
    non_negative("train.weight_decay", spec_.train.weight_decay);
    non_negative("train.eps_root", spec_.train.eps_root);
    non_negative("train.clip_grad_norm", spec_.train.clip_grad_norm);
    non_negative("compare.tensor_rtol", spec_.compare.tensor_rtol);
    non_negative("compare.tensor_atol", spec_.compare.tensor_atol);
    in_unit_interval("train.momentum", spec_.train.momentum);
    in_unit_interval("train.beta1", spec_.train.beta1);
    in_unit_interval("train.beta2", spec_.train.beta2);
    check_limits();
  }

  // What the producers can run (case_limits.h has the reason for each bound).
  void check_limits() {
    at_most("parallel.replicas", spec_.parallel.replicas, kMaxCaseReplicas,
            "ddp_ref runs each rank as a thread and meters its memory in one of " +
                std::to_string(kMaxCaseReplicas) + " per-rank slots");
    at_most("train.steps", spec_.train.steps, kMaxCaseSteps,
            "a cap so that every run ends: " + std::to_string(kMaxCaseSteps) +
                " steps take about 3 hours at 1 ms a step, and each writes a line of "
                "metrics.jsonl");
    // steps <= kMaxCaseSteps here, so the product cannot overflow unless grad_accum_steps is
    // itself absurd; divide instead of multiplying.
    if (spec_.train.grad_accum_steps > kMaxCaseSteps / spec_.train.steps) {
      fail_at(reader_.origin("train.grad_accum_steps"),
              "train.grad_accum_steps: " + std::to_string(spec_.train.steps) + " steps x " +
                  std::to_string(spec_.train.grad_accum_steps) +
                  " micro-batches is more than the " + std::to_string(kMaxCaseSteps) +
                  " batches a run may read",
              "use fewer steps or fewer micro-batches per step");
    }
    const int64_t layers = static_cast<int64_t>(spec_.model.widths.size()) - 1;
    if (layers > kMaxCaseLayers) {
      fail_at(reader_.origin("model.widths"),
              "model.widths: " + std::to_string(layers) + " layers, more than the " +
                  std::to_string(kMaxCaseLayers) +
                  " parity trains (the engine traces and runs one op group per layer, ddp_ref "
                  "builds one module per layer)",
              "use at most " + std::to_string(kMaxCaseLayers + 1) + " widths");
    }
  }

  void check_model() {
    const std::vector<int64_t>& widths = spec_.model.widths;
    if (widths.empty()) {
      fail_at(reader_.origin("model.widths"),
              "model.widths is required: the layer widths from input to output, for example "
              "widths = [784, 256, 10]");
    }
    if (widths.size() < 2) {
      fail_at(reader_.origin("model.widths"),
              "model.widths: expected at least 2 widths (input and output), found " +
                  std::to_string(widths.size()));
    }
    for (size_t i = 0; i < widths.size(); ++i) {
      if (widths[i] < 1) {
        fail_at(reader_.origin("model.widths"),
                "model.widths[" + std::to_string(i) + "]: expected a width >= 1, found " +
                    std::to_string(widths[i]));
      }
    }
  }

  void check_data() {
    if (spec_.data.dataset == "fashion-mnist") check_fashion_mnist();
    if (spec_.data.dataset == "synthetic-linear") check_synthetic_linear();
    check_batches_exist();
  }

  void check_fashion_mnist() {
    const std::vector<int64_t>& widths = spec_.model.widths;
    if (widths.front() != kFashionMnistFeatures) {
      fail_at(reader_.origin("model.widths"),
              "model.widths: fashion-mnist images have 784 features (28x28), so widths[0] must "
              "be 784, found " + std::to_string(widths.front()));
    }
    if (widths.back() != kFashionMnistClasses) {
      fail_at(reader_.origin("model.widths"),
              "model.widths: fashion-mnist has 10 classes, so the last width must be 10, found " +
                  std::to_string(widths.back()));
    }
    if (spec_.model.loss != "softmax_cross_entropy") {
      fail_at(reader_.origin("model.loss"),
              "model.loss: fashion-mnist has integer class labels; expected "
              "softmax_cross_entropy, found " + spec_.model.loss);
    }
  }

  void check_synthetic_linear() {
    const std::vector<int64_t>& widths = spec_.model.widths;
    if (widths.back() > widths.front()) {
      fail_at(reader_.origin("model.widths"),
              "model.widths: synthetic-linear targets are a permutation of input features, so "
              "the last width (" + std::to_string(widths.back()) +
                  ") must not exceed the first (" + std::to_string(widths.front()) + ")");
    }
    if (spec_.model.loss != "mse") {
      fail_at(reader_.origin("model.loss"),
              "model.loss: synthetic-linear has real-valued targets; expected mse, found " +
                  spec_.model.loss);
    }
  }

  // With drop_last, each replica sees floor(num_samples / replicas) samples per epoch (the
  // DistributedSampler), cut into full batches only: fewer samples than one batch would leave
  // an epoch with no step at all.
  void check_batches_exist() {
    if (!spec_.data.drop_last) return;
    const int64_t num_samples = spec_.data.dataset == "fashion-mnist"
                                    ? kFashionMnistTrainSamples
                                    : spec_.data.synthetic_num_samples;
    const int64_t per_replica = num_samples / spec_.parallel.replicas;
    if (per_replica < spec_.data.per_replica_batch) {
      fail_at(reader_.origin("data.per_replica_batch"),
              "data.per_replica_batch: with drop_last each replica gets " +
                  std::to_string(per_replica) + " samples per epoch, fewer than one batch of " +
                  std::to_string(spec_.data.per_replica_batch),
              "use a smaller batch, more samples, or drop_last = false");
    }
  }

  void check_parallel() {
    if (spec_.parallel.replicas % spec_.parallel.processes != 0) {
      fail_at(reader_.origin("parallel.processes"),
              "parallel.processes: " + std::to_string(spec_.parallel.replicas) +
                  " replicas cannot be spread evenly over " +
                  std::to_string(spec_.parallel.processes) +
                  " processes; expected a divisor of parallel.replicas");
    }
  }

  void check_train() {
    if (spec_.train.nesterov && (spec_.train.optimizer != "sgd" || spec_.train.momentum <= 0)) {
      fail_at(reader_.origin("train.nesterov"),
              "train.nesterov: Nesterov momentum needs optimizer = \"sgd\" and momentum > 0 (as "
              "torch.optim.SGD requires), found optimizer = \"" + spec_.train.optimizer +
                  "\", momentum = " + format_float(spec_.train.momentum));
    }
  }

  void check_scenario() {
    const ScenarioSpec& scenario = spec_.scenario;
    if (scenario.id.empty()) {
      if (!scenario.expect.empty()) {
        fail_at(reader_.origin("scenario.expect"),
                "scenario.expect: a [scenario] needs an id (the item of docs/pitfalls.md it "
                "reproduces, e.g. id = \"P2\")");
      }
      return;
    }
    one_of("scenario.expect", scenario.expect, kExpectations);
    one_of("scenario.engine_program", scenario.engine_program, engine_program_names());
    one_of("scenario.reference", scenario.reference, {"ddp_ref", "engine"});
    if (scenario.expect == "error" && scenario.expect_error.empty()) {
      fail_at(reader_.origin("scenario.expect"),
              "scenario.expect = \"error\" needs scenario.expect_error, a part of the error "
              "text the engine must raise");
    }
    if (scenario.expect == "not supported" && scenario.missing.empty()) {
      fail_at(reader_.origin("scenario.expect"),
              "scenario.expect = \"not supported\" needs scenario.missing, the engine feature "
              "the case waits for");
    }
  }

  void one_of(const char* dotted, const std::string& value,
              const std::vector<std::string>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
    fail_at(reader_.origin(dotted),
            std::string(dotted) + ": expected one of " + join(allowed) + ", found '" + value + "'",
            did_you_mean(value, allowed));
  }

  void at_least(const char* dotted, int64_t value, int64_t minimum) {
    if (value >= minimum) return;
    fail_at(reader_.origin(dotted), std::string(dotted) + ": expected an integer >= " +
                                        std::to_string(minimum) + ", found " +
                                        std::to_string(value));
  }

  void at_most(const char* dotted, int64_t value, int64_t maximum, const std::string& reason) {
    if (value <= maximum) return;
    fail_at(reader_.origin(dotted), std::string(dotted) + ": expected an integer <= " +
                                        std::to_string(maximum) + ", found " +
                                        std::to_string(value) + " (" + reason + ")");
  }

  void finite(const char* dotted, double value) {
    if (std::isfinite(value)) return;
    fail_at(reader_.origin(dotted),
            std::string(dotted) + ": expected a finite number, found " + format_float(value));
  }

  void positive(const char* dotted, double value) {
    finite(dotted, value);
    if (value > 0) return;
    fail_at(reader_.origin(dotted),
            std::string(dotted) + ": expected a value > 0, found " + format_float(value));
  }

  void non_negative(const char* dotted, double value) {
    finite(dotted, value);
    if (value >= 0) return;
    fail_at(reader_.origin(dotted),
            std::string(dotted) + ": expected a value >= 0, found " + format_float(value));
  }

  void in_unit_interval(const char* dotted, double value) {
    finite(dotted, value);
    if (value >= 0 && value < 1) return;
    fail_at(reader_.origin(dotted),
            std::string(dotted) + ": expected a value in [0, 1), found " + format_float(value));
  }

  const CaseSpec& spec_;
  const CaseReader& reader_;
};

// record_steps is a set of steps, numbered from 0; a negative entry counts from the end (-1 is
// the last step, as in Python), so that `--set train.steps=10` keeps "record the last step"
// meaningful. After this, entries lie in [0, steps), sorted, without repeats.
void resolve_record_steps(CaseSpec& spec, const CaseReader& reader) {
  std::vector<int64_t>& record_steps = spec.train.record_steps;
  const int64_t steps = spec.train.steps;
  for (size_t i = 0; i < record_steps.size(); ++i) {
    if (record_steps[i] < -steps || record_steps[i] >= steps) {
      fail_at(reader.origin("train.record_steps"),
              "train.record_steps[" + std::to_string(i) + "]: expected a step in [" +
                  std::to_string(-steps) + ", " + std::to_string(steps) +
                  ") (0 is the first step, -1 the last), found " +
                  std::to_string(record_steps[i]));
    }
    if (record_steps[i] < 0) record_steps[i] += steps;
  }
  std::sort(record_steps.begin(), record_steps.end());
  record_steps.erase(std::unique(record_steps.begin(), record_steps.end()), record_steps.end());
}

// ---------------------------------------------------------------------------------------------
// Canonical TOML

// The shortest decimal that reads back as the same double, always with a '.' or an exponent so
// that TOML parses it as a float (1.0, not 1).
std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  std::string result(text);
  if (result.find_first_of(".e") == std::string::npos) result += ".0";
  return result;
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string quote(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (c == '\n') {
      quoted += "\\n";
    } else if (c == '\t') {
      quoted += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", byte);
      quoted += escape;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string string_list(const std::vector<std::string>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i == 0 ? "" : ", ") + quote(values[i]);
  return text + "]";
}

std::string int_list(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(values[i]);
  }
  return text + "]";
}

const char* boolean(bool value) { return value ? "true" : "false"; }

// ---------------------------------------------------------------------------------------------
// Files

std::string read_text_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError("case file " + file.string() + " cannot be opened for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

toml::table parse_toml_file(const std::filesystem::path& file) {
  const std::string text = read_text_file(file);
  try {
    return toml::parse(text, file.string());
  } catch (const toml::parse_error& error) {
    throw InputError(position(file, error.source()) + ": TOML syntax error: " +
                     std::string(error.description()));
  }
}

std::vector<std::string> available_case_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A case is read from a regular file (or a link to one): a directory named x.toml would
// otherwise read as an empty table and fail as "model.widths is required".
void require_regular_file(const std::filesystem::path& file) {
  std::error_code error;
  if (std::filesystem::is_regular_file(file, error)) return;
  const std::filesystem::file_status status = std::filesystem::status(file, error);
  const char* what = status.type() == std::filesystem::file_type::directory ? "a directory"
                                                                            : "not a regular file";
  throw InputError("case file " + file.string() + " is " + what +
                   "; give the path of a .toml case file (or a case name from " +
                   cases_dir().string() + ")");
}

// A name is looked up in cases_dir(); anything that looks like a path is used as one.
std::filesystem::path resolve_case_file(const std::string& name_or_path) {
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       std::filesystem::path(name_or_path).extension() == ".toml";
  if (is_path) {
    if (!std::filesystem::exists(name_or_path)) {
      throw InputError("case file " + name_or_path + " not found");
    }
    require_regular_file(name_or_path);
    return name_or_path;
  }
  const std::filesystem::path dir = cases_dir();
  std::filesystem::path file = dir / (name_or_path + ".toml");
  if (std::filesystem::exists(file)) {
    require_regular_file(file);
    return file;
  }
  const std::vector<std::string> names = available_case_names(dir);
  std::string message = "unknown case '" + name_or_path + "'; available cases in " +
                        dir.string() + ": " + (names.empty() ? "(none)" : join(names));
  const std::string guess = did_you_mean(name_or_path, names);
  if (!guess.empty()) message += "; " + guess;
  throw InputError(message);
}

void check_name_matches_file(CaseSpec& spec, const CaseReader& reader) {
  const std::string stem = spec.source_file.stem().string();
  if (spec.name.empty()) {
    spec.name = stem;  // [case] name is optional: the file name is the case name
    return;
  }
  if (spec.name != stem) {
    fail_at(reader.origin("case.name"),
            "case.name: expected '" + stem + "' (the file name without .toml), found '" +
                spec.name + "'",
            "rename the file or the case so that they agree");
  }
}

}  // namespace

// -------------------------------------------------------------------------------------------
// Public interface

std::filesystem::path cases_dir() {
  const char* from_env = std::getenv("PARITY_CASES_DIR");
  if (from_env != nullptr && *from_env != '\0') return from_env;
  return PARITY_SOURCE_CASES_DIR;
}

CaseSpec load_case(const std::string& name_or_path, const std::vector<std::string>& overrides) {
  const std::filesystem::path file = resolve_case_file(name_or_path);
  toml::table root = parse_toml_file(file);
  check_structure(root, file);

  std::map<std::string, std::string> override_texts;
  for (const std::string& text : overrides) {
    const Override override_ = parse_override(text);
    apply_override(root, override_);
    override_texts[override_.section + "." + override_.key] = text;
  }

  CaseReader reader(root, file, override_texts);
  CaseSpec spec = read_case(reader);
  spec.source_file = file;
  check_name_matches_file(spec, reader);
  CaseChecker(spec, reader).check_all();
  resolve_record_steps(spec, reader);
  // Last: the estimate assumes the bounds above (case_limits.h) hold.
  check_case_memory(spec, physical_memory_bytes());
  return spec;
}

std::vector<CaseSpec> list_cases() {
  const std::filesystem::path dir = cases_dir();
  if (!std::filesystem::is_directory(dir)) {
    throw InputError("cases folder " + dir.string() +
                     " not found; set PARITY_CASES_DIR to the folder holding the *.toml cases");
  }
  std::vector<CaseSpec> cases;
  for (const std::string& name : available_case_names(dir)) {
    cases.push_back(load_case((dir / (name + ".toml")).string()));
  }
  std::sort(cases.begin(), cases.end(),
            [](const CaseSpec& a, const CaseSpec& b) { return a.name < b.name; });
  return cases;
}

std::string CaseSpec::to_toml() const {
  std::string text =
      training_toml() + "\n[compare]\noracle = " + boolean(compare.oracle) +
      "\ntensor_rtol = " + format_float(compare.tensor_rtol) +
      "\ntensor_atol = " + format_float(compare.tensor_atol) + "\n";
  if (scenario.id.empty()) return text;
  std::ostringstream out;
  out << "\n[scenario]\n"
      << "id = " << quote(scenario.id) << "\n"
      << "title = " << quote(scenario.title) << "\n"
      << "source = " << quote(scenario.source) << "\n"
      << "claim = " << quote(scenario.claim) << "\n"
      << "fact_check = " << quote(scenario.fact_check) << "\n"
      << "expect = " << quote(scenario.expect) << "\n"
      << "expect_diagnoses = " << string_list(scenario.expect_diagnoses) << "\n"
      << "expect_error = " << quote(scenario.expect_error) << "\n"
      << "missing = " << quote(scenario.missing) << "\n"
      << "engine_program = " << quote(scenario.engine_program) << "\n"
      << "reference = " << quote(scenario.reference) << "\n"
      << "quick = " << string_list(scenario.quick) << "\n";
  return text + out.str();
}

std::string CaseSpec::hash() const { return Fnv1a64().update(training_toml()).hex(); }

std::string CaseSpec::training_toml() const {
  std::ostringstream out;
  out << "[case]\n"
      << "name = " << quote(name) << "\n"
      << "description = " << quote(description) << "\n\n"
      << "[model]\n"
      << "widths = " << int_list(model.widths) << "\n"
      << "activation = " << quote(model.activation) << "\n"
      << "loss = " << quote(model.loss) << "\n\n"
      << "[data]\n"
      << "dataset = " << quote(data.dataset) << "\n"
      << "per_replica_batch = " << data.per_replica_batch << "\n"
      << "seed = " << data.seed << "\n"
      << "shuffle = " << boolean(data.shuffle) << "\n"
      << "drop_last = " << boolean(data.drop_last) << "\n"
      << "synthetic_num_samples = " << data.synthetic_num_samples << "\n"
      << "synthetic_seed = " << data.synthetic_seed << "\n\n"
      << "[parallel]\n"
      << "replicas = " << parallel.replicas << "\n"
      << "processes = " << parallel.processes << "\n\n"
      << "[train]\n"
      << "steps = " << train.steps << "\n"
      << "optimizer = " << quote(train.optimizer) << "\n"
      << "lr = " << format_float(train.lr) << "\n"
      << "momentum = " << format_float(train.momentum) << "\n"
      << "nesterov = " << boolean(train.nesterov) << "\n"
      << "weight_decay = " << format_float(train.weight_decay) << "\n"
      << "beta1 = " << format_float(train.beta1) << "\n"
      << "beta2 = " << format_float(train.beta2) << "\n"
      << "eps = " << format_float(train.eps) << "\n"
      << "eps_root = " << format_float(train.eps_root) << "\n"
      << "clip_grad_norm = " << format_float(train.clip_grad_norm) << "\n"
      << "grad_accum_steps = " << train.grad_accum_steps << "\n"
      << "dtype = " << quote(train.dtype) << "\n"
      << "record_steps = " << int_list(train.record_steps) << "\n\n"
      << "[init]\n"
      << "scheme = " << quote(init.scheme) << "\n"
      << "seed = " << init.seed << "\n"
      << "scale = " << format_float(init.scale) << "\n";
  return out.str();
}

}  // namespace parity
