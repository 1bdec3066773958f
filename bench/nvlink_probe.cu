// ferry-bench nvlink: how fast one GPU moves bytes to its NVLink peers, by
// method and by the number of SMs it spends, all ranks at once (an all-to-all,
// the traffic pattern of EP). It answers the design questions of the EP and
// AllReduce kernels: what a few SMs of 16-byte stores can push, what a release
// flag per item costs, whether pulling (remote loads) or the TMA bulk engine or
// the copy engines do better.
//
// Methods (each rank sends `--bytes` to every peer, in items of `--item-bytes`,
// items spread over the warps of `--sms` blocks):
//   store          warp loads 8 x 16 B per lane from local memory, stores them to the peer
//   store_release  store, plus one system-scope release flag store per item (EP's pattern)
//   pull           warp loads from the peer's memory, stores locally
//   tma            lane 0 of each warp: bulk copy global->shared, then shared->peer global
//   copy_engine    cudaMemcpyAsync per peer on its own stream (no SMs; one row)
//   store_local    store, plus the same item into a local buffer (the rank-rows
//                  dispatch's send pattern: every row to the peer and to this rank)
//   store_split    store_local's bytes, but the first 2/3 of the blocks only store to
//                  peers and the rest only write the local copies (SMs split by role)
//   local_x4       no NVLink: each item into 4 rows of a local buffer (the local
//                  expansion of the expanded EP layout, ~4 local experts a token)
//   local_x4_tma   local_x4 with the bulk-copy engine (one load to shared, 4 bulk stores)
//   local_sum4     no NVLink: 4 local bf16 rows per item summed in fp32 with weights into
//                  one local row (the expanded EP combine's reads); GB/s: bytes read / time
// GB/s: bytes this rank sends to (pull: gets from) its peers / time (local_x4:
// bytes it writes locally / time); median of CUDA-graph replays, max time over
// ranks. Every method's result is checked.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/symmetric_heap.hpp"
#include "nvlink_probe_kernels.cuh"

namespace ferry::bench {
namespace {
using namespace nvlink_probe;  // the kernels, Params and Method (nvlink_probe_kernels.cuh)
}  // namespace

void print_nvlink_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np N ferry-bench nvlink [--sms 4,8,...] [--bytes 32M] [--item-bytes 14336]\n"
               "                                       [--threads 1024] [--csv FILE]\n"
               "Egress GB/s per GPU of an all-to-all by method (store, store_release, pull, tma,\n"
               "copy_engine, store_local, store_split) and SM count; local_x4(_tma): local write GB/s of a 1-to-4 row\n"
               "copy; local_sum4: local read GB/s of a 4-to-1 weighted bf16 row sum.\n");
}

int run_nvlink_probe(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const CopyProbeOptions o = parse_copy_probe_options(std::move(args));
  if (o.registered_host) throw UsageError("--registered-host is an option of ferry-bench pcie");
  const bool leader = bootstrap->rank() == 0;
  start_gpu_subcommand(*bootstrap);
  Communicator comm(bootstrap);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  const int W = comm.size();
  require_one_node(comm, 2, kMaxPeers);

  Params p{};
  p.rank = comm.rank();
  p.world_size = W;
  p.item_bytes = o.item_bytes;
  p.items_per_peer = int(o.bytes / o.item_bytes);
  p.per_peer_bytes = (size_t(p.items_per_peer) * o.item_bytes + 4095) / 4096 * 4096;
  const SymmetricBuffer src = comm.heap().allocate(p.per_peer_bytes * W);
  const SymmetricBuffer dst = comm.heap().allocate(p.per_peer_bytes * W);
  const SymmetricBuffer flags = comm.heap().allocate(kFlagWords * sizeof(uint64_t));
  DeviceBuffer local(size_t(kLocalFanout) * W * p.per_peer_bytes);
  p.local = static_cast<uint8_t*>(local.get());
  for (int r = 0; r < W; ++r) {
    p.src[r] = static_cast<uint8_t*>(src.peer(r));
    p.dst[r] = static_cast<uint8_t*>(dst.peer(r));
    p.flags[r] = static_cast<uint64_t*>(flags.peer(r));
  }
  CudaStream stream;
  std::vector<std::unique_ptr<CudaStream>> side;
  for (int i = 0; i < W - 1; ++i) side.push_back(std::make_unique<CudaStream>());
  cudaEvent_t fork, joins[kMaxPeers];
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (int i = 0; i < W - 1; ++i) FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&joins[i], cudaEventDisableTiming));
  const size_t tma_smem = size_t(o.threads / 32) * 2 * kTmaChunk;
  FERRY_CUDA_CHECK(cudaFuncSetAttribute(tma_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(tma_smem)));
  FERRY_CUDA_CHECK(
      cudaFuncSetAttribute(tma_kernel<kLocalFanout>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(tma_smem)));
  fill_kernel<<<132, 1024, 0, stream.get()>>>(p);
  FERRY_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  bootstrap->barrier();
  DeviceBuffer mismatches(sizeof(unsigned long long));

  auto enqueue = [&](Method m, int sms, cudaStream_t s) {
    switch (m) {
      case Method::kStore: copy_kernel<Method::kStore><<<sms, o.threads, 0, s>>>(p); break;
      case Method::kStoreRelease: copy_kernel<Method::kStoreRelease><<<sms, o.threads, 0, s>>>(p); break;
      case Method::kPull: copy_kernel<Method::kPull><<<sms, o.threads, 0, s>>>(p); break;
      case Method::kStoreLocal: copy_kernel<Method::kStoreLocal><<<sms, o.threads, 0, s>>>(p); break;
      case Method::kStoreSplit: copy_kernel<Method::kStoreSplit><<<sms, o.threads, 0, s>>>(p); break;
      case Method::kLocalX4: copy_kernel<Method::kLocalX4><<<sms, o.threads, 0, s>>>(p); break;
      case Method::kTma: tma_kernel<0><<<sms, o.threads, tma_smem, s>>>(p); break;
      case Method::kLocalX4Tma: tma_kernel<kLocalFanout><<<sms, o.threads, tma_smem, s>>>(p); break;
      case Method::kLocalSum4: sum_kernel<<<sms, o.threads, 0, s>>>(p); break;
      case Method::kCopyEngine: {
        FERRY_CUDA_CHECK(cudaEventRecord(fork, s));
        for (int j = 0; j < W - 1; ++j) {
          const int peer = (p.rank + 1 + j) % W;
          cudaStream_t cs = side[j]->get();
          FERRY_CUDA_CHECK(cudaStreamWaitEvent(cs, fork, 0));
          FERRY_CUDA_CHECK(cudaMemcpyAsync(p.dst[peer] + size_t(p.rank) * p.per_peer_bytes,
                                           p.src[p.rank] + size_t(peer) * p.per_peer_bytes,
                                           size_t(p.items_per_peer) * p.item_bytes, cudaMemcpyDeviceToDevice, cs));
          FERRY_CUDA_CHECK(cudaEventRecord(joins[j], cs));
          FERRY_CUDA_CHECK(cudaStreamWaitEvent(s, joins[j], 0));
        }
        break;
      }
    }
    FERRY_CUDA_CHECK(cudaGetLastError());
  };
  // Correct first: poisoned destination, one run, every peer's slice compared.
  auto check = [&](Method m, int sms) {
    FERRY_CUDA_CHECK(cudaMemset(p.dst[p.rank], 0xEE, p.per_peer_bytes * W));
    FERRY_CUDA_CHECK(cudaMemset(p.local, 0xEE, size_t(kLocalFanout) * W * p.per_peer_bytes));
    if (m == Method::kLocalSum4) fill_local_kernel<<<132, 1024>>>(p);  // after the memsets (legacy stream)
    FERRY_CUDA_CHECK(cudaMemset(mismatches.get(), 0, sizeof(unsigned long long)));
    FERRY_CUDA_CHECK(cudaDeviceSynchronize());
    bootstrap->barrier();
    enqueue(m, sms, stream.get());
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    bootstrap->barrier();
    unsigned long long* counter = static_cast<unsigned long long*>(mismatches.get());
    if (m == Method::kLocalX4 || m == Method::kLocalX4Tma) {
      check_kernel<<<132, 1024, 0, stream.get()>>>(p, kLocalFanout, counter);
    } else if (m == Method::kLocalSum4) {
      check_sums_kernel<<<132, 1024, 0, stream.get()>>>(p, counter);
    } else {
      check_kernel<<<132, 1024, 0, stream.get()>>>(p, 0, counter);
      if (m == Method::kStoreLocal || m == Method::kStoreSplit)
        check_kernel<<<132, 1024, 0, stream.get()>>>(p, 1, counter);
    }
    FERRY_CUDA_CHECK(cudaGetLastError());
    return no_mismatches_on_any_rank(*bootstrap, mismatches, stream.get());
  };

  const double gigabytes = double(W - 1) * p.items_per_peer * o.item_bytes / 1e9;
  if (leader) {
    std::printf("ferry-bench nvlink: %d ranks, all-to-all, %s per peer in %d-byte items, %d threads per block\n", W,
                format_byte_size(size_t(p.items_per_peer) * o.item_bytes).c_str(), o.item_bytes, o.threads);
    std::printf("  GB/s per GPU (bytes to or from its peers / time), median of graph replays, max time over ranks; "
                "'!' failed check\n");
  }
  CopyProbeTable table(leader, o);
  TimingOptions timing;
  timing.ops_per_graph = 4;
  for (Method m : {Method::kStore, Method::kStoreRelease, Method::kPull, Method::kTma, Method::kCopyEngine,
                   Method::kStoreLocal, Method::kStoreSplit, Method::kLocalX4, Method::kLocalX4Tma,
                   Method::kLocalSum4}) {
    table.begin_row(method_name(m));
    const std::vector<int> counts = m == Method::kCopyEngine ? std::vector<int>{0} : o.sms;
    for (int sms : counts) {
      const int blocks = std::min(sms, comm.num_sms());
      const bool ok = check(m, blocks);
      const TimingResult t = time_op({method_name(m), [&](cudaStream_t s) { enqueue(m, blocks, s); }, {}},
                                     stream.get(), *bootstrap, timing);
      const bool local = m == Method::kLocalX4 || m == Method::kLocalX4Tma || m == Method::kLocalSum4;
      const double gbps = (local ? kLocalFanout : 1) * gigabytes / (t.op_us * 1e-6);
      table.cell(method_name(m), blocks, t.op_us, gbps, ok);
    }
    table.end_row();
  }
  FERRY_CUDA_CHECK(cudaEventDestroy(fork));
  for (int i = 0; i < W - 1; ++i) FERRY_CUDA_CHECK(cudaEventDestroy(joins[i]));
  comm.heap().release(flags);
  comm.heap().release(dst);
  comm.heap().release(src);
  return 0;
}

}  // namespace ferry::bench
