// The rendezvous of a multi-process run: a key-value store that process 0 serves at the
// coordinator address, as JAX's coordination service does behind jax.distributed.initialize.
// Gloo needs one to trade every process's listening address before the processes connect to
// each other directly; nothing else goes through it.
//
// Wire format (TCP, little-endian): a request is one op byte, a u32 key length and the key,
// and for 'S' (set) a u32 value length and the value. The reply to a set is 'K'; to a get 'V',
// a u32 length and the value, or 'N' when the key is not there yet (the client polls).
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace pmap_engine::distributed {

class CoordinatorStore : public gloo::rendezvous::Store {
 public:
  // Process 0 passes `serve`: it listens on every interface at `port` first. Every process,
  // 0 included, then connects to host:port, retrying until `timeout` (the coordinator may
  // start after the others). Throws EngineError naming the address on failure.
  CoordinatorStore(const std::string& host, int port, bool serve,
                   std::chrono::milliseconds timeout);
  ~CoordinatorStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits up to the store's timeout for the key; EngineError naming the key after that.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // This process's address on the connection to the coordinator: the interface the other
  // processes can reach it on.
  const std::string& local_address() const { return local_address_; }

 private:
  class Server;
  std::vector<char> get_until(const std::string& key, std::chrono::milliseconds timeout);

  std::unique_ptr<Server> server_;
  std::string where_;  // "host:port", for messages
  std::chrono::milliseconds timeout_;
  int socket_ = -1;
  std::string local_address_;
};

}  // namespace pmap_engine::distributed
