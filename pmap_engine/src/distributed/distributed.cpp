#include "pmap_engine/distributed.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <unistd.h>

#include <memory>
#include <mutex>

#include "distributed/coordinator_store.h"
#include "pmap_engine/dtype.h"

namespace pmap_engine::distributed {
namespace {

struct Session {
  InitializeOptions options;
  std::unique_ptr<CoordinatorStore> store;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::vector<std::string> process_addresses;  // "host pid" of every process
  uint32_t next_tag = 0;
};

std::string this_process_address() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + " " + std::to_string(getpid());
}

std::mutex session_mutex;
std::unique_ptr<Session> session;

Session& current(const char* what) {
  if (!session) {
    throw EngineError(std::string(what) +
                      " needs jax.distributed.initialize first (distributed::initialize)");
  }
  return *session;
}

}  // namespace

void initialize(const InitializeOptions& options) {
  std::lock_guard<std::mutex> lock(session_mutex);
  if (session) {
    throw EngineError("jax.distributed.initialize should only be called once");
  }
  if (options.num_processes < 1 || options.process_id < 0 ||
      options.process_id >= options.num_processes || options.local_device_count < 1) {
    throw EngineError("jax.distributed.initialize: process_id " +
                      std::to_string(options.process_id) + " of " +
                      std::to_string(options.num_processes) + " processes with " +
                      std::to_string(options.local_device_count) +
                      " local devices; need 0 <= process_id < num_processes and at least one "
                      "local device");
  }
  const size_t colon = options.coordinator_address.rfind(':');
  int port = 0;
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no port");
    port = std::stoi(options.coordinator_address.substr(colon + 1));
  } catch (const std::exception&) {
    throw EngineError("jax.distributed.initialize: coordinator_address '" +
                      options.coordinator_address + "' is not host:port");
  }
  auto next = std::make_unique<Session>();
  next->options = options;
  next->store = std::make_unique<CoordinatorStore>(options.coordinator_address.substr(0, colon),
                                                   port, options.process_id == 0, options.timeout);
  // Every process says how many devices it has; a mismatch is JAX's "device count mismatch".
  const std::string devices_key = "devices/" + std::to_string(options.process_id);
  const std::string mine = std::to_string(options.local_device_count);
  next->store->set(devices_key, std::vector<char>(mine.begin(), mine.end()));
  const std::string address = this_process_address();
  next->store->set("address/" + std::to_string(options.process_id),
                   std::vector<char>(address.begin(), address.end()));
  for (int p = 0; p < options.num_processes; ++p) {
    const std::vector<char> where = next->store->get("address/" + std::to_string(p));
    next->process_addresses.emplace_back(where.begin(), where.end());
    const std::vector<char> theirs = next->store->get("devices/" + std::to_string(p));
    if (std::string(theirs.begin(), theirs.end()) != mine) {
      throw EngineError("jax.distributed.initialize: process " + std::to_string(p) + " has " +
                        std::string(theirs.begin(), theirs.end()) + " local devices and this one " +
                        mine + "; every process must see the same number of devices");
    }
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = next->store->local_address();
  auto device = gloo::transport::tcp::CreateDevice(attr);
  next->context =
      std::make_shared<gloo::rendezvous::Context>(options.process_id, options.num_processes);
  next->context->setTimeout(options.timeout);
  gloo::rendezvous::PrefixStore prefixed("gloo", *next->store);
  next->context->connectFullMesh(prefixed, device);
  session = std::move(next);
}

void shutdown() {
  std::lock_guard<std::mutex> lock(session_mutex);
  session.reset();
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(session_mutex);
  return session != nullptr;
}

int process_index() {
  std::lock_guard<std::mutex> lock(session_mutex);
  return session ? session->options.process_id : 0;
}

int process_count() {
  std::lock_guard<std::mutex> lock(session_mutex);
  return session ? session->options.num_processes : 1;
}

int local_device_count() {
  std::lock_guard<std::mutex> lock(session_mutex);
  return session ? session->options.local_device_count : 0;
}

int device_count() {
  std::lock_guard<std::mutex> lock(session_mutex);
  return session ? session->options.local_device_count * session->options.num_processes : 0;
}

namespace {

std::vector<std::vector<char>> allgather_bytes(Session& s, const std::vector<char>& local) {
  const auto processes = static_cast<size_t>(s.options.num_processes);
  // The sizes first, then the bytes (allgatherv needs every process's count).
  int64_t size = static_cast<int64_t>(local.size());
  std::vector<int64_t> sizes(processes);
  gloo::AllgatherOptions size_options(s.context);
  size_options.setInput(&size, 1);
  size_options.setOutput(sizes.data(), processes);
  size_options.setTag(s.next_tag++);
  gloo::allgather(size_options);

  std::vector<size_t> counts(sizes.begin(), sizes.end());
  size_t total = 0;
  for (size_t count : counts) total += count;
  std::vector<char> gathered(total);
  std::vector<char> input = local;  // gloo registers the buffer for writing too
  gloo::AllgathervOptions options(s.context);
  options.setInput(input.data(), input.size());
  options.setOutput(gathered.data(), counts);
  options.setTag(s.next_tag++);
  gloo::allgatherv(options);

  std::vector<std::vector<char>> out(processes);
  size_t offset = 0;
  for (size_t p = 0; p < processes; ++p) {
    out[p].assign(gathered.begin() + static_cast<std::ptrdiff_t>(offset),
                  gathered.begin() + static_cast<std::ptrdiff_t>(offset + counts[p]));
    offset += counts[p];
  }
  return out;
}

}  // namespace

std::vector<std::vector<char>> process_allgather(const std::vector<char>& local) {
  std::lock_guard<std::mutex> lock(session_mutex);
  Session& s = current("process_allgather");
  try {
    return allgather_bytes(s, local);
  } catch (const gloo::Exception& error) {  // a peer closed its socket, or the timeout passed
    throw CollectiveFailed(
        "jax.distributed: a cross-process collective failed (Gloo: " + std::string(error.what()) +
            "); another process died, was stopped or hung",
        s.process_addresses);
  }
}

}  // namespace pmap_engine::distributed
