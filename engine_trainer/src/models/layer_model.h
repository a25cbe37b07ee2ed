// The cases' layers models (docs/model-layers.md) written with pmap_engine as a Flax user writes
// a compact module and its loss:
//
//   class Model(nn.Module):
//     @nn.compact
//     def __call__(self, x, train):
//       x = x.reshape((x.shape[0],) + input)                      # [model] input, NHWC
//       x = nn.Conv(16, (3, 3), padding="SAME", use_bias=False)(x)
//       x = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5,
//                        axis_name="data" if sync else None)(x)
//       x = nn.relu(x)
//       x = Residual(...)(x)                                      # x + branch(x)
//       ...
//
//   def loss_fn(params, x, y, batch_stats):
//     logits, updates = model.apply({"params": params, "batch_stats": batch_stats}, x,
//                                   train=True, mutable=["batch_stats"])
//     return loss(logits, y), updates["batch_stats"]
//
// Parameters and batch statistics are nested dicts by Flax's auto-names ({"Conv_0": {"kernel"},
// "Residual_0": {"BatchNorm_0": {"scale", "bias"}}}), the names infer_model_shapes gives.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/engine_trainer/case_model.h"
#include "pmap_engine/transforms.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

struct LayerModelOutput {
  pe::Array outputs;     // [B, ...]: the last layer's output
  pe::Tree batch_stats;  // train: the updated running statistics; eval: the ones given
  // train with a dropout key: each dropout site's (key, keep mask) by module path
  // ({"Residual_1/Dropout_0": (u32[2], bool[...])}); otherwise an empty dict.
  pe::Tree dropout_draws;
};

// model.apply({"params": params, "batch_stats": batch_stats}, x, train, mutable=["batch_stats"]):
// x [B, prod(model.input)] (the dataset's flat rows) -> outputs. In training BatchNorm
// normalises with the batch's statistics (over the "data" axis when the layer's sync is set,
// so then only inside a pmap binding it) and updates the running ones; in evaluation it uses
// the running statistics and dropout is the identity. A training forward through a dropout with
// a rate above 0 needs `dropout_key`, the "dropout" rng of model.apply(..., rngs={"dropout":
// key}): each Dropout module draws from its own make_rng("dropout") key (flax_rng.h).
LayerModelOutput layer_model_apply(const ModelSpec& model, const pe::Tree& params,
                                   const pe::Tree& batch_stats, const pe::Array& x, bool train,
                                   const std::optional<pe::Array>& dropout_key = std::nullopt);

// Every layer's output for the batch x [B, prod(model.input)] (layer_intermediates.h), as
// model.apply({"params": params, "batch_stats": batch_stats}, x, train=True,
// capture_intermediates=True, mutable=["batch_stats"]) computes them with dropout off
// (deterministic): BatchNorm normalises with the batch's own statistics, as a training step
// does, and the updated statistics are dropped. Run eagerly, outside any trace; a BatchNorm that
// syncs over "data" is not supported (records_intermediates says which models record them).
struct LayerIntermediates {
  pe::Array input;                           // x as the model reads it: [B, model.input...]
  std::map<std::string, pe::Array> outputs;  // by intermediate path
};
LayerIntermediates layer_model_intermediates(const ModelSpec& model, const pe::Tree& params,
                                             const pe::Tree& batch_stats, const pe::Array& x);

// initial_batch_stats: parity/engine_trainer/case_model.h.

// loss_fn(params, x, y, batch_stats[, dropout_key]) -> (mean loss, (new batch_stats,
// dropout_draws)), the model in training mode: the function value_and_grad(loss_fn,
// has_aux=True) takes. The dropout key is an argument when the model has dropout.
pe::TreeFunction layer_model_loss(const ModelSpec& model);

// Whether a training forward draws dropout masks (a dropout layer with a rate above 0: the
// dropout_sites of parity/common/dropout_streams.h, which name dropout_draws' entries).
bool has_dropout(const ModelSpec& model);

}  // namespace parity::engine_trainer
