#include "distributed/coordinator_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "pmap_engine/dtype.h"

namespace pmap_engine::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// Reads exactly `size` bytes before `deadline`; false on EOF, error or timeout.
bool read_exactly(int fd, char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd ready{fd, POLLIN, 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (polled < 0 && errno != EINTR) return false;
    if (polled <= 0) continue;
    const ssize_t got = ::recv(fd, data, size, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      return false;
    }
    data += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

bool write_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t put = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    sent += static_cast<size_t>(put);
  }
  return true;
}

void append_u32(std::string& out, uint32_t value) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((value >> (8 * b)) & 0xff));
}

bool read_u32(int fd, uint32_t& value, Clock::time_point deadline) {
  unsigned char bytes[4];
  if (!read_exactly(fd, reinterpret_cast<char*>(bytes), 4, deadline)) return false;
  value = 0;
  for (int b = 0; b < 4; ++b) value |= static_cast<uint32_t>(bytes[b]) << (8 * b);
  return true;
}

bool read_string(int fd, std::string& out, Clock::time_point deadline) {
  uint32_t size = 0;
  if (!read_u32(fd, size, deadline)) return false;
  out.assign(size, '\0');
  return read_exactly(fd, out.data(), size, deadline);
}

std::string request(char op, const std::string& key, const std::string* value = nullptr) {
  std::string out(1, op);
  append_u32(out, static_cast<uint32_t>(key.size()));
  out += key;
  if (value != nullptr) {
    append_u32(out, static_cast<uint32_t>(value->size()));
    out += *value;
  }
  return out;
}

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

// Serves the store: one thread accepts, one thread per connected process answers requests
// until the process disconnects or the store shuts down.
class CoordinatorStore::Server {
 public:
  explicit Server(int port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (listener_ < 0) throw EngineError(system_error("coordinator: socket"));
    const int on = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener_, 64) != 0) {
      const std::string message =
          system_error("coordinator: cannot listen on port " + std::to_string(port) +
                       " (is another run using it? pick a free port)");
      ::close(listener_);
      throw EngineError(message);
    }
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~Server() {
    stopping_ = true;
    acceptor_.join();
    ::close(listener_);
    std::lock_guard<std::mutex> lock(threads_mutex_);
    for (std::thread& thread : handlers_) thread.join();
  }

 private:
  void accept_loop() {
    while (!stopping_) {
      pollfd ready{listener_, POLLIN, 0};
      if (::poll(&ready, 1, 100) <= 0) continue;
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      std::lock_guard<std::mutex> lock(threads_mutex_);
      handlers_.emplace_back([this, client] { serve(client); });
    }
  }

  void serve(int client) {
    while (!stopping_) {
      pollfd ready{client, POLLIN, 0};
      const int polled = ::poll(&ready, 1, 100);
      if (polled == 0) continue;
      if (polled < 0 && errno == EINTR) continue;
      // A request, once started, arrives whole within a generous bound.
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      char op = 0;
      std::string key;
      if (polled < 0 || !read_exactly(client, &op, 1, deadline) ||
          !read_string(client, key, deadline)) {
        break;
      }
      std::string reply;
      if (op == 'S') {
        std::string value;
        if (!read_string(client, value, deadline)) break;
        std::lock_guard<std::mutex> lock(values_mutex_);
        values_[key] = std::move(value);
        reply = "K";
      } else if (op == 'G') {
        std::lock_guard<std::mutex> lock(values_mutex_);
        const auto found = values_.find(key);
        if (found == values_.end()) {
          reply = "N";
        } else {
          reply = "V";
          append_u32(reply, static_cast<uint32_t>(found->second.size()));
          reply += found->second;
        }
      } else {
        break;  // not a client of this store
      }
      if (!write_all(client, reply)) break;
    }
    ::close(client);
  }

  int listener_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex threads_mutex_;
  std::vector<std::thread> handlers_;
  std::mutex values_mutex_;
  std::map<std::string, std::string> values_;
};

CoordinatorStore::CoordinatorStore(const std::string& host, int port, bool serve,
                                   std::chrono::milliseconds timeout)
    : where_(host + ":" + std::to_string(port)), timeout_(timeout) {
  if (serve) server_ = std::make_unique<Server>(port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    throw EngineError("jax.distributed.initialize: cannot resolve the coordinator address " +
                      where_);
  }
  const auto deadline = Clock::now() + timeout;
  while (socket_ < 0) {
    const int fd = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      socket_ = fd;
      break;
    }
    if (fd >= 0) ::close(fd);
    if (Clock::now() > deadline) {
      ::freeaddrinfo(found);
      throw EngineError("jax.distributed.initialize: no coordinator answered at " + where_ +
                        " within " + std::to_string(timeout.count() / 1000) +
                        " s; start process 0 (it serves the coordinator) with the same address");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::freeaddrinfo(found);
  const int on = 1;
  ::setsockopt(socket_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  sockaddr_in local{};
  socklen_t length = sizeof local;
  ::getsockname(socket_, reinterpret_cast<sockaddr*>(&local), &length);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  local_address_ = text;
}

CoordinatorStore::~CoordinatorStore() {
  if (socket_ >= 0) ::close(socket_);
}

void CoordinatorStore::set(const std::string& key, const std::vector<char>& data) {
  const std::string value(data.begin(), data.end());
  char reply = 0;
  if (!write_all(socket_, request('S', key, &value)) ||
      !read_exactly(socket_, &reply, 1, Clock::now() + timeout_) || reply != 'K') {
    throw EngineError("jax.distributed: the coordinator at " + where_ + " stopped answering (set " +
                      key + "); did process 0 exit?");
  }
}

std::vector<char> CoordinatorStore::get_until(const std::string& key,
                                              std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    char reply = 0;
    if (!write_all(socket_, request('G', key)) ||
        !read_exactly(socket_, &reply, 1, Clock::now() + timeout_)) {
      throw EngineError("jax.distributed: the coordinator at " + where_ +
                        " stopped answering (get " + key + "); did process 0 exit?");
    }
    if (reply == 'V') {
      std::string value;
      if (!read_string(socket_, value, Clock::now() + timeout_)) {
        throw EngineError("jax.distributed: truncated reply from the coordinator at " + where_);
      }
      return std::vector<char>(value.begin(), value.end());
    }
    if (Clock::now() > deadline) {
      throw EngineError("jax.distributed: waited " + std::to_string(timeout.count() / 1000) +
                        " s for '" + key + "' at the coordinator " + where_ +
                        "; a process has not started or has failed (every process must call "
                        "initialize with the same coordinator and process count)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<char> CoordinatorStore::get(const std::string& key) { return get_until(key, timeout_); }

void CoordinatorStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void CoordinatorStore::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  for (const std::string& key : keys) get_until(key, timeout);
}

}  // namespace pmap_engine::distributed
