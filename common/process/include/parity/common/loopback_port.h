// A free TCP port on the loopback interface, for a rendezvous store (torchrun's MASTER_PORT).
#pragma once

namespace parity {

// A port on 127.0.0.1 that nothing listens on right now: the kernel's pick for port 0, released
// at once. Throws RunError when none can be had.
int free_loopback_port();

}  // namespace parity
