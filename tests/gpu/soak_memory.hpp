// The soak's bookkeeping (tests/gpu/soak.cpp): environment knobs, which calls are
// checked, memory samples (device free bytes, VmRSS, malloc's bytes) at the warm-up,
// at half the calls and at the end, the limits on them and the per-rank summary.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/test_util.hpp"

namespace ferry::testing::soak {

using Clock = std::chrono::steady_clock;

inline long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 0) : fallback;
}
inline long check_every() { return std::max(1L, env_long("FERRY_SOAK_CHECK_EVERY", 100)); }
inline bool is_check(long c, long calls) { return c == 0 || (c + 1) % check_every() == 0 || c == calls - 1; }

// Failed assertions recorded so far in the running test (this rank).
inline int failed_parts() {
  const ::testing::TestResult* r = ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int n = 0;
  for (int i = 0; i < r->total_part_count(); ++i) n += r->GetTestPartResult(i).failed();
  return n;
}

// ---------------------------------------------------------------- memory and the summary
struct Mem {
  size_t dev_free = 0;  // cudaMemGetInfo free bytes (the whole GPU's)
  long rss_kb = 0;      // VmRSS
  size_t heap_in_use = 0;  // malloc's bytes in use (mallinfo2), less what the test itself holds
                           // then (its current inputs): a leak grows it, memory malloc keeps
                           // after free (its trim and mmap thresholds) does not
  size_t heap_held = 0;    // malloc's bytes taken from the system (in use + kept free)
};
// Collective: every rank idle at a barrier, then measured, then a barrier again
// (so no rank allocates while another measures the GPU they share).
inline Mem measure(cudaStream_t stream, size_t test_held = 0) {
  cudaStreamSynchronize(stream);
  MPI_Barrier(MPI_COMM_WORLD);
  Mem m;
  size_t total = 0;
  if (cudaMemGetInfo(&m.dev_free, &total) != cudaSuccess) m.dev_free = 0;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) m.rss_kb = std::strtol(line.c_str() + 6, nullptr, 10);
  const struct mallinfo2 heap = mallinfo2();
  m.heap_in_use = heap.uordblks + heap.hblkhd - std::min<size_t>(test_held, heap.uordblks + heap.hblkhd);
  m.heap_held = heap.arena + heap.hblkhd;
  MPI_Barrier(MPI_COMM_WORLD);
  return m;
}

struct Summary {
  std::string what;
  long calls = 0, checks = 0, failed_checks = 0;
  Mem before, mid, after;
  bool have_before = false, have_mid = false;
  Clock::time_point start = Clock::now();
};
// Measures (collectively) the baseline, then the midpoint once `done` calls reach
// half of `calls`. Every rank passes the same values.
inline void measure_progress(Summary& s, long done, long warm, long calls, cudaStream_t stream, size_t test_held = 0) {
  if (!s.have_before && (done >= warm || done >= calls)) {
    s.before = measure(stream, test_held);
    s.have_before = true;
  } else if (s.have_before && !s.have_mid && done >= calls / 2) {
    s.mid = measure(stream, test_held);
    s.have_mid = true;
  }
}

// Checks the memory limits on this rank, then rank 0 prints one line per rank.
inline void expect_at_most(double value, const char* knob, long fallback, const Summary& s, const char* what) {
  const long limit = env_long(knob, fallback);
  EXPECT_LE(value, static_cast<double>(limit)) << s.what << ": " << what << " " << value << " MiB (" << knob << "=" << limit << ")";
}

inline void finish(Summary& s, cudaStream_t stream, size_t test_held = 0) {
  s.after = measure(stream, test_held);
  if (!s.have_before) s.before = s.after;
  if (!s.have_mid) s.mid = s.before;
  constexpr double mib = 1024.0 * 1024.0;
  auto dev_drop = [&](const Mem& a, const Mem& b) { return (static_cast<double>(a.dev_free) - static_cast<double>(b.dev_free)) / mib; };
  auto rss_growth = [&](const Mem& a, const Mem& b) { return static_cast<double>(b.rss_kb - a.rss_kb) / 1024.0; };
  auto heap_growth = [&](const Mem& a, const Mem& b) { return (static_cast<double>(b.heap_in_use) - static_cast<double>(a.heap_in_use)) / mib; };
  // VmRSS outside malloc's heap (driver, mapped and pinned memory, code): malloc
  // keeps freed blocks of the test's host references (glibc raises its mmap
  // threshold after the first large free), which VmRSS counts but is no leak.
  auto outside_malloc = [&](const Mem& m) { return static_cast<double>(m.rss_kb) / 1024.0 - m.heap_held / mib; };
  auto outside_growth = [&](const Mem& a, const Mem& b) { return outside_malloc(b) - outside_malloc(a); };
  expect_at_most(dev_drop(s.before, s.after), "FERRY_SOAK_DEVICE_SLACK_MB", 16, s, "device free memory dropped by");
  expect_at_most(rss_growth(s.before, s.after), "FERRY_SOAK_RSS_SLACK_MB", 64, s, "VmRSS grew by");
  expect_at_most(dev_drop(s.mid, s.after), "FERRY_SOAK_STEADY_DEVICE_SLACK_MB", 2, s, "second half: device free memory dropped by");
  expect_at_most(heap_growth(s.mid, s.after), "FERRY_SOAK_STEADY_HEAP_SLACK_MB", 1, s, "second half: malloc's bytes in use grew by");
  expect_at_most(outside_growth(s.mid, s.after), "FERRY_SOAK_STEADY_RSS_SLACK_MB", 8, s,
                 "second half: VmRSS outside malloc's heap grew by");
  const double secs = std::chrono::duration<double>(Clock::now() - s.start).count();
  char line[768];
  std::snprintf(line, sizeof line,
                "[soak rank %d] %s: calls %ld, checks %ld, failed checks %ld, wall %.1f s (%.0f calls/s); "
                "warm-up -> half -> end: device free %.1f -> %.1f -> %.1f MiB (second half drop %.1f MiB), "
                "VmRSS %.1f -> %.1f -> %.1f MiB (second half growth %.1f MiB, outside malloc's heap %.1f MiB), "
                "malloc in use %.1f -> %.1f -> %.1f MiB (second half growth %.2f MiB), malloc held %.1f -> %.1f -> %.1f MiB",
                mpi_rank(), s.what.c_str(), s.calls, s.checks, s.failed_checks, secs, secs > 0 ? s.calls / secs : 0.0,
                s.before.dev_free / mib, s.mid.dev_free / mib, s.after.dev_free / mib, dev_drop(s.mid, s.after),
                s.before.rss_kb / 1024.0, s.mid.rss_kb / 1024.0, s.after.rss_kb / 1024.0, rss_growth(s.mid, s.after),
                outside_growth(s.mid, s.after),
                s.before.heap_in_use / mib, s.mid.heap_in_use / mib, s.after.heap_in_use / mib,
                heap_growth(s.mid, s.after), s.before.heap_held / mib, s.mid.heap_held / mib, s.after.heap_held / mib);
  std::vector<char> all(static_cast<size_t>(mpi_size()) * sizeof line);
  MPI_Gather(line, sizeof line, MPI_CHAR, all.data(), sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (mpi_rank() == 0) {
    for (int r = 0; r < mpi_size(); ++r) std::printf("%s\n", &all[static_cast<size_t>(r) * sizeof line]);
    std::fflush(stdout);
  }
}

inline void progress(const Summary& s, long c, long calls) {
  if (mpi_rank() != 0 || calls < 10 || (c + 1) % std::max(1L, calls / 10) != 0) return;
  std::printf("[soak] %s: %ld/%ld calls, %ld checks, %ld failed, %.1f s\n", s.what.c_str(), c + 1, calls, s.checks,
              s.failed_checks, std::chrono::duration<double>(Clock::now() - s.start).count());
  std::fflush(stdout);
}

}  // namespace ferry::testing::soak
