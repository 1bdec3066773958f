// AllReduce argument checks at the API boundary (ferry::allreduce::validate_call),
// no GPU: every rejection is the right exception with a message naming the values,
// and valid calls (unaligned pointers and in-place included) return their byte size.
// Also which algorithms run where: the NVLink ones inside one node, hierarchical
// across nodes of equal size (comm_shape reads that from a Topology).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "allreduce/allreduce_args.hpp"
#include "allreduce/hierarchical.hpp"
#include "common/expect_error.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/error.hpp"
#include "ferry/topology.hpp"
#include "ferry/types.hpp"

namespace {

using ferry::AllReduceAlgorithm;
using ferry::DataType;
using ferry::ReduceOp;
using ferry::allreduce::algorithm_supported;
using ferry::allreduce::CallShape;
using ferry::allreduce::comm_shape;
using ferry::allreduce::CommShape;
using ferry::allreduce::validate_call;

const std::vector<DataType> kTypes = {DataType::kFloat32, DataType::kFloat64,  DataType::kInt32,
                                      DataType::kInt64,   DataType::kBFloat16, DataType::kFloat16};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};
// The algorithms that need every rank in one node (NVLink).
const std::vector<AllReduceAlgorithm> kExplicit = {AllReduceAlgorithm::kOneShot, AllReduceAlgorithm::kTwoShot,
                                                   AllReduceAlgorithm::kRing,
                                                   AllReduceAlgorithm::kRecursiveDoubling};
// What a single-node communicator runs.
const std::vector<AllReduceAlgorithm> kAll = {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kOneShot,
                                              AllReduceAlgorithm::kTwoShot, AllReduceAlgorithm::kRing,
                                              AllReduceAlgorithm::kRecursiveDoubling};
// What a multi-node communicator runs.
const std::vector<AllReduceAlgorithm> kAcrossNodes = {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kHierarchical};
// nodes x ranks per node
const std::vector<std::pair<int, int>> kMultiNode = {{2, 1}, {4, 1}, {2, 2}, {2, 4}, {8, 1}, {4, 4}, {2, 8}, {16, 1}};

CommShape multi_node(int nodes, int per_node, size_t max_bytes = size_t{1} << 20) {
  return CommShape{max_bytes, nodes * per_node, false, nodes, per_node};
}

// Fake device addresses: validation must not dereference them.
const void* const kIn = reinterpret_cast<const void*>(uintptr_t{0x7f0000100000});
void* const kOut = reinterpret_cast<void*>(uintptr_t{0x7f0000900000});

constexpr CommShape kComm{size_t{1} << 20, 8, true};

CallShape call(size_t count, DataType type = DataType::kFloat32, ReduceOp op = ReduceOp::kSum,
               AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto) {
  return CallShape{kIn, kOut, count, type, op, algorithm};
}

using ferry::testing::contains_ci;
using ferry::testing::names_number;
using ferry::testing::user_part;

// Runs validate_call, expects exception E, returns its message.
template <typename E>
std::string rejection(const CallShape& c, const CommShape& comm) {
  return ferry::testing::error_message<E>([&] { return validate_call(c, comm); });
}

TEST(AllReduceArgs, NullPointersAreInvalid) {
  CallShape c = call(16);
  c.in = nullptr;
  std::string msg = rejection<ferry::InvalidArgument>(c, kComm);
  EXPECT_TRUE(contains_ci(msg, "null")) << msg;

  c = call(16);
  c.out = nullptr;
  msg = rejection<ferry::InvalidArgument>(c, kComm);
  EXPECT_TRUE(contains_ci(msg, "null")) << msg;

  c.in = nullptr;
  rejection<ferry::InvalidArgument>(c, kComm);
}

TEST(AllReduceArgs, ZeroCountIsInvalid) {
  for (DataType t : kTypes) {
    SCOPED_TRACE(ferry::dtype_name(t));
    const std::string msg = rejection<ferry::InvalidArgument>(call(0, t), kComm);
    EXPECT_TRUE(contains_ci(user_part(msg), "count")) << msg;
  }
}

TEST(AllReduceArgs, TooManyBytesNamesTheSizes) {
  const CommShape comm{1000, 4, true};
  // 300 float32 = 1200 bytes > 1000.
  std::string msg = rejection<ferry::InvalidArgument>(call(300, DataType::kFloat32), comm);
  EXPECT_TRUE(names_number(msg, 1000)) << "should name max_bytes 1000: " << msg;
  EXPECT_TRUE(names_number(msg, 1200) || names_number(msg, 300)) << "should name the request: " << msg;

  // One element over, for a 2-byte type: 501 bf16 = 1002 bytes.
  msg = rejection<ferry::InvalidArgument>(call(501, DataType::kBFloat16), comm);
  EXPECT_TRUE(names_number(msg, 1000)) << msg;
  EXPECT_TRUE(names_number(msg, 1002) || names_number(msg, 501)) << msg;

  // Exactly max_bytes is accepted.
  EXPECT_EQ(validate_call(call(500, DataType::kBFloat16), comm), 1000u);
  EXPECT_EQ(validate_call(call(125, DataType::kFloat64), comm), 1000u);
}

TEST(AllReduceArgs, ByteCountOverflowIsInvalid) {
  // count * 8 wraps around to 8 bytes in size_t arithmetic: must still be rejected.
  const size_t count = std::numeric_limits<size_t>::max() / 4 + 2;
  rejection<ferry::InvalidArgument>(call(count, DataType::kFloat64), kComm);
  rejection<ferry::InvalidArgument>(call(std::numeric_limits<size_t>::max(), DataType::kBFloat16), kComm);
}

TEST(AllReduceArgs, UnknownTypeOrOpIsInvalid) {
  std::string msg = rejection<ferry::InvalidArgument>(call(16, static_cast<DataType>(99)), kComm);
  EXPECT_TRUE(names_number(msg, 99)) << msg;
  msg = rejection<ferry::InvalidArgument>(call(16, DataType::kFloat32, static_cast<ReduceOp>(99)), kComm);
  EXPECT_TRUE(names_number(msg, 99)) << msg;
  rejection<ferry::InvalidArgument>(call(16, static_cast<DataType>(-1)), kComm);
  rejection<ferry::InvalidArgument>(call(16, DataType::kInt32, static_cast<ReduceOp>(5)), kComm);
  // fp8 is an EP wire type, not a reduction type.
  msg = rejection<ferry::InvalidArgument>(call(16, DataType::kFloat8E4M3), kComm);
  EXPECT_NE(msg.find("float8_e4m3"), std::string::npos) << msg;
}

TEST(AllReduceArgs, UnknownAlgorithmIsRejected) {
  const CallShape c = call(16, DataType::kFloat32, ReduceOp::kSum, static_cast<AllReduceAlgorithm>(99));
  EXPECT_FALSE(algorithm_supported(c.algorithm, kComm));
  try {
    validate_call(c, kComm);
    ADD_FAILURE() << "algorithm 99 accepted";
  } catch (const ferry::InvalidArgument& e) {
    EXPECT_TRUE(names_number(e.what(), 99)) << e.what();
  } catch (const ferry::NotSupported& e) {
    EXPECT_TRUE(names_number(e.what(), 99)) << e.what();
  }
}

TEST(AllReduceArgs, RecursiveDoublingNeedsPowerOfTwo) {
  for (int n : {3, 5, 6, 7}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    const CommShape comm{size_t{1} << 20, n, true};
    EXPECT_FALSE(algorithm_supported(AllReduceAlgorithm::kRecursiveDoubling, comm));
    const std::string msg = rejection<ferry::NotSupported>(
        call(64, DataType::kFloat32, ReduceOp::kSum, AllReduceAlgorithm::kRecursiveDoubling), comm);
    EXPECT_TRUE(names_number(msg, static_cast<unsigned>(n))) << "should name the world size: " << msg;
    // Every other algorithm (and kAuto) still works on this size.
    for (AllReduceAlgorithm a : {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kOneShot,
                                 AllReduceAlgorithm::kTwoShot, AllReduceAlgorithm::kRing}) {
      EXPECT_TRUE(algorithm_supported(a, comm)) << ferry::algorithm_name(a);
      EXPECT_EQ(validate_call(call(64, DataType::kFloat32, ReduceOp::kSum, a), comm), 256u);
    }
  }
  for (int n : {2, 4, 8}) {
    const CommShape comm{size_t{1} << 20, n, true};
    EXPECT_TRUE(algorithm_supported(AllReduceAlgorithm::kRecursiveDoubling, comm)) << n;
    EXPECT_EQ(validate_call(call(64, DataType::kFloat32, ReduceOp::kSum, AllReduceAlgorithm::kRecursiveDoubling),
                            comm),
              256u);
  }
}

TEST(AllReduceArgs, MultiNodeRejectsTheNvlinkAlgorithms) {
  for (auto [nodes, per_node] : kMultiNode) {
    SCOPED_TRACE(std::to_string(nodes) + "x" + std::to_string(per_node));
    const CommShape comm = multi_node(nodes, per_node);
    for (AllReduceAlgorithm a : kExplicit) {
      SCOPED_TRACE(ferry::algorithm_name(a));
      EXPECT_FALSE(algorithm_supported(a, comm));
      const std::string msg = rejection<ferry::NotSupported>(call(64, DataType::kFloat32, ReduceOp::kSum, a), comm);
      EXPECT_NE(msg.find(ferry::algorithm_name(a)), std::string::npos) << "should name the algorithm: " << msg;
      EXPECT_TRUE(contains_ci(msg, "one node")) << "should say it needs one node: " << msg;
      EXPECT_TRUE(contains_ci(msg, "hierarchical")) << "should name what works across nodes: " << msg;
      EXPECT_TRUE(names_number(msg, static_cast<unsigned>(nodes))) << "should name the node count: " << msg;
    }
  }
}

TEST(AllReduceArgs, MultiNodeRunsHierarchicalAndAuto) {
  for (auto [nodes, per_node] : kMultiNode) {
    SCOPED_TRACE(std::to_string(nodes) + "x" + std::to_string(per_node));
    const CommShape comm = multi_node(nodes, per_node);
    for (AllReduceAlgorithm a : kAcrossNodes) {
      SCOPED_TRACE(ferry::algorithm_name(a));
      EXPECT_TRUE(algorithm_supported(a, comm));
      for (DataType t : kTypes)
        for (ReduceOp op : kOps)
          for (size_t count : {size_t{1}, size_t{17}, size_t{65537}})
            EXPECT_EQ(validate_call(call(count, t, op, a), comm), count * ferry::dtype_size(t));
    }
    // Size limits and argument checks are the same as inside a node.
    rejection<ferry::InvalidArgument>(call((size_t{1} << 20) / 4 + 1, DataType::kFloat32), comm);
    rejection<ferry::InvalidArgument>(call(16, DataType::kFloat8E4M3, ReduceOp::kSum,
                                           AllReduceAlgorithm::kHierarchical), comm);
    rejection<ferry::InvalidArgument>(call(0, DataType::kFloat32, ReduceOp::kSum, AllReduceAlgorithm::kHierarchical),
                                      comm);
  }
}

TEST(AllReduceArgs, HierarchicalNeedsSeveralNodes) {
  for (int n : {1, 2, 4, 8}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    const CommShape comm{size_t{1} << 20, n, true};
    EXPECT_FALSE(algorithm_supported(AllReduceAlgorithm::kHierarchical, comm));
    const std::string msg = rejection<ferry::NotSupported>(
        call(64, DataType::kFloat32, ReduceOp::kSum, AllReduceAlgorithm::kHierarchical), comm);
    EXPECT_NE(msg.find("hierarchical"), std::string::npos) << msg;
    EXPECT_TRUE(contains_ci(msg, "across nodes")) << msg;
    EXPECT_TRUE(algorithm_supported(AllReduceAlgorithm::kAuto, comm));
  }
}

TEST(AllReduceArgs, HierarchicalNeedsNodesOfEqualSizeWithinTheLimits) {
  // 3 + 1 ranks: nodes of different sizes.
  const CommShape uneven{size_t{1} << 20, 4, false, 2, 0};
  for (AllReduceAlgorithm a : kAcrossNodes) {
    SCOPED_TRACE(ferry::algorithm_name(a));
    EXPECT_FALSE(algorithm_supported(a, uneven));
    const std::string msg = rejection<ferry::NotSupported>(call(64, DataType::kFloat32, ReduceOp::kSum, a), uneven);
    EXPECT_TRUE(contains_ci(msg, "same number of ranks")) << msg;
  }
  // 32 nodes of 1, 2 nodes of 16.
  for (auto [nodes, per_node] : {std::pair{32, 1}, std::pair{2, 16}}) {
    const CommShape comm = multi_node(nodes, per_node);
    EXPECT_FALSE(algorithm_supported(AllReduceAlgorithm::kHierarchical, comm));
    EXPECT_FALSE(algorithm_supported(AllReduceAlgorithm::kAuto, comm));
    const std::string msg = rejection<ferry::NotSupported>(
        call(64, DataType::kFloat32, ReduceOp::kSum, AllReduceAlgorithm::kHierarchical), comm);
    EXPECT_TRUE(names_number(msg, static_cast<unsigned>(nodes == 32 ? 32 : 16))) << msg;
  }
}

ferry::Topology topology_of(const std::vector<int>& node_of_rank, int rank) {
  return ferry::topology_from_nodes(node_of_rank, rank);
}

TEST(AllReduceArgs, CommShapeFromTopology) {
  CommShape s = comm_shape(4096, topology_of({0, 0, 0, 0}, 1));
  EXPECT_TRUE(s.single_node);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.num_nodes, 1);
  EXPECT_EQ(s.ranks_per_node, 4);
  EXPECT_EQ(s.max_bytes, 4096u);

  s = comm_shape(4096, topology_of({0, 0, 1, 1}, 3));  // 2x2
  EXPECT_FALSE(s.single_node);
  EXPECT_EQ(s.num_nodes, 2);
  EXPECT_EQ(s.ranks_per_node, 2);
  EXPECT_TRUE(algorithm_supported(AllReduceAlgorithm::kHierarchical, s));

  s = comm_shape(4096, topology_of({0, 1, 0, 1, 0, 1}, 0));  // 2x3, interleaved ranks (hostnames)
  EXPECT_EQ(s.num_nodes, 2);
  EXPECT_EQ(s.ranks_per_node, 3);
  EXPECT_TRUE(algorithm_supported(AllReduceAlgorithm::kHierarchical, s));

  s = comm_shape(4096, topology_of({0, 0, 0, 1}, 0));  // 3 + 1
  EXPECT_EQ(s.num_nodes, 2);
  EXPECT_EQ(s.ranks_per_node, 0);
  EXPECT_FALSE(algorithm_supported(AllReduceAlgorithm::kHierarchical, s));
  EXPECT_FALSE(algorithm_supported(AllReduceAlgorithm::kAuto, s));
}

TEST(AllReduceArgs, SingleNodeSupportsTheBasicAlgorithms) {
  for (int n : {2, 3, 4, 6, 8}) {
    const CommShape comm{size_t{1} << 20, n, true};
    for (AllReduceAlgorithm a : {AllReduceAlgorithm::kOneShot, AllReduceAlgorithm::kTwoShot,
                                 AllReduceAlgorithm::kRing})
      EXPECT_TRUE(algorithm_supported(a, comm)) << ferry::algorithm_name(a) << " on " << n;
  }
}

TEST(AllReduceArgs, ValidCallsReturnTheirByteSize) {
  const CommShape two_by_four = multi_node(2, 4);
  for (DataType t : kTypes) {
    for (ReduceOp op : kOps) {
      for (const auto& [comm, algos] : {std::pair{kComm, kAll}, std::pair{two_by_four, kAcrossNodes}}) {
        for (AllReduceAlgorithm a : algos) {
          for (size_t count : {size_t{1}, size_t{3}, size_t{17}, size_t{1023}, size_t{65537}}) {
            SCOPED_TRACE(std::string(ferry::dtype_name(t)) + " " + ferry::reduce_op_name(op) + " " +
                         ferry::algorithm_name(a) + " count " + std::to_string(count) +
                         (comm.single_node ? "" : " across nodes"));
            EXPECT_EQ(validate_call(call(count, t, op, a), comm), count * ferry::dtype_size(t));
          }
        }
      }
    }
  }
}

TEST(AllReduceArgs, InPlaceAndUnalignedPointersAreValid) {
  // The API takes any device pointers: no alignment requirement, in == out allowed.
  for (DataType t : kTypes) {
    SCOPED_TRACE(ferry::dtype_name(t));
    const size_t sz = ferry::dtype_size(t);
    const auto* in = static_cast<const char*>(kIn) + sz;       // base + 1 element
    auto* out = static_cast<char*>(kOut) + 3 * sz;              // base + 3 elements
    EXPECT_EQ(validate_call(CallShape{in, out, 1001, t, ReduceOp::kSum, AllReduceAlgorithm::kAuto}, kComm),
              1001 * sz);
    EXPECT_EQ(validate_call(CallShape{out, out, 7, t, ReduceOp::kMax, AllReduceAlgorithm::kRing}, kComm), 7 * sz);
    EXPECT_EQ(validate_call(CallShape{in, out, 1001, t, ReduceOp::kSum, AllReduceAlgorithm::kHierarchical},
                            multi_node(2, 2)),
              1001 * sz);
    EXPECT_EQ(validate_call(CallShape{out, out, 7, t, ReduceOp::kMax, AllReduceAlgorithm::kAuto}, multi_node(4, 1)),
              7 * sz);
  }
}

// The exact messages (the part the thrower wrote) of every way a communicator's
// shape refuses an algorithm, and the names algorithm_from_string knows: one
// table of algorithms (allreduce.cpp) gives them all, hierarchical included.
TEST(AllReduceArgs, ShapeRejectionsSayExactlyWhy) {
  const CommShape uneven{size_t{1} << 20, 4, false, 2, 0};
  const struct {
    CommShape comm;
    AllReduceAlgorithm algorithm;
    const char* message;
  } cases[] = {
      {multi_node(2, 2), AllReduceAlgorithm::kOneShot,
       "AllReduce algorithm one_shot needs all ranks in one node (NVLink), but the 4 ranks span 2 nodes: across "
       "nodes use hierarchical (or auto, which picks it)"},
      {multi_node(4, 1), AllReduceAlgorithm::kRecursiveDoubling,
       "AllReduce algorithm recursive_doubling needs all ranks in one node (NVLink), but the 4 ranks span 4 nodes: "
       "across nodes use hierarchical (or auto, which picks it)"},
      {CommShape{size_t{1} << 20, 4, true}, AllReduceAlgorithm::kHierarchical,
       "AllReduce algorithm hierarchical runs across nodes, but all 4 ranks share one node: inside a node use auto, "
       "one_shot, two_shot, ring or recursive_doubling"},
      {uneven, AllReduceAlgorithm::kAuto,
       "AllReduce across nodes (hierarchical) needs the same number of ranks in every node; the 4 ranks span 2 nodes "
       "of different sizes"},
      {uneven, AllReduceAlgorithm::kHierarchical,
       "AllReduce across nodes (hierarchical) needs the same number of ranks in every node; the 4 ranks span 2 nodes "
       "of different sizes"},
      {multi_node(32, 1), AllReduceAlgorithm::kHierarchical,
       "AllReduce across nodes (hierarchical) supports 2 to 16 nodes, got 32"},
      {multi_node(2, 16), AllReduceAlgorithm::kAuto,
       "AllReduce across nodes (hierarchical) supports at most 8 ranks in a node, got 16"},
      {CommShape{size_t{1} << 20, 9, true}, AllReduceAlgorithm::kAuto,
       "AllReduce supports at most 8 ranks in a node, got 9"},
      {CommShape{size_t{1} << 20, 12, true}, AllReduceAlgorithm::kRing,
       "AllReduce supports at most 8 ranks in a node, got 12"},
      {CommShape{size_t{1} << 20, 12, true}, AllReduceAlgorithm::kRecursiveDoubling,
       "AllReduce supports at most 8 ranks in a node, got 12"},
      {CommShape{size_t{1} << 20, 6, true}, AllReduceAlgorithm::kRecursiveDoubling,
       "AllReduce algorithm recursive_doubling needs a power-of-two world size, got 6"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(ferry::algorithm_name(c.algorithm)) + " on " + std::to_string(c.comm.world_size) +
                 " ranks in " + std::to_string(c.comm.num_nodes) + " nodes");
    EXPECT_FALSE(algorithm_supported(c.algorithm, c.comm));
    const std::string msg =
        rejection<ferry::NotSupported>(call(64, DataType::kFloat32, ReduceOp::kSum, c.algorithm), c.comm);
    EXPECT_EQ(user_part(msg), std::string("ferry: ") + c.message);
  }
}

TEST(AllReduceArgs, AlgorithmNamesComeFromOneTable) {
  const std::pair<AllReduceAlgorithm, const char*> names[] = {
      {AllReduceAlgorithm::kAuto, "auto"},          {AllReduceAlgorithm::kOneShot, "one_shot"},
      {AllReduceAlgorithm::kTwoShot, "two_shot"},   {AllReduceAlgorithm::kRing, "ring"},
      {AllReduceAlgorithm::kRecursiveDoubling, "recursive_doubling"},
      {AllReduceAlgorithm::kHierarchical, "hierarchical"}};
  for (const auto& [algorithm, name] : names) {
    EXPECT_STREQ(ferry::algorithm_name(algorithm), name);
    EXPECT_EQ(ferry::algorithm_from_string(name), algorithm) << name;
  }
  EXPECT_STREQ(ferry::algorithm_name(static_cast<AllReduceAlgorithm>(99)), "unknown");
  EXPECT_EQ(ferry::algorithm_from_string("rd"), AllReduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(ferry::algorithm_from_string("one-shot"), AllReduceAlgorithm::kOneShot);
  const std::string msg =
      ferry::testing::error_message<ferry::InvalidArgument>([] { return ferry::algorithm_from_string("one_shot_ll"); });
  EXPECT_EQ(user_part(msg), "ferry: unknown allreduce algorithm 'one_shot_ll' (expected auto, one_shot, two_shot, "
                            "ring, recursive_doubling, hierarchical)");
}

// The hierarchical AllReduce's grid: one block per `block_bytes` of a shard (64 KiB built in, 256 KiB over tcp
// alone: each block is one put with its signal), at least one, at most the launch's most blocks; every rank
// computes it from the call alone.
TEST(HierarchicalBlocks, OnePerBlockBytesOfAShard) {
  using ferry::allreduce::hierarchical_blocks;
  using ferry::allreduce::kHierarchicalBlockBytes;
  using ferry::allreduce::kHierarchicalTcpBlockBytes;
  constexpr size_t kBf16 = 2;
  const size_t kib = 1024;
  // 1 MiB of bf16 on 1 rank per node: a 1 MiB shard.
  EXPECT_EQ(hierarchical_blocks(512 * kib, kBf16, 1, 64, false), 16);
  EXPECT_EQ(hierarchical_blocks(512 * kib, kBf16, 1, 64, false, kHierarchicalBlockBytes), 16);
  EXPECT_EQ(hierarchical_blocks(512 * kib, kBf16, 1, 4, false, kHierarchicalTcpBlockBytes), 4);
  // 256 KiB: 4 blocks of 64 KiB, or one of 256 KiB.
  EXPECT_EQ(hierarchical_blocks(128 * kib, kBf16, 1, 4, false, kHierarchicalBlockBytes), 4);
  EXPECT_EQ(hierarchical_blocks(128 * kib, kBf16, 1, 4, false, kHierarchicalTcpBlockBytes), 1);
  // 512 KiB over 2 ranks per node: 256 KiB shards.
  EXPECT_EQ(hierarchical_blocks(256 * kib, kBf16, 2, 4, false, kHierarchicalTcpBlockBytes), 1);
  EXPECT_EQ(hierarchical_blocks(256 * kib + 8, kBf16, 2, 4, false, kHierarchicalTcpBlockBytes), 2);
  // Tiny and empty calls keep one block.
  EXPECT_EQ(hierarchical_blocks(1, kBf16, 4, 64, false, kHierarchicalTcpBlockBytes), 1);
  EXPECT_EQ(hierarchical_blocks(0, kBf16, 1, 64, false), 1);
  // 0 bytes per block: the built-in size, never a division by zero.
  EXPECT_EQ(hierarchical_blocks(512 * kib, kBf16, 1, 64, false, 0), 16);
}

}  // namespace

// NOTE [LL128 lines]: the 32 lanes of a unit carry its 30 packs, every pack once except pack 14 of each half, whose
// low and high halves ride beside the flags of lanes 7 / 15 (and 23 / 31); each flag lane is the last slot of its
// 128-byte line, so a line is 7 whole packs, half a pack and the flag: 30 packs of data in 512 bytes.
TEST(Ll128Lines, EveryPackOfAUnitOnceAndTheFlagLast) {
  using ferry::allreduce::kLl128UnitBytes;
  using ferry::allreduce::kLl128UnitPacks;
  using ferry::allreduce::ll128_lane_pack;
  std::vector<int> whole(kLl128UnitPacks, 0), halves(kLl128UnitPacks, 0);
  for (int lane = 0; lane < 32; ++lane) {
    const size_t pack = ll128_lane_pack(lane);
    ASSERT_LT(pack, kLl128UnitPacks) << "lane " << lane;
    const bool flag_lane = (lane & 7) == 7;
    ++(flag_lane ? halves : whole)[pack];
    if (flag_lane) EXPECT_EQ(pack, size_t(lane >> 4) * 15 + 14) << "lane " << lane;  // both halves of one pack
  }
  for (size_t pack = 0; pack < kLl128UnitPacks; ++pack) {
    const bool split = pack % 15 == 14;
    EXPECT_EQ(whole[pack], split ? 0 : 1) << "pack " << pack;
    EXPECT_EQ(halves[pack], split ? 2 : 0) << "pack " << pack;
  }
  EXPECT_EQ(kLl128UnitBytes, size_t{32} * 16);
  EXPECT_EQ(kLl128UnitPacks * 16 + 4 * 8, kLl128UnitBytes);  // 480 bytes of data and 4 flags of 8
}
