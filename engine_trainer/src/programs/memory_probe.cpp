// C2 (000 §2.1): what a 7B-parameter model holds on each device under DDP. The document:
//   对于一个 7B 参数的模型，光参数就是 14GB（fp16），加上优化器状态（Adam 的 m 和 v）就是 42GB，
//   再加梯度又是 14GB，单卡 80GB 的 A100 也就勉强放得下。模型再大一点，DDP 就撑不住了，必须上
//   FSDP 或者张量并行
// (for a 7B model the parameters alone are 14GB in fp16; adding the optimizer state, Adam's m and
// v, makes 42GB; the gradients add another 14GB; a single 80GB A100 barely holds it; a somewhat
// bigger model and DDP no longer copes: FSDP or tensor parallelism is needed).
//
// The model is Llama-2-7B's parameters (meta-llama/Llama-2-7b-hf config.json: vocab_size 32000,
// hidden_size 4096, intermediate_size 11008, num_hidden_layers 32, lm_head untied from the
// embedding), given as ShapeDtypeStructs, so nothing of its size is allocated. eval_shape
// (transforms.h) gives the types of what training holds: the fp16 copy of fp32 master weights
// (002 §3.4's tree.map(astype(float16))), the gradients of a loss with respect to the fp16
// parameters, and optax's adam(...).init of either (m and v take the parameters' dtype: optax's
// mu_dtype unset). Bytes are counted from those types, in GB of 10^9 bytes as the document
// counts (7e9 x 2 bytes = 14 GB). Activations are left out: they depend on the batch, which the
// document does not give.
#include <fmt/format.h>

#include <map>
#include <string>

#include "pmap_engine/mesh.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/optim.h"
#include "pmap_engine/sharding.h"
#include "programs/program_parts.h"

namespace parity::engine_trainer {
namespace {

constexpr int64_t kVocab = 32000;
constexpr int64_t kHidden = 4096;
constexpr int64_t kIntermediate = 11008;
constexpr int64_t kLayers = 32;
constexpr double kGB = 1e9;
// Its parameter count, as the shapes below sum: 2 x 32000 x 4096 + 32 x (4 x 4096^2 +
// 3 x 4096 x 11008 + 2 x 4096) + 4096.
constexpr double kLlama2Params = 6738415616.0;
// An "80GB" A100 has 80 GiB (nvidia-smi reports 81920 MiB), in the document's GB.
constexpr double kA100GB = 80.0 * (1 << 30) / kGB;

// Llama-2-7B's parameters by Hugging Face name, kernels (in, out) as Flax's Dense holds them.
pe::Tree llama2_7b(pe::DType dtype) {
  const auto type = [dtype](pe::Shape shape) {
    return pe::Tree(pe::Array::shape_dtype_struct(std::move(shape), dtype));
  };
  std::map<std::string, pe::Tree> layers;
  for (int64_t l = 0; l < kLayers; ++l) {
    layers[fmt::format("{:02d}", l)] =
        pe::Tree::dict({{"input_layernorm", type({kHidden})},
                        {"q_proj", type({kHidden, kHidden})},
                        {"k_proj", type({kHidden, kHidden})},
                        {"v_proj", type({kHidden, kHidden})},
                        {"o_proj", type({kHidden, kHidden})},
                        {"post_attention_layernorm", type({kHidden})},
                        {"gate_proj", type({kHidden, kIntermediate})},
                        {"up_proj", type({kHidden, kIntermediate})},
                        {"down_proj", type({kIntermediate, kHidden})}});
  }
  return pe::Tree::dict({{"embed_tokens", type({kVocab, kHidden})},
                         {"layers", pe::Tree::dict(std::move(layers))},
                         {"norm", type({kHidden})},
                         {"lm_head", type({kHidden, kVocab})}});
}

pe::Array rms_norm(const pe::Array& x, const pe::Array& scale) {
  return x * pe::rsqrt(pe::mean(pe::square(x), {-1}, true) + 1e-5) * scale;
}

// (params, tokens, labels) -> mean cross-entropy: Llama's blocks as a stack of dense layers on
// each token, the attention's four projections applied without the mixing across positions
// (which has no parameters). Every parameter is used, so the gradient tree is the model's.
pe::Tree dense_stack_loss(const std::vector<pe::Tree>& args) {
  const pe::Tree& p = args[0];
  pe::Array x =
      pe::matmul(pe::one_hot(args[1].leaf(), kVocab, p["norm"].leaf().dtype()), p["embed_tokens"]);
  for (const auto& [name, layer] : p["layers"].entries()) {
    const pe::Array h = rms_norm(x, layer["input_layernorm"]);
    const pe::Array qkv = pe::matmul(h, layer["q_proj"]) + pe::matmul(h, layer["k_proj"]) +
                          pe::matmul(h, layer["v_proj"]);
    x = x + pe::matmul(qkv, layer["o_proj"]);
    const pe::Array g = rms_norm(x, layer["post_attention_layernorm"]);
    x = x +
        pe::matmul(pe::silu(pe::matmul(g, layer["gate_proj"])) * pe::matmul(g, layer["up_proj"]),
                   layer["down_proj"]);
  }
  const pe::Array logits = pe::matmul(rms_norm(x, p["norm"]), p["lm_head"]);
  return pe::Tree(pe::mean(pe::softmax_cross_entropy_with_integer_labels(
      pe::astype(logits, pe::DType::f32), args[2].leaf())));
}

double bytes_of(const pe::Tree& tree) {
  double bytes = 0;
  for (const pe::Array& leaf : tree.leaves()) {
    bytes += static_cast<double>(leaf.num_elements() * pe::dtype_num_bytes(leaf.dtype()));
  }
  return bytes;
}

std::vector<std::string> types_of(const pe::Tree& tree) {
  std::vector<std::string> types;
  for (const pe::Array& leaf : tree.leaves()) {
    types.push_back(pe::type_to_string(leaf.dtype(), leaf.shape()));
  }
  return types;
}

}  // namespace

ProbeResult probe_memory_7b(const CaseSpec& spec) {
  const pe::Tree master = llama2_7b(pe::DType::f32);
  const pe::Tree params = pe::eval_shape(
      [](const std::vector<pe::Tree>& args) {
        return pe::tree_map([](const pe::Array& p) { return pe::astype(p, pe::DType::f16); },
                            args[0]);
      },
      {master});
  const pe::Tree tokens(
      pe::Array::shape_dtype_struct({spec.data.per_replica_batch}, pe::DType::i32));
  const pe::Tree grads = pe::eval_shape(pe::grad(dense_stack_loss), {params, tokens, tokens});
  const pe::optim::GradientTransformation adam = pe::optim::adam(spec.train.lr);
  const auto init = [&adam](const std::vector<pe::Tree>& args) { return adam.init(args[0]); };
  const pe::Tree adam_fp16 = pe::eval_shape(init, {params});
  const pe::Tree adam_fp32 = pe::eval_shape(init, {master});

  // FSDP over the case's devices: every leaf split along its first dimension, P('data'), which
  // NamedSharding checks divides evenly, so each device holds exactly 1/N of every state.
  const int64_t devices = spec.parallel.replicas;
  const pe::NamedSharding fsdp(
      pe::Mesh(pe::DeviceSet(static_cast<int>(devices)), {{"data", devices}}),
      pe::PartitionSpec{{"data"}});
  const std::vector<std::string> paths = master.leaf_paths();
  const std::vector<pe::Array> leaves = master.leaves();
  for (size_t i = 0; i < leaves.size(); ++i) fsdp.check_leaf(leaves[i].shape(), paths[i]);

  double count = 0;
  for (const pe::Array& leaf : params.leaves()) count += static_cast<double>(leaf.num_elements());
  const double params_bytes = bytes_of(params);
  const double grads_bytes = bytes_of(grads);
  // Three layouts: everything in fp16 (m and v follow fp16 parameters); fp16 parameters and
  // gradients with fp32 m and v; mixed precision, adding fp32 master weights.
  const double fp16_adam = params_bytes + bytes_of(adam_fp16) + grads_bytes;
  const double fp32_adam = params_bytes + bytes_of(adam_fp32) + grads_bytes;
  const double mixed = fp32_adam + bytes_of(master);

  // The document's figures, and its 7e9 parameters under each layout (bytes per parameter from
  // the model above).
  constexpr double kDocumentParams = 7e9;  // 7B
  const auto at_document_count = [&](double bytes) {
    return bytes / count * kDocumentParams / kGB;
  };

  ProbeResult result;
  // eval_shape gives what JAX gives: gradients of the parameters' types, optax's m and v of the
  // parameters' types; and the model has Llama-2-7B's parameter count.
  const std::vector<std::string> mu_nu_fp16 = [&] {
    std::vector<std::string> types = types_of(params);
    const std::vector<std::string> again = types;
    types.insert(types.begin(), "i32[]");  // optax's step count
    types.insert(types.end(), again.begin(), again.end());
    return types;
  }();
  result.as_expected = types_of(grads) == types_of(params) && types_of(adam_fp16) == mu_nu_fp16 &&
                       count == kLlama2Params;
  result.figures.set_text("model", "Llama-2-7B");
  result.figures.set("params", count);
  result.figures.set("params_fp16_gb", params_bytes / kGB);
  result.figures.set("grads_fp16_gb", grads_bytes / kGB);
  result.figures.set("adam_fp16_gb", bytes_of(adam_fp16) / kGB);
  result.figures.set("adam_fp32_gb", bytes_of(adam_fp32) / kGB);
  result.figures.set("master_fp32_gb", bytes_of(master) / kGB);
  result.figures.set("ddp_fp16_adam_gb", fp16_adam / kGB);
  result.figures.set("ddp_fp32_adam_gb", fp32_adam / kGB);
  result.figures.set("ddp_mixed_gb", mixed / kGB);
  result.figures.set("bytes_per_param_fp16_adam", fp16_adam / count);
  result.figures.set("bytes_per_param_fp32_adam", fp32_adam / count);
  result.figures.set("bytes_per_param_mixed", mixed / count);
  result.figures.set("fsdp_devices", static_cast<double>(devices));
  result.figures.set("fsdp_mixed_gb", mixed / static_cast<double>(devices) / kGB);
  result.figures.set("a100_gb", kA100GB);
  result.figures.set("document_params", kDocumentParams);
  result.figures.set("document_params_gb", 14);  // 光参数就是 14GB（fp16）
  result.figures.set("document_with_adam_gb", 42);  // 加上优化器状态（Adam 的 m 和 v）就是 42GB
  result.figures.set("document_grads_gb", 14);  // 再加梯度又是 14GB
  result.figures.set("document_gpu_gb", 80);    // 单卡 80GB 的 A100
  result.figures.set("document_total_gb", 42 + 14);
  result.figures.set("doc_count_params_gb", at_document_count(params_bytes));
  result.figures.set("doc_count_with_fp16_adam_gb",
                     at_document_count(params_bytes + bytes_of(adam_fp16)));
  result.figures.set("doc_count_with_fp32_adam_gb",
                     at_document_count(params_bytes + bytes_of(adam_fp32)));
  result.figures.set("doc_count_ddp_fp16_adam_gb", at_document_count(fp16_adam));
  result.figures.set("doc_count_ddp_fp32_adam_gb", at_document_count(fp32_adam));
  result.figures.set("doc_count_ddp_mixed_gb", at_document_count(mixed));
  result.observed = fmt::format(
      "Llama-2-7B's {:.0f} parameters, by eval_shape: fp16 parameters {:.2f} GB, fp16 gradients "
      "{:.2f} GB, Adam's m and v {:.2f} GB in fp16 or {:.2f} GB in fp32, fp32 master weights "
      "{:.2f} GB; per device under DDP {:.2f} GB (all fp16), {:.2f} GB (fp32 m and v), {:.2f} GB "
      "(mixed precision, {:.3g} bytes a parameter); FSDP over {} devices {:.2f} GB; an 80 GiB "
      "A100 holds {:.2f} GB",
      count, params_bytes / kGB, grads_bytes / kGB, bytes_of(adam_fp16) / kGB,
      bytes_of(adam_fp32) / kGB, bytes_of(master) / kGB, fp16_adam / kGB, fp32_adam / kGB,
      mixed / kGB, mixed / count, devices, mixed / static_cast<double>(devices) / kGB, kA100GB);
  return result;
}

}  // namespace parity::engine_trainer
