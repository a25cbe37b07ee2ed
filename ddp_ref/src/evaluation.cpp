#include "evaluation.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace parity::ddp_ref {
namespace {

// Small enough that a CNN's activations of a chunk (100 x 16 x 28 x 28 floats: 5 MB) are
// reused from the heap between chunks: glibc's malloc maps and unmaps every block above its
// mmap threshold (at most 32 MiB), and page faults on fresh maps took more time than the
// convolutions themselves with 1000-row chunks.
constexpr int64_t kChunkRows = 100;

}  // namespace

torch::Tensor evaluation_outputs(CaseModelImpl& model, const torch::Tensor& features) {
  model.eval();
  const int64_t num_rows = features.size(0);
  const int64_t num_chunks = (num_rows + kChunkRows - 1) / kChunkRows;
  std::vector<torch::Tensor> outputs(static_cast<size_t>(num_chunks));
  // The ranks run one intra-op thread each (launcher.cpp), and only rank 0 evaluates: its
  // chunks are shared among a thread per core instead, each taking the next chunk left.
  const auto num_workers = static_cast<size_t>(
      std::min<int64_t>(num_chunks, std::max<int64_t>(1, std::thread::hardware_concurrency())));
  std::atomic<int64_t> next_chunk{0};
  std::vector<std::exception_ptr> failures(num_workers);
  auto work = [&](size_t worker) {
    try {
      torch::NoGradGuard no_grad;  // thread-local, as autograd's grad mode is
      for (int64_t chunk = next_chunk++; chunk < num_chunks; chunk = next_chunk++) {
        const int64_t first = chunk * kChunkRows;
        outputs[static_cast<size_t>(chunk)] =
            model.forward(features.narrow(0, first, std::min(kChunkRows, num_rows - first)));
      }
    } catch (...) {
      failures[worker] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t w = 1; w < num_workers; ++w) threads.emplace_back(work, w);
  work(0);
  for (auto& thread : threads) thread.join();
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  return torch::cat(outputs);
}

}  // namespace parity::ddp_ref
