// libferry_nccl.so on the CPU, in front of a stand-in NCCL (fake_nccl.cpp):
// calls reach NCCL with the shim's handles unwrapped, results come back, and
// bad use gets NCCL's error codes and a ncclGetLastError text, never a crash.
// ferry itself cannot be set up without a GPU here, so every ncclAllReduce takes
// the forwarding path (its GPU tests are the ferry side).
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <dlfcn.h>

#include "ferry_nccl_ext.h"
#if __has_include(<nccl_device.h>) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#include <nccl_device.h>
#define SHIM_TEST_DEVICE_API 1
#endif

namespace {

int calls(const char* name) {
  // The stand-in is loaded by the shim (dlopen), not linked: find it the same way.
  using Fn = int (*)(const char*);
  static Fn fn = [] {
    void* h = dlopen(std::getenv("FERRY_NCCL_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
    return h ? reinterpret_cast<Fn>(dlsym(h, "fake_nccl_calls")) : nullptr;
  }();
  return fn ? fn(name) : -1;
}

ncclComm_t make_comm() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  return comm;
}

// Every function the nccl.h built against declares is the shim's own (defined in
// libferry_nccl, not resolved to NCCL), so no call can reach NCCL with the
// shim's handle. FERRY_TEST_NCCL_HEADER: that nccl.h (tests/CMakeLists.txt).
TEST(NcclShim, DefinesEveryFunctionOfItsNcclHeader) {
  std::ifstream header(FERRY_TEST_NCCL_HEADER);
  ASSERT_TRUE(header.good()) << FERRY_TEST_NCCL_HEADER;
  std::stringstream text;
  text << header.rdbuf();
  const std::string all = text.str();
  const std::regex declaration(R"((?:ncclResult_t|const char\s*\*)\s+(nccl[A-Za-z0-9_]+)\s*\()");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(all.begin(), all.end(), declaration); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1].str());
  ASSERT_GT(names.size(), 30u) << "parsed too few declarations from " << FERRY_TEST_NCCL_HEADER;
  Dl_info shim{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&ferryNcclShimStats), &shim), 0);
  for (const std::string& name : names) {
    void* fn = dlsym(RTLD_DEFAULT, name.c_str());
    Dl_info where{};
    ASSERT_NE(fn, nullptr) << name << " is declared in nccl.h but not defined by the shim";
    ASSERT_NE(dladdr(fn, &where), 0) << name;
    EXPECT_STREQ(where.dli_fname, shim.dli_fname) << name << " resolves outside the shim";
  }
}

TEST(NcclShim, ForwardsWithItsOwnHandles) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  ncclComm_t comm = make_comm();
  ASSERT_NE(comm, nullptr);
  int n = 0, rank = -1, device = -1;
  EXPECT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  EXPECT_EQ(ncclCommCuDevice(comm, &device), ncclSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(device, 0);

  std::vector<float> in = {1.5f, -2.f, 3.25f}, out(3, 0.f);
  const int before = calls("ncclAllReduce");
  EXPECT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(out, in);
  EXPECT_EQ(calls("ncclAllReduce"), before + 1);  // no GPU: ferry is not set up, NCCL took it

  std::vector<int> g_in = {4, 5}, g_out(2, 0);
  EXPECT_EQ(ncclAllGather(g_in.data(), g_out.data(), 2, ncclInt32, comm, nullptr), ncclSuccess);
  EXPECT_EQ(g_out, g_in);

  // Inside a group: forwarded too.
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclMax, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(calls("ncclAllReduce"), before + 2);

  // The shim's own introspection (ferry_nccl_ext.h): both calls forwarded, ferry not set up.
  ferryNcclShimStats_t s{};
  ASSERT_EQ(ferryNcclShimStats(comm, &s), ncclSuccess);
  EXPECT_EQ(s.allreduce_ferry, 0u);
  EXPECT_EQ(s.allreduce_forwarded, 2u);
  EXPECT_EQ(s.ferry_serves, 0);
  EXPECT_EQ(s.max_bytes, 0u);
  EXPECT_STREQ(s.no_ferry, "FERRY_NCCL_SHIM=off");
  EXPECT_EQ(ferryNcclShimStats(comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(ferryNcclShimStats(comm, &s), ncclInvalidArgument);
}

// NOTE [Communicators made inside a group]: recorded at ncclCommInitRank,
// finished (queries, ferry's set-up or the reason against it) at the outermost ncclGroupEnd.
TEST(NcclShim, CommunicatorMadeInsideAGroup) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  ASSERT_NE(comm, nullptr);
  ferryNcclShimStats_t s{};
  ASSERT_EQ(ferryNcclShimStats(comm, &s), ncclSuccess);
  EXPECT_NE(std::string(s.no_ferry).find("inside ncclGroupStart/End"), std::string::npos) << s.no_ferry;
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);  // inner: still pending
  ASSERT_EQ(ferryNcclShimStats(comm, &s), ncclSuccess);
  EXPECT_NE(std::string(s.no_ferry).find("inside ncclGroupStart/End"), std::string::npos) << s.no_ferry;
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(ferryNcclShimStats(comm, &s), ncclSuccess);
  EXPECT_STREQ(s.no_ferry, "FERRY_NCCL_SHIM=off");
  std::vector<float> in = {1.f, 2.f}, out(2, 0.f);
  EXPECT_EQ(ncclAllReduce(in.data(), out.data(), 2, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(out, in);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// NOTE [Real handles reaching the shim]: the real NCCL calling its own exported
// functions reaches the shim with its own handles (on 2 H100s every such call had
// failed with ncclInvalidArgument): they are forwarded as they are, and a
// communicator split from one stays a real handle.
TEST(NcclShim, RealHandlesAreForwardedAsTheyAre) {
  void* h = dlopen(std::getenv("FERRY_NCCL_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr) << "the shim loads the stand-in first";
  using Init = ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int);
  const auto init = reinterpret_cast<Init>(dlsym(h, "ncclCommInitRank"));
  ASSERT_NE(init, nullptr);
  ncclComm_t real = nullptr;
  ASSERT_EQ(init(&real, 1, ncclUniqueId{}, 0), ncclSuccess);  // the stand-in's own handle, not the shim's
  int n = 0, rank = -1;
  EXPECT_EQ(ncclCommCount(real, &n), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(real, &rank), ncclSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(rank, 0);
  std::vector<float> in = {3.f, -4.f}, out(2, 0.f);
  const int before = calls("ncclAllReduce");
  EXPECT_EQ(ncclAllReduce(in.data(), out.data(), 2, ncclFloat32, ncclSum, real, nullptr), ncclSuccess);
  EXPECT_EQ(out, in);
  EXPECT_EQ(calls("ncclAllReduce"), before + 1);
  ferryNcclShimStats_t s{};
  ASSERT_EQ(ferryNcclShimStats(real, &s), ncclSuccess);
  EXPECT_EQ(s.ferry_serves, 0);
  EXPECT_NE(std::string(s.no_ferry).find("real NCCL"), std::string::npos) << s.no_ferry;
  ncclComm_t child = nullptr;
  ASSERT_EQ(ncclCommSplit(real, 0, 0, &child, nullptr), ncclSuccess);
  ASSERT_NE(child, nullptr);
  ASSERT_EQ(ferryNcclShimStats(child, &s), ncclSuccess);
  EXPECT_NE(std::string(s.no_ferry).find("real NCCL"), std::string::npos) << "the child of a real handle stays real";
  EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(real), ncclSuccess);  // the stand-in's destroy, with its own handle
}

TEST(NcclShim, BadUseGetsNcclErrors) {
  std::vector<float> buf(4, 1.f);
  EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 4, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("null"), std::string::npos) << ncclGetLastError(nullptr);
  int n = 0;
  EXPECT_EQ(ncclCommCount(nullptr, &n), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(nullptr, 1, ncclUniqueId{}, 0), ncclInvalidArgument);

  ncclComm_t comm = make_comm();
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("not a live communicator"), std::string::npos);
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidArgument);  // twice
  EXPECT_NE(std::string(ncclGetErrorString(ncclInvalidArgument)).size(), 0u);

  // A function the stand-in lacks: NCCL's "invalid usage", naming it.
  EXPECT_EQ(ncclBroadcast(buf.data(), buf.data(), 4, ncclFloat32, 0, make_comm(), nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclBroadcast"), std::string::npos);

  // The shim's text is forgotten at the next call: NCCL's shows again.
  int version = 0;
  EXPECT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_STREQ(ncclGetLastError(nullptr), "fake NCCL last error");
}

#ifdef SHIM_TEST_DEVICE_API
// The device API's host functions reach NCCL with its own communicator (the
// stand-in refuses the shim's record); a null one is refused by the shim.
TEST(NcclShim, DeviceApiHostFunctionsForwardWithRealHandles) {
  ncclComm_t comm = make_comm();
  ASSERT_NE(comm, nullptr);
  ncclDevComm_t dev_comm{};
  const int creates = calls("ncclDevCommCreate");
  EXPECT_EQ(ncclDevCommCreate(comm, nullptr, &dev_comm), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(calls("ncclDevCommCreate"), creates + 1);
  EXPECT_EQ(ncclDevCommDestroy(comm, &dev_comm), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(ncclDevCommCreate(nullptr, nullptr, &dev_comm), ncclInvalidArgument);
  EXPECT_EQ(calls("ncclDevCommCreate"), creates + 1);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
// NCCL 2.30's functions reach NCCL with its own handles (the stand-in refuses
// anything else), and a grown communicator comes back as a shim handle that
// works (shim_api_newer.cpp).
TEST(NcclShim, Nccl230FunctionsForwardWithRealHandles) {
  ncclComm_t comm = make_comm();
  ASSERT_NE(comm, nullptr);
  ncclUniqueId id;
  EXPECT_EQ(ncclCommGetUniqueId(comm, &id), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(static_cast<unsigned char>(id.internal[0]), 9);
  EXPECT_EQ(ncclCommSuspend(comm, 0), ncclSuccess);
  // Suspended: ncclAllReduce goes to NCCL (here it would anyway: no GPU), and still works after resume.
  EXPECT_EQ(ncclCommResume(comm), ncclSuccess);
  std::vector<float> in = {1.f, 2.f}, out(2, 0.f);
  EXPECT_EQ(ncclAllReduce(in.data(), out.data(), 2, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(out, in);
  const int signals = calls("ncclSignal");
  EXPECT_EQ(ncclSignal(0, 0, 0, 0, comm, nullptr), ncclSuccess);
  EXPECT_EQ(calls("ncclSignal"), signals + 1);
  ncclComm_t grown = nullptr;
  EXPECT_EQ(ncclCommGrow(comm, 2, nullptr, -1, &grown, nullptr), ncclSuccess);
  ASSERT_NE(grown, nullptr);
  int n = 0;
  EXPECT_EQ(ncclCommCount(grown, &n), ncclSuccess);
  EXPECT_EQ(n, 2);
  ncclComm_t joined = nullptr;  // a joining rank passes no communicator
  EXPECT_EQ(ncclCommGrow(nullptr, 2, &id, 1, &joined, nullptr), ncclSuccess);
  EXPECT_NE(joined, nullptr);
  const char* value = nullptr;
  int len = 0;
  EXPECT_EQ(ncclParamGetParameter("NCCL_PROTO", &value, &len), ncclSuccess);
  EXPECT_EQ(std::string(value, len), "fake");
  // Bad use: a destroyed communicator is refused by the shim, not passed on.
  EXPECT_EQ(ncclCommDestroy(grown), ncclSuccess);
  EXPECT_EQ(ncclCommGetUniqueId(grown, &id), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(joined), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}
#endif

}  // namespace
