/* libferry_nccl.so's own additions to NCCL's API (C, like nccl.h): how a
 * communicator's ncclAllReduce calls were routed, for tests and benches that
 * must tell ferry's path from NCCL's. Resolve it with dlsym(RTLD_DEFAULT,
 * "ferryNcclShimStats") where the shim may be absent (a program run against the
 * real NCCL): the symbol is then missing instead of the program failing to load. */
#ifndef FERRY_NCCL_EXT_H_
#define FERRY_NCCL_EXT_H_

#include <nccl.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  unsigned long long allreduce_ferry;     /* ncclAllReduce calls ferry ran */
  unsigned long long allreduce_forwarded; /* ncclAllReduce calls handed to the real NCCL */
  int ferry_serves;                       /* 1: ferry is set up on this communicator */
  size_t max_bytes;                       /* its AllReduce's max_bytes: larger calls run in pieces of it (0: serves none) */
  const char* no_ferry;                   /* why ferry does not serve it ("" when it does); lives as long as
                                             the process (records are never freed) */
} ferryNcclShimStats_t;

/* ncclSuccess, or ncclInvalidArgument (with a ncclGetLastError text) for a null,
 * destroyed or foreign communicator or a null `stats`. */
ncclResult_t ferryNcclShimStats(ncclComm_t comm, ferryNcclShimStats_t* stats);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_NCCL_EXT_H_ */
