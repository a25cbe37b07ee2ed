#include "parity/common/case_limits.h"

#include <unistd.h>

#include <cstdio>
#include <iterator>

#include "parity/common/error.h"

namespace parity {
namespace {

// Fashion-MNIST as load_fashion_mnist holds it: 784 float32 features and one int64 label per
// sample, 60000 training and 10000 test samples (docs/case-schema.md, "Datasets").
constexpr double kFashionMnistSamples = 60000 + 10000;
constexpr double kFashionMnistFeatures = 784;

double element_bytes(const std::string& dtype) { return dtype == "f32" ? 4 : 2; }

}  // namespace

// Derivation, per replica (a DDP rank and a pmap device each hold a whole copy of the model and
// its optimizer state: data parallelism replicates them), with L = widths.size() - 1 layers,
// layer i a kernel (w_i, w_{i+1}) and a bias (w_{i+1}) (docs/case-schema.md, [model]):
//   parameters  P = sum_i (w_i * w_{i+1} + w_{i+1}), stored as f32 (master weights stay f32
//               for every train.dtype): 4P bytes, exactly the tensors of the case's init file.
//   gradients   one f32 gradient per parameter: 4P.
//   optimizer   torch.optim / optax state: Adam and AdamW keep two f32 moments (8P), SGD with
//               momentum one buffer (4P), plain SGD none, RMSprop and Adagrad one
//               accumulator of squares (4P).
//   activations the forward keeps, for the backward, each layer's input and its
//               pre-activation output for one micro-batch of per_replica_batch samples (batch
//               s*k+m is micro-batch m of step s, each a full batch): B * (w_0 + 2 * sum_{i>=1}
//               w_i) elements of the compute dtype (4 bytes for f32, 2 for bf16/f16).
// Every replica trains at once (threads, or devices of one pmap), so the producer holds
// replicas x that, plus the dataset once per process (the training and test splits), plus for
// ddp_ref the c10d Reducer's gradient buckets (every gradient is copied into a flat bucket
// before the allreduce: another 4P per rank).
// Left out: the allocators' and libraries' workspaces, the backward's transient activation
// gradients, the optimizer's temporaries. The estimate is therefore a lower bound: a case
// refused for exceeding physical memory cannot run here.
CaseMemoryEstimate estimate_case_memory(const CaseSpec& spec) {
  CaseMemoryEstimate estimate;
  const std::vector<int64_t>& widths = spec.model.widths;
  double activation_elements = widths.empty() ? 0 : static_cast<double>(widths.front());
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const double in = static_cast<double>(widths[i]);
    const double out = static_cast<double>(widths[i + 1]);
    estimate.parameter_count += in * out + out;
    activation_elements += 2 * out;
  }
  const std::string& optimizer = spec.train.optimizer;
  const double moments = optimizer == "sgd" ? (spec.train.momentum > 0 ? 1 : 0)
                         : optimizer == "rmsprop" || optimizer == "adagrad" ? 1
                                                                             : 2;
  estimate.parameter_bytes = 4 * estimate.parameter_count;
  estimate.gradient_bytes = 4 * estimate.parameter_count;
  estimate.optimizer_bytes = moments * 4 * estimate.parameter_count;
  estimate.activation_bytes = static_cast<double>(spec.data.per_replica_batch) *
                              activation_elements * element_bytes(spec.train.dtype);
  estimate.per_replica_bytes = estimate.parameter_bytes + estimate.gradient_bytes +
                               estimate.optimizer_bytes + estimate.activation_bytes;
  estimate.replicas = spec.parallel.replicas;

  if (spec.data.dataset == "fashion-mnist") {
    estimate.dataset_bytes = kFashionMnistSamples * (kFashionMnistFeatures * 4 + 8);
  } else if (!widths.empty()) {
    // synthetic-linear: each split holds N x w_0 float32 inputs and N x w_L float32 targets.
    estimate.dataset_bytes = 2 * static_cast<double>(spec.data.synthetic_num_samples) *
                             static_cast<double>(widths.front() + widths.back()) * 4;
  }
  const double replicas = static_cast<double>(estimate.replicas);
  estimate.pmap_engine_bytes = replicas * estimate.per_replica_bytes + estimate.dataset_bytes;
  estimate.ddp_ref_bytes = estimate.pmap_engine_bytes + replicas * estimate.gradient_bytes;
  return estimate;
}

double CaseMemoryEstimate::required_bytes() const {
  return ddp_ref_bytes > pmap_engine_bytes ? ddp_ref_bytes : pmap_engine_bytes;
}

std::string format_byte_size(double num_bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (num_bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    num_bytes /= 1024;
    ++unit;
  }
  char text[64];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%.0f bytes", num_bytes);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", num_bytes, kUnits[unit]);
  }
  return text;
}

std::string CaseMemoryEstimate::breakdown() const {
  return "pmap_engine " + format_byte_size(pmap_engine_bytes) + " = " + std::to_string(replicas) +
         " replicas x (parameters " + format_byte_size(parameter_bytes) + " + gradients " +
         format_byte_size(gradient_bytes) + " + optimizer state " +
         format_byte_size(optimizer_bytes) + " + activations " +
         format_byte_size(activation_bytes) + ") + dataset " + format_byte_size(dataset_bytes) +
         "; ddp_ref " + format_byte_size(ddp_ref_bytes) +
         ", the same plus its reducer's gradient buckets (" + format_byte_size(gradient_bytes) +
         " per replica)";
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<double>(pages) * static_cast<double>(page_size);
}

void check_case_memory(const CaseSpec& spec, double available_bytes) {
  const CaseMemoryEstimate estimate = estimate_case_memory(spec);
  if (available_bytes <= 0 || estimate.required_bytes() <= available_bytes) return;
  throw InputError(
      "case " + spec.name + " (" + spec.source_file.string() + ") needs at least " +
      format_byte_size(estimate.required_bytes()) + " of memory, more than this machine's " +
      format_byte_size(available_bytes) + ": " + estimate.breakdown() +
      "; use fewer replicas (parallel.replicas), narrower or fewer layers (model.widths) or "
      "a smaller batch (data.per_replica_batch)");
}

}  // namespace parity
