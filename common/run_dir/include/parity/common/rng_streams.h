// A run's RNG streams: what every dropout site drew on every replica at every step, recorded in
// the run directory's rng.jsonl (one line per step, replica and site) so that compare can check
// that replicas draw independently, that steps do not repeat a mask, that the keep rate is the
// layer's, and that two producers declaring the same stream drew the same masks.
//
//   {"step": 3, "replica": 1, "site": "Residual_1/Dropout_0", "rate": 0.1, "key": [hi, lo],
//    "size": 100352, "kept": 90311, "digest": "89ab...", "prefix": "f7ff..."}
//
// site:   the dropout's module path, as infer_model_shapes names modules (an attention's weight
//         dropout is its MultiHeadDotProductAttention_i's path)
// rate:   the layer's drop rate as the producer applied it (each element kept with 1 - rate)
// key:    the jax.random key the mask was drawn from, [hi, lo] as key_data prints it; absent
//         where the producer has no keys (torch's generator)
// size, kept: the mask's elements and how many of them are kept
// digest: FNV-1a 64 (digest.h) of the mask as one byte per element, 1 kept, 0 dropped, in
//         row-major order, 16 hex digits
// prefix: the mask's first min(size, kMaskPrefixBits) elements as bits, eight per byte, the
//         first element in the lowest bit, as hex: what replica agreement is measured on
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace parity {

inline constexpr int64_t kMaskPrefixBits = 4096;

using RngKeyWords = std::array<uint32_t, 2>;  // [hi, lo]

struct MaskDraw {
  int64_t step = 0;
  int64_t replica = 0;
  std::string site;
  double rate = 0;
  std::optional<RngKeyWords> key;
  int64_t size = 0;
  int64_t kept = 0;
  std::string digest;
  std::vector<uint8_t> prefix;  // packed bits, ceil(min(size, kMaskPrefixBits) / 8) bytes
};

// The draw of `keep` (one element per mask entry, nonzero = kept, row-major).
MaskDraw summarise_mask(int64_t step, int64_t replica, std::string site, double rate,
                        const std::vector<uint8_t>& keep,
                        std::optional<RngKeyWords> key = std::nullopt);

// Element i of a draw's prefix (i < min(size, kMaskPrefixBits)).
bool prefix_bit(const MaskDraw& draw, int64_t i);

// One rng.jsonl line, without its newline.
std::string mask_draw_to_json_line(const MaskDraw& draw);

// DIR/rng.jsonl.
std::filesystem::path rng_streams_path(const std::filesystem::path& dir);

// Reads DIR/rng.jsonl; empty when the run recorded no streams (no file). InputError naming the
// file and line for a malformed line (a missing or mistyped key, a rate outside [0, 1), a replica outside
// 0..replicas-1, kept outside 0..size, a digest that is not 16 hex digits, a prefix of the wrong
// length or with more kept bits than `kept`), and naming the step, replica and site when the
// streams are incomplete: every step in `steps` must hold a draw for every replica at every site
// that step 0 of the file has, each once, and each site must keep one mask size. `being_written`
// as in read_run_dir (a running producer's unterminated last line is left out).
std::vector<MaskDraw> read_rng_streams(const std::filesystem::path& dir, int64_t replicas,
                                       const std::vector<int64_t>& steps, bool being_written);

}  // namespace parity
