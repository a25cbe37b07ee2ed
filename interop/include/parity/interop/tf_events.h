// TensorBoard event files: the scalars that PyTorch's SummaryWriter, TensorFlow's FileWriter
// and Flax/CLU writers log. Each record (tfrecord.h) is an Event (tensorboard/compat/proto/
// event.proto): wall_time = 1 (double), step = 2 (int64), and one of file_version = 3,
// graph_def = 4, summary = 5, session_log = 7, tagged_run_metadata = 8, meta_graph_def = 9. A
// Summary (summary.proto) holds Values: tag = 1, and simple_value = 2 (a float; what
// add_scalar writes) or tensor = 8 (a TensorProto, tensor.proto; what tf.summary.scalar and
// CLU write in TF2: dtype = 1, tensor_shape = 2, tensor_content = 4 or the typed repeated
// fields float_val = 5, double_val = 6, int_val = 7, int64_val = 10, half_val = 13).
// Graphs, histograms, images and other non-scalar values are counted and skipped.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace parity::interop {

struct EventScalar {
  std::string tag;
  int64_t step = 0;
  double value = 0;  // the stored number, widened (a float32 simple_value exactly)
  double wall_time = 0;
  std::string encoding;  // "simple_value" or "tensor"
  std::string dtype;     // "DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16", "DT_INT32", ...
};

struct EventFile {
  int64_t records = 0;
  std::string file_version;                     // "brain.Event:2"
  std::map<std::string, int64_t> event_kinds;   // "summary", "graph_def", "file_version", ...
  std::vector<EventScalar> scalars;             // in file order
  std::map<std::string, int64_t> skipped_tags;  // non-scalar summary values per tag
};

// Reads every record (checksums verified) and decodes its Event. Throws InputError naming the
// file, the record, the byte and what is wrong: a damaged record, a message that is not an
// Event, a tensor whose bytes do not match its dtype and shape.
EventFile read_event_file(const std::filesystem::path& path);

}  // namespace parity::interop
