// One pmapped program exercising every collective, shared by the multi-process worker
// (distributed_worker.cpp) and the test that runs the same program in one process
// (distributed_test.cpp): device g's input is a function of g alone, so any split of the
// devices over processes must give each device the same outputs, bit for bit.
#pragma once

#include <cmath>
#include <vector>

#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"

namespace pmap_engine::testing {

// Devices first .. first + count - 1 of the run: x [count, 3, 5] f32.
inline Array device_inputs(int64_t first, int64_t count) {
  std::vector<float> values;
  for (int64_t g = first; g < first + count; ++g) {
    for (int64_t e = 0; e < 15; ++e) {
      values.push_back(static_cast<float>(std::sin(0.37 * static_cast<double>(g * 15 + e)) * 3.1));
    }
  }
  return Array::from_floats({count, 3, 5}, values);
}

// psum, pmean, pmax, all_gather, ppermute (a cyclic shift by one), axis_index, and the gradient
// of a psum'd loss, of x over axis "i" of `axis_size` devices.
inline Tree collectives_program(int64_t axis_size, const Array& x, const DeviceSet& devices) {
  std::vector<std::pair<int64_t, int64_t>> shift;
  for (int64_t d = 0; d < axis_size; ++d) shift.push_back({d, (d + 1) % axis_size});
  const TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(sum(psum(args[0].leaf() * args[0].leaf(), "i")));
  };
  const TreeFunction grad_of_loss = grad(loss);
  PmapOptions options;
  options.axis_name = "i";
  options.devices = devices;
  return pmap(
      [shift, grad_of_loss](const std::vector<Tree>& args) {
        const Array& v = args[0].leaf();
        return Tree::tuple({psum(v, "i"), pmean(v, "i"), pmax(v, "i"), all_gather(v, "i"),
                            ppermute(v, "i", shift), axis_index("i"), grad_of_loss({v}).leaf()});
      },
      options)({x});
}

// Every leaf's values, flattened in leaf order.
inline std::vector<double> flat_values(const Tree& tree) {
  std::vector<double> out;
  for (const Array& leaf : tree.leaves()) {
    const std::vector<double> values = leaf.to_doubles();
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

}  // namespace pmap_engine::testing
