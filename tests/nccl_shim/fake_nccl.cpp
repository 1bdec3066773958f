// A stand-in for the real NCCL, for the shim's CPU tests: one rank, host memory,
// every call counted (fake_nccl_calls). libferry_nccl.so loads it through
// FERRY_NCCL_LIBRARY like the real one.
#include <nccl.h>
#if __has_include(<nccl_device.h>) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#include <nccl_device.h>
#define FAKE_NCCL_DEVICE_API 1
#endif

#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {
std::mutex g_mutex;
std::map<std::string, int> g_calls;
void count(const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_calls[name];
}
struct FakeComm {
  static constexpr unsigned kMagic = 0xfa4ec033u;
  unsigned magic = kMagic;  // the shim must hand NCCL its own handles, never the shim's records
  int rank = 0, size = 1;
};
bool is_fake(ncclComm_t comm) {
  return comm != nullptr && reinterpret_cast<const FakeComm*>(comm)->magic == FakeComm::kMagic;
}
size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}
}  // namespace

extern "C" {
int fake_nccl_calls(const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_calls[name];
}
ncclResult_t ncclGetVersion(int* v) { count("ncclGetVersion"); *v = NCCL_VERSION_CODE; return ncclSuccess; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) { count("ncclGetUniqueId"); std::memset(id, 7, sizeof(*id)); return ncclSuccess; }
const char* ncclGetErrorString(ncclResult_t) { return "fake NCCL error string"; }
const char* ncclGetLastError(ncclComm_t) { return "fake NCCL last error"; }
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  count("ncclCommInitRank");
  if (nranks != 1 || rank != 0) return ncclInvalidArgument;
  *comm = reinterpret_cast<ncclComm_t>(new FakeComm);
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int, ncclComm_t* newcomm, ncclConfig_t*) {
  count("ncclCommSplit");
  if (comm == nullptr) return ncclInvalidArgument;
  *newcomm = color == NCCL_SPLIT_NOCOLOR ? nullptr : reinterpret_cast<ncclComm_t>(new FakeComm);
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) { count("ncclCommDestroy"); delete reinterpret_cast<FakeComm*>(comm); return ncclSuccess; }
ncclResult_t ncclCommCount(const ncclComm_t comm, int* n) { *n = reinterpret_cast<const FakeComm*>(comm)->size; return ncclSuccess; }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* r) { *r = reinterpret_cast<const FakeComm*>(comm)->rank; return ncclSuccess; }
ncclResult_t ncclCommCuDevice(const ncclComm_t, int* d) { *d = 0; return ncclSuccess; }
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t n, ncclDataType_t t, ncclRedOp_t, ncclComm_t comm, cudaStream_t) {
  count("ncclAllReduce");
  if (!is_fake(comm)) return ncclInvalidArgument;
  if (send != recv) std::memmove(recv, send, n * type_size(t));  // one rank: the sum is the input
  return ncclSuccess;
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t n, ncclDataType_t t, ncclComm_t, cudaStream_t) {
  count("ncclAllGather");
  std::memmove(recv, send, n * type_size(t));
  return ncclSuccess;
}
ncclResult_t ncclGroupStart() { count("ncclGroupStart"); return ncclSuccess; }
ncclResult_t ncclGroupEnd() { count("ncclGroupEnd"); return ncclSuccess; }

#ifdef FAKE_NCCL_DEVICE_API
// The device API's host functions that take a communicator.
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  count("ncclDevCommCreate");
  return is_fake(comm) ? ncclSuccess : ncclInvalidArgument;
}
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const*) {
  count("ncclDevCommDestroy");
  return is_fake(comm) ? ncclSuccess : ncclInvalidArgument;
}
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
// Functions NCCL 2.30 added (the shim defines them where its nccl.h has them).
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* id) {
  count("ncclCommGetUniqueId");
  if (!is_fake(comm)) return ncclInvalidArgument;
  std::memset(id, 9, sizeof(*id));
  return ncclSuccess;
}
ncclResult_t ncclCommGrow(ncclComm_t comm, int nranks, const ncclUniqueId*, int, ncclComm_t* newcomm, ncclConfig_t*) {
  count("ncclCommGrow");
  if (comm != nullptr && !is_fake(comm)) return ncclInvalidArgument;  // joining ranks pass NULL
  auto* grown = new FakeComm;
  grown->size = nranks;
  *newcomm = reinterpret_cast<ncclComm_t>(grown);
  return ncclSuccess;
}
ncclResult_t ncclCommSuspend(ncclComm_t comm, int) { count("ncclCommSuspend"); return is_fake(comm) ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t ncclCommResume(ncclComm_t comm) { count("ncclCommResume"); return is_fake(comm) ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t comm, cudaStream_t) {
  count("ncclSignal");
  return is_fake(comm) ? ncclSuccess : ncclInvalidArgument;
}
ncclResult_t ncclParamGetParameter(const char*, const char** value, int* len) {
  count("ncclParamGetParameter");
  *value = "fake";
  *len = 4;
  return ncclSuccess;
}
#endif
}
