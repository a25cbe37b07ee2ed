// Params: the static attributes of an equation (axes, shapes, dtypes, ...), printed in the
// program as JAX prints a primitive's params: reduce_sum[axes=(1,)].
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pmap_engine/dtype.h"

namespace pmap_engine::ir {

using ParamValue = std::variant<int64_t, double, bool, std::string, DType, std::vector<int64_t>>;

class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<std::string, ParamValue>> entries) : entries_(entries) {}

  Params& set(const std::string& name, ParamValue value);
  bool has(const std::string& name) const;

  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  bool flag(const std::string& name) const;
  const std::string& text(const std::string& name) const;
  DType dtype(const std::string& name) const;
  const std::vector<int64_t>& ints(const std::string& name) const;

  // "[axes=(1,) keepdims=False]", or "" without params.
  std::string to_string() const;
  // A canonical text used in cache keys.
  bool operator==(const Params& other) const { return entries_ == other.entries_; }

 private:
  const ParamValue& get(const std::string& name) const;
  std::vector<std::pair<std::string, ParamValue>> entries_;
};

}  // namespace pmap_engine::ir
