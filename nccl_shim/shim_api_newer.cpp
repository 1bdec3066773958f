// The functions NCCL 2.30 added to nccl.h, and the host functions of NCCL's
// device API (nccl_device.h, 2.28+) that take a communicator, each defined where
// the headers built against declare it (FERRY_NCCL_HAS_*, CMake checks).
// Without them a program calling one would reach the real NCCL directly with
// the shim's handle, which NCCL cannot read. Each forwards with the handle
// unwrapped (NOTE [Shim communicators]); none of them runs on ferry.
#include <nccl.h>

#include <cstdint>
#include <string>

#include "ferry_nccl_optional.h"
#include "shim_entry.hpp"

using ferry::nccl_shim::fail;

extern "C" {

#ifdef FERRY_NCCL_HAS_ncclCommGetUniqueId
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  FERRY_NCCL_FORWARD(ncclCommGetUniqueId, comm, c->real, uniqueId);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclCommGrow
// Ranks that join pass comm = NULL. The grown communicator stays on NCCL, as
// ncclCommShrink's does: ferry would need every rank, old and new, to set up
// together, which the joining ranks cannot know to do.
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config) {
  FERRY_NCCL_REAL(ncclCommGrow);
  ncclComm_t real_old = nullptr;
  bool pass_through = false;
  if (comm != nullptr) {
    FERRY_NCCL_COMM(c, comm, ncclCommGrow);
    real_old = c->real;
    pass_through = c->pass_through;
  }
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommGrow: newcomm is null");
  ncclComm_t real = nullptr;
  const ncclResult_t res = r.ncclCommGrow(real_old, nRanks, uniqueId, rank, &real, config);
  if (res != ncclSuccess && res != ncclInProgress) return res;  // in progress: non-blocking
  *newcomm = real == nullptr || pass_through ? real : ferry::nccl_shim::wrap(real, false, "made by ncclCommGrow");
  return res;
}
#endif

#ifdef FERRY_NCCL_HAS_ncclCommSuspend
// A suspended communicator "cannot be used": its ncclAllReduce calls go to NCCL
// (which reports that), not to ferry, until ncclCommResume.
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  FERRY_NCCL_REAL(ncclCommSuspend);
  FERRY_NCCL_COMM(c, comm, ncclCommSuspend);
  const ncclResult_t res = r.ncclCommSuspend(c->real, flags);
  if (res == ncclSuccess || res == ncclInProgress) c->suspended.store(true);
  return res;
}
#endif

#ifdef FERRY_NCCL_HAS_ncclCommResume
ncclResult_t ncclCommResume(ncclComm_t comm) {
  FERRY_NCCL_REAL(ncclCommResume);
  FERRY_NCCL_COMM(c, comm, ncclCommResume);
  const ncclResult_t res = r.ncclCommResume(c->real);
  if (res == ncclSuccess) c->suspended.store(false);
  return res;
}
#endif

#ifdef FERRY_NCCL_HAS_ncclCommMemStats
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  FERRY_NCCL_FORWARD(ncclCommMemStats, comm, c->real, stat, value);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclWinGetUserPtr
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  FERRY_NCCL_FORWARD(ncclWinGetUserPtr, comm, c->real, win, outUserPtr);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclPutSignal
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclPutSignal, comm, localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags,
                     c->real, stream);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclSignal
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclSignal, comm, peer, sigIdx, ctx, flags, c->real, stream);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclWaitSignal
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream) {
  FERRY_NCCL_FORWARD(ncclWaitSignal, comm, nDesc, signalDescs, c->real, stream);
}
#endif

// The parameter API takes no communicator: passed through as it is.
#ifdef FERRY_NCCL_HAS_ncclParamBind
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  FERRY_NCCL_REAL(ncclParamBind);
  return r.ncclParamBind(out, key);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclParamGet
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  FERRY_NCCL_REAL(ncclParamGet);
  return r.ncclParamGet(h, out, maxLen, len);
}
#endif

// The typed getters: ncclParamGetI8 .. ncclParamGetU64.
#define FERRY_NCCL_PARAM_GETTER(name, type)             \
  ncclResult_t name(ncclParamHandle_t h, type* out) {   \
    FERRY_NCCL_REAL(name);                              \
    return r.name(h, out);                              \
  }
#ifdef FERRY_NCCL_HAS_ncclParamGetI8
FERRY_NCCL_PARAM_GETTER(ncclParamGetI8, int8_t)
#endif
#ifdef FERRY_NCCL_HAS_ncclParamGetI16
FERRY_NCCL_PARAM_GETTER(ncclParamGetI16, int16_t)
#endif
#ifdef FERRY_NCCL_HAS_ncclParamGetI32
FERRY_NCCL_PARAM_GETTER(ncclParamGetI32, int32_t)
#endif
#ifdef FERRY_NCCL_HAS_ncclParamGetI64
FERRY_NCCL_PARAM_GETTER(ncclParamGetI64, int64_t)
#endif
#ifdef FERRY_NCCL_HAS_ncclParamGetU8
FERRY_NCCL_PARAM_GETTER(ncclParamGetU8, uint8_t)
#endif
#ifdef FERRY_NCCL_HAS_ncclParamGetU16
FERRY_NCCL_PARAM_GETTER(ncclParamGetU16, uint16_t)
#endif
#ifdef FERRY_NCCL_HAS_ncclParamGetU32
FERRY_NCCL_PARAM_GETTER(ncclParamGetU32, uint32_t)
#endif
#ifdef FERRY_NCCL_HAS_ncclParamGetU64
FERRY_NCCL_PARAM_GETTER(ncclParamGetU64, uint64_t)
#endif
#undef FERRY_NCCL_PARAM_GETTER

#ifdef FERRY_NCCL_HAS_ncclParamGetStr
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  FERRY_NCCL_REAL(ncclParamGetStr);
  return r.ncclParamGetStr(h, out);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclParamGetParameter
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  FERRY_NCCL_REAL(ncclParamGetParameter);
  return r.ncclParamGetParameter(key, value, valueLen);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclParamGetAllParameterKeys
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  FERRY_NCCL_REAL(ncclParamGetAllParameterKeys);
  return r.ncclParamGetAllParameterKeys(table, tableLen);
}
#endif

// NCCL's device API (nccl_device.h): the host functions that take a
// communicator. The device communicator NCCL fills in is NCCL's own.
#ifdef FERRY_NCCL_HAS_ncclDevCommCreate
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm) {
  FERRY_NCCL_FORWARD(ncclDevCommCreate, comm, c->real, reqs, outDevComm);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclDevCommDestroy
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  FERRY_NCCL_FORWARD(ncclDevCommDestroy, comm, c->real, devComm);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclGinBarrierCreateRequirement
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  FERRY_NCCL_FORWARD(ncclGinBarrierCreateRequirement, comm, c->real, team, nBarriers, outHandle, outReq);
}
#endif

#ifdef FERRY_NCCL_HAS_ncclCommQueryProperties
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  FERRY_NCCL_FORWARD(ncclCommQueryProperties, comm, c->real, props);
}
#endif

}  // extern "C"
