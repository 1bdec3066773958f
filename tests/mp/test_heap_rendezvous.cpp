// Topology discovery and the symmetric heap's collective rendezvous, on CPU only
// (mpirun -np 2 / 4). The rendezvous runs before any CUDA call, so a heap built
// with device -1 rejects mismatched collectives without a GPU: every rank throws
// MismatchError naming the ranks and sizes that disagree, and nobody hangs.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "common/expect_error.hpp"
#include "common/test_util.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/error.hpp"
#include "ferry/symmetric_heap.hpp"

namespace {

using ferry::testing::all_ranks;
using ferry::testing::contains_ci;
using ferry::testing::mpi_rank;
using ferry::testing::mpi_size;
using ferry::testing::names_number;
using ferry::testing::user_part;

constexpr size_t kMiB = size_t{1} << 20;
const char* const kRanksPerNodeVar = "FERRY_RANKS_PER_NODE";

// Sets (or unsets, with nullptr) an environment variable for one scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// "rank 3", "ranks 1, 3", "rank(s) 3", "rank=3", "rank #3" ...: the word rank, then
// the number within a few non-digit characters or a list of numbers.
bool names_rank(const std::string& what, int r) {
  const std::regex re("rank[^0-9]{0,12}([0-9]+[^0-9]{1,4}){0,64}" + std::to_string(r) + "([^0-9]|$)",
                      std::regex::icase);
  return std::regex_search(user_part(what), re);
}

struct Group {
  std::shared_ptr<ferry::MpiBootstrap> bootstrap = std::make_shared<ferry::MpiBootstrap>();
  ferry::Topology topology = ferry::discover_topology(*bootstrap);
};

// Runs a collective heap call expected to fail on every rank with MismatchError.
template <typename Fn>
std::string expect_mismatch(Fn&& fn) {
  SCOPED_TRACE("rank " + std::to_string(mpi_rank()));
  const std::optional<std::string> msg = ferry::testing::caught<ferry::MismatchError>(std::forward<Fn>(fn));
  EXPECT_TRUE(all_ranks(msg.has_value())) << "every rank must throw MismatchError";
  return msg.value_or(std::string());
}

std::vector<std::string> all_hostnames() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::vector<char> all(256 * static_cast<size_t>(mpi_size()));
  MPI_Allgather(name, 256, MPI_CHAR, all.data(), 256, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < mpi_size(); ++r) out.emplace_back(all.data() + 256 * r);
  return out;
}

void expect_consistent(const ferry::Topology& t) {
  const int n = mpi_size();
  EXPECT_EQ(t.rank, mpi_rank());
  EXPECT_EQ(t.size, n);
  ASSERT_EQ(t.node_of_rank.size(), static_cast<size_t>(n));
  ASSERT_EQ(t.local_rank_of_rank.size(), static_cast<size_t>(n));
  EXPECT_EQ(t.node_of_rank[t.rank], t.node);
  EXPECT_EQ(t.local_rank_of_rank[t.rank], t.local_rank);
  ASSERT_EQ(t.ranks_in_node.size(), static_cast<size_t>(t.local_size));
  EXPECT_EQ(t.ranks_in_node[t.local_rank], t.rank);
  for (int l = 0; l < t.local_size; ++l) {
    EXPECT_TRUE(t.same_node(t.ranks_in_node[l]));
    EXPECT_EQ(t.local_rank_of_rank[t.ranks_in_node[l]], l);
  }
  EXPECT_GE(t.node, 0);
  EXPECT_LT(t.node, t.num_nodes);
}

TEST(Topology, OneRankPerVirtualNode) {
  ScopedEnv env(kRanksPerNodeVar, "1");
  Group g;
  const ferry::Topology& t = g.topology;
  expect_consistent(t);
  EXPECT_EQ(t.num_nodes, mpi_size());
  EXPECT_EQ(t.node, mpi_rank());
  EXPECT_EQ(t.local_rank, 0);
  EXPECT_EQ(t.local_size, 1);
  EXPECT_EQ(t.ranks_in_node, std::vector<int>{mpi_rank()});
  // Virtual nodes of one machine: a rank's GPU index follows its place among the
  // machine's ranks, not its (always 0) place in its node (NOTE [Device of a rank]).
  if (all_hostnames() == std::vector<std::string>(mpi_size(), all_hostnames()[0])) {
    EXPECT_EQ(t.host_rank, mpi_rank());
    EXPECT_EQ(t.host_size, mpi_size());  // every rank on this machine, whatever the virtual nodes
  }
  for (int r = 0; r < mpi_size(); ++r) {
    EXPECT_EQ(t.node_of_rank[r], r);
    EXPECT_EQ(t.local_rank_of_rank[r], 0);
    EXPECT_EQ(t.same_node(r), r == mpi_rank());
  }
}

TEST(Topology, TwoRanksPerVirtualNode) {
  if (mpi_size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  ScopedEnv env(kRanksPerNodeVar, "2");
  Group g;
  const ferry::Topology& t = g.topology;
  const int rank = mpi_rank();
  expect_consistent(t);
  EXPECT_EQ(t.num_nodes, mpi_size() / 2);
  EXPECT_EQ(t.node, rank / 2);
  EXPECT_EQ(t.local_rank, rank % 2);
  EXPECT_EQ(t.local_size, 2);
  if (all_hostnames() == std::vector<std::string>(mpi_size(), all_hostnames()[0])) {
    EXPECT_EQ(t.host_rank, rank);
    EXPECT_EQ(t.host_size, mpi_size());
  }
  EXPECT_EQ(t.ranks_in_node, (std::vector<int>{rank - rank % 2, rank - rank % 2 + 1}));
  for (int r = 0; r < mpi_size(); ++r) {
    EXPECT_EQ(t.node_of_rank[r], r / 2);
    EXPECT_EQ(t.local_rank_of_rank[r], r % 2);
  }
}

TEST(Topology, ByHostnameWithoutVariable) {
  ScopedEnv env(kRanksPerNodeVar, nullptr);
  Group g;
  const ferry::Topology& t = g.topology;
  expect_consistent(t);
  const std::vector<std::string> hosts = all_hostnames();
  for (int a = 0; a < mpi_size(); ++a)
    for (int b = 0; b < mpi_size(); ++b)
      EXPECT_EQ(t.node_of_rank[a] == t.node_of_rank[b], hosts[a] == hosts[b]) << "ranks " << a << ", " << b;
  EXPECT_EQ(t.host_rank, t.local_rank);  // nodes are machines: the same index
  EXPECT_EQ(t.host_size, t.local_size);
  bool one_host = true;
  for (const auto& h : hosts) one_host = one_host && h == hosts[0];
  if (one_host) {
    EXPECT_EQ(t.num_nodes, 1);
    EXPECT_EQ(t.node, 0);
    EXPECT_EQ(t.local_rank, mpi_rank());
    EXPECT_EQ(t.local_size, mpi_size());
    for (int r = 0; r < mpi_size(); ++r) {
      EXPECT_EQ(t.local_rank_of_rank[r], r);
      EXPECT_EQ(t.ranks_in_node[r], r);
      EXPECT_TRUE(t.same_node(r));
    }
  }
}

TEST(HeapRendezvous, SizeMismatchOnRankZero) {
  Group g;
  ferry::SymmetricHeap heap(*g.bootstrap, g.topology, /*device=*/-1);
  const std::string msg = expect_mismatch([&] { heap.allocate(mpi_rank() == 0 ? kMiB : 2 * kMiB); });
  EXPECT_TRUE(names_number(msg, kMiB)) << "should name 1048576: " << msg;
  EXPECT_TRUE(names_number(msg, 2 * kMiB)) << "should name 2097152: " << msg;
  EXPECT_TRUE(names_rank(msg, 0)) << "should name rank 0: " << msg;
  bool names_other = false;
  for (int r = 1; r < mpi_size(); ++r) names_other = names_other || names_rank(msg, r);
  EXPECT_TRUE(names_other) << "should name a rank that disagrees with rank 0: " << msg;
  EXPECT_EQ(heap.num_buffers(), 0u);
}

TEST(HeapRendezvous, SizeMismatchOnLastRank) {
  Group g;
  ferry::SymmetricHeap heap(*g.bootstrap, g.topology, /*device=*/-1);
  const int last = mpi_size() - 1;
  const size_t mine = mpi_rank() == last ? 3 * kMiB + 5 : kMiB;
  const std::string msg = expect_mismatch([&] { heap.allocate(mine); });
  EXPECT_TRUE(names_number(msg, kMiB)) << msg;
  EXPECT_TRUE(names_number(msg, 3 * kMiB + 5)) << msg;
  EXPECT_TRUE(names_rank(msg, last)) << "should name the odd rank " << last << ": " << msg;
}

TEST(HeapRendezvous, AllocateVersusRegister) {
  Group g;
  ferry::SymmetricHeap heap(*g.bootstrap, g.topology, /*device=*/-1);
  // A fake device address: the rendezvous must reject the mismatch before using it.
  void* fake = reinterpret_cast<void*>(uintptr_t{0x7f0000200000});
  const bool registers = mpi_rank() % 2 == 1;
  const std::string msg = expect_mismatch([&] {
    if (registers) heap.register_buffer(fake, kMiB);
    else heap.allocate(kMiB);
  });
  EXPECT_TRUE(contains_ci(msg, "alloc")) << "should say which ranks allocate: " << msg;
  EXPECT_TRUE(contains_ci(msg, "regist")) << "should say which ranks register: " << msg;
  EXPECT_TRUE(names_rank(msg, 0)) << msg;
  EXPECT_TRUE(names_rank(msg, 1)) << msg;
}

TEST(HeapRendezvous, RegisterSizeMismatch) {
  Group g;
  ferry::SymmetricHeap heap(*g.bootstrap, g.topology, /*device=*/-1);
  void* fake = reinterpret_cast<void*>(uintptr_t{0x7f0000200000});
  const size_t mine = mpi_rank() == 0 ? 4096 : 8192;
  const std::string msg = expect_mismatch([&] { heap.register_buffer(fake, mine); });
  EXPECT_TRUE(names_number(msg, 4096)) << msg;
  EXPECT_TRUE(names_number(msg, 8192)) << msg;
}

TEST(HeapRendezvous, RepeatedMismatchesDoNotDesynchronize) {
  // After a rejected collective the ranks are still in step: a second mismatch
  // reports the second call's sizes, not leftovers of the first.
  Group g;
  ferry::SymmetricHeap heap(*g.bootstrap, g.topology, /*device=*/-1);
  expect_mismatch([&] { heap.allocate(mpi_rank() == 0 ? kMiB : 2 * kMiB); });
  const std::string msg = expect_mismatch([&] { heap.allocate(mpi_rank() == 0 ? 12345 : 54321); });
  EXPECT_TRUE(names_number(msg, 12345)) << msg;
  EXPECT_TRUE(names_number(msg, 54321)) << msg;
  EXPECT_FALSE(names_number(msg, 2 * kMiB)) << msg;
}

}  // namespace
