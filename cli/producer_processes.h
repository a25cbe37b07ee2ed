// Multi-process runs of either producer on this host. The launcher starts copies of this
// executable, tells each its place through the environment (torchrun's variables for ddp_ref,
// PARITY_PMAP_* for the engine) and gives all of them the case as it resolved it (a TOML file,
// overrides applied), so that every copy trains the same case. This file is the only reader of
// those variables: the producers take a ProcessPlace (parity/common/producer.h).
#pragma once

#include <cstdint>
#include <optional>

#include "parity/common/case_spec.h"
#include "parity/common/producer.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "parity/engine_trainer/engine_trainer.h"

namespace parity::cli {

// This process's place when it is a rank process of a multi-process ddp run (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT as torchrun sets them; PARITY_RANKS_PER_PROCESS consecutive ranks,
// 1 by default); nullopt when RANK is unset. InputError naming the variable when one is
// malformed, or when WORLD_SIZE is not the case's parallel.replicas.
std::optional<ProcessPlace> ddp_place_from_environment(const CaseSpec& spec);

// This process's place when it is an engine process of a multi-process run
// (PARITY_PMAP_COORDINATOR, PARITY_PMAP_PROCESS_ID, PARITY_PMAP_NUM_PROCESSES); nullopt when
// they are unset. InputError for a partial or malformed set.
std::optional<ProcessPlace> engine_place_from_environment();

// `parity ddp --nproc N`: N processes of replicas / N ranks each. Throws InputError before any
// starts when the case or the options cannot run, RunError naming each process that failed.
void launch_ddp_processes(const CaseSpec& spec, const ddp_ref::DdpOptions& options,
                          int64_t processes);

// The engine run of a case: in this process when `processes` is 1, else over that many
// processes (which must be the case's parallel.processes). Used by `parity pmap`, `parity run`,
// `parity cases run` and gate's reruns.
void train_engine(const CaseSpec& spec, const engine_trainer::EngineOptions& options,
                  int64_t processes);

}  // namespace parity::cli
