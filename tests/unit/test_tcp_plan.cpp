// The tcp reconnect plan (net::plan_tcp_again) on the CPU: every rank decides the same from all ranks' wishes, and
// a rank with a lane that is not tcp, or one that keeps UCX's peer-failure handling, or one that turns the receive
// thread off, changes the whole decision.
#include <gtest/gtest.h>

#include <vector>

#include "net/tcp_plan.hpp"

namespace {

using ferry::net::plan_tcp_again;
using ferry::net::TcpPlan;
using ferry::net::TcpWish;

TcpWish tcp(bool peer_failure = true, bool receive = true, bool drop_asked = true, uint8_t streams = 1) {
  return {TcpWish::kTcp, static_cast<uint8_t>(peer_failure), static_cast<uint8_t>(drop_asked),
          static_cast<uint8_t>(receive), streams};
}

TEST(TcpPlan, EveryRankTcpAloneDropsTheHandlingAndTakesTheReceiveWorker) {
  const TcpPlan plan = plan_tcp_again({tcp(), tcp(), tcp(), tcp()});
  EXPECT_TRUE(plan.drop_peer_failure);
  EXPECT_TRUE(plan.receive_worker);
}

TEST(TcpPlan, OneRankWithAnotherLaneKeepsEverythingAsItIs) {
  const TcpPlan plan = plan_tcp_again({tcp(), {TcpWish::kOther, 1, 1, 1}, tcp()});
  EXPECT_FALSE(plan.drop_peer_failure);
  EXPECT_FALSE(plan.receive_worker);
}

TEST(TcpPlan, NoRemoteEndpointsAnywhereIsNoPlan) {
  const TcpPlan plan = plan_tcp_again({{TcpWish::kNone, 1, 1, 1}, {TcpWish::kNone, 1, 1, 1}});
  EXPECT_FALSE(plan.drop_peer_failure);
  EXPECT_FALSE(plan.receive_worker);
  // Ranks without remote endpoints beside tcp-only ones do not stop the others.
  const TcpPlan mixed = plan_tcp_again({{TcpWish::kNone, 1, 1, 1}, tcp()});
  EXPECT_TRUE(mixed.drop_peer_failure);
  EXPECT_TRUE(mixed.receive_worker);
}

TEST(TcpPlan, TheHandlingIsDroppedOnlyWhereAskedAndEveryRankHasIt) {
  // FERRY_UCX_PEER_FAILURE=1 on every rank, or on one rank only: kept on every rank.
  EXPECT_FALSE(plan_tcp_again({tcp(true, true, false), tcp(true, true, false)}).drop_peer_failure);
  EXPECT_FALSE(plan_tcp_again({tcp(true, true, true), tcp(true, true, false)}).drop_peer_failure);
  EXPECT_FALSE(plan_tcp_again({tcp(true), tcp(false)}).drop_peer_failure);  // one rank never had it
  EXPECT_TRUE(plan_tcp_again({tcp(false), tcp(false)}).receive_worker);     // the receive worker regardless
}

TEST(TcpPlan, OneRankWithoutTheReceiveThreadMeansNoneHasIt) {
  const TcpPlan plan = plan_tcp_again({tcp(true, true), tcp(true, false), tcp(true, true)});
  EXPECT_FALSE(plan.receive_worker);
  EXPECT_TRUE(plan.drop_peer_failure);
}

// NOTE [Several tcp streams]: every rank opens as many streams as the rank asking for the fewest, and none without
// the receive workers they connect to.
TEST(TcpPlan, StreamsAreTheFewestAnyRankAsksFor) {
  EXPECT_EQ(plan_tcp_again({tcp(true, true, true, 4), tcp(true, true, true, 4)}).streams, 4);
  EXPECT_EQ(plan_tcp_again({tcp(true, true, true, 4), tcp(true, true, true, 2), tcp(true, true, true, 3)}).streams,
            2);
  EXPECT_EQ(plan_tcp_again({tcp(true, true, true, 4), tcp(true, true, true, 0)}).streams, 1);  // 0 counts as 1
  EXPECT_EQ(plan_tcp_again({tcp(true, true, true, 4), tcp(true, false, true, 4)}).streams, 1);  // no receive worker
  EXPECT_EQ(plan_tcp_again({tcp(true, true, true, 4), {TcpWish::kOther, 1, 1, 1, 4}}).streams, 1);
}

}  // namespace

// NOTE [tcp streams by default]: one stream per 4 CPUs of a rank, 1 to 4.
TEST(TcpPlan, StreamsByDefaultFollowTheCpusOfARank) {
  using ferry::net::auto_tcp_streams;
  EXPECT_EQ(auto_tcp_streams(32, 2), 4);   // the 2xH200 host
  EXPECT_EQ(auto_tcp_streams(2, 2), 1);    // a 2-core CI machine
  EXPECT_EQ(auto_tcp_streams(2, 4), 1);
  EXPECT_EQ(auto_tcp_streams(32, 4), 2);
  EXPECT_EQ(auto_tcp_streams(24, 2), 3);
  EXPECT_EQ(auto_tcp_streams(256, 1), 4);  // at most 4
  EXPECT_EQ(auto_tcp_streams(32, 0), 4);   // no ranks counted: as one
  EXPECT_GE(ferry::net::usable_cpus(), 1);
}
