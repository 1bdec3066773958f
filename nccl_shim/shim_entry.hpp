// The start of every exported function of libferry_nccl.so: the real NCCL's
// entry point, and the shim's record of a communicator argument.
#pragma once

#include <nccl.h>

#include <string>

#include "real_nccl.hpp"
#include "shim_comm.hpp"

// The real NCCL, with `fn` resolved; else an error naming what is missing.
// Every entry point starts here, which also forgets the shim's last error text:
// ncclGetLastError then shows NCCL's for a call NCCL failed after one the shim failed.
#define FERRY_NCCL_REAL(fn)                                                                              \
  ferry::nccl_shim::clear_last_error();                                                                  \
  const ferry::nccl_shim::RealNccl& r = ferry::nccl_shim::real_nccl();                                   \
  if (r.fn == nullptr)                                                                                   \
    return ferry::nccl_shim::fail(ncclInvalidUsage,                                                      \
                                  r.handle == nullptr ? r.error                                          \
                                                      : std::string("libferry_nccl: the loaded NCCL (") + \
                                                            r.path + ") has no " #fn);

// The live record of `comm`, else ncclInvalidArgument.
#define FERRY_NCCL_COMM(c, comm, fn)                                                                            \
  ncclComm* c = ferry::nccl_shim::live(comm);                                                                    \
  if (c == nullptr)                                                                                              \
    return ferry::nccl_shim::fail(ncclInvalidArgument, std::string(#fn ": ") +                                   \
                                         (comm == nullptr ? "the communicator is null"                           \
                                                          : "not a live communicator (destroyed)"));

// The whole body of a function that only forwards with `comm`'s real handle:
// the arguments name it `c->real` in its place.
#define FERRY_NCCL_FORWARD(fn, comm, ...) \
  FERRY_NCCL_REAL(fn);                   \
  FERRY_NCCL_COMM(c, comm, fn);          \
  return r.fn(__VA_ARGS__)
