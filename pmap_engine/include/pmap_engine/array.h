// Array: the engine's value type, like a jax.Array. Outside a trace it holds a concrete
// buffer; inside `jit` or `value_and_grad` it is a tracer, a symbolic stand-in for a value of
// known shape and dtype, and every op on it records an equation in the trace's program.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "pmap_engine/dtype.h"

namespace pmap_engine {

// An allocator whose value-less construct() leaves bytes uninitialised, so that a kernel
// which writes every element does not pay for zero-filling first.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) {}  // NOLINT: rebinding
  template <typename U>
  void construct(U* pointer) {
    ::new (static_cast<void*>(pointer)) U;  // default-initialisation: no zeroing
  }
  template <typename U, typename... Args>
  void construct(U* pointer, Args&&... args) {
    ::new (static_cast<void*>(pointer)) U(std::forward<Args>(args)...);
  }
};

using ByteStorage = std::vector<std::byte, UninitializedAllocator<std::byte>>;

// Host memory of one array: row-major, dtype-sized elements.
struct Buffer {
  DType dtype = DType::f32;
  Shape shape;
  std::shared_ptr<ByteStorage> bytes;

  static Buffer allocate(DType dtype, Shape shape);  // zero-filled
  // For kernels that write every element of their output: the contents start undefined.
  static Buffer allocate_uninitialized(DType dtype, Shape shape);
  size_t num_elements() const { return shape_num_elements(shape); }
  size_t num_bytes() const { return bytes ? bytes->size() : 0; }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes->data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes->data());
  }
};

namespace ir {
class TraceContext;
}
namespace runtime {
class DeviceBlocks;
}

class Array {
 public:
  Array() = default;
  explicit Array(Buffer buffer);
  // A tracer: variable `var` of `trace`'s program.
  Array(ir::TraceContext* trace, int var, DType dtype, Shape shape);

  // Concrete arrays from host values.
  static Array from_floats(Shape shape, const std::vector<float>& values);
  static Array from_doubles(Shape shape, const std::vector<double>& values);
  static Array from_ints(Shape shape, const std::vector<int32_t>& values);
  static Array from_uints(Shape shape, const std::vector<uint32_t>& values);
  static Array scalar(double value, DType dtype = DType::f32);
  // jax.ShapeDtypeStruct(shape, dtype): an array's type without values or storage, for
  // eval_shape (transforms.h). Reading its values is an error.
  static Array shape_dtype_struct(Shape shape, DType dtype);
  // A mapped call's output that stays on its devices (runtime/device_blocks.h): its global
  // value is assembled the first time buffer() is read.
  static Array on_devices(std::shared_ptr<const runtime::DeviceBlocks> blocks, DType dtype,
                          Shape shape);

  bool valid() const { return impl_ != nullptr; }
  const Shape& shape() const;
  DType dtype() const;
  int64_t ndim() const { return static_cast<int64_t>(shape().size()); }
  size_t num_elements() const { return shape_num_elements(shape()); }

  bool is_traced() const;
  bool is_shape_dtype_struct() const;
  ir::TraceContext* trace() const;
  int var() const;

  // The buffer of a concrete array. On a tracer: EngineError explaining tracing, pointing to
  // debug_print and static arguments (as JAX's ConcretizationTypeError does).
  const Buffer& buffer(const char* what = "this operation") const;
  std::vector<float> to_floats() const;  // any dtype, converted
  std::vector<double> to_doubles() const;
  std::vector<int64_t> to_ints() const;
  double item() const;  // a one-element array's value

  // jit's donate_argnums: hands this array's storage to the callee. The array is deleted
  // afterwards and any later read is an error, as for a donated jax.Array.
  Buffer donate();
  // Donation to a mapped call that took the device blocks themselves: deletes the array
  // without assembling its global value.
  void donate_device_blocks();
  bool is_deleted() const { return impl_ && impl_->deleted; }
  // The blocks of an array a mapped call left on its devices; null for any other array.
  const runtime::DeviceBlocks* device_blocks() const {
    return impl_ ? impl_->blocks.get() : nullptr;
  }

 private:
  // The errors of buffer() on an array without values (deleted, a tracer, a ShapeDtypeStruct).
  void check_concrete(const char* what) const;

  struct Impl {
    DType dtype = DType::f32;
    Shape shape;
    Buffer buffer;                      // concrete arrays
    std::shared_ptr<const runtime::DeviceBlocks> blocks;  // or concrete, left on devices
    ir::TraceContext* trace = nullptr;  // tracers
    int var = -1;
    bool deleted = false;
    bool abstract = false;  // shape_dtype_struct
  };
  std::shared_ptr<Impl> impl_;
};

}  // namespace pmap_engine
