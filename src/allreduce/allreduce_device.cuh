// Shared device code of the AllReduce algorithms: kernel parameters, element
// packs, reduction operators and the epoch counter. Flag exchange between ranks
// is the channel layer's node part (Params::flags, ferry/device/channel.cuh).
// The dtype/op switch lives here, in dispatch_type_op(), and nowhere else.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "allreduce/allreduce_params.hpp"
#include "common/dependent_launch.hpp"
#include "ferry/device/channel.cuh"
#include "ferry/device/epoch_tag.hpp"
#include "ferry/device/sync.cuh"
#include "ferry/device/timeout.cuh"
#include "ferry/device/vec.cuh"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace ferry::allreduce {

// ---------------------------------------------------------------- element types

template <typename T> struct AccumulatorOf { using type = T; };
template <> struct AccumulatorOf<__nv_bfloat16> { using type = float; };
template <> struct AccumulatorOf<__half> { using type = float; };
template <typename T> using Acc = typename AccumulatorOf<T>::type;

__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T to_acc(T v) { return v; }

template <typename T> __device__ __forceinline__ T from_acc(Acc<T> v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else return v;
}

// A 16-byte pack of user elements.
template <typename T> struct Pack {
  static constexpr int kElems = 16 / sizeof(T);
  union {
    uint4 raw;
    T elems[kElems];
  };
};

// kElems accumulators of one pack (16 or 32 bytes), moved as whole uint4s.
template <typename T> struct AccPack {
  static constexpr int kElems = Pack<T>::kElems;
  static constexpr int kVecs = kElems * sizeof(Acc<T>) / 16;
  union {
    uint4 raw[kVecs];
    Acc<T> elems[kElems];
  };
};

// ---------------------------------------------------------------- operators

template <ReduceOp Op> struct Reducer {
  template <typename A> __device__ __forceinline__ static A apply(A a, A b) {
    if constexpr (Op == ReduceOp::kSum || Op == ReduceOp::kAvg) return a + b;
    else if constexpr (Op == ReduceOp::kProd) return a * b;
    else if constexpr (Op == ReduceOp::kMin) return b < a ? b : a;
    else return a < b ? b : a;
  }
  template <typename A> __device__ __forceinline__ static A finalize(A a, int world_size) {
    if constexpr (Op == ReduceOp::kAvg) return a / static_cast<A>(world_size);
    else return a;
  }
};

template <typename T> __device__ __forceinline__ AccPack<T> unpack(const uint4& raw) {
  Pack<T> p;
  p.raw = raw;
  AccPack<T> a;
#pragma unroll
  for (int i = 0; i < Pack<T>::kElems; ++i) a.elems[i] = to_acc(p.elems[i]);
  return a;
}

template <typename T, ReduceOp Op> __device__ __forceinline__ uint4 pack_final(const AccPack<T>& a, int n) {
  Pack<T> p;
#pragma unroll
  for (int i = 0; i < Pack<T>::kElems; ++i) p.elems[i] = from_acc<T>(Reducer<Op>::finalize(a.elems[i], n));
  return p.raw;
}

// The accumulators rounded to T with no final step: a partial result that is
// reduced further (avg divides once, at the end).
template <typename T> __device__ __forceinline__ uint4 pack_partial(const AccPack<T>& a) {
  Pack<T> p;
#pragma unroll
  for (int i = 0; i < Pack<T>::kElems; ++i) p.elems[i] = from_acc<T>(a.elems[i]);
  return p.raw;
}

// acc = acc (op) x, element-wise.
template <typename T, ReduceOp Op>
__device__ __forceinline__ void accumulate(AccPack<T>& acc, const AccPack<T>& x) {
#pragma unroll
  for (int i = 0; i < Pack<T>::kElems; ++i) acc.elems[i] = Reducer<Op>::apply(acc.elems[i], x.elems[i]);
}

// Reduces raw[0..world) in rank order (the order every rank uses, so every rank
// gets identical bits) and applies the op's final step (avg: divide by world).
template <typename T, ReduceOp Op>
__device__ __forceinline__ uint4 reduce_in_rank_order(const uint4 (&raw)[kMaxNodeRanks], int world) {
  AccPack<T> acc = unpack<T>(raw[0]);
#pragma unroll
  for (int r = 1; r < kMaxNodeRanks; ++r)
    if (r < world) accumulate<T, Op>(acc, unpack<T>(raw[r]));
  return pack_final<T, Op>(acc, world);
}

// ---------------------------------------------------------------- user memory

// User buffers may be unaligned and of any element count: the last pack may be
// partial. Padding elements are never stored back.
template <typename T>
__device__ __forceinline__ uint4 load_user_pack(const T* base, size_t pack, size_t count, bool aligned) {
  constexpr int N = Pack<T>::kElems;
  const size_t first = pack * N;
  if (aligned && first + N <= count) return device::load16(base + first);
  Pack<T> p;
  p.raw = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (first + i < count) p.elems[i] = base[first + i];
  return p.raw;
}

template <typename T>
__device__ __forceinline__ void store_user_pack(T* base, size_t pack, size_t count, bool aligned, uint4 raw) {
  constexpr int N = Pack<T>::kElems;
  const size_t first = pack * N;
  if (aligned && first + N <= count) {
    device::store16(base + first, raw);
    return;
  }
  Pack<T> p;
  p.raw = raw;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (first + i < count) base[first + i] = p.elems[i];
}

template <typename T> __device__ __forceinline__ void store_acc(void* dst, const AccPack<T>& a) {
#pragma unroll
  for (int v = 0; v < AccPack<T>::kVecs; ++v) device::store16(static_cast<uint4*>(dst) + v, a.raw[v]);
}
template <typename T> __device__ __forceinline__ AccPack<T> load_acc(const void* src) {
  AccPack<T> a;
#pragma unroll
  for (int v = 0; v < AccPack<T>::kVecs; ++v) a.raw[v] = device::load16(static_cast<const uint4*>(src) + v);
  return a;
}

// ---------------------------------------------------------------- epoch

// NOTE [AllReduce epoch]
// Every launch of any algorithm on one AllReduce is numbered by a device-side
// epoch (1, 2, 3, ...), identical on every rank because every rank makes the same
// calls in the same order. Flags carry values derived from the epoch and only
// grow, so waits are `flag >= expected` and no flag is ever reset. Every block
// reads the epoch at its start; the last block to finish increments it, after
// which the next launch on the stream sees the next number. Keeping it on the
// device makes graph replays advance it without host involvement. The increment
// is device::epoch_after (NOTE [Epoch tags]): it skips epochs whose low 32 bits
// are 0, so those bits are a never-zero tag (NOTE [LL lines]).
__device__ __forceinline__ uint64_t read_epoch(const EpochState* state) {
  return *reinterpret_cast<const volatile uint64_t*>(&state->epoch) + 1;
}

// A block's reads of the epoch are ordered before the count by the barrier and
// the count's release; the last block's acquire orders every block's reads
// before its increment. The next launch on the stream sees the increment (the
// kernel boundary), so no fence follows it. A grid of one block has read the
// epoch by the barrier, so it skips the count (the tail of LL calls <= 4 KB).
__device__ __forceinline__ void finish_epoch(EpochState* state) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) {
    state->epoch = device::epoch_after(state->epoch + 1) - 1;
    return;
  }
  if (device::count_block_acq_rel(&state->blocks_done) == gridDim.x - 1) {
    state->blocks_done = 0;
    state->epoch = device::epoch_after(state->epoch + 1) - 1;
  }
}

// ---------------------------------------------------------------- launches

// NOTE [AllReduce launches]
// The one-shot kernels (fenced, LL and pipelined; the latency-bound ones up to 2 MiB) are
// launched with programmatic stream serialization where
// LaunchTuning::dependent_launch says so (compute capability 9.0+, one rank per
// GPU; off with FERRY_ALLREDUCE_PDL=0). Such a kernel starts with
// start_launch(): it waits for the grid before it on the stream (done, memory
// visible: what a kernel boundary gives), then lets the next launch start. So
// the next call's launch and block placement overlap this call (2xH200, bf16,
// graph replay: 8 KB 4.5 -> 4.0 us, 128 KB 5.7 -> 5.3; eager all_reduce_perf
// through the NCCL shim, 128 KB 6.5 -> 5.9), and nothing a kernel reads (user
// input, the epoch, scratch, flags) is read before the work ahead of it on the
// stream is complete.
// The trigger comes after the wait on purpose: triggered first, every queued
// call can become resident at once, each waiting on the one before, and fill
// the GPU. (That version timed out in the one-shot exchange with 4 and 8 ranks
// sharing 2 GPUs under MPS, where a peer's blocks need the same SMs; this is
// the likely cause.) After the wait, at most the next grid waits beside a
// running one. Ranks sharing a GPU still get plain launches: a waiting grid per
// rank could still crowd out a peer's grid on the same GPU.
// A grid launched without the attribute (user kernels, the other algorithms)
// waits for this one to complete, as usual. The pipelined one-shot (2 ranks,
// 2 MiB and up) is a dependent launch too: 2xH100, bf16, same binary with and
// without, 4 MB 22.2 -> 21.5 us, 8 MB 35.7 -> 35.1, 16-32 MB unchanged (session
// 14, docs/results/session14_2xH100 c1). Two-shot stays a plain launch: with the
// attribute, its 1 MB calls took 3-6% longer, and calls split into several
// launches (64-128 MB) varied by up to 4%.
__device__ __forceinline__ void start_launch() {
  device::wait_prior_grid();
  device::allow_dependent_launch();
}

// Every NVLink AllReduce launch: `dependent` asks for programmatic stream
// serialization (the one-shot kernels, NOTE [AllReduce launches]).
template <typename... Args>
void launch_kernel(void (*kernel)(Args...), int blocks, int threads, bool dependent, cudaStream_t stream,
                   const Params& p) {
  launch_dependent(kernel, dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(threads)), 0, stream,
                   dependent, p);
}

// ---------------------------------------------------------------- dispatch

// Calls fn(T{}, std::integral_constant<ReduceOp, op>{}) for the runtime type/op.
template <typename Fn> void dispatch_type_op(DataType type, ReduceOp op, Fn&& fn) {
  auto with_type = [&](auto type_tag) {
    switch (op) {
      case ReduceOp::kSum: return fn(type_tag, std::integral_constant<ReduceOp, ReduceOp::kSum>{});
      case ReduceOp::kProd: return fn(type_tag, std::integral_constant<ReduceOp, ReduceOp::kProd>{});
      case ReduceOp::kMin: return fn(type_tag, std::integral_constant<ReduceOp, ReduceOp::kMin>{});
      case ReduceOp::kMax: return fn(type_tag, std::integral_constant<ReduceOp, ReduceOp::kMax>{});
      case ReduceOp::kAvg: return fn(type_tag, std::integral_constant<ReduceOp, ReduceOp::kAvg>{});
    }
    FERRY_THROW(InvalidArgument, "unsupported reduce op " << static_cast<int>(op));
  };
  switch (type) {
    case DataType::kFloat32: return with_type(float{});
    case DataType::kFloat64: return with_type(double{});
    case DataType::kInt32: return with_type(int32_t{});
    case DataType::kInt64: return with_type(int64_t{});
    case DataType::kBFloat16: return with_type(__nv_bfloat16{});
    case DataType::kFloat16: return with_type(__half{});
    case DataType::kFloat8E4M3: break;  // not a reduction type (rejected by validate_call)
  }
  FERRY_THROW(InvalidArgument, "unsupported data type " << static_cast<int>(type));
}

// Packs of shard q when num_packs are cut into shards of shard_packs (the last
// shards may be short or empty).
__host__ __device__ __forceinline__ size_t shard_length(int q, size_t shard_packs, size_t num_packs) {
  const size_t first = static_cast<size_t>(q) * shard_packs;
  return first >= num_packs ? 0 : (num_packs - first < shard_packs ? num_packs - first : shard_packs);
}

// Contiguous split of [0, total) into `parts`: the range of part `index`.
__host__ __device__ __forceinline__ void split_range(size_t total, size_t parts, size_t index, size_t* begin,
                                                     size_t* end) {
  const size_t base = total / parts, extra = total % parts;
  *begin = index * base + (index < extra ? index : extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}

}  // namespace ferry::allreduce
