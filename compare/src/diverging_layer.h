// What the rules that read the first layer output that parts (the Layer outputs check's
// first_diverging_layer) share: the layer's recorded values and the sentence that names it.
// layer_output_rules.cpp dispatches on the layer's kind; the normalisation layers' variance
// formula (M14) has its own file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checks.h"

namespace parity::compare {

// The diverging layer's outputs in both runs and the one input they agree on (A's), each file
// read once: a layer outputs file holds every layer's output (40 MB on cnn-fmnist).
struct LayerValues {
  std::vector<double> x, a, b;
  Shape x_shape;
};

std::optional<LayerValues> layer_values(const RunPair& runs, const DivergingLayer& layer);

// "the first layer output that parts at step S is PATH (a KIND), and what it read agrees (...)"
std::string layer_text(const DivergingLayer& layer);

// fast_variance_rule.cpp, M14: a batch_norm or layer_norm whose input's mean is large against
// its spread, where the one-pass variance E[x^2] - E[x]^2 explains the outputs parting.
std::optional<Diagnosis> fast_variance_diagnosis(const RunPair& runs, const DivergingLayer& layer);

}  // namespace parity::compare
