// pmap: maps a function over devices, as jax.pmap. Inside the function every array is one
// device's value (the mapped axis removed); collectives over `axis_name` combine the devices'
// values. Outputs carry a device axis (out_axes 0, or another position) or are one value that
// is the same on every device (out_axes None, checked bit for bit).
//
// As in JAX >= 0.8.0 (jax_pmap_shmap_merge, on by default from jax-v0.8.0; the code in
// jax/_src/shard_map.py at jax-v0.8.0, in jax/_src/pmap.py from jax-v0.8.1), pmap is shard_map
// on a one-axis mesh of the first axis-size devices: in_axes k becomes
// PartitionSpec(None, ..., axis_name) with axis_name at position k, the mapped dimension
// squeezed inside; out_axes likewise; check_vma=False.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pmap_engine/axis_spec.h"
#include "pmap_engine/device.h"
#include "pmap_engine/mapped.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {

struct PmapOptions {
  std::string axis_name = "i";
  // One entry per positional argument: the axis to map (negative counts from the end),
  // std::nullopt to give every device the whole argument (in_axes=None), or a tuple/dict
  // AxisSpec, a tree prefix of the argument. Empty: every argument mapped on axis 0.
  std::vector<AxisSpec> in_axes;
  // One entry for all outputs, or one per top-level output (a tuple result): where the device
  // axis goes in each output (0: leading; negative counts from the end), or std::nullopt to
  // return the value all devices agree on. Empty: 0.
  std::vector<AxisSpec> out_axes;
  std::set<size_t> donate_argnums;
  std::set<size_t> static_broadcasted_argnums;
  // Debug check: top-level outputs (positions in the returned tuple; 0 for a single result)
  // whose values must be bit-identical on every device, such as the parameters after a
  // synchronised update. A divergence raises an EngineError naming the first leaf, device and
  // element that differ (pitfalls P4, P11).
  std::set<size_t> check_replicated_outputs;
  // Devices to map over; default: DeviceSet::from_environment(). The mapped axis size must not
  // exceed their count.
  std::optional<DeviceSet> devices;
};

class Pmapped : public Mapped {
 public:
  Pmapped(TreeFunction function, PmapOptions options);
};

Pmapped pmap(TreeFunction function, PmapOptions options = {});

}  // namespace pmap_engine
