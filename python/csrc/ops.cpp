// ferry._C: AllReduce and EpBuffer. Pointers and streams are integers; the
// Python layer (python/ferry/_allreduce.py, _ep.py) checks AllReduce's tensors,
// leaves EpBuffer's to its own checks (src/ep/ep_args.hpp) and wraps the
// returned pointers into tensors. Both objects keep their Communicator alive
// (keep_alive), as the C++ objects hold a reference to it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>

#include "../../src/ep/ep_args.hpp"  // the EP argument checks (public headers only; libferry exports them)
#include "bindings.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"

namespace nb = nanobind;

namespace ferry::python {
namespace {

cudaStream_t as_stream(uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }
uintptr_t as_int(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// NOTE [EP argument names]: _C.EpBuffer exists for ferry.EpLayer, so the checks
// name EpLayer's calls and arguments.
constexpr ep::ArgNames kEpLayerNames{
    .dispatch = "EpLayer.dispatch",
    .dispatch_recv = "EpLayer.dispatch",
    .combine = "EpLayer.combine",
    .combine_recv = "EpLayer.combine",
    .tokens = "input",
    .scales = "input[1] (scales)",
    .topk_idx = "exp_indices",
    .topk_weights = "weight",
    .expert_outputs = "expert_output",
    .out = "out",
    .handle = "layout",
    .max_tokens = "max_tokens",
    .dispatch_type = "the EpLayer's dtype",
    .with_weights = "with_weights",
    .owner = "EpLayer",
    .route = "EpLayer.route",
};

// The same for EpLayer's halves (dispatch_send ... combine_recv), each named as itself.
constexpr ep::ArgNames layer_half_names() {
  ep::ArgNames names = kEpLayerNames;
  names.dispatch = "EpLayer.dispatch_send";
  names.dispatch_recv = "EpLayer.dispatch_recv";
  names.combine = "EpLayer.combine_send";
  names.combine_recv = "EpLayer.combine_recv";
  names.handle = "handle (layout)";
  return names;
}
constexpr ep::ArgNames kEpLayerHalfNames = layer_half_names();

// The checks of an EpLayer call without a buffer; device < 0: the device is not checked.
ep::CallContext layer_context(const EpConfig& config, int world_size, int device) {
  return ep::CallContext{config, world_size, ep::DeviceRule{device, ep::cuda_pointer_device}, kEpLayerNames};
}

}  // namespace

void bind_allreduce(nb::module_& m) {
  nb::enum_<AllReduceAlgorithm>(m, "AllReduceAlgorithm")
      .value("auto", AllReduceAlgorithm::kAuto)
      .value("one_shot", AllReduceAlgorithm::kOneShot)
      .value("two_shot", AllReduceAlgorithm::kTwoShot)
      .value("ring", AllReduceAlgorithm::kRing)
      .value("recursive_doubling", AllReduceAlgorithm::kRecursiveDoubling)
      .value("hierarchical", AllReduceAlgorithm::kHierarchical);
  m.def("algorithm_from_string", &algorithm_from_string, nb::arg("name"));
  m.def("algorithm_name", &algorithm_name, nb::arg("algorithm"));

  nb::class_<AllReduce>(m, "AllReduce")
      .def(
          "__init__",
          [](AllReduce* self, Communicator& comm, size_t max_bytes, int max_blocks) {
            AllReduceOptions options;
            options.max_blocks = max_blocks;
            new (self) AllReduce(comm, max_bytes, options);
          },
          nb::arg("comm"), nb::arg("max_bytes"), nb::arg("max_blocks") = 0, nb::keep_alive<1, 2>())
      .def(
          "run",
          [](AllReduce& a, uintptr_t in, uintptr_t out, size_t count, DataType type, ReduceOp op,
             uintptr_t stream, AllReduceAlgorithm algorithm) {
            a.run(reinterpret_cast<const void*>(in), reinterpret_cast<void*>(out), count, type, op,
                  as_stream(stream), algorithm);
          },
          nb::arg("input"), nb::arg("output"), nb::arg("count"), nb::arg("dtype"), nb::arg("op"),
          nb::arg("stream"), nb::arg("algorithm") = AllReduceAlgorithm::kAuto)
      .def("select", &AllReduce::select, nb::arg("nbytes"))
      .def("supports", &AllReduce::supports, nb::arg("algorithm"))
      .def_prop_ro("max_bytes", &AllReduce::max_bytes);
}

void bind_ep(nb::module_& m) {
  nb::enum_<EpMode>(m, "EpMode")
      .value("high_throughput", EpMode::kHighThroughput)
      .value("low_latency", EpMode::kLowLatency);
  nb::enum_<EpLayout>(m, "EpLayout")
      .value("expanded", EpLayout::kExpanded)
      .value("rank_rows", EpLayout::kRankRows);

  nb::class_<EpConfig>(m, "EpConfig")
      .def(nb::init<>())
      .def_rw("max_tokens_per_rank", &EpConfig::max_tokens_per_rank)
      .def_rw("hidden", &EpConfig::hidden)
      .def_rw("topk", &EpConfig::topk)
      .def_rw("num_experts", &EpConfig::num_experts)
      .def_rw("dispatch_type", &EpConfig::dispatch_type)
      .def_rw("with_weights", &EpConfig::with_weights)
      .def_rw("num_sms", &EpConfig::num_sms)
      .def_rw("mode", &EpConfig::mode)
      .def_rw("expert_alignment", &EpConfig::expert_alignment)
      .def_rw("max_recv_rows", &EpConfig::max_recv_rows)
      .def_rw("layout", &EpConfig::layout)
      .def_rw("own_rows_first", &EpConfig::own_rows_first)
      .def_rw("zero_copy_combine", &EpConfig::zero_copy_combine);

  // The checks EpBuffer's constructor makes, without a communicator (the Python
  // layer runs them before anything collective).
  m.def("validate_ep_config", &validate_ep_config, nb::arg("config"), nb::arg("world_size"));

  nb::class_<ep::EpDims>(m, "EpDims")
      .def_ro("local_experts", &ep::EpDims::local_experts)
      .def_ro("capacity_per_expert", &ep::EpDims::capacity_per_expert)
      .def_ro("capacity_rows", &ep::EpDims::capacity_rows)
      .def_ro("index_capacity", &ep::EpDims::index_capacity);
  m.def("ep_dims", &ep::ep_dims, nb::arg("config"), nb::arg("world_size"));

  // What EpBuffer.dispatch/combine check before launching, without a buffer (the
  // Python layer's checks without a GPU). num_rows: the dispatch's rows, -1 unknown.
  m.def(
      "validate_ep_dispatch",
      [](const EpConfig& config, int world_size, const TensorView& tokens, const TensorView& topk_idx,
         const TensorView& topk_weights, const TensorView& scales, int device) {
        ep::validate_dispatch_args(layer_context(config, world_size, device),
                                   {tokens, topk_idx, topk_weights, scales, nullptr});
      },
      nb::arg("config"), nb::arg("world_size"), nb::arg("tokens"), nb::arg("topk_idx"), nb::arg("topk_weights"),
      nb::arg("scales"), nb::arg("device") = -1);
  m.def(
      "validate_ep_combine",
      [](const EpConfig& config, int world_size, const TensorView& expert_outputs, const TensorView& out,
         int num_tokens, int64_t num_rows, int device) {
        ep::validate_combine_args(layer_context(config, world_size, device), num_tokens, num_rows, expert_outputs,
                                  out);
      },
      nb::arg("config"), nb::arg("world_size"), nb::arg("expert_outputs"), nb::arg("out"), nb::arg("num_tokens"),
      nb::arg("num_rows") = -1, nb::arg("device") = -1);

  nb::class_<EpHandle>(m, "EpHandle")
      .def_ro("generation", &EpHandle::generation)
      .def_ro("num_tokens", &EpHandle::num_tokens)
      .def_ro("with_weights", &EpHandle::with_weights);

  nb::class_<DispatchResult>(m, "DispatchResult")
      .def_prop_ro("tokens", [](const DispatchResult& r) { return as_int(r.tokens); })
      .def_prop_ro("scales", [](const DispatchResult& r) { return as_int(r.scales); })
      .def_prop_ro("weights", [](const DispatchResult& r) { return as_int(r.weights); })
      .def_prop_ro("expert_counts", [](const DispatchResult& r) { return as_int(r.expert_counts); })
      .def_prop_ro("expert_offsets", [](const DispatchResult& r) { return as_int(r.expert_offsets); })
      .def_ro("local_experts", &DispatchResult::local_experts)
      .def_ro("capacity_per_expert", &DispatchResult::capacity_per_expert)
      .def_ro("capacity_rows", &DispatchResult::capacity_rows)
      .def_ro("num_rows", &DispatchResult::num_rows)
      .def_ro("host_expert_counts", &DispatchResult::host_expert_counts)
      .def_ro("handle", &DispatchResult::handle)
      // EpLayout::rank_rows only (else 0 / -1).
      .def_prop_ro("row_experts", [](const DispatchResult& r) { return as_int(r.row_experts); })
      .def_prop_ro("row_weights", [](const DispatchResult& r) { return as_int(r.row_weights); })
      .def_prop_ro("source_offsets", [](const DispatchResult& r) { return as_int(r.source_offsets); })
      .def_prop_ro("source_rows", [](const DispatchResult& r) { return as_int(r.source_rows); })
      .def_prop_ro("expert_rows", [](const DispatchResult& r) { return as_int(r.expert_rows); })
      .def_ro("index_capacity", &DispatchResult::index_capacity)
      .def_ro("num_index_entries", &DispatchResult::num_index_entries)
      .def_ro("topk", &DispatchResult::topk);

  nb::class_<EpBuffer>(m, "EpBuffer")
      .def(nb::init<Communicator&, const EpConfig&>(), nb::arg("comm"), nb::arg("config"), nb::keep_alive<1, 2>())
      .def(
          "dispatch",
          [](EpBuffer& b, const TensorView& tokens, const TensorView& topk_idx, const TensorView& topk_weights,
             const TensorView& scales, uintptr_t stream, bool sync_counts, std::optional<EpHandle> reuse) {
            DispatchOptions options;
            options.sync_counts = sync_counts;
            if (reuse) options.reuse = &*reuse;
            const ep::ScopedArgNames names(kEpLayerNames);
            nb::gil_scoped_release release;  // sync_counts waits for the stream
            return b.dispatch(tokens, topk_idx, topk_weights, scales, as_stream(stream), options);
          },
          nb::arg("tokens"), nb::arg("topk_idx"), nb::arg("topk_weights"), nb::arg("scales"), nb::arg("stream"),
          nb::arg("sync_counts") = true, nb::arg("reuse") = nb::none())
      .def(
          "route",
          [](EpBuffer& b, const TensorView& topk_idx, uintptr_t stream) {
            const ep::ScopedArgNames names(kEpLayerNames);
            return b.route(topk_idx, as_stream(stream));
          },
          nb::arg("topk_idx"), nb::arg("stream"))
      .def(
          "combine",
          [](EpBuffer& b, const TensorView& expert_outputs, const EpHandle& handle, const TensorView& out,
             uintptr_t stream) {
            const ep::ScopedArgNames names(kEpLayerNames);
            b.combine(expert_outputs, handle, out, as_stream(stream));
          },
          nb::arg("expert_outputs"), nb::arg("handle"), nb::arg("out"), nb::arg("stream"))
      // The halves (include/ferry/ep.hpp): each returns once its kernels are queued.
      .def(
          "dispatch_send",
          [](EpBuffer& b, const TensorView& tokens, const TensorView& topk_idx, const TensorView& topk_weights,
             const TensorView& scales, uintptr_t stream, std::optional<EpHandle> reuse) {
            DispatchOptions options;
            if (reuse) options.reuse = &*reuse;
            const ep::ScopedArgNames names(kEpLayerHalfNames);
            return b.dispatch_send(tokens, topk_idx, topk_weights, scales, as_stream(stream), options);
          },
          nb::arg("tokens"), nb::arg("topk_idx"), nb::arg("topk_weights"), nb::arg("scales"), nb::arg("stream"),
          nb::arg("reuse") = nb::none())
      .def(
          "dispatch_recv",
          [](EpBuffer& b, const EpHandle& handle, uintptr_t stream, bool sync_counts) {
            DispatchOptions options;
            options.sync_counts = sync_counts;
            const ep::ScopedArgNames names(kEpLayerHalfNames);
            nb::gil_scoped_release release;  // sync_counts waits for the stream
            return b.dispatch_recv(handle, as_stream(stream), options);
          },
          nb::arg("handle"), nb::arg("stream"), nb::arg("sync_counts") = true)
      .def(
          "combine_send",
          [](EpBuffer& b, const TensorView& expert_outputs, const EpHandle& handle, uintptr_t stream) {
            const ep::ScopedArgNames names(kEpLayerHalfNames);
            b.combine_send(expert_outputs, handle, as_stream(stream));
          },
          nb::arg("expert_outputs"), nb::arg("handle"), nb::arg("stream"))
      .def(
          "combine_recv",
          [](EpBuffer& b, const EpHandle& handle, const TensorView& out, uintptr_t stream) {
            const ep::ScopedArgNames names(kEpLayerHalfNames);
            b.combine_recv(handle, out, as_stream(stream));
          },
          nb::arg("handle"), nb::arg("out"), nb::arg("stream"))
      // EpConfig::zero_copy_combine: the view the caller writes its combine input into (a pointer the Python
      // layer wraps, as DispatchResult's); InvalidArgument on a buffer without the option.
      .def("combine_input", &EpBuffer::combine_input)
      .def("check_errors", &EpBuffer::check_errors)
      .def_prop_ro("local_experts", &EpBuffer::local_experts)
      .def_prop_ro("world_size", &EpBuffer::world_size)
      .def_prop_ro("rank", &EpBuffer::rank);
}

}  // namespace ferry::python
