// A layers model's dropout sites: its dropout layers with a rate above 0, named by module path as
// Flax names them. Part of the model's description, so the case checker can see them; the keys
// the sites draw from are dropout_streams.h's.
#pragma once

#include <string>
#include <vector>

#include "parity/common/case_spec.h"

namespace parity {

// A dropout layer with a rate above 0: its module path ("Dropout_0", "Residual_1/Dropout_0", as
// infer_model_shapes names modules) and its drop rate.
struct DropoutSite {
  std::string path;
  double rate = 0;
};

// The model's dropout sites in the order its layers apply them (a residual's branch, then its
// projection).
std::vector<DropoutSite> dropout_sites(const ModelSpec& model);

}  // namespace parity
