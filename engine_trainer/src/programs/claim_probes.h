// Probes for claims of the source documents that no pitfall case covers (cases C4, C5): what
// the engine does where a document describes JAX's behaviour. Dispatched by
// run_probe_program (probe_programs.cpp).
#pragma once

#include "programs/program_parts.h"

namespace parity::engine_trainer {

// 000 §3.1: "pmap requires axis 0 of every input and output to equal the device count".
ProbeResult probe_fewer_devices(const CaseSpec& spec);

// 001 §4.2-4.3: a NumPy function on a tracer, print inside jit, and the debugging tools.
ProbeResult probe_debugging(const CaseSpec& spec);

}  // namespace parity::engine_trainer
