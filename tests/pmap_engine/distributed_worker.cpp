// One process of the multi-process collectives test (distributed_test.cpp):
//   distributed_worker COORDINATOR PROCESS_ID NUM_PROCESSES LOCAL_DEVICES OUT_FILE [TIMEOUT_S]
// joins the run, pmaps distributed_program.h's program over its local devices, and writes its
// outputs' values as raw doubles to OUT_FILE. Exit 0 on success; an error's text on stderr.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "distributed_program.h"
#include "pmap_engine/distributed.h"

int main(int argc, char** argv) {
  namespace pe = pmap_engine;
  if (argc != 6 && argc != 7) {
    std::cerr << "usage: distributed_worker COORDINATOR PROCESS_ID NUM_PROCESSES LOCAL_DEVICES "
                 "OUT_FILE [TIMEOUT_S]\n";
    return 2;
  }
  try {
    pe::distributed::InitializeOptions options;
    options.coordinator_address = argv[1];
    options.process_id = std::atoi(argv[2]);
    options.num_processes = std::atoi(argv[3]);
    options.local_device_count = std::atoi(argv[4]);
    options.timeout = std::chrono::seconds(argc == 7 ? std::atoi(argv[6]) : 30);
    pe::distributed::initialize(options);
    const int64_t local = options.local_device_count;
    const pe::Tree out = pe::testing::collectives_program(
        pe::distributed::device_count(),
        pe::testing::device_inputs(pe::distributed::process_index() * local, local),
        pe::DeviceSet(static_cast<int>(local)));
    const std::vector<double> values = pe::testing::flat_values(out);
    std::ofstream file(argv[5], std::ios::binary);
    file.write(reinterpret_cast<const char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(double)));
    pe::distributed::shutdown();
    return file ? 0 : 1;
  } catch (const std::exception& error) {
    std::cerr << "distributed_worker " << argv[2] << ": " << error.what() << "\n";
    return 1;
  }
}
