// DistributedSampler and torch_cpu_randperm against golden vectors from real PyTorch, plus the
// padding / drop_last / batching rules checked by hand.
#include "parity/common/distributed_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "parity/common/error.h"

namespace parity {
namespace {

// The checksum scripts/gen_sampler_vectors.py prints: sum of (i + 1) * values[i] mod 2^61.
// Unsigned arithmetic wraps mod 2^64, so masking to 61 bits at the end is exact.
uint64_t list_checksum(const std::vector<int64_t>& values) {
  uint64_t sum = 0;
  for (size_t i = 0; i < values.size(); ++i) sum += (i + 1) * static_cast<uint64_t>(values[i]);
  return sum & ((uint64_t{1} << 61) - 1);
}

std::vector<int64_t> head(const std::vector<int64_t>& values, size_t count) {
  return {values.begin(),
          values.begin() + static_cast<std::ptrdiff_t>(std::min(count, values.size()))};
}

struct SamplerVector {
  int64_t dataset_size;
  int64_t num_replicas;
  bool shuffle;
  bool drop_last;
  uint64_t seed;
  int64_t epoch;
  int64_t num_samples;
  int64_t total_size;
  std::vector<int64_t> rank0_head;       // first 16 indices of rank 0
  std::vector<int64_t> last_rank_head;   // first 16 indices of rank num_replicas - 1
  std::vector<uint64_t> rank_checksums;  // list_checksum of every rank's full list
};

struct RandpermVector {
  int64_t n;
  uint64_t seed;
  std::vector<int64_t> perm_head;  // first 16 elements
  uint64_t checksum;               // list_checksum of the full permutation
};

// Produced by torch 1.13.1 (Debian python3-torch 1.13.1+dfsg-4; torch.__version__ reads
// "1.13.0a0" there) with
//     /usr/bin/python3 scripts/gen_sampler_vectors.py
// which, per row, builds DistributedSampler(range(n), num_replicas, rank, shuffle, seed,
// drop_last), calls set_epoch(epoch) and lists it for every rank, and for randperm seeds
// g = torch.Generator(); g.manual_seed(seed) and lists torch.randperm(n, generator=g).
// Columns: n, num_replicas, shuffle, drop_last, seed, epoch, num_samples, total_size,
// rank 0 head, last rank head, checksum per rank.
// clang-format off
const std::vector<SamplerVector> kSamplerVectors = {
  {10, 1, true, false, 0, 0, 10, 10, {4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, {4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, {254}},
  {10, 1, true, false, 0, 1, 10, 10, {5, 6, 1, 2, 0, 8, 9, 3, 7, 4}, {5, 6, 1, 2, 0, 8, 9, 3, 7, 4}, {266}},
  {10, 1, true, false, 42, 0, 10, 10, {2, 6, 1, 8, 4, 5, 0, 9, 3, 7}, {2, 6, 1, 8, 4, 5, 0, 9, 3, 7}, {268}},
  {10, 1, true, false, 42, 1, 10, 10, {8, 4, 9, 0, 5, 1, 6, 7, 2, 3}, {8, 4, 9, 0, 5, 1, 6, 7, 2, 3}, {220}},
  {10, 1, true, true, 0, 0, 10, 10, {4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, {4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, {254}},
  {10, 1, true, true, 0, 1, 10, 10, {5, 6, 1, 2, 0, 8, 9, 3, 7, 4}, {5, 6, 1, 2, 0, 8, 9, 3, 7, 4}, {266}},
  {10, 1, true, true, 42, 0, 10, 10, {2, 6, 1, 8, 4, 5, 0, 9, 3, 7}, {2, 6, 1, 8, 4, 5, 0, 9, 3, 7}, {268}},
  {10, 1, true, true, 42, 1, 10, 10, {8, 4, 9, 0, 5, 1, 6, 7, 2, 3}, {8, 4, 9, 0, 5, 1, 6, 7, 2, 3}, {220}},
  {10, 1, false, false, 0, 0, 10, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {330}},
  {10, 1, false, true, 0, 0, 10, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {330}},
  {10, 3, true, false, 0, 0, 4, 12, {4, 5, 0, 2}, {7, 9, 6, 1}, {22, 47, 47}},
  {10, 3, true, false, 0, 1, 4, 12, {5, 2, 9, 4}, {1, 8, 7, 6}, {52, 35, 62}},
  {10, 3, true, false, 42, 0, 4, 12, {2, 8, 0, 7}, {1, 5, 3, 6}, {46, 49, 44}},
  {10, 3, true, false, 42, 1, 4, 12, {8, 0, 6, 3}, {9, 1, 2, 4}, {38, 67, 33}},
  {10, 3, true, true, 0, 0, 3, 9, {4, 5, 0}, {7, 9, 6}, {14, 31, 43}},
  {10, 3, true, true, 0, 1, 3, 9, {5, 2, 9}, {1, 8, 7}, {36, 15, 38}},
  {10, 3, true, true, 42, 0, 3, 9, {2, 8, 0}, {1, 5, 3}, {18, 41, 20}},
  {10, 3, true, true, 42, 1, 3, 9, {8, 0, 6}, {9, 1, 2}, {26, 35, 17}},
  {10, 3, false, false, 0, 0, 4, 12, {0, 3, 6, 9}, {2, 5, 8, 1}, {60, 30, 40}},
  {10, 3, false, true, 0, 0, 3, 9, {0, 3, 6}, {2, 5, 8}, {24, 30, 36}},
  {10, 8, true, false, 0, 0, 2, 16, {4, 6}, {8, 9}, {16, 5, 15, 7, 17, 19, 6, 26}},
  {10, 8, true, false, 0, 1, 2, 16, {5, 7}, {3, 8}, {19, 14, 11, 14, 2, 12, 9, 19}},
  {10, 8, true, false, 42, 0, 2, 16, {2, 3}, {9, 5}, {8, 20, 5, 20, 6, 21, 8, 19}},
  {10, 8, true, false, 42, 1, 2, 16, {8, 2}, {7, 1}, {12, 10, 25, 8, 23, 1, 16, 9}},
  {10, 8, true, true, 0, 0, 1, 8, {4}, {8}, {4, 1, 7, 5, 3, 9, 0, 8}},
  {10, 8, true, true, 0, 1, 1, 8, {5}, {3}, {5, 6, 1, 2, 0, 8, 9, 3}},
  {10, 8, true, true, 42, 0, 1, 8, {2}, {9}, {2, 6, 1, 8, 4, 5, 0, 9}},
  {10, 8, true, true, 42, 1, 1, 8, {8}, {7}, {8, 4, 9, 0, 5, 1, 6, 7}},
  {10, 8, false, false, 0, 0, 2, 16, {0, 8}, {7, 5}, {16, 19, 2, 5, 8, 11, 14, 17}},
  {10, 8, false, true, 0, 0, 1, 8, {0}, {7}, {0, 1, 2, 3, 4, 5, 6, 7}},
  {11, 1, true, false, 0, 0, 11, 11, {10, 0, 4, 3, 5, 8, 2, 1, 9, 7, 6}, {10, 0, 4, 3, 5, 8, 2, 1, 9, 7, 6}, {346}},
  {11, 1, true, false, 0, 1, 11, 11, {0, 10, 2, 3, 7, 6, 4, 8, 1, 9, 5}, {0, 10, 2, 3, 7, 6, 4, 8, 1, 9, 5}, {355}},
  {11, 1, true, false, 42, 0, 11, 11, {6, 8, 9, 2, 1, 10, 0, 7, 3, 5, 4}, {6, 8, 9, 2, 1, 10, 0, 7, 3, 5, 4}, {299}},
  {11, 1, true, false, 42, 1, 11, 11, {3, 9, 4, 2, 8, 7, 6, 10, 1, 5, 0}, {3, 9, 4, 2, 8, 7, 6, 10, 1, 5, 0}, {304}},
  {11, 1, true, true, 0, 0, 11, 11, {10, 0, 4, 3, 5, 8, 2, 1, 9, 7, 6}, {10, 0, 4, 3, 5, 8, 2, 1, 9, 7, 6}, {346}},
  {11, 1, true, true, 0, 1, 11, 11, {0, 10, 2, 3, 7, 6, 4, 8, 1, 9, 5}, {0, 10, 2, 3, 7, 6, 4, 8, 1, 9, 5}, {355}},
  {11, 1, true, true, 42, 0, 11, 11, {6, 8, 9, 2, 1, 10, 0, 7, 3, 5, 4}, {6, 8, 9, 2, 1, 10, 0, 7, 3, 5, 4}, {299}},
  {11, 1, true, true, 42, 1, 11, 11, {3, 9, 4, 2, 8, 7, 6, 10, 1, 5, 0}, {3, 9, 4, 2, 8, 7, 6, 10, 1, 5, 0}, {304}},
  {11, 1, false, false, 0, 0, 11, 11, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {440}},
  {11, 1, false, true, 0, 0, 11, 11, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {440}},
  {11, 3, true, false, 0, 0, 4, 12, {10, 3, 2, 7}, {4, 8, 9, 10}, {50, 37, 87}},
  {11, 3, true, false, 0, 1, 4, 12, {0, 3, 4, 9}, {2, 6, 1, 0}, {54, 68, 17}},
  {11, 3, true, false, 42, 0, 4, 12, {6, 2, 0, 5}, {9, 10, 3, 6}, {30, 47, 62}},
  {11, 3, true, false, 42, 1, 4, 12, {3, 2, 6, 5}, {4, 7, 1, 3}, {45, 55, 33}},
  {11, 3, true, true, 0, 0, 3, 9, {10, 3, 2}, {4, 8, 9}, {22, 13, 47}},
  {11, 3, true, true, 0, 1, 3, 9, {0, 3, 4}, {2, 6, 1}, {18, 48, 17}},
  {11, 3, true, true, 42, 0, 3, 9, {6, 2, 0}, {9, 10, 3}, {10, 31, 38}},
  {11, 3, true, true, 42, 1, 3, 9, {3, 2, 6}, {4, 7, 1}, {25, 55, 21}},
  {11, 3, false, false, 0, 0, 4, 12, {0, 3, 6, 9}, {2, 5, 8, 0}, {60, 70, 36}},
  {11, 3, false, true, 0, 0, 3, 9, {0, 3, 6}, {2, 5, 8}, {24, 30, 36}},
  {11, 8, true, false, 0, 0, 2, 16, {10, 9}, {1, 5}, {28, 14, 16, 23, 5, 16, 8, 11}},
  {11, 8, true, false, 0, 1, 2, 16, {0, 1}, {8, 7}, {2, 28, 12, 3, 27, 10, 10, 22}},
  {11, 8, true, false, 42, 0, 2, 16, {6, 3}, {7, 1}, {12, 18, 17, 14, 17, 28, 4, 9}},
  {11, 8, true, false, 42, 1, 2, 16, {3, 1}, {10, 8}, {5, 19, 4, 8, 26, 15, 10, 26}},
  {11, 8, true, true, 0, 0, 1, 8, {10}, {1}, {10, 0, 4, 3, 5, 8, 2, 1}},
  {11, 8, true, true, 0, 1, 1, 8, {0}, {8}, {0, 10, 2, 3, 7, 6, 4, 8}},
  {11, 8, true, true, 42, 0, 1, 8, {6}, {7}, {6, 8, 9, 2, 1, 10, 0, 7}},
  {11, 8, true, true, 42, 1, 1, 8, {3}, {10}, {3, 9, 4, 2, 8, 7, 6, 10}},
  {11, 8, false, false, 0, 0, 2, 16, {0, 8}, {7, 4}, {16, 19, 22, 3, 6, 9, 12, 15}},
  {11, 8, false, true, 0, 0, 1, 8, {0}, {7}, {0, 1, 2, 3, 4, 5, 6, 7}},
  {60000, 1, true, false, 0, 0, 60000, 60000, {36044, 10678, 57327, 55074, 21567, 15479, 9481, 43095, 26145, 7479, 36531, 9597, 58716, 58338, 29792, 41291}, {36044, 10678, 57327, 55074, 21567, 15479, 9481, 43095, 26145, 7479, 36531, 9597, 58716, 58338, 29792, 41291}, {53971558475953}},
  {60000, 1, true, false, 0, 1, 60000, 60000, {35845, 27522, 33254, 23645, 11299, 16178, 58355, 27002, 35815, 26559, 57358, 33583, 41548, 45005, 58401, 16665}, {35845, 27522, 33254, 23645, 11299, 16178, 58355, 27002, 35815, 26559, 57358, 33583, 41548, 45005, 58401, 16665}, {54053341573727}},
  {60000, 1, true, false, 42, 0, 60000, 60000, {37542, 43087, 2992, 25810, 39634, 6425, 55768, 11034, 44310, 44384, 23068, 47752, 37118, 26420, 46483, 45982}, {37542, 43087, 2992, 25810, 39634, 6425, 55768, 11034, 44310, 44384, 23068, 47752, 37118, 26420, 46483, 45982}, {53968154258704}},
  {60000, 1, true, false, 42, 1, 60000, 60000, {55588, 18576, 8097, 17641, 8045, 27265, 47904, 9999, 38905, 57364, 42551, 10522, 7986, 42512, 56465, 5002}, {55588, 18576, 8097, 17641, 8045, 27265, 47904, 9999, 38905, 57364, 42551, 10522, 7986, 42512, 56465, 5002}, {53901437080734}},
  {60000, 1, true, true, 0, 0, 60000, 60000, {36044, 10678, 57327, 55074, 21567, 15479, 9481, 43095, 26145, 7479, 36531, 9597, 58716, 58338, 29792, 41291}, {36044, 10678, 57327, 55074, 21567, 15479, 9481, 43095, 26145, 7479, 36531, 9597, 58716, 58338, 29792, 41291}, {53971558475953}},
  {60000, 1, true, true, 0, 1, 60000, 60000, {35845, 27522, 33254, 23645, 11299, 16178, 58355, 27002, 35815, 26559, 57358, 33583, 41548, 45005, 58401, 16665}, {35845, 27522, 33254, 23645, 11299, 16178, 58355, 27002, 35815, 26559, 57358, 33583, 41548, 45005, 58401, 16665}, {54053341573727}},
  {60000, 1, true, true, 42, 0, 60000, 60000, {37542, 43087, 2992, 25810, 39634, 6425, 55768, 11034, 44310, 44384, 23068, 47752, 37118, 26420, 46483, 45982}, {37542, 43087, 2992, 25810, 39634, 6425, 55768, 11034, 44310, 44384, 23068, 47752, 37118, 26420, 46483, 45982}, {53968154258704}},
  {60000, 1, true, true, 42, 1, 60000, 60000, {55588, 18576, 8097, 17641, 8045, 27265, 47904, 9999, 38905, 57364, 42551, 10522, 7986, 42512, 56465, 5002}, {55588, 18576, 8097, 17641, 8045, 27265, 47904, 9999, 38905, 57364, 42551, 10522, 7986, 42512, 56465, 5002}, {53901437080734}},
  {60000, 1, false, false, 0, 0, 60000, 60000, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {71999999980000}},
  {60000, 1, false, true, 0, 0, 60000, 60000, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {71999999980000}},
  {60000, 3, true, false, 0, 0, 20000, 60000, {36044, 55074, 9481, 7479, 58716, 41291, 3020, 39437, 29120, 47621, 4711, 15735, 4354, 46924, 4270, 11627}, {57327, 15479, 26145, 9597, 29792, 1776, 46986, 16810, 30705, 26236, 3731, 49545, 21795, 22009, 13367, 11240}, {5995855849375, 5971152388479, 6024109846981}},
  {60000, 3, true, false, 0, 1, 20000, 60000, {35845, 23645, 58355, 26559, 41548, 16665, 34718, 50586, 7131, 10586, 56558, 354, 19319, 30794, 24905, 55605}, {33254, 16178, 35815, 33583, 58401, 28517, 7110, 1176, 20710, 20200, 46903, 35988, 38612, 12696, 14555, 52889}, {5980296712251, 6020982663289, 6017100413772}},
  {60000, 3, true, false, 42, 0, 20000, 60000, {37542, 25810, 55768, 44384, 37118, 45982, 1203, 30716, 24611, 46281, 10452, 55993, 23543, 16020, 21283, 27188}, {2992, 6425, 44310, 47752, 46483, 42205, 59229, 30280, 24923, 36959, 7787, 7309, 12350, 44185, 52539, 29066}, {5999125034465, 6006840729456, 5984019379485}},
  {60000, 3, true, false, 42, 1, 20000, 60000, {55588, 17641, 47904, 57364, 7986, 5002, 30666, 41222, 27682, 49749, 47192, 41648, 1503, 22237, 53524, 32830}, {8097, 27265, 38905, 10522, 56465, 33343, 3059, 12062, 44838, 24944, 44629, 5343, 37636, 37430, 35944, 14135}, {6004716390798, 5989728269951, 5973301914973}},
  {60000, 3, true, true, 0, 0, 20000, 60000, {36044, 55074, 9481, 7479, 58716, 41291, 3020, 39437, 29120, 47621, 4711, 15735, 4354, 46924, 4270, 11627}, {57327, 15479, 26145, 9597, 29792, 1776, 46986, 16810, 30705, 26236, 3731, 49545, 21795, 22009, 13367, 11240}, {5995855849375, 5971152388479, 6024109846981}},
  {60000, 3, true, true, 0, 1, 20000, 60000, {35845, 23645, 58355, 26559, 41548, 16665, 34718, 50586, 7131, 10586, 56558, 354, 19319, 30794, 24905, 55605}, {33254, 16178, 35815, 33583, 58401, 28517, 7110, 1176, 20710, 20200, 46903, 35988, 38612, 12696, 14555, 52889}, {5980296712251, 6020982663289, 6017100413772}},
  {60000, 3, true, true, 42, 0, 20000, 60000, {37542, 25810, 55768, 44384, 37118, 45982, 1203, 30716, 24611, 46281, 10452, 55993, 23543, 16020, 21283, 27188}, {2992, 6425, 44310, 47752, 46483, 42205, 59229, 30280, 24923, 36959, 7787, 7309, 12350, 44185, 52539, 29066}, {5999125034465, 6006840729456, 5984019379485}},
  {60000, 3, true, true, 42, 1, 20000, 60000, {55588, 17641, 47904, 57364, 7986, 5002, 30666, 41222, 27682, 49749, 47192, 41648, 1503, 22237, 53524, 32830}, {8097, 27265, 38905, 10522, 56465, 33343, 3059, 12062, 44838, 24944, 44629, 5343, 37636, 37430, 35944, 14135}, {6004716390798, 5989728269951, 5973301914973}},
  {60000, 3, false, false, 0, 0, 20000, 60000, {0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45}, {2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 44, 47}, {7999999980000, 8000199990000, 8000400000000}},
  {60000, 3, false, true, 0, 0, 20000, 60000, {0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45}, {2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 44, 47}, {7999999980000, 8000199990000, 8000400000000}},
  {60000, 8, true, false, 0, 0, 7500, 60000, {36044, 26145, 4072, 29120, 3731, 57738, 11534, 15399, 22807, 9678, 56202, 7619, 25582, 24180, 44852, 17535}, {43095, 41291, 16810, 56094, 46924, 11240, 38750, 6315, 50262, 8398, 26734, 25506, 10961, 22153, 17432, 19434}, {852442532812, 850110346960, 845149014893, 835598860308, 844389495575, 829788541461, 844154123393, 845600563830}},
  {60000, 8, true, false, 0, 1, 7500, 60000, {35845, 35815, 17862, 7131, 46903, 46045, 36401, 17575, 37301, 41492, 56431, 3634, 46455, 14120, 47833, 3952}, {27002, 16665, 1176, 46194, 30794, 52889, 36743, 24548, 24529, 41961, 23059, 18397, 21181, 38590, 35510, 46564}, {842453619435, 836324122130, 856493670764, 846462615659, 844052170314, 849477956936, 843178753543, 839012654135}},
  {60000, 8, true, false, 42, 0, 7500, 60000, {37542, 44310, 57971, 24611, 7787, 21306, 53997, 18247, 32838, 18088, 30054, 24131, 45769, 43593, 23255, 21719}, {11034, 45982, 30280, 53824, 16020, 29066, 59084, 53326, 52451, 23516, 51486, 39000, 1128, 1443, 13693, 13853}, {839137351132, 844448723652, 841801816529, 841307993408, 837612163125, 843632296547, 841969585984, 856895751292}},
  {60000, 8, true, false, 42, 1, 7500, 60000, {55588, 38905, 26659, 27682, 44629, 58272, 10457, 50979, 52026, 34250, 21630, 21200, 50798, 31195, 34415, 28625}, {9999, 5002, 12062, 55883, 22237, 14135, 20386, 1490, 10839, 17248, 6139, 27236, 18210, 25176, 51522, 42501}, {838357381720, 833225340312, 844812527054, 837927575482, 848548284683, 844129862142, 845437899065, 846026625142}},
  {60000, 8, true, true, 0, 0, 7500, 60000, {36044, 26145, 4072, 29120, 3731, 57738, 11534, 15399, 22807, 9678, 56202, 7619, 25582, 24180, 44852, 17535}, {43095, 41291, 16810, 56094, 46924, 11240, 38750, 6315, 50262, 8398, 26734, 25506, 10961, 22153, 17432, 19434}, {852442532812, 850110346960, 845149014893, 835598860308, 844389495575, 829788541461, 844154123393, 845600563830}},
  {60000, 8, true, true, 0, 1, 7500, 60000, {35845, 35815, 17862, 7131, 46903, 46045, 36401, 17575, 37301, 41492, 56431, 3634, 46455, 14120, 47833, 3952}, {27002, 16665, 1176, 46194, 30794, 52889, 36743, 24548, 24529, 41961, 23059, 18397, 21181, 38590, 35510, 46564}, {842453619435, 836324122130, 856493670764, 846462615659, 844052170314, 849477956936, 843178753543, 839012654135}},
  {60000, 8, true, true, 42, 0, 7500, 60000, {37542, 44310, 57971, 24611, 7787, 21306, 53997, 18247, 32838, 18088, 30054, 24131, 45769, 43593, 23255, 21719}, {11034, 45982, 30280, 53824, 16020, 29066, 59084, 53326, 52451, 23516, 51486, 39000, 1128, 1443, 13693, 13853}, {839137351132, 844448723652, 841801816529, 841307993408, 837612163125, 843632296547, 841969585984, 856895751292}},
  {60000, 8, true, true, 42, 1, 7500, 60000, {55588, 38905, 26659, 27682, 44629, 58272, 10457, 50979, 52026, 34250, 21630, 21200, 50798, 31195, 34415, 28625}, {9999, 5002, 12062, 55883, 22237, 14135, 20386, 1490, 10839, 17248, 6139, 27236, 18210, 25176, 51522, 42501}, {838357381720, 833225340312, 844812527054, 837927575482, 848548284683, 844129862142, 845437899065, 846026625142}},
  {60000, 8, false, false, 0, 0, 7500, 60000, {0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120}, {7, 15, 23, 31, 39, 47, 55, 63, 71, 79, 87, 95, 103, 111, 119, 127}, {1124999980000, 1125028108750, 1125056237500, 1125084366250, 1125112495000, 1125140623750, 1125168752500, 1125196881250}},
  {60000, 8, false, true, 0, 0, 7500, 60000, {0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120}, {7, 15, 23, 31, 39, 47, 55, 63, 71, 79, 87, 95, 103, 111, 119, 127}, {1124999980000, 1125028108750, 1125056237500, 1125084366250, 1125112495000, 1125140623750, 1125168752500, 1125196881250}},
};

// Columns: n, seed, head, checksum. Seed 2^32 + 42 equals seed 42: torch seeds mt19937 with the
// low 32 bits only.
const std::vector<RandpermVector> kRandpermVectors = {
  {0, 0uLL, {}, 0},
  {0, 1uLL, {}, 0},
  {0, 42uLL, {}, 0},
  {0, 4294967338uLL, {}, 0},
  {0, 18446744073709551615uLL, {}, 0},
  {1, 0uLL, {0}, 0},
  {1, 1uLL, {0}, 0},
  {1, 42uLL, {0}, 0},
  {1, 4294967338uLL, {0}, 0},
  {1, 18446744073709551615uLL, {0}, 0},
  {2, 0uLL, {0, 1}, 2},
  {2, 1uLL, {1, 0}, 1},
  {2, 42uLL, {0, 1}, 2},
  {2, 4294967338uLL, {0, 1}, 2},
  {2, 18446744073709551615uLL, {1, 0}, 1},
  {7, 0uLL, {4, 0, 5, 3, 2, 6, 1}, 84},
  {7, 1uLL, {0, 6, 1, 3, 5, 2, 4}, 92},
  {7, 42uLL, {1, 6, 3, 5, 4, 0, 2}, 76},
  {7, 4294967338uLL, {1, 6, 3, 5, 4, 0, 2}, 76},
  {7, 18446744073709551615uLL, {2, 1, 3, 6, 4, 5, 0}, 87},
  {10, 0uLL, {4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, 254},
  {10, 1uLL, {5, 6, 1, 2, 0, 8, 9, 3, 7, 4}, 266},
  {10, 42uLL, {2, 6, 1, 8, 4, 5, 0, 9, 3, 7}, 268},
  {10, 4294967338uLL, {2, 6, 1, 8, 4, 5, 0, 9, 3, 7}, 268},
  {10, 18446744073709551615uLL, {1, 4, 6, 2, 0, 5, 8, 7, 9, 3}, 288},
  {100, 0uLL, {44, 19, 93, 90, 71, 69, 37, 95, 53, 91, 81, 42, 80, 85, 74, 56}, 237336},
  {100, 1uLL, {45, 15, 90, 32, 35, 63, 17, 72, 79, 96, 48, 36, 16, 11, 23, 80}, 256065},
  {100, 42uLL, {42, 96, 62, 98, 46, 95, 60, 24, 78, 16, 68, 70, 11, 13, 97, 52}, 237869},
  {100, 4294967338uLL, {42, 96, 62, 98, 46, 95, 60, 24, 78, 16, 68, 70, 11, 13, 97, 52}, 237869},
  {100, 18446744073709551615uLL, {71, 67, 18, 74, 88, 15, 72, 25, 61, 97, 47, 32, 94, 75, 93, 2}, 242841},
  {60000, 0uLL, {36044, 10678, 57327, 55074, 21567, 15479, 9481, 43095, 26145, 7479, 36531, 9597, 58716, 58338, 29792, 41291}, 53971558475953},
  {60000, 1uLL, {35845, 27522, 33254, 23645, 11299, 16178, 58355, 27002, 35815, 26559, 57358, 33583, 41548, 45005, 58401, 16665}, 54053341573727},
  {60000, 42uLL, {37542, 43087, 2992, 25810, 39634, 6425, 55768, 11034, 44310, 44384, 23068, 47752, 37118, 26420, 46483, 45982}, 53968154258704},
  {60000, 4294967338uLL, {37542, 43087, 2992, 25810, 39634, 6425, 55768, 11034, 44310, 44384, 23068, 47752, 37118, 26420, 46483, 45982}, 53968154258704},
  {60000, 18446744073709551615uLL, {46371, 14968, 5104, 10485, 6764, 41195, 24988, 11304, 20609, 10750, 30407, 59019, 38362, 32684, 54863, 21953}, 53926229799124},
};
// clang-format on

std::string describe(const SamplerVector& v) {
  return "n=" + std::to_string(v.dataset_size) + " R=" + std::to_string(v.num_replicas) +
         " shuffle=" + std::to_string(v.shuffle) + " drop_last=" + std::to_string(v.drop_last) +
         " seed=" + std::to_string(v.seed) + " epoch=" + std::to_string(v.epoch);
}

TEST(DistributedSampler, MatchesTorchGoldenVectors) {
  ASSERT_EQ(kSamplerVectors.size(), 90u);  // the whole table made it into the test
  for (const SamplerVector& v : kSamplerVectors) {
    SCOPED_TRACE(describe(v));
    DistributedSampler sampler({v.dataset_size, v.num_replicas, v.shuffle, v.seed, v.drop_last});
    sampler.set_epoch(v.epoch);
    EXPECT_EQ(sampler.num_samples(), v.num_samples);
    EXPECT_EQ(sampler.total_size(), v.total_size);
    ASSERT_EQ(v.rank_checksums.size(), static_cast<size_t>(v.num_replicas));
    for (int64_t rank = 0; rank < v.num_replicas; ++rank) {
      const std::vector<int64_t> indices = sampler.indices(rank);
      ASSERT_EQ(static_cast<int64_t>(indices.size()), v.num_samples) << "rank " << rank;
      EXPECT_EQ(list_checksum(indices), v.rank_checksums[static_cast<size_t>(rank)])
          << "rank " << rank;
      if (rank == 0) {
        EXPECT_EQ(head(indices, 16), v.rank0_head);
      }
      if (rank == v.num_replicas - 1) {
        EXPECT_EQ(head(indices, 16), v.last_rank_head);
      }
    }
  }
}

TEST(DistributedSampler, RandpermMatchesTorchGoldenVectors) {
  ASSERT_EQ(kRandpermVectors.size(), 35u);
  for (const RandpermVector& v : kRandpermVectors) {
    SCOPED_TRACE("n=" + std::to_string(v.n) + " seed=" + std::to_string(v.seed));
    const std::vector<int64_t> perm = torch_cpu_randperm(v.n, v.seed);
    ASSERT_EQ(static_cast<int64_t>(perm.size()), v.n);
    EXPECT_EQ(head(perm, 16), v.perm_head);
    EXPECT_EQ(list_checksum(perm), v.checksum);
  }
}

TEST(DistributedSampler, RandpermIsAPermutation) {
  for (int64_t n : {0, 1, 2, 3, 1000}) {
    std::vector<int64_t> perm = torch_cpu_randperm(n, 7);
    std::sort(perm.begin(), perm.end());
    std::vector<int64_t> identity(static_cast<size_t>(n));
    std::iota(identity.begin(), identity.end(), int64_t{0});
    EXPECT_EQ(perm, identity) << "n=" << n;
  }
  EXPECT_THROW(torch_cpu_randperm(-1, 0), InputError);
}

// n = 10, R = 4: num_samples = ceil(10 / 4) = 3, total 12; the order is padded with its first
// two entries, so rank 2 reads positions 2, 6, 10 -> order[2], order[6], order[0].
TEST(DistributedSampler, PadsByRepeatingTheStart) {
  DistributedSampler sampler({10, 4, /*shuffle=*/true, /*seed=*/3, /*drop_last=*/false});
  EXPECT_EQ(sampler.num_samples(), 3);
  EXPECT_EQ(sampler.total_size(), 12);
  const std::vector<int64_t> order = torch_cpu_randperm(10, 3);
  EXPECT_EQ(sampler.indices(0), (std::vector<int64_t>{order[0], order[4], order[8]}));
  EXPECT_EQ(sampler.indices(1), (std::vector<int64_t>{order[1], order[5], order[9]}));
  EXPECT_EQ(sampler.indices(2), (std::vector<int64_t>{order[2], order[6], order[0]}));
  EXPECT_EQ(sampler.indices(3), (std::vector<int64_t>{order[3], order[7], order[1]}));
}

// Padding longer than the dataset repeats the whole list: n = 2, R = 5 -> total 5 = [a b a b a].
TEST(DistributedSampler, PadsBeyondTheDatasetLength) {
  DistributedSampler sampler({2, 5, /*shuffle=*/false, 0, /*drop_last=*/false});
  EXPECT_EQ(sampler.num_samples(), 1);
  EXPECT_EQ(sampler.total_size(), 5);
  const std::vector<int64_t> expected = {0, 1, 0, 1, 0};
  for (int64_t rank = 0; rank < 5; ++rank) {
    EXPECT_EQ(sampler.indices(rank), (std::vector<int64_t>{expected[static_cast<size_t>(rank)]}));
  }
}

// n = 11, R = 4 with drop_last: ceil((11 - 4) / 4) = 2 per rank, total 8; ids 8..10 are dropped.
TEST(DistributedSampler, DropLastTruncates) {
  DistributedSampler sampler({11, 4, /*shuffle=*/false, 0, /*drop_last=*/true});
  EXPECT_EQ(sampler.num_samples(), 2);
  EXPECT_EQ(sampler.total_size(), 8);
  EXPECT_EQ(sampler.indices(0), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(sampler.indices(3), (std::vector<int64_t>{3, 7}));
  // Fewer samples than replicas: every rank gets nothing.
  DistributedSampler tiny({3, 4, true, 0, true});
  EXPECT_EQ(tiny.num_samples(), 0);
  EXPECT_TRUE(tiny.indices(1).empty());
}

TEST(DistributedSampler, NoShuffleIsRankStridedIdentity) {
  DistributedSampler sampler({7, 3, /*shuffle=*/false, /*seed=*/99, false});
  sampler.set_epoch(5);  // no effect without shuffle
  EXPECT_EQ(sampler.indices(0), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(sampler.indices(1), (std::vector<int64_t>{1, 4, 0}));
  EXPECT_EQ(sampler.indices(2), (std::vector<int64_t>{2, 5, 1}));
}

TEST(DistributedSampler, EpochChangesTheOrderAndSeedPlusEpochIsTheKey) {
  DistributedSampler a({50, 2, true, /*seed=*/10, false});
  DistributedSampler b({50, 2, true, /*seed=*/11, false});
  const std::vector<int64_t> epoch0 = a.indices(0);
  a.set_epoch(1);
  EXPECT_NE(a.indices(0), epoch0);
  EXPECT_EQ(a.indices(0), b.indices(0));  // seed 10 + epoch 1 == seed 11 + epoch 0
}

TEST(DistributedSampler, RanksCoverTheDatasetOnceWithoutPadding) {
  DistributedSampler sampler({60, 3, true, 42, false});
  std::multiset<int64_t> seen;
  for (int64_t rank = 0; rank < 3; ++rank) {
    for (int64_t id : sampler.indices(rank)) seen.insert(id);
  }
  ASSERT_EQ(seen.size(), 60u);
  for (int64_t id = 0; id < 60; ++id) EXPECT_EQ(seen.count(id), 1u) << id;
}

TEST(DistributedSampler, RejectsBadOptionsAndRanks) {
  EXPECT_THROW(DistributedSampler({-1, 1, true, 0, false}), InputError);
  EXPECT_THROW(DistributedSampler({10, 0, true, 0, false}), InputError);
  DistributedSampler sampler({10, 4, true, 0, false});
  try {
    sampler.indices(4);
    FAIL() << "rank 4 of 4 accepted";
  } catch (const InputError& error) {
    EXPECT_NE(
        std::string(error.what()).find("invalid rank 4, rank should be in the interval [0, 3]"),
        std::string::npos)
        << error.what();
  }
  EXPECT_THROW(sampler.indices(-1), InputError);
}

// n = 10, R = 2 -> 5 samples per rank; B = 2 -> batches of 2, 2, 1 (3 per epoch).
TEST(BatchPlan, LastBatchIsShortAndEpochsRollOver) {
  const DistributedSamplerOptions options{10, 2, true, /*seed=*/5, false};
  DistributedBatchPlan plan(options, 2);
  EXPECT_EQ(plan.batches_per_epoch(), 3);

  DistributedSampler sampler(options);
  std::vector<std::vector<int64_t>> epoch0 = {sampler.indices(0), sampler.indices(1)};
  sampler.set_epoch(1);
  std::vector<std::vector<int64_t>> epoch1 = {sampler.indices(0), sampler.indices(1)};

  const StepBatches step0 = plan.step(0);
  EXPECT_EQ(step0.epoch, 0);
  EXPECT_EQ(step0.batch_in_epoch, 0);
  ASSERT_EQ(step0.rank_sample_ids.size(), 2u);
  EXPECT_EQ(step0.rank_sample_ids[1], (std::vector<int64_t>{epoch0[1][0], epoch0[1][1]}));

  const StepBatches step2 = plan.step(2);  // the short last batch of epoch 0
  EXPECT_EQ(step2.epoch, 0);
  EXPECT_EQ(step2.batch_in_epoch, 2);
  EXPECT_EQ(step2.rank_sample_ids[0], (std::vector<int64_t>{epoch0[0][4]}));
  EXPECT_EQ(step2.rank_sample_ids[1], (std::vector<int64_t>{epoch0[1][4]}));

  const StepBatches step3 = plan.step(3);  // set_epoch(1): a new permutation
  EXPECT_EQ(step3.epoch, 1);
  EXPECT_EQ(step3.batch_in_epoch, 0);
  EXPECT_EQ(step3.rank_sample_ids[0], (std::vector<int64_t>{epoch1[0][0], epoch1[0][1]}));
  EXPECT_EQ(step3.rank_sample_ids[1], (std::vector<int64_t>{epoch1[1][0], epoch1[1][1]}));
}

TEST(BatchPlan, DropLastDropsTheShortBatch) {
  // n = 11, R = 2 with drop_last -> 5 samples per rank; B = 2 -> 2 full batches per epoch.
  const DistributedSamplerOptions options{11, 2, false, 0, true};
  DistributedBatchPlan plan(options, 2);
  EXPECT_EQ(plan.batches_per_epoch(), 2);
  const StepBatches step2 = plan.step(2);
  EXPECT_EQ(step2.epoch, 1);
  EXPECT_EQ(step2.batch_in_epoch, 0);
  EXPECT_EQ(step2.rank_sample_ids[0], (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(step2.rank_sample_ids[1], (std::vector<int64_t>{1, 3}));
}

TEST(BatchPlan, EveryRankGetsTheSameBatchCount) {
  // Padding gives all ranks num_samples ids, so their batches align step by step.
  DistributedBatchPlan plan({13, 4, true, 1, false}, 3);  // 4 samples per rank -> 3 + 1
  EXPECT_EQ(plan.batches_per_epoch(), 2);
  for (int64_t step = 0; step < 4; ++step) {
    const StepBatches batches = plan.step(step);
    const size_t expected = (step % 2 == 0) ? 3u : 1u;
    for (const auto& ids : batches.rank_sample_ids) EXPECT_EQ(ids.size(), expected) << step;
  }
}

TEST(BatchPlan, RejectsImpossiblePlans) {
  EXPECT_THROW(DistributedBatchPlan({10, 2, true, 0, false}, 0), InputError);
  DistributedBatchPlan empty({3, 2, true, 0, true}, 4);  // 1 sample per rank, batch 4, drop_last
  EXPECT_EQ(empty.batches_per_epoch(), 0);
  try {
    empty.step(0);
    FAIL() << "a plan without batches produced a step";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("an epoch has no batch"), std::string::npos)
        << error.what();
  }
  DistributedBatchPlan plan({10, 2, true, 0, false}, 2);
  EXPECT_THROW(plan.step(-1), InputError);
}

}  // namespace
}  // namespace parity
