#include "parity/common/peer_processes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace parity {
std::string host_name() {
  char buffer[256] = {};
  gethostname(buffer, sizeof buffer - 1);
  return buffer;
}

std::string this_process_address() { return fmt::format("{} {}", host_name(), getpid()); }

std::optional<ProcessAddress> parse_process_address(const std::string& text) {
  std::istringstream in(text);
  ProcessAddress address;
  if (!(in >> address.host >> address.pid) || address.pid <= 0) return std::nullopt;
  return address;
}

std::optional<std::string> lost_process_state(const ProcessAddress& address) {
  if (address.host != host_name()) return std::nullopt;
  // /proc/PID/stat: "PID (COMM) STATE ..."; COMM may hold spaces and parentheses, so the state
  // is the first field after the last ')'.
  std::ifstream stat("/proc/" + std::to_string(address.pid) + "/stat");
  if (!stat) return "exited";
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  const char state = text[close + 2];
  if (state == 'Z' || state == 'X') return "exited";
  if (state == 'T' || state == 't') return "stopped";
  return std::nullopt;
}

std::string describe_lost_ranks(const std::map<int64_t, ProcessAddress>& ranks,
                                const std::string& unit) {
  std::vector<std::string> lost;
  for (const auto& [rank, address] : ranks) {
    if (const auto state = lost_process_state(address)) {
      lost.push_back(fmt::format("{} {} (pid {}, {})", unit, rank, address.pid, *state));
    }
  }
  return fmt::format("{}", fmt::join(lost, ", "));
}

}  // namespace parity
