// Bootstraps across real processes (run under mpirun -np 2 and -np 4): MpiBootstrap
// against MPI itself, and TcpBootstrap with its id passed around by MPI_Bcast.
// Every check that could differ between ranks is agreed on with all_ranks() first,
// so a failing rank never leaves the others waiting in a collective.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/tcp_util.hpp"
#include "common/test_util.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

using namespace std::chrono_literals;
using ::ferry::testing::all_ranks;
using ::ferry::testing::free_port;
using ::ferry::testing::mpi_rank;
using ::ferry::testing::mpi_size;
using ::ferry::testing::with_timeout;

uint8_t pattern_byte(int rank, size_t index, int salt) {
  return static_cast<uint8_t>((rank + 1) * 37 + index * 11 + static_cast<size_t>(salt) * 101 + (index >> 8));
}

// One all_gather of `bytes` per rank; true when every slot holds its rank's pattern.
bool gather_matches(Bootstrap& boot, size_t bytes, int salt) {
  std::vector<uint8_t> mine(bytes);
  for (size_t i = 0; i < bytes; ++i) mine[i] = pattern_byte(boot.rank(), i, salt);
  std::vector<uint8_t> result(bytes * static_cast<size_t>(boot.size()), 0xEE);
  boot.all_gather(mine.data(), result.data(), bytes);
  for (int r = 0; r < boot.size(); ++r)
    for (size_t i = 0; i < bytes; ++i)
      if (result[static_cast<size_t>(r) * bytes + i] != pattern_byte(r, i, salt)) {
        ADD_FAILURE() << "rank " << boot.rank() << ": byte " << i << " of rank " << r << "'s slot is wrong (" << bytes
                      << " bytes per rank)";
        return false;
      }
  return true;
}

// Same, with the contribution already in this rank's slot of the result.
bool gather_in_place_matches(Bootstrap& boot, size_t bytes, int salt) {
  std::vector<uint8_t> result(bytes * static_cast<size_t>(boot.size()), 0xEE);
  uint8_t* mine = result.data() + static_cast<size_t>(boot.rank()) * bytes;
  for (size_t i = 0; i < bytes; ++i) mine[i] = pattern_byte(boot.rank(), i, salt);
  boot.all_gather(mine, result.data(), bytes);
  for (int r = 0; r < boot.size(); ++r)
    for (size_t i = 0; i < bytes; ++i)
      if (result[static_cast<size_t>(r) * bytes + i] != pattern_byte(r, i, salt)) return false;
  return true;
}

// ---------------------------------------------------------------- MpiBootstrap
TEST(MpiBootstrap, RankAndSizeMatchMpi) {
  MpiBootstrap boot;
  EXPECT_EQ(boot.rank(), mpi_rank());
  EXPECT_EQ(boot.size(), mpi_size());
}

TEST(MpiBootstrap, AllGatherContents) {
  MpiBootstrap boot;
  int salt = 0;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{13}, size_t{4096}, (size_t{1} << 20) + 3})
    EXPECT_TRUE(all_ranks(gather_matches(boot, bytes, salt++))) << bytes << " bytes per rank";
  EXPECT_TRUE(all_ranks(gather_in_place_matches(boot, 100, salt++)));
  std::vector<int> expected;
  for (int r = 0; r < mpi_size(); ++r) expected.push_back(r * r);
  EXPECT_EQ(boot.all_gather_value(mpi_rank() * mpi_rank()), expected);
  std::vector<uint8_t> out(4);
  EXPECT_THROW(boot.all_gather(nullptr, out.data(), 1), InvalidArgument);
}

TEST(MpiBootstrap, ChunkedAllGather) {
  // Pieces of 7 bytes exercise the path that large (> INT_MAX) gathers take.
  ::setenv("FERRY_MPI_ALLGATHER_CHUNK_BYTES", "7", 1);
  MpiBootstrap boot;
  ::unsetenv("FERRY_MPI_ALLGATHER_CHUNK_BYTES");
  int salt = 10;
  for (size_t bytes : {size_t{7}, size_t{8}, size_t{100}, size_t{1000}})
    EXPECT_TRUE(all_ranks(gather_matches(boot, bytes, salt++))) << bytes << " bytes per rank";
  EXPECT_TRUE(all_ranks(gather_in_place_matches(boot, 100, salt++)));
}

TEST(MpiBootstrap, BarrierWaitsForTheSlowestRank) {
  MpiBootstrap boot;
  boot.barrier();
  const auto start = std::chrono::steady_clock::now();
  if (boot.rank() == boot.size() - 1) std::this_thread::sleep_for(300ms);
  boot.barrier();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(all_ranks(waited >= 250ms)) << "a barrier returned before the last rank arrived";
}

TEST(MpiBootstrap, ConstructingTwiceLeavesMpiInitialized) {
  for (int i = 0; i < 2; ++i) {
    MpiBootstrap boot;
    boot.barrier();
  }
  {
    MpiBootstrap first, second;  // two alive at once
    first.barrier();
    second.barrier();
  }
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  EXPECT_TRUE(initialized);
  EXPECT_FALSE(finalized);
  EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
}

TEST(MpiBootstrap, UsesTheGivenCommunicator) {
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, mpi_rank() % 2, mpi_rank(), &half);
  int half_rank = 0, half_size = 0;
  MPI_Comm_rank(half, &half_rank);
  MPI_Comm_size(half, &half_size);
  {
    MpiBootstrap boot(&half);
    EXPECT_EQ(boot.rank(), half_rank);
    EXPECT_EQ(boot.size(), half_size);
    EXPECT_TRUE(all_ranks(gather_matches(boot, 64, 20)));
  }
  MPI_Comm_free(&half);
  MPI_Comm null_comm = MPI_COMM_NULL;
  EXPECT_THROW(MpiBootstrap{nullptr}, InvalidArgument);
  EXPECT_THROW(MpiBootstrap{&null_comm}, InvalidArgument);
}

// ---------------------------------------------------------------- TcpBootstrap
// Rank 0 makes the id (port 0: an ephemeral port it already listens on) and every
// rank gets it by MPI_Bcast.
TcpUniqueId broadcast_new_id(int port) {
  TcpUniqueId id;
  if (mpi_rank() == 0) id = TcpBootstrap::create_unique_id("127.0.0.1", port);
  MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  return id;
}

// Builds a group from `id` and runs gathers of several sizes and barriers.
bool tcp_group_works(const TcpUniqueId& id) {
  try {
    TcpBootstrap boot(id, mpi_rank(), mpi_size(), with_timeout(10s));
    if (boot.rank() != mpi_rank() || boot.size() != mpi_size()) return false;
    bool ok = true;
    int salt = 30;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{333}, (size_t{1} << 20) + 5})
      ok = gather_matches(boot, bytes, salt++) && ok;
    for (int round = 0; round < 50; ++round) {
      ok = gather_matches(boot, static_cast<size_t>(round) * 7, salt++) && ok;
      boot.barrier();
    }
    return ok && gather_in_place_matches(boot, 100, salt++);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << mpi_rank() << ": " << e.what();
    return false;
  }
}

TEST(TcpBootstrapAcrossProcesses, AllGatherWithEphemeralPort) {
  EXPECT_TRUE(all_ranks(tcp_group_works(broadcast_new_id(0))));
}

TEST(TcpBootstrapAcrossProcesses, AllGatherWithExplicitPortViaString) {
  // The id travels as its hex string, as it would through an environment variable.
  int port = mpi_rank() == 0 ? free_port() : 0;  // rank 0 binds it in its constructor
  MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string text(256, ' ');
  if (mpi_rank() == 0) text = TcpBootstrap::id_to_string(TcpBootstrap::create_unique_id("127.0.0.1", port));
  MPI_Bcast(text.data(), static_cast<int>(text.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  EXPECT_TRUE(all_ranks(tcp_group_works(TcpBootstrap::id_from_string(text))));
}

TEST(TcpBootstrapAcrossProcesses, MissingLastRankTimesOutEverywhere) {
  const TcpUniqueId id = broadcast_new_id(0);
  const int missing = mpi_size() - 1;
  bool ok = true;
  if (mpi_rank() != missing) {  // the last rank never joins
    const auto start = std::chrono::steady_clock::now();
    try {
      TcpBootstrap boot(id, mpi_rank(), mpi_size(), with_timeout(1000ms));
      ADD_FAILURE() << "rank " << mpi_rank() << ": built a group without rank " << missing;
      ok = false;
    } catch (const TimeoutError& e) {
      const std::string expected = "waiting for rank " + std::to_string(missing) + " to connect";
      if (std::string(e.what()).find(expected) == std::string::npos) {
        ADD_FAILURE() << "rank " << mpi_rank() << ": message lacks '" << expected << "': " << e.what();
        ok = false;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << mpi_rank() << ": expected TimeoutError, got: " << e.what();
      ok = false;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > 5s) {
      ADD_FAILURE() << "rank " << mpi_rank() << ": took "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms";
      ok = false;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // everybody resyncs, the missing rank included
  EXPECT_TRUE(all_ranks(ok));
}

}  // namespace
}  // namespace ferry
