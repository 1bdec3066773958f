// libferry_nccl.so: NCCL's C API (nccl.h). ncclAllReduce runs on ferry where
// ferry handles the call (route_allreduce); every other call, and every call
// ferry does not take, goes to the real NCCL (NOTE [Real NCCL]) with the
// handle unwrapped (NOTE [Shim communicators]).
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "common/knobs.hpp"
#include "ferry_nccl_ext.h"
#include "ferry/error.hpp"
#include "ferry/types.hpp"
#include "real_nccl.hpp"
#include "shim_comm.hpp"
#include "shim_entry.hpp"

using ferry::nccl_shim::fail;
using ferry::nccl_shim::live;
using ferry::nccl_shim::real_nccl;
using ferry::nccl_shim::RealNccl;

namespace {

std::optional<ferry::DataType> ferry_type(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32: return ferry::DataType::kFloat32;
    case ncclFloat16: return ferry::DataType::kFloat16;
    case ncclBfloat16: return ferry::DataType::kBFloat16;
    case ncclFloat64: return ferry::DataType::kFloat64;
    case ncclInt32: return ferry::DataType::kInt32;
    case ncclInt64: return ferry::DataType::kInt64;
    default: return std::nullopt;  // 8-bit, unsigned and fp8 types
  }
}

std::optional<ferry::ReduceOp> ferry_op(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return ferry::ReduceOp::kSum;
    case ncclProd: return ferry::ReduceOp::kProd;
    case ncclMin: return ferry::ReduceOp::kMin;
    case ncclMax: return ferry::ReduceOp::kMax;
    case ncclAvg: return ferry::ReduceOp::kAvg;
    default: return std::nullopt;  // ncclRedOpCreatePreMulSum's ops
  }
}

void log_route(const ncclComm* c, size_t count, ncclDataType_t type, ncclRedOp_t op, const char* route,
               const std::string& why) {
  if (!ferry::nccl_shim::log_on()) return;
  std::fprintf(stderr, "[ferry-nccl] rank %d: ncclAllReduce count %zu type %d op %d -> %s%s%s\n", c->rank, count,
               static_cast<int>(type), static_cast<int>(op), route, why.empty() ? "" : ": ", why.c_str());
}

// Why ferry does not take this call, or "" when it does. The same on every
// rank of a collective call (it depends on the call's arguments, the thread's
// group nesting and the communicator only).
std::string not_for_ferry(const ncclComm* c, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  if (!c->no_ferry.empty()) return c->no_ferry;
  if (c->suspended.load()) return "suspended (ncclCommSuspend)";
  if (ferry::nccl_shim::group_depth() > 0) return "inside ncclGroupStart/End";
  const std::optional<ferry::DataType> t = ferry_type(type);
  if (!t) return "a datatype ferry's AllReduce lacks";
  if (!ferry_op(op)) return "an op ferry's AllReduce lacks";
  const size_t bytes = count * ferry::dtype_size(*t);
  if (bytes == 0) return "no elements";
  return "";
}

// Calls larger than the AllReduce's max_bytes (FERRY_NCCL_SHIM_MAX_BYTES) run as
// pieces of max_bytes, one after another on the stream (the op is elementwise,
// so pieces are independent; each keeps the pointers' alignment, max_bytes
// being a multiple of 16). A piece that ferry refuses is refused before
// anything launched, since every piece has the first one's type, op and
// alignment, so NCCL can still take the whole call. 2xH200, bf16, ferry-bench:
// 64 MB in ferry 213 us vs NCCL 248, so 128-256 MB calls gain from ferry too.
void run_in_pieces(ferry::AllReduce& allreduce, const void* send, void* recv, size_t count, ferry::DataType type,
                   ferry::ReduceOp op, cudaStream_t stream) {
  const size_t elem = ferry::dtype_size(type);
  const size_t piece = std::max<size_t>(1, allreduce.max_bytes() / 16 * 16 / elem);
  for (size_t done = 0; done < count; done += piece) {
    try {
      allreduce.run(static_cast<const char*>(send) + done * elem, static_cast<char*>(recv) + done * elem,
                    std::min(piece, count - done), type, op, stream);
    } catch (const ferry::InvalidArgument& e) {
      if (done == 0) throw;  // nothing launched: NCCL may take the call
      // Not expected (see above); an in-place call half reduced must not go to NCCL.
      FERRY_THROW(ferry::Error, "a later piece was refused: " << e.what());
    }
  }
}

// The end of every ncclCommInit*: NCCL's result (ncclInProgress: a non-blocking
// init under way) with the shim's record of the new communicator handed out.
ncclResult_t hand_out(ncclResult_t res, ncclComm_t real, ncclComm_t* comm, bool with_ferry, const char* why) {
  if (res != ncclSuccess && res != ncclInProgress) return res;
  *comm = ferry::nccl_shim::wrap(real, with_ferry, why);
  return res;
}
constexpr const char* kNonBlocking = "a non-blocking communicator (config->blocking = 0)";
// A non-blocking communicator may still be initializing: ferry's set-up would wait on it.
bool blocking(const ncclConfig_t* config) { return config == nullptr || config->blocking != 0; }

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  FERRY_NCCL_REAL(ncclGetVersion);
  return r.ncclGetVersion(version);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  FERRY_NCCL_REAL(ncclGetUniqueId);
  return r.ncclGetUniqueId(id);
}

const char* ncclGetErrorString(ncclResult_t result) {
  const RealNccl& r = real_nccl();
  return r.ncclGetErrorString != nullptr ? r.ncclGetErrorString(result) : "unknown (the real NCCL is not loaded)";
}

const char* ncclGetLastError(ncclComm_t comm) {
  const char* mine = ferry::nccl_shim::last_error();
  if (mine[0] != '\0') return mine;
  const RealNccl& r = real_nccl();
  if (r.ncclGetLastError == nullptr) return r.error.c_str();
  ncclComm* c = live(comm);
  return r.ncclGetLastError(c != nullptr ? c->real : nullptr);
}

// ---------------------------------------------------------------- communicators


ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  FERRY_NCCL_REAL(ncclCommInitRank);
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is null");
  ncclComm_t real = nullptr;
  const ncclResult_t res = r.ncclCommInitRank(&real, nranks, id, rank);
  return hand_out(res, real, comm, true, "");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  FERRY_NCCL_REAL(ncclCommInitRankConfig);
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRankConfig: comm is null");
  ncclComm_t real = nullptr;
  const ncclResult_t res = r.ncclCommInitRankConfig(&real, nranks, id, rank, config);
  return hand_out(res, real, comm, blocking(config), kNonBlocking);
}

#ifdef FERRY_NCCL_HAS_ncclCommInitRankScalable
ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nids, ncclUniqueId* ids,
                                      ncclConfig_t* config) {
  FERRY_NCCL_REAL(ncclCommInitRankScalable);
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRankScalable: comm is null");
  ncclComm_t real = nullptr;
  const ncclResult_t res = r.ncclCommInitRankScalable(&real, nranks, rank, nids, ids, config);
  return hand_out(res, real, comm, blocking(config), kNonBlocking);
}
#endif

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  FERRY_NCCL_REAL(ncclCommInitAll);
  if (comms == nullptr) return fail(ncclInvalidArgument, "ncclCommInitAll: comms is null");
  const ncclResult_t res = r.ncclCommInitAll(comms, ndev, devlist);
  if (res != ncclSuccess) return res;
  // One process drives every GPU here; ferry runs one process per GPU.
  for (int i = 0; i < ndev; ++i)
    comms[i] = ferry::nccl_shim::wrap(comms[i], false, "ncclCommInitAll (one process, several GPUs)");
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  FERRY_NCCL_REAL(ncclCommSplit);
  FERRY_NCCL_COMM(c, comm, ncclCommSplit);
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is null");
  ncclComm_t real = nullptr;
  const ncclResult_t res = r.ncclCommSplit(c->real, color, key, &real, config);
  if (res != ncclSuccess && res != ncclInProgress) return res;  // in progress: non-blocking
  *newcomm = real == nullptr || c->pass_through ? real  // NCCL_SPLIT_NOCOLOR; a real parent's child stays real
                                                : ferry::nccl_shim::wrap(real, blocking(config), kNonBlocking);
  return res;
}

#ifdef FERRY_NCCL_HAS_ncclCommShrink
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int count, ncclComm_t* newcomm, ncclConfig_t* config,
                            int flags) {
  FERRY_NCCL_REAL(ncclCommShrink);
  FERRY_NCCL_COMM(c, comm, ncclCommShrink);
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommShrink: newcomm is null");
  ncclComm_t real = nullptr;
  const ncclResult_t res = r.ncclCommShrink(c->real, exclude, count, &real, config, flags);
  if (res != ncclSuccess && res != ncclInProgress) return res;  // in progress: non-blocking
  *newcomm = real == nullptr || c->pass_through ? real : ferry::nccl_shim::wrap(real, false, "made by ncclCommShrink");
  return res;
}
#endif

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  FERRY_NCCL_FORWARD(ncclCommFinalize, comm, c->real);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  FERRY_NCCL_REAL(ncclCommDestroy);
  FERRY_NCCL_COMM(c, comm, ncclCommDestroy);
  ncclComm_t real = c->real;
  ferry::nccl_shim::retire(c);
  return r.ncclCommDestroy(real);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  FERRY_NCCL_REAL(ncclCommAbort);
  FERRY_NCCL_COMM(c, comm, ncclCommAbort);
  ncclComm_t real = c->real;
  ferry::nccl_shim::retire(c);
  return r.ncclCommAbort(real);
}

#ifdef FERRY_NCCL_HAS_ncclCommRevoke
ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
  FERRY_NCCL_FORWARD(ncclCommRevoke, comm, c->real, flags);
}
#endif

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  FERRY_NCCL_FORWARD(ncclCommGetAsyncError, comm, c->real, error);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  FERRY_NCCL_FORWARD(ncclCommCount, comm, c->real, count);
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  FERRY_NCCL_FORWARD(ncclCommCuDevice, comm, c->real, device);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  FERRY_NCCL_FORWARD(ncclCommUserRank, comm, c->real, rank);
}

// ---------------------------------------------------------------- memory and registration

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  FERRY_NCCL_REAL(ncclMemAlloc);
  return r.ncclMemAlloc(ptr, size);
}

ncclResult_t ncclMemFree(void* ptr) {
  FERRY_NCCL_REAL(ncclMemFree);
  return r.ncclMemFree(ptr);
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  FERRY_NCCL_FORWARD(ncclCommRegister, comm, c->real, buff, size, handle);
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  FERRY_NCCL_FORWARD(ncclCommDeregister, comm, c->real, handle);
}

#ifdef FERRY_NCCL_HAS_ncclCommWindowRegister
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags) {
  FERRY_NCCL_FORWARD(ncclCommWindowRegister, comm, c->real, buff, size, win, flags);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclCommWindowDeregister
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  FERRY_NCCL_FORWARD(ncclCommWindowDeregister, comm, c->real, win);
}
#endif

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  FERRY_NCCL_FORWARD(ncclRedOpCreatePreMulSum, comm, op, scalar, type, residence, c->real);
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  FERRY_NCCL_FORWARD(ncclRedOpDestroy, comm, op, c->real);
}

// ---------------------------------------------------------------- collectives

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  FERRY_NCCL_REAL(ncclAllReduce);
  FERRY_NCCL_COMM(c, comm, ncclAllReduce);
  std::string why = ferry::nccl_shim::shim_on() ? not_for_ferry(c, count, type, op) : "FERRY_NCCL_SHIM=off";
  if (why.empty()) {
    try {
      run_in_pieces(*c->allreduce, send, recv, count, *ferry_type(type), *ferry_op(op), stream);
      c->allreduce_ferry.fetch_add(1, std::memory_order_relaxed);
      log_route(c, count, type, op, "ferry", "");
      return ncclSuccess;
    } catch (const ferry::InvalidArgument& e) {  // refused before launching anything: NCCL takes it
      why = e.what();
    } catch (const ferry::NotSupported& e) {
      why = e.what();
    } catch (const std::exception& e) {
      return fail(ncclInternalError, std::string("ncclAllReduce (ferry): ") + e.what());
    }
  }
  c->allreduce_forwarded.fetch_add(1, std::memory_order_relaxed);
  log_route(c, count, type, op, "NCCL", why);
  return r.ncclAllReduce(send, recv, count, type, op, c->real, stream);
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclReduce, comm, send, recv, count, type, op, root, c->real, stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclBcast, comm, buff, count, type, root, c->real, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclBroadcast, comm, send, recv, count, type, root, c->real, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclReduceScatter, comm, send, recv, count, type, op, c->real, stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclAllGather, comm, send, recv, count, type, c->real, stream);
}

ncclResult_t ncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                          cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclAlltoAll, comm, send, recv, count, type, c->real, stream);
}

ncclResult_t ncclGather(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclGather, comm, send, recv, count, type, root, c->real, stream);
}

ncclResult_t ncclScatter(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                         cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclScatter, comm, send, recv, count, type, root, c->real, stream);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclSend, comm, send, count, type, peer, c->real, stream);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclRecv, comm, recv, count, type, peer, c->real, stream);
}

// ---------------------------------------------------------------- groups

ncclResult_t ncclGroupStart() {
  FERRY_NCCL_REAL(ncclGroupStart);
  const ncclResult_t res = r.ncclGroupStart();
  if (res == ncclSuccess) ferry::nccl_shim::group_start();
  return res;
}

ncclResult_t ncclGroupEnd() {
  FERRY_NCCL_REAL(ncclGroupEnd);
  const ncclResult_t res = r.ncclGroupEnd();
  ferry::nccl_shim::group_end(res == ncclSuccess);  // NOTE [Communicators made inside a group]
  return res;
}

#ifdef FERRY_NCCL_HAS_ncclGroupSimulateEnd
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* info) {
  FERRY_NCCL_REAL(ncclGroupSimulateEnd);
  const ncclResult_t res = r.ncclGroupSimulateEnd(info);
  ferry::nccl_shim::group_end(false);
  return res;
}
#endif

// ---------------------------------------------------------------- the shim's own (ferry_nccl_ext.h)

ncclResult_t ferryNcclShimStats(ncclComm_t comm, ferryNcclShimStats_t* stats) {
  FERRY_NCCL_COMM(c, comm, ferryNcclShimStats);
  if (stats == nullptr) return fail(ncclInvalidArgument, "ferryNcclShimStats: stats is null");
  stats->allreduce_ferry = c->allreduce_ferry.load(std::memory_order_relaxed);
  stats->allreduce_forwarded = c->allreduce_forwarded.load(std::memory_order_relaxed);
  stats->ferry_serves = c->allreduce != nullptr && c->no_ferry.empty() ? 1 : 0;
  stats->max_bytes = stats->ferry_serves ? c->allreduce->max_bytes() : 0;
  stats->no_ferry = c->no_ferry.c_str();
  return ncclSuccess;
}

}  // extern "C"
