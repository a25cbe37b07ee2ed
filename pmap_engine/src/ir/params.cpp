#include "ir/params.h"

#include <sstream>

namespace pmap_engine::ir {
namespace {

std::string format_value(const ParamValue& value) {
  std::ostringstream out;
  if (const auto* integer = std::get_if<int64_t>(&value)) {
    out << *integer;
  } else if (const auto* real = std::get_if<double>(&value)) {
    out << *real;
  } else if (const auto* flag = std::get_if<bool>(&value)) {
    out << (*flag ? "True" : "False");
  } else if (const auto* text = std::get_if<std::string>(&value)) {
    out << *text;
  } else if (const auto* dtype = std::get_if<DType>(&value)) {
    out << dtype_name(*dtype);
  } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
    out << "(";
    for (size_t i = 0; i < ints->size(); ++i) out << (i ? ", " : "") << (*ints)[i];
    out << (ints->size() == 1 ? ",)" : ")");
  }
  return out.str();
}

}  // namespace

Params& Params::set(const std::string& name, ParamValue value) {
  for (auto& entry : entries_) {
    if (entry.first == name) {
      entry.second = std::move(value);
      return *this;
    }
  }
  entries_.emplace_back(name, std::move(value));
  return *this;
}

bool Params::has(const std::string& name) const {
  for (const auto& entry : entries_) {
    if (entry.first == name) return true;
  }
  return false;
}

const ParamValue& Params::get(const std::string& name) const {
  for (const auto& entry : entries_) {
    if (entry.first == name) return entry.second;
  }
  throw std::logic_error("primitive param '" + name + "' is missing (bug in an op definition)");
}

template <typename T>
const T& get_as(const ParamValue& value, const std::string& name) {
  if (const auto* typed = std::get_if<T>(&value)) return *typed;
  throw std::logic_error("primitive param '" + name + "' has another type (bug in an op)");
}

int64_t Params::integer(const std::string& name) const { return get_as<int64_t>(get(name), name); }
double Params::real(const std::string& name) const { return get_as<double>(get(name), name); }
bool Params::flag(const std::string& name) const { return get_as<bool>(get(name), name); }
const std::string& Params::text(const std::string& name) const {
  return get_as<std::string>(get(name), name);
}
DType Params::dtype(const std::string& name) const { return get_as<DType>(get(name), name); }
const std::vector<int64_t>& Params::ints(const std::string& name) const {
  return get_as<std::vector<int64_t>>(get(name), name);
}

std::string Params::to_string() const {
  if (entries_.empty()) return "";
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < entries_.size(); ++i) {
    out << (i ? " " : "") << entries_[i].first << "=" << format_value(entries_[i].second);
  }
  out << "]";
  return out.str();
}

}  // namespace pmap_engine::ir
