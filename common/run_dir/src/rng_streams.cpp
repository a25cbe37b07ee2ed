#include "parity/common/rng_streams.h"

#include <fmt/format.h>

#include <algorithm>
#include <bitset>
#include <map>
#include <set>
#include <tuple>

#include "json_fields.h"
#include "parity/common/digest.h"

namespace parity {
namespace {

constexpr const char* kRngJsonl = "rng.jsonl";

int64_t prefix_length(int64_t size) { return std::min(size, kMaskPrefixBits); }
size_t prefix_bytes(int64_t size) { return static_cast<size_t>((prefix_length(size) + 7) / 8); }

std::string to_hex(const std::vector<uint8_t>& bytes) {
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (uint8_t byte : bytes) hex += fmt::format("{:02x}", byte);
  return hex;
}

bool is_hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

std::optional<std::vector<uint8_t>> from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0 || !std::all_of(hex.begin(), hex.end(), is_hex_digit)) {
    return std::nullopt;
  }
  std::vector<uint8_t> bytes(hex.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
  return bytes;
}

int64_t count_bits(const std::vector<uint8_t>& bytes) {
  int64_t count = 0;
  for (uint8_t byte : bytes) count += static_cast<int64_t>(std::bitset<8>(byte).count());
  return count;
}

MaskDraw draw_from_json(const Json& line, const std::string& where, int64_t replicas) {
  const ObjectReader reader = expect_object(line, where);
  MaskDraw draw;
  draw.step = reader.integer("step");
  draw.replica = reader.integer("replica");
  draw.site = reader.string("site");
  draw.rate = reader.number("rate");
  if (reader.has("key")) {
    const std::vector<int64_t> words = reader.integers("key");
    const auto is_word = [](int64_t word) { return word >= 0 && word <= 0xFFFFFFFFll; };
    if (words.size() != 2 || !std::all_of(words.begin(), words.end(), is_word)) {
      throw InputError(where + ": key \"key\": expected [hi, lo], two 32-bit unsigned words");
    }
    draw.key = RngKeyWords{static_cast<uint32_t>(words[0]), static_cast<uint32_t>(words[1])};
  }
  draw.size = reader.integer("size");
  draw.kept = reader.integer("kept");
  draw.digest = reader.string("digest");
  if (draw.step < 0) throw InputError(fmt::format("{}: step {} is negative", where, draw.step));
  if (draw.replica < 0 || draw.replica >= replicas) {
    throw InputError(fmt::format("{}: replica {} is outside 0..{} (run.json says {} replicas)",
                                 where, draw.replica, replicas - 1, replicas));
  }
  if (draw.site.empty()) throw InputError(where + ": key \"site\" is empty");
  if (!(draw.rate >= 0 && draw.rate < 1)) {
    throw InputError(fmt::format("{}: rate {} is outside [0, 1): a drop rate", where, draw.rate));
  }
  if (draw.size <= 0 || draw.kept < 0 || draw.kept > draw.size) {
    throw InputError(fmt::format("{}: kept {} of size {}: a mask has at least one element and "
                                 "keeps between none and all of them",
                                 where, draw.kept, draw.size));
  }
  if (draw.digest.size() != 16 || !std::all_of(draw.digest.begin(), draw.digest.end(), is_hex_digit)) {
    throw InputError(where + ": key \"digest\": expected 16 lowercase hex digits (FNV-1a 64), "
                     "found \"" + draw.digest + "\"");
  }
  const std::optional<std::vector<uint8_t>> prefix = from_hex(reader.string("prefix"));
  if (!prefix || prefix->size() != prefix_bytes(draw.size)) {
    throw InputError(fmt::format(
        "{}: key \"prefix\": expected {} hex digits (the first {} mask bits of {}), found {}",
        where, 2 * prefix_bytes(draw.size), prefix_length(draw.size), draw.size,
        prefix ? std::to_string(2 * prefix->size()) + " digits" : "something not hex"));
  }
  draw.prefix = *prefix;
  if (count_bits(draw.prefix) > draw.kept) {
    throw InputError(fmt::format("{}: the prefix keeps {} elements but \"kept\" says {} of the "
                                 "whole mask; the line is damaged",
                                 where, count_bits(draw.prefix), draw.kept));
  }
  return draw;
}

// Every step of the run holds every replica at every site of the file's first step, once, with
// one mask size per step and site.
void check_complete(const std::vector<MaskDraw>& draws, const std::vector<std::string>& wheres,
                    int64_t replicas, const std::vector<int64_t>& steps,
                    const std::string& file) {
  std::set<std::string> sites;
  const int64_t first_step = draws.front().step;
  for (const MaskDraw& draw : draws) {
    if (draw.step == first_step) sites.insert(draw.site);
  }
  std::map<std::tuple<int64_t, std::string, int64_t>, size_t> seen;  // (step, site, replica)
  std::map<std::pair<int64_t, std::string>, size_t> size_of;         // (step, site) -> index
  std::map<std::string, size_t> rate_of;                             // site -> index
  for (size_t i = 0; i < draws.size(); ++i) {
    const MaskDraw& draw = draws[i];
    if (sites.count(draw.site) == 0) {
      throw InputError(fmt::format("{}: site \"{}\" is not among step {}'s sites; every step "
                                   "draws at the same dropout sites",
                                   wheres[i], draw.site, first_step));
    }
    const auto [earlier, inserted] = seen.emplace(std::make_tuple(draw.step, draw.site, draw.replica), i);
    if (!inserted) {
      throw InputError(fmt::format("{}: step {}, replica {}, site \"{}\" is recorded twice ({} too)",
                                   wheres[i], draw.step, draw.replica, draw.site,
                                   wheres[earlier->second]));
    }
    const auto [same_site, first_of_site] = rate_of.emplace(draw.site, i);
    if (!first_of_site && draws[same_site->second].rate != draw.rate) {
      throw InputError(fmt::format("{}: site \"{}\" has rate {}, but {} for it ({}); a "
                                   "layer keeps one drop rate",
                                   wheres[i], draw.site, draw.rate,
                                   draws[same_site->second].rate, wheres[same_site->second]));
    }
    const auto [same, first] = size_of.emplace(std::make_pair(draw.step, draw.site), i);
    if (!first && draws[same->second].size != draw.size) {
      throw InputError(fmt::format(
          "{}: replica {}'s mask at step {}, site \"{}\" has {} elements, replica {}'s {} ({}); "
          "every replica's batch has the same shape, so its masks must have the same size",
          wheres[i], draw.replica, draw.step, draw.site, draw.size,
          draws[same->second].replica, draws[same->second].size, wheres[same->second]));
    }
  }
  for (int64_t step : steps) {
    for (const std::string& site : sites) {
      for (int64_t replica = 0; replica < replicas; ++replica) {
        if (seen.count(std::make_tuple(step, site, replica)) == 0) {
          throw InputError(fmt::format(
              "{}: no draw for step {}, replica {}, site \"{}\"; metrics.jsonl records step {}, "
              "so its streams must be complete: rerun the producer",
              file, step, replica, site, step));
        }
      }
    }
  }
}

}  // namespace

MaskDraw summarise_mask(int64_t step, int64_t replica, std::string site, double rate,
                        const std::vector<uint8_t>& keep, std::optional<RngKeyWords> key) {
  MaskDraw draw;
  draw.step = step;
  draw.replica = replica;
  draw.site = std::move(site);
  draw.rate = rate;
  draw.key = key;
  draw.size = static_cast<int64_t>(keep.size());
  std::vector<uint8_t> bytes(keep.size());
  for (size_t i = 0; i < keep.size(); ++i) bytes[i] = keep[i] != 0 ? 1 : 0;
  draw.kept = std::count(bytes.begin(), bytes.end(), uint8_t{1});
  draw.digest = Fnv1a64().update(bytes.data(), bytes.size()).hex();
  draw.prefix.assign(prefix_bytes(draw.size), 0);
  for (int64_t i = 0; i < prefix_length(draw.size); ++i) {
    if (bytes[static_cast<size_t>(i)] != 0) draw.prefix[static_cast<size_t>(i / 8)] |= 1u << (i % 8);
  }
  return draw;
}

bool prefix_bit(const MaskDraw& draw, int64_t i) {
  return ((draw.prefix[static_cast<size_t>(i / 8)] >> (i % 8)) & 1u) != 0;
}

std::string mask_draw_to_json_line(const MaskDraw& draw) {
  Json line;
  line["step"] = draw.step;
  line["replica"] = draw.replica;
  line["site"] = draw.site;
  line["rate"] = draw.rate;
  if (draw.key) line["key"] = {(*draw.key)[0], (*draw.key)[1]};
  line["size"] = draw.size;
  line["kept"] = draw.kept;
  line["digest"] = draw.digest;
  line["prefix"] = to_hex(draw.prefix);
  return line.dump();
}

std::filesystem::path rng_streams_path(const std::filesystem::path& dir) { return dir / kRngJsonl; }

std::vector<MaskDraw> read_rng_streams(const std::filesystem::path& dir, int64_t replicas,
                                       const std::vector<int64_t>& steps, bool being_written) {
  const std::filesystem::path path = rng_streams_path(dir);
  if (!std::filesystem::exists(path)) return {};
  std::vector<MaskDraw> draws;
  std::vector<std::string> wheres;
  for_each_json_line(path, being_written, [&](const Json& line, const std::string& where) {
    draws.push_back(draw_from_json(line, where, replicas));
    wheres.push_back(where);
  });
  if (draws.empty()) return draws;
  check_complete(draws, wheres, replicas, steps, path.string());
  std::sort(draws.begin(), draws.end(), [](const MaskDraw& a, const MaskDraw& b) {
    return std::tie(a.step, a.site, a.replica) < std::tie(b.step, b.site, b.replica);
  });
  return draws;
}

}  // namespace parity
