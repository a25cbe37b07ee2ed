// A layers case's train step (cnn-fmnist, vit-fmnist) for the benchmarks: the case's initial
// parameters and real Fashion-MNIST training images, `devices` x `per_device` of them, and the
// engine trainer's mapped step over them as `parity pmap` runs it (pmap layout: every argument
// with a leading device axis, BatchNorm's statistics in and out). engine_step_bench times it on
// one device against LibTorch eager; ddp_bench on eight against DDP.
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

// The case with parallel.replicas = devices and data.per_replica_batch = per_device, its
// initial parameters, and the first devices * per_device training images and labels (device d
// reads rows d * per_device ..). Made once per (case, devices, per_device) and kept.
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
                                   int64_t per_device) {
  static std::map<std::tuple<std::string, int64_t, int64_t>, CaseBatch> batches;
  const auto key = std::make_tuple(case_name, devices, per_device);
  auto found = batches.find(key);
  if (found != batches.end()) return found->second;
  CaseBatch b;
  b.devices = devices;
  b.per_device = per_device;
  b.spec = load_case(case_name, {"parallel.replicas=" + std::to_string(devices),
                                 "data.per_replica_batch=" + std::to_string(per_device)});
  b.init = init_model_params(b.spec);
  const Dataset train = load_fashion_mnist("train");
  b.x.assign(train.features.begin(), train.features.begin() + b.size() * train.feature_dim);
  b.labels64.assign(train.labels.begin(), train.labels.begin() + b.size());
  b.labels32.assign(b.labels64.begin(), b.labels64.end());
  return batches.emplace(key, std::move(b)).first->second;
}

// The engine's pmap train step of a layers case on b.devices devices, each starting from the
// case's initial parameters; run() takes one step and returns device 0's loss.
class EngineLayerStep {
 public:
  explicit EngineLayerStep(const CaseBatch& b)
      : step_(engine_trainer::make_mapped_train_step(
            b.spec, pmap_engine::DeviceSet(static_cast<int>(b.devices)))) {
    namespace et = engine_trainer;
    const pmap_engine::Tree params =
        et::params_from_tensors(b.init, et::name_separator(b.spec.model));
    args_ = {et::replicate(params, b.devices),
             et::replicate(et::step_optimizer(b.spec).init(params), b.devices),
             pmap_engine::Array::from_floats({b.devices, b.per_device, 784}, b.x),
             pmap_engine::Array::from_ints({b.devices, b.per_device}, b.labels32),
             et::replicate(et::initial_batch_stats(b.spec.model, pmap_engine::DType::f32),
                           b.devices)};
  }

  double run() {
    const pmap_engine::Tree out = step_(args_);
    args_[0] = out[0];  // params
    args_[1] = out[1];  // opt_state
    args_[4] = out[4];  // batch_stats
    return out[2].leaf().to_doubles().front();
  }

 private:
  engine_trainer::MappedTrainStep step_;
  std::vector<pmap_engine::Tree> args_;
};

}  // namespace parity::bench
