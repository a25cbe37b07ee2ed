// What a case may ask for: the bounds on its sizes that the producers can run, and estimates of
// the memory and the compute it needs, whatever form its model takes, so that an absurd case (a
// million replicas, a width of 4e8, 2^63 steps, 200,000 layers) is refused when it is loaded,
// naming the key or the layer and the reason, instead of ending in an internal check,
// std::bad_alloc or a run without end. load_case() applies them.
#pragma once

#include <cstdint>
#include <string>

#include "parity/common/case_spec.h"

namespace parity {

// Steps: a run must end, and every step index must be nameable. Tensor files are named
// step_%06d (common/run_dir/src/recorded_tensors.cpp), read back with up to 18 digits, so any
// int64 step would fit the reader; the cap is the endlessness bound: 10 million optimizer steps
// is ~3 hours at 1 ms per step (mlp2-fmnist takes ~5 ms per step here), and every producer's
// step loop and metrics.jsonl (one line per step) stay bounded. It also bounds steps x
// grad_accum_steps (the batches read: batch s*k+m is micro-batch m of step s in both
// producers), so that index cannot overflow.
inline constexpr int64_t kMaxCaseSteps = 10'000'000;

// Replicas: ddp_ref runs every rank as a thread (or a process of threads) and meters each
// rank's allocations in one of 1024 slots (ddp_ref/src/memory_meter.cpp, kMaxSlots;
// MemoryMeter::install takes parallel.replicas), a fixed table indexed by rank.
inline constexpr int64_t kMaxCaseReplicas = 1024;

// Layers: the engine traces, prints and runs one op group per layer, and ddp_ref builds one
// module per layer; both grow with depth, and `parity program` on 200,000 layers ran past a
// minute. 1024 layers is far deeper than any network the documents migrate and still traces
// within seconds: `parity program` on 1024 dense layers of width 64 (43,059 ops) took 3.8 s on
// a 2-core machine. The cap counts widths.size() - 1 for a widths model, and every layer of a
// layers model, those inside residuals included (case_model_depth).
inline constexpr int64_t kMaxCaseLayers = 1024;

// Compute: the floating-point operations of one training step (all replicas), and of the
// evaluation on the test split, each at most this. 10^14 is about half an hour of a 2-core
// machine's f32 peak (~50 GFLOP/s) for one step; the shipped cases need 10^11 at most
// (mlp4-1024's step). A step past it is a case typed wrong (a 100,000-wide padding), not a
// job parity could judge.
inline constexpr double kMaxCaseFlops = 1e14;

// The model's depth as kMaxCaseLayers counts it.
int64_t case_model_depth(const ModelSpec& model);

// The memory one producer needs to train a case, in bytes, as a lower bound derived from what
// both producers hold at once (see estimate_case_memory). Doubles, because the products of
// absurd int64 widths overflow int64, and those are exactly the cases to refuse.
struct CaseMemoryEstimate {
  double parameter_count = 0;  // the model's parameters (widths: in*out + out per layer)
  // Per replica (each DDP rank, each pmap device holds its own copy):
  double parameter_bytes = 0;   // f32 master weights: 4 bytes per parameter
  double gradient_bytes = 0;    // f32 gradients: 4 bytes per parameter
  double optimizer_bytes = 0;   // Adam/AdamW: 2 moments; SGD with momentum: 1; plain SGD: 0
  double activation_bytes = 0;  // the forward's kept activations for one micro-batch
  double per_replica_bytes = 0; // the four above
  int64_t replicas = 0;
  double dataset_bytes = 0;     // the training and test splits, held once per process
  // The whole case for each producer: replicas x per replica + the dataset (+ DDP's buckets).
  double ddp_ref_bytes = 0;
  double pmap_engine_bytes = 0;
  // The layer that holds the most per replica (its parameters, their gradients and optimizer
  // state, its kept output): "model.layers[0] (dense at f.toml:5:3)" or "model.widths[1]".
  std::string largest_layer;
  double largest_layer_bytes = 0;
  // The producers run one after the other (parity run: ddp_ref, then pmap_engine), so the case
  // needs the larger of the two.
  double required_bytes() const;
  // "ddp_ref 1.2 TiB = 8 replicas x (parameters ... + gradients ... + ...) + dataset ...; ..."
  std::string breakdown() const;
};

// The estimate for `spec` (model, batch, optimizer, dtype, replicas, dataset).
CaseMemoryEstimate estimate_case_memory(const CaseSpec& spec);

// The floating-point operations a case asks for, counted as 2 per multiply-add of the layers'
// products (dense, conv, attention) and 1 per value of the others.
struct CaseComputeEstimate {
  double forward_flops = 0;   // one sample's forward pass
  double step_flops = 0;      // a training step: every replica's micro-batches, forward + backward
  double eval_flops = 0;      // the forward over the test split
  std::string largest_layer;  // the layer whose forward costs the most, as in CaseMemoryEstimate
  double largest_layer_flops = 0;  // its share of forward_flops
};

CaseComputeEstimate estimate_case_compute(const CaseSpec& spec);

// The machine's physical memory: sysconf(_SC_PHYS_PAGES) x sysconf(_SC_PAGE_SIZE).
double physical_memory_bytes();

// Throws InputError naming `spec.source_file`, the estimate's breakdown, its largest layer and
// `available_bytes` when the case needs more memory than that.
void check_case_memory(const CaseSpec& spec, double available_bytes);

// Throws InputError naming the case, the layer that costs the most and kMaxCaseFlops when a
// step or the evaluation needs more operations than that.
void check_case_compute(const CaseSpec& spec);

// Both, against this machine's memory: what load_case() applies after the checker (whose bounds
// the estimates assume: the depth cap, and shapes that infer).
void check_case_resources(const CaseSpec& spec);

// "1.5 GiB", "812.0 KiB": binary units, for messages.
std::string format_byte_size(double num_bytes);

}  // namespace parity
