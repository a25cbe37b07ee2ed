// Naming the process that a failed collective was waiting for. When a worker of a
// multi-process run dies or is stopped, the survivors' collectives fail or time out, and the
// rendezvous store may have died with it (it lives in process 0), so nothing read from the
// store after the failure can be trusted. Instead each process records, while all are alive,
// where every rank lives (host and pid); after a failure, the kernel says which of them is
// gone or stopped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace parity {

struct ProcessAddress {
  std::string host;
  int64_t pid = 0;
};

// This host's name, as addresses carry it.
std::string host_name();

// "host pid" for this process, to publish; and its inverse (nullopt for anything else).
std::string this_process_address();
std::optional<ProcessAddress> parse_process_address(const std::string& text);

// What the kernel says of a process on this host: "exited" (gone, or a zombie not yet reaped),
// "stopped" (SIGSTOP, or a debugger), or nullopt while it runs. nullopt, too, for a process on
// another host, which this host cannot see.
std::optional<std::string> lost_process_state(const ProcessAddress& address);

// "rank 5 (pid 4242, exited), rank 6 (pid 4243, stopped)": the ranks (key) whose processes are
// lost; empty when none is, or none can be seen from here.
std::string describe_lost_ranks(const std::map<int64_t, ProcessAddress>& ranks,
                                const std::string& unit = "rank");

}  // namespace parity
