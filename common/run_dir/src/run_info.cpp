#include "parity/common/peer_processes.h"
#include "parity/common/run_dir.h"

namespace parity {

RunInfo run_info_for_case(const CaseSpec& spec, const std::string& producer) {
  RunInfo info;
  info.producer = producer;
  info.case_name = spec.name;
  info.case_hash = spec.hash();
  info.case_toml = spec.to_toml();
  info.replicas = spec.parallel.replicas;
  info.processes = 1;
  info.steps = spec.train.steps;
  info.dtype = spec.train.dtype;
  info.optimizer = spec.train.optimizer;
  info.seed = spec.init.seed;
  info.versions = {{"parity", PARITY_VERSION}};
  info.host = host_name();
  info.started_at = utc_timestamp_now();
  return info;
}

}  // namespace parity
