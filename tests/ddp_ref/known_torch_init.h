// Checks a case's initial parameters against the known answers PyTorch gave for it
// (torch_init_vectors.h), for the library test and the CLI test alike.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "parity/common/digest.h"
#include "parity/common/host_tensor.h"
#include "torch_init_vectors.h"

namespace parity::testing {

// Every tensor PyTorch drew for (case_name, seed), bit for bit: the same names, F32, the same
// canonical shapes, the same first values and the same digest of all the bytes.
inline void expect_pytorchs_init(const NamedTensors& params, const std::string& case_name,
                                 uint64_t seed) {
  namespace vectors = ddp_ref::torch_init_vectors;
  const vectors::KnownInit* known = nullptr;
  for (const vectors::KnownInit& init : vectors::kKnownInits) {
    if (init.case_name == case_name && init.seed == seed) known = &init;
  }
  ASSERT_NE(known, nullptr) << "no known answers for " << case_name << " seed " << seed;
  ASSERT_EQ(params.size(), known->tensors.size());
  for (const vectors::Tensor& want : known->tensors) {
    SCOPED_TRACE(want.name);
    ASSERT_EQ(params.count(want.name), 1u);
    const HostTensor& got = params.at(want.name);
    ASSERT_EQ(got.dtype, DType::F32);
    ASSERT_EQ(got.shape, Shape(want.shape.begin(), want.shape.end()));
    const float* values = got.data_as<float>();
    EXPECT_EQ(std::vector<float>(values, values + want.head.size()), want.head);
    EXPECT_EQ(Fnv1a64().update(got.bytes.data(), got.num_bytes()).value(), want.fnv1a64);
  }
}

}  // namespace parity::testing
