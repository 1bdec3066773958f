// The TCP bootstrap's liveness probe (NOTE [Bootstrap liveness],
// src/bootstrap/tcp_bootstrap.cpp), on the CPU: forked ranks form a group, every
// rank is seen alive, one is SIGKILLed, and every survivor's probe then names
// exactly that rank as gone, quickly. ctest entry unit_bootstrap_liveness.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ferry/bootstrap.hpp"
#include "gpu/forked_ranks.hpp"

namespace {

using namespace ferry::testing::forked;

// `world` forked ranks form a TcpBootstrap group; everyone is seen alive; after
// a barrier the victim is SIGKILLed; every survivor's probe then names exactly
// the victim as gone, quickly, with nobody silent. Exit code 0: right.
void liveness_case(int world, int victim) {
  const std::string id = ferry::TcpBootstrap::id_to_string(ferry::TcpBootstrap::create_unique_id("127.0.0.1"));
  const SharedCounter saw;  // survivors stay until all of them saw the victim gone
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pids.push_back(fork_child([&, r]() -> int {
      const std::string who = "liveness w" + std::to_string(world) + " rank " + std::to_string(r);
      ferry::TcpBootstrapOptions options;
      options.timeout = std::chrono::seconds(20);
      ferry::TcpBootstrap boot(ferry::TcpBootstrap::id_from_string(id), r, world, options);
      const ferry::PeerLiveness before = boot.probe_liveness(std::chrono::milliseconds(1000));
      if (!before.known || !before.gone.empty() || !before.silent.empty()) {
        say(who, "before the kill: known %d, %zu gone, %zu silent", before.known, before.gone.size(),
            before.silent.size());
        return 1;
      }
      boot.barrier();
      if (r == victim) raise(SIGKILL);
      const auto start = Clock::now();
      ferry::PeerLiveness after;
      while (seconds_since(start) < 10) {
        const auto t = Clock::now();
        after = boot.probe_liveness(std::chrono::milliseconds(500));
        if (seconds_since(t) > 1.0) {
          say(who, "a probe took %.2f s (budget 0.5 s)", seconds_since(t));
          return 2;
        }
        if (!after.gone.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      const bool right = after.known && after.gone == std::vector<int>{victim} && after.silent.empty();
      saw.arrive_and_wait(world - 1, std::chrono::seconds(15));
      if (!right) {
        say(who, "after the kill: known %d, %zu gone (first %d), %zu silent", after.known, after.gone.size(),
            after.gone.empty() ? -1 : after.gone[0], after.silent.size());
        return 3;
      }
      say(who, "saw rank %d gone after %.2f s", victim, seconds_since(start));
      return 0;
    }));
  }
  for (int r = 0; r < world; ++r) {
    int status = 0;
    const bool exited = wait_child(pids[static_cast<size_t>(r)], Clock::now() + std::chrono::seconds(60), status);
    ASSERT_TRUE(exited) << "rank " << r << " hung";
    if (r == victim) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the victim should die by SIGKILL";
    } else {
      ASSERT_TRUE(WIFEXITED(status)) << "rank " << r << " crashed";
      EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r << " (1: not all alive before, 2: slow probe, 3: wrong "
                                        << "verdict after the kill)";
    }
  }
}

TEST(BootstrapLiveness, KilledMemberIsGone) { liveness_case(4, 2); }
TEST(BootstrapLiveness, KilledRootIsGone) { liveness_case(3, 0); }
TEST(BootstrapLiveness, TwoRanks) { liveness_case(2, 1); }

TEST(BootstrapLiveness, OneRankAndOtherBootstraps) {
  ferry::TcpBootstrap alone(ferry::TcpBootstrap::create_unique_id("127.0.0.1"), 0, 1);
  const ferry::PeerLiveness self = alone.probe_liveness(std::chrono::milliseconds(100));
  EXPECT_TRUE(self.known);
  EXPECT_TRUE(self.gone.empty());
  ferry::CallbackBootstrap callbacks(0, 2, [](const void*, void*, size_t) {}, [] {});
  const ferry::PeerLiveness unknown = callbacks.probe_liveness(std::chrono::milliseconds(100));
  EXPECT_FALSE(unknown.known) << "a callback bootstrap cannot tell";
  EXPECT_TRUE(unknown.gone.empty());
}

}  // namespace
