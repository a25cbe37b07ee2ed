// `parity rng`: argument parsing and JSON printing around pmap_engine::random. See
// rng_command.h for the subcommands and docs/rng.md for what the numbers mean.
#include "rng_command.h"

#include <charconv>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "numeric_options.h"
#include "parity/common/error.h"
#include "pmap_engine/random.h"

namespace parity::cli {
namespace {

namespace pr = pmap_engine::random;

// The most numbers one invocation prints: 2^24 (64 MiB of uint32, several hundred MiB of JSON).
constexpr uint64_t kMaxPrintedElements = uint64_t{1} << 24;

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// Strips one pair of enclosing brackets, "[...]" or "(...)", so JSON and Python spellings work.
std::string_view strip_brackets(std::string_view text) {
  text = trim(text);
  if (text.size() >= 2 && ((text.front() == '[' && text.back() == ']') ||
                           (text.front() == '(' && text.back() == ')'))) {
    text = trim(text.substr(1, text.size() - 2));
  }
  return text;
}

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    parts.push_back(trim(text.substr(start, comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return parts;
}

// Parses all of `text` as a base-10 integer of type T; false on anything else.
template <typename T>
bool parse_integer(std::string_view text, T& value) {
  if (text.empty()) return false;
  if (text.front() == '+') text.remove_prefix(1);
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return result.ec == std::errc() && result.ptr == text.data() + text.size();
}

pr::Key parse_key(const std::string& text) {
  const auto parts = split_commas(strip_brackets(text));
  pr::Key key;
  if (parts.size() != 2 || !parse_integer(parts[0], key.hi) || !parse_integer(parts[1], key.lo)) {
    throw InputError("parity rng: KEY '" + text +
                     "' is not two uint32 numbers; write the key data as HI,LO with each "
                     "number in 0..4294967295, e.g. 0,42 (what `parity rng key 42` prints)");
  }
  return key;
}

pr::Shape parse_shape(const std::string& text) {
  const std::string_view inner = strip_brackets(text);
  pr::Shape shape;
  if (inner.empty()) return shape;  // "", "()" or "[]": a scalar, JAX's default shape
  auto parts = split_commas(inner);
  if (parts.size() > 1 && parts.back().empty()) parts.pop_back();  // Python's "(3,)"
  // Product of max(dim, 1) over the dimensions: bounds both the numbers and the nested lists
  // that get printed.
  uint64_t extent_product = 1;
  bool too_large = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t dim = 0;
    if (!parse_integer(parts[i], dim) || dim < 0) {
      throw InputError("parity rng: --shape '" + text + "': dimension " + std::to_string(i) +
                       " ('" + std::string(parts[i]) +
                       "') is not a non-negative integer; write the shape as comma-separated "
                       "dimensions, e.g. --shape 2,3 (or --shape '' for a scalar)");
    }
    shape.push_back(dim);
    const uint64_t extent = dim == 0 ? 1 : static_cast<uint64_t>(dim);
    if (too_large || extent > kMaxPrintedElements / extent_product) {
      too_large = true;
    } else {
      extent_product *= extent;
    }
  }
  if (too_large) {
    throw InputError("parity rng: --shape '" + text + "' asks for more than " +
                     std::to_string(kMaxPrintedElements) +
                     " numbers, more than parity rng prints; ask for a smaller shape (with "
                     "--partitionable true the first values do not change with the size)");
  }
  return shape;
}

bool parse_partitionable(const std::string& text) {
  if (text.empty()) return pr::default_partitionable();
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  throw InputError("parity rng: --partitionable '" + text +
                   "' is not true or false; it is JAX's jax_threefry_partitionable flag: "
                   "true (the default since jax 0.5.0) or false (older versions)");
}

int64_t parse_seed(const std::string& text) {
  int64_t seed = 0;
  if (!parse_integer(trim(text), seed)) {
    throw InputError("parity rng key: SEED '" + text +
                     "' is not an integer in the int64 range; JAX's PRNGKey takes an int64 "
                     "seed (and raises OverflowError outside it), e.g. parity rng key 42");
  }
  return seed;
}

uint32_t parse_fold_in_data(const std::string& text) {
  uint32_t data = 0;
  if (!parse_integer(trim(text), data)) {
    throw InputError("parity rng fold-in: DATA '" + text +
                     "' is not a uint32; fold_in folds in a 32-bit unsigned integer, "
                     "0..4294967295, e.g. parity rng fold-in 0,42 7");
  }
  return data;
}

nlohmann::json key_json(pr::Key key) { return nlohmann::json::array({key.hi, key.lo}); }

// A float32 goes out as the double of the same value: nlohmann prints doubles with the
// shortest digits that read back as that double, and the double converts back to the float.
nlohmann::json element_json(float value) { return static_cast<double>(value); }
nlohmann::json element_json(uint32_t value) { return value; }

// Row-major `flat` as nested JSON lists of `shape` (a bare number for a scalar shape).
template <typename T>
nlohmann::json nested_json(const std::vector<T>& flat, const pr::Shape& shape, size_t dim,
                           size_t& offset) {
  if (dim == shape.size()) return element_json(flat[offset++]);
  nlohmann::json list = nlohmann::json::array();
  for (int64_t i = 0; i < shape[dim]; ++i)
    list.push_back(nested_json(flat, shape, dim + 1, offset));
  return list;
}

template <typename T>
void print_array(const std::vector<T>& flat, const pr::Shape& shape) {
  size_t offset = 0;
  std::cout << nested_json(flat, shape, 0, offset).dump() << "\n";
}

struct Arguments {
  std::string seed;
  bool enable_x64 = false;
  std::string key;
  int64_t num = 2;
  std::string data;
  std::string shape;
  std::string partitionable;
  double minval = 0.0;
  double maxval = 1.0;
};

void add_partitionable_option(CLI::App* command, Arguments& arguments) {
  command
      ->add_option("--partitionable", arguments.partitionable,
                   "JAX's jax_threefry_partitionable flag: true (default, jax >= 0.5.0) or false")
      ->type_name("true|false");
}

void add_key_argument(CLI::App* command, Arguments& arguments) {
  command->add_option("key", arguments.key, "key data HI,LO, e.g. 0,42")->required();
}

void add_shape_option(CLI::App* command, Arguments& arguments) {
  command
      ->add_option("--shape", arguments.shape,
                   "comma-separated dimensions, e.g. 2,3; empty for a scalar (the default)")
      ->type_name("D0,D1,...");
}

}  // namespace

void register_rng_command(CLI::App& app) {
  auto arguments = std::make_shared<Arguments>();
  CLI::App* rng = app.add_subcommand(
      "rng", "JAX's threefry PRNG, bit-exact: keys, split, fold_in and samples as JSON");
  rng->require_subcommand(1);

  CLI::App* key = rng->add_subcommand("key", "jax.random.PRNGKey(seed) as [hi, lo]");
  key->add_option("seed", arguments->seed, "integer seed (int64)")->required();
  key->add_flag("--x64", arguments->enable_x64,
                "as with jax_enable_x64 on: keep the seed's high 32 bits (default: off, as JAX)");
  key->callback([arguments] {
    const pr::Key result = pr::prng_key(parse_seed(arguments->seed), arguments->enable_x64);
    std::cout << key_json(result).dump() << "\n";
  });

  CLI::App* split = rng->add_subcommand("split", "jax.random.split(key, num) as [[hi, lo], ...]");
  add_key_argument(split, *arguments);
  split->add_option("--num", arguments->num, "how many keys (default 2)")
      ->check(integer_in(0, static_cast<int64_t>(kMaxPrintedElements)));
  add_partitionable_option(split, *arguments);
  split->callback([arguments] {
    const pr::Key parent = parse_key(arguments->key);
    const bool partitionable = parse_partitionable(arguments->partitionable);
    nlohmann::json keys = nlohmann::json::array();
    for (const pr::Key& child : pr::split(parent, arguments->num, partitionable)) {
      keys.push_back(key_json(child));
    }
    std::cout << keys.dump() << "\n";
  });

  CLI::App* fold_in = rng->add_subcommand("fold-in", "jax.random.fold_in(key, data) as [hi, lo]");
  add_key_argument(fold_in, *arguments);
  fold_in->add_option("data", arguments->data, "uint32 to fold in")->required();
  fold_in->callback([arguments] {
    const pr::Key parent = parse_key(arguments->key);
    std::cout << key_json(pr::fold_in(parent, parse_fold_in_data(arguments->data))).dump() << "\n";
  });

  CLI::App* bits = rng->add_subcommand("bits", "jax.random.bits(key, shape, uint32)");
  CLI::App* uniform =
      rng->add_subcommand("uniform", "jax.random.uniform(key, shape, float32, minval, maxval)");
  CLI::App* normal = rng->add_subcommand("normal", "jax.random.normal(key, shape, float32)");
  for (CLI::App* sampler : {bits, uniform, normal}) {
    add_key_argument(sampler, *arguments);
    add_shape_option(sampler, *arguments);
    add_partitionable_option(sampler, *arguments);
  }
  uniform->add_option("--minval", arguments->minval, "lower bound, inclusive (default 0)")
      ->check(finite_number());
  uniform->add_option("--maxval", arguments->maxval, "upper bound, exclusive (default 1)")
      ->check(finite_number());

  bits->callback([arguments] {
    const pr::Key parent = parse_key(arguments->key);
    const pr::Shape shape = parse_shape(arguments->shape);
    print_array(pr::random_bits(parent, shape, parse_partitionable(arguments->partitionable)),
                shape);
  });
  uniform->callback([arguments] {
    const pr::Key parent = parse_key(arguments->key);
    const pr::Shape shape = parse_shape(arguments->shape);
    // JAX converts Python float bounds to float32 (round to nearest) before sampling.
    const auto minval = static_cast<float>(arguments->minval);
    const auto maxval = static_cast<float>(arguments->maxval);
    print_array(
        pr::uniform(parent, shape, minval, maxval, parse_partitionable(arguments->partitionable)),
        shape);
  });
  normal->callback([arguments] {
    const pr::Key parent = parse_key(arguments->key);
    const pr::Shape shape = parse_shape(arguments->shape);
    print_array(pr::normal(parent, shape, parse_partitionable(arguments->partitionable)), shape);
  });
}

}  // namespace parity::cli
