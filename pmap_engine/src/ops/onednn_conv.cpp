#include "ops/onednn_conv.h"

#include <optional>
#include <unordered_map>
#include <vector>

#include "ops/kernel_util.h"
#include "ops/onednn_runtime.h"

namespace pmap_engine {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// oneDNN names dimensions logically ({N, C, H, W} for activations, {O, I, KH, KW} for
// weights) and places them in memory by the tag.
memory::desc activations(const Shape& nhwc) {
  return {{nhwc[0], nhwc[3], nhwc[1], nhwc[2]}, memory::data_type::f32, Tag::nhwc};
}
memory::desc weights(const Shape& hwio, Tag tag) {
  return {{hwio[3], hwio[2], hwio[0], hwio[1]}, memory::data_type::f32, tag};
}

// The conv's descriptor arguments. oneDNN counts dilation as the holes between taps (lax's
// dilation - 1), and pads its output's extent exactly as lax's stride_dim does.
struct Window {
  memory::dims strides, dilates, padding_l, padding_r;
};
Window window_of(const OneDnnConvGeometry& g) {
  return {{g.strides[0], g.strides[1]},
          {g.dilation[0] - 1, g.dilation[1] - 1},
          {g.padding_lo[0], g.padding_lo[1]},
          {g.padding_hi[0], g.padding_hi[1]}};
}

// A primitive with what a call needs around it: its kernel layout, the reorder between that
// layout and HWIO where they differ, and its scratchpad's size (the caller owns the
// scratchpad, so that device threads running one cached primitive at once never share one).
struct Prepared {
  dnnl::primitive conv;
  memory::desc kernel_layout;
  std::optional<dnnl::reorder> kernel_reorder;
  memory::desc scratchpad;
};

// `to_primitive`: the reorder reads HWIO into the primitive's layout (forward, backward data);
// else it writes the primitive's kernel layout back as HWIO (backward weights).
template <typename Primitive, typename PrimitiveDesc>
Prepared prepare(const PrimitiveDesc& pd, const memory::desc& kernel_layout, const Shape& hwio,
                 bool to_primitive) {
  Prepared p{Primitive(pd), kernel_layout, std::nullopt, pd.scratchpad_desc()};
  const memory::desc user = weights(hwio, Tag::hwio);
  if (kernel_layout != user) {
    p.kernel_reorder = to_primitive ? dnnl::reorder(dnnl::reorder::primitive_desc(
                                          onednn_engine(), user, onednn_engine(), kernel_layout))
                                    : dnnl::reorder(dnnl::reorder::primitive_desc(
                                          onednn_engine(), kernel_layout, onednn_engine(), user));
  }
  return p;
}

dnnl::convolution_forward::primitive_desc forward_pd(const OneDnnConvGeometry& g,
                                                     const dnnl::primitive_attr& attr) {
  const Window w = window_of(g);
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, activations(g.x),
      weights(g.w, Tag::any), activations(g.y), w.strides, w.dilates, w.padding_l, w.padding_r);
  return {desc, attr, onednn_engine()};
}

// The backward passes' descriptors share their argument order (the input or its cotangent, the
// kernel or its cotangent, the output's cotangent) and take the forward's descriptor as a hint.
template <typename Primitive>
typename Primitive::primitive_desc backward_pd(const OneDnnConvGeometry& g) {
  const Window w = window_of(g);
  const typename Primitive::desc desc(dnnl::algorithm::convolution_direct, activations(g.x),
                                      weights(g.w, Tag::any), activations(g.y), w.strides,
                                      w.dilates, w.padding_l, w.padding_r);
  return {desc, user_scratchpad_attr(), onednn_engine(), forward_pd(g, dnnl::primitive_attr())};
}

// A primitive's cache key (each pass has its own cache).
std::vector<int64_t> key_of(const OneDnnConvGeometry& g) {
  std::vector<int64_t> key;
  for (const Shape* shape : {&g.x, &g.w, &g.y}) key.insert(key.end(), shape->begin(), shape->end());
  for (const auto* pair : {&g.strides, &g.dilation, &g.padding_lo, &g.padding_hi}) {
    key.insert(key.end(), pair->begin(), pair->end());
  }
  return key;
}

memory wrap(const memory::desc& md, const float* data) {
  return memory(md, onednn_engine(), const_cast<float*>(data));
}

// The per-thread buffer holding the kernel in the primitive's layout.
memory kernel_buffer(const Prepared& p) {
  thread_local std::vector<uint8_t, UninitializedAllocator<uint8_t>> buffer;
  buffer.resize(p.kernel_layout.get_size());
  return memory(p.kernel_layout, onednn_engine(), buffer.data());
}

// The HWIO kernel `w` as the primitive reads it: itself, or reordered into kernel_buffer.
memory kernel_to_read(const Prepared& p, const Shape& hwio, const float* w, OneDnnCall& call) {
  memory user = wrap(weights(hwio, Tag::hwio), w);
  if (!p.kernel_reorder) return user;
  memory kernel = kernel_buffer(p);
  p.kernel_reorder->execute(call.stream(), user, kernel);
  return kernel;
}

void execute(const Prepared& p, std::unordered_map<int, memory> args, OneDnnCall& call) {
  args.emplace(DNNL_ARG_SCRATCHPAD, call.scratchpad(p.scratchpad));
  p.conv.execute(call.stream(), args);
}

}  // namespace

void onednn_conv_forward(const OneDnnConvGeometry& g, const float* x, const float* w, float* y) {
  OneDnnCall call;
  static OneDnnCache<Prepared> cache;
  const Prepared& p = cache.get(key_of(g), [&] {
    const auto pd = forward_pd(g, user_scratchpad_attr());
    return prepare<dnnl::convolution_forward>(pd, pd.weights_desc(), g.w, true);
  });
  execute(p,
          {{DNNL_ARG_SRC, wrap(activations(g.x), x)},
           {DNNL_ARG_WEIGHTS, kernel_to_read(p, g.w, w, call)},
           {DNNL_ARG_DST, wrap(activations(g.y), y)}},
          call);
  call.stream().wait();
}

void onednn_conv_backward_data(const OneDnnConvGeometry& g, const float* dy, const float* w,
                               float* dx) {
  OneDnnCall call;
  static OneDnnCache<Prepared> cache;
  const Prepared& p = cache.get(key_of(g), [&] {
    const auto pd = backward_pd<dnnl::convolution_backward_data>(g);
    return prepare<dnnl::convolution_backward_data>(pd, pd.weights_desc(), g.w, true);
  });
  execute(p,
          {{DNNL_ARG_DIFF_DST, wrap(activations(g.y), dy)},
           {DNNL_ARG_WEIGHTS, kernel_to_read(p, g.w, w, call)},
           {DNNL_ARG_DIFF_SRC, wrap(activations(g.x), dx)}},
          call);
  call.stream().wait();
}

void onednn_conv_backward_weights(const OneDnnConvGeometry& g, const float* x, const float* dy,
                                  float* dw) {
  OneDnnCall call;
  static OneDnnCache<Prepared> cache;
  const Prepared& p = cache.get(key_of(g), [&] {
    const auto pd = backward_pd<dnnl::convolution_backward_weights>(g);
    return prepare<dnnl::convolution_backward_weights>(pd, pd.diff_weights_desc(), g.w, false);
  });
  memory user_kernel = wrap(weights(g.w, Tag::hwio), dw);
  memory kernel = p.kernel_reorder ? kernel_buffer(p) : user_kernel;
  execute(p,
          {{DNNL_ARG_SRC, wrap(activations(g.x), x)},
           {DNNL_ARG_DIFF_DST, wrap(activations(g.y), dy)},
           {DNNL_ARG_DIFF_WEIGHTS, kernel}},
          call);
  if (p.kernel_reorder) p.kernel_reorder->execute(call.stream(), kernel, user_kernel);
  call.stream().wait();
}

}  // namespace pmap_engine
