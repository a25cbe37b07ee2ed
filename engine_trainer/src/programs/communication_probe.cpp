// C1 (002 §2.3): the communication of replicated data parallelism. The document: "复制式数据并行的
// 好处是通信量少每个step只需要同步梯度也就是每个参数对应一个浮点数所有设备的梯度求和再广播。这个通信量约占
// 参数量的两倍" (replicated data parallelism communicates little: each step synchronises only
// the gradients, one float per parameter, summed over all devices and broadcast; this
// communication is about twice the parameter count).
//
// The probe pmaps 002 §2.1's gradient step, grads = lax.pmean(grad(loss_fn)(params, x, y),
// 'data'), on the case's model, and counts with ReductionTraffic what each device's buffers
// send and receive in that pmean (pmap_engine/collectives.h). The engine's all-reduce is a
// reduce to device 0 and a broadcast from it; the figure it is held against is a ring
// all-reduce's (NCCL's and Gloo's for large buffers): a reduce-scatter and an all-gather of
// N - 1 steps each, every step sending one Nth of the buffer to the next device, so every
// device sends, and receives, 2 (N - 1) / N of the gradient's bytes.
#include <fmt/format.h>

#include <algorithm>

#include "pmap_engine/collectives.h"
#include "pmap_engine/pmap.h"
#include "programs/program_parts.h"

namespace parity::engine_trainer {

ProbeResult probe_communication_volume(const CaseSpec& spec) {
  const int64_t devices = spec.parallel.replicas;
  const MappedBatch batch =
      first_samples(spec, "probe-communication-volume", devices, spec.data.per_replica_batch);
  const pe::TreeFunction grad_fn = pe::grad(case_loss(spec));
  const pe::Pmapped step = pe::pmap(
      [grad_fn](const std::vector<pe::Tree>& args) { return pe::pmean(grad_fn(args), "data"); },
      broadcast_params_options(spec));
  const pe::Tree params = case_params(spec);
  std::vector<int64_t> sent;
  std::vector<int64_t> received;
  {
    const pe::ReductionTraffic traffic;
    step({params, pe::Tree(batch.x), pe::Tree(batch.y)});
    sent = traffic.sent_bytes();
    received = traffic.received_bytes();
  }

  int64_t count = 0;
  int64_t bytes = 0;
  for (const pe::Array& leaf : params.leaves()) {
    count += static_cast<int64_t>(leaf.num_elements());
    bytes += static_cast<int64_t>(leaf.num_elements() * pe::dtype_num_bytes(leaf.dtype()));
  }
  // The schedule collectives.cpp documents: device 0 receives every other device's gradients
  // and sends each of them the result; every other device sends its gradients once and
  // receives the result once.
  std::vector<int64_t> star(static_cast<size_t>(devices), bytes);
  star.front() = (devices - 1) * bytes;
  const auto n = static_cast<double>(devices);
  const auto size = static_cast<double>(bytes);
  // Device 0's count, and the largest of the others'.
  const auto root_of = [](const std::vector<int64_t>& counts) {
    return counts.empty() ? 0.0 : static_cast<double>(counts.front());
  };
  const auto other_of = [](const std::vector<int64_t>& counts) {
    return counts.size() > 1
               ? static_cast<double>(*std::max_element(counts.begin() + 1, counts.end()))
               : 0.0;
  };
  const double root = root_of(sent);
  const double other = other_of(sent);
  double mean = 0;
  for (int64_t value : sent) mean += static_cast<double>(value) / n;
  const double ring = 2 * (n - 1) / n * size;

  ProbeResult result;
  result.as_expected = sent == star && received == star;
  result.figures.set("devices", n);
  result.figures.set("params", static_cast<double>(count));
  result.figures.set("param_bytes", size);
  result.figures.set("bytes_per_param", size / static_cast<double>(count));
  result.figures.set("sent_bytes_device0", root);
  result.figures.set("sent_bytes_other_device", other);
  result.figures.set("sent_bytes_mean", mean);
  result.figures.set("received_bytes_device0", root_of(received));
  result.figures.set("received_bytes_other_device", other_of(received));
  result.figures.set("engine_ratio_device0", root / size);
  result.figures.set("engine_ratio_other_device", other / size);
  result.figures.set("engine_ratio_mean", mean / size);
  result.figures.set("ring_bytes_per_device", ring);
  result.figures.set("ring_ratio_to_params", ring / size);
  result.figures.set("document_ratio", 2);  // 约占参数量的两倍: about twice
  result.observed = fmt::format(
      "pmean of {} gradients ({} bytes) over {} devices: device 0 sent {:.0f} bytes ({:.3g}x) "
      "and received {:.0f}, each other device at most sent {:.0f} ({:.3g}x) and received "
      "{:.0f}: {:.3g}x per device on average; a ring all-reduce sends {:.0f} bytes ({:.3g}x) "
      "from every device",
      count, bytes, devices, root, root / size, root_of(received), other, other / size,
      other_of(received), mean / size, ring, ring / size);
  return result;
}

}  // namespace parity::engine_trainer
