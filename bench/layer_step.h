// A layers case's train step (cnn-fmnist, vit-fmnist) for the benchmarks: the case's initial
// parameters and real Fashion-MNIST training images, `devices` x `per_device` of them, and the
// engine trainer's mapped step over them as `parity pmap` runs it in the case's parallel.style
// (BatchNorm's statistics in and out). engine_step_bench times it on one device against
// LibTorch eager; ddp_bench on eight against DDP; parallel_styles_bench under jit's styles.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/init_params.h"
#include "parity/engine_trainer/case_model.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"

namespace parity::bench {

// The case with parallel.replicas = devices, data.per_replica_batch = per_device and
// `overrides` (`--set`'s grammar), its initial parameters, and the first devices * per_device
// training images and labels (device d reads rows d * per_device ..). Made once per
// (case, devices, per_device, overrides) and kept.
struct CaseBatch {
  CaseSpec spec;
  NamedTensors init;
  std::vector<float> x;
  std::vector<int32_t> labels32;
  std::vector<int64_t> labels64;
  int64_t devices = 0;
  int64_t per_device = 0;
  int64_t size() const { return devices * per_device; }
};

inline const CaseBatch& case_batch(const std::string& case_name, int64_t devices,
                                   int64_t per_device,
                                   const std::vector<std::string>& overrides = {}) {
  using Key = std::tuple<std::string, int64_t, int64_t, std::vector<std::string>>;
  static std::map<Key, CaseBatch> batches;
  const Key key = std::make_tuple(case_name, devices, per_device, overrides);
  auto found = batches.find(key);
  if (found != batches.end()) return found->second;
  CaseBatch b;
  b.devices = devices;
  b.per_device = per_device;
  std::vector<std::string> settings = {"parallel.replicas=" + std::to_string(devices),
                                       "data.per_replica_batch=" + std::to_string(per_device)};
  settings.insert(settings.end(), overrides.begin(), overrides.end());
  b.spec = load_case(case_name, settings);
  b.init = init_model_params(b.spec);
  const Dataset train = load_fashion_mnist("train");
  b.x.assign(train.features.begin(), train.features.begin() + b.size() * train.feature_dim);
  b.labels64.assign(train.labels.begin(), train.labels.begin() + b.size());
  b.labels32.assign(b.labels64.begin(), b.labels64.end());
  return batches.emplace(key, std::move(b)).first->second;
}

// The engine's train step of a layers case on b.devices devices, from the case's initial
// parameters, laid out as the step's style takes them (StepLayout): under pmap every argument
// with a leading device axis, under jit global values its shardings place. run() takes one step
// and returns (device 0's) loss.
class EngineLayerStep {
 public:
  explicit EngineLayerStep(const CaseBatch& b)
      : step_(engine_trainer::make_mapped_train_step(
            b.spec, pmap_engine::DeviceSet(static_cast<int>(b.devices)))) {
    namespace et = engine_trainer;
    const et::StepLayout& layout = step_.layout();
    const auto state = [&](const pmap_engine::Tree& value) {
      return layout.stacked_state ? et::replicate(value, b.devices) : value;
    };
    const pmap_engine::Shape batch = layout.global_batch
                                         ? pmap_engine::Shape{b.size()}
                                         : pmap_engine::Shape{b.devices, b.per_device};
    pmap_engine::Shape rows = batch;
    rows.push_back(784);
    const pmap_engine::Tree params =
        et::params_from_tensors(b.init, et::name_separator(b.spec.model));
    args_ = {state(params), state(et::step_optimizer(b.spec).init(params)),
             pmap_engine::Array::from_floats(rows, b.x),
             pmap_engine::Array::from_ints(batch, b.labels32),
             state(et::initial_batch_stats(b.spec.model, pmap_engine::DType::f32))};
  }

  double run() {
    const pmap_engine::Tree out = step_(args_);
    args_[0] = out[0];  // params
    args_[1] = out[1];  // opt_state
    args_[4] = out[4];  // batch_stats
    return out[2].leaf().to_doubles().front();
  }

  const engine_trainer::MappedTrainStep& step() const { return step_; }

 private:
  engine_trainer::MappedTrainStep step_;
  std::vector<pmap_engine::Tree> args_;
};

}  // namespace parity::bench
