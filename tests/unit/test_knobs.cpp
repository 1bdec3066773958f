// The knob registry (src/common/knobs.hpp, NOTE [Knobs]), no GPU: every knob's
// default parses, bad values are rejected with InvalidArgument naming the
// variable and the value, docs/knobs.md is the registry's page, and no FERRY_*
// variable is read outside the registry.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/expect_error.hpp"
#include "common/knobs.hpp"
#include "ferry/error.hpp"

namespace {

namespace knobs = ferry::knobs;
using knobs::Info;
using knobs::Type;
using ferry::testing::ScopedEnv;
using ferry::testing::user_part;

#ifndef FERRY_SOURCE_DIR
#error "FERRY_SOURCE_DIR must name the source tree (tests/CMakeLists.txt)"
#endif
const std::filesystem::path kSourceDir = FERRY_SOURCE_DIR;

// Parses `value` as `knob`'s type, as the typed handles do.
void parse_as(const Info& knob, const std::string& value) {
  switch (knob.type) {
    case Type::kBool: knobs::parse_bool(knob, value); break;
    case Type::kInt:
    case Type::kSize: knobs::parse_number(knob, value); break;
    case Type::kEnum: knobs::parse_choice(knob, value); break;
    case Type::kString: break;
  }
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

TEST(Knobs, RowsAreWellFormed) {
  std::set<std::string> names;
  for (const Info& k : knobs::kRegistry) {
    SCOPED_TRACE(k.name);
    EXPECT_EQ(std::string_view(k.name).substr(0, 6), "FERRY_");
    EXPECT_TRUE(names.insert(k.name).second) << "listed twice";
    bool known_area = false;
    for (const knobs::Area& a : knobs::kAreas) known_area = known_area || std::string_view(a.name) == k.area;
    EXPECT_TRUE(known_area) << k.area;
    EXPECT_NE(std::string(k.meaning), "");
    EXPECT_EQ(std::string(k.meaning).find('\n'), std::string::npos) << "a meaning is one line";
    EXPECT_TRUE(k.default_value != nullptr || *k.default_note != '\0') << "a computed default needs a note";
    if (k.type == Type::kInt || k.type == Type::kSize) EXPECT_LE(k.min, k.max);
    if (k.type == Type::kInt) EXPECT_LE(k.max, uint64_t{INT64_MAX});
    if (k.type == Type::kEnum) EXPECT_NE(k.choices[0], nullptr);
    EXPECT_EQ(knobs::index_of(k.name), &k - knobs::kRegistry);
  }
}

TEST(Knobs, EveryKnobParsesItsDefault) {
  for (const Info& k : knobs::kRegistry) {
    SCOPED_TRACE(k.name);
    ScopedEnv unset(k.name, nullptr);
    EXPECT_FALSE(knobs::raw(k).has_value());
    if (k.default_value == nullptr) {
      EXPECT_THROW(knobs::fixed_default(k), ferry::Error) << "the default is computed where it is read";
      continue;
    }
    EXPECT_NO_THROW(parse_as(k, k.default_value));
    // Set to its default, it reads as it does unset.
    ScopedEnv set(k.name, k.default_value);
    EXPECT_NO_THROW(parse_as(k, *knobs::raw(k)));
  }
}

TEST(Knobs, DefaultsAreThoseTheReadersHad) {
  for (const Info& k : knobs::kRegistry) ::unsetenv(k.name);  // this test's process: no knob set
  EXPECT_EQ(knobs::kTimeoutMs.value(), 10000);
  EXPECT_FALSE(knobs::kRanksPerNode.read().has_value());
  EXPECT_EQ(knobs::kBootstrapAddr.value(), "127.0.0.1");
  EXPECT_EQ(knobs::kUcxPeerFailure.value(), knobs::UcxPeerFailure::kAuto);  // NOTE [tcp without UCX's peer-failure ...]
  EXPECT_EQ(knobs::kProxyFifoEntries.value(), 1024u);
  EXPECT_EQ(knobs::kProxyIdleSpins.value(), uint64_t{1} << 20);
  EXPECT_EQ(knobs::kProxyPutChunkBytes.value(), uint64_t{4} << 20);
  EXPECT_EQ(knobs::kAllReduceOneShotMaxBytes.read_or(12345), 12345u);
  EXPECT_EQ(knobs::kAllReduceLlMaxBytes.read_or(54321), 54321u);  // default by world size
  EXPECT_EQ(knobs::kHierarchicalLaunchBytes.value(), 0u);
  EXPECT_EQ(knobs::kOneShotPacksPerThread.value(), 0);
  EXPECT_EQ(knobs::kOneShotBlocks.value(), 0);
  EXPECT_EQ(knobs::kTwoShotBlocks.value(), 0);
  EXPECT_EQ(knobs::kTwoShotMaxChunkPacks.value(), 0u);
  EXPECT_EQ(knobs::kTwoShotVariant.value(), knobs::TwoShotVariant::kAuto);
  EXPECT_EQ(knobs::kEpChunkCols.read_or(8192), 8192);
  EXPECT_EQ(knobs::kEpDispatchRecvBlocks.read_or(16), 16);
  EXPECT_EQ(knobs::kEpCombineRecvBlocks.read_or(8), 8);
  EXPECT_TRUE(knobs::kEpOverlap.value());
  EXPECT_TRUE(knobs::kEpFuseLayout.value());
  EXPECT_TRUE(knobs::kEpSpreadItems.value());
  EXPECT_FALSE(knobs::kEpHierarchical.read().has_value());
  EXPECT_FALSE(knobs::kUcxPerftest.read().has_value());
  EXPECT_EQ(knobs::kMpiAllgatherChunkBytes.value(), uint64_t{1} << 30);
}

TEST(Knobs, GoodValuesParse) {
  {
    ScopedEnv e("FERRY_EP_OVERLAP", "0");
    EXPECT_FALSE(knobs::kEpOverlap.value());
  }
  for (const char* on : {"1", "on"}) {  // NOTE [tcp without UCX's peer-failure handling]: 1 and 0 as before
    ScopedEnv e("FERRY_UCX_PEER_FAILURE", on);
    EXPECT_EQ(knobs::kUcxPeerFailure.value(), knobs::UcxPeerFailure::kOn) << on;
  }
  for (const char* off : {"0", "off"}) {
    ScopedEnv e("FERRY_UCX_PEER_FAILURE", off);
    EXPECT_EQ(knobs::kUcxPeerFailure.value(), knobs::UcxPeerFailure::kOff) << off;
  }
  EXPECT_EQ(knobs::kUcxPeerFailure.value(), knobs::UcxPeerFailure::kAuto);
  for (const char* off : {"0", "off", "false"}) {
    ScopedEnv e("FERRY_EP_HIERARCHICAL", off);
    EXPECT_EQ(knobs::kEpHierarchical.read(), std::optional<bool>(false)) << off;
  }
  {
    ScopedEnv e("FERRY_EP_HIERARCHICAL", "");  // empty: unset
    EXPECT_FALSE(knobs::kEpHierarchical.read().has_value());
  }
  {
    ScopedEnv e("FERRY_TIMEOUT_MS", "120000");
    EXPECT_EQ(knobs::kTimeoutMs.value(), 120000);
  }
  {
    ScopedEnv e("FERRY_RANKS_PER_NODE", "2");
    EXPECT_EQ(knobs::kRanksPerNode.read(), std::optional<int64_t>(2));
  }
  {
    ScopedEnv e("FERRY_EP_CHUNK_COLS", "0");  // below 256: the reader rounds it up
    EXPECT_EQ(knobs::kEpChunkCols.read_or(8192), 0);
  }
  {
    ScopedEnv e("FERRY_PROXY_PUT_CHUNK_BYTES", "18446744073709551615");
    EXPECT_EQ(knobs::kProxyPutChunkBytes.value(), UINT64_MAX);
  }
  for (const auto& [text, variant] : {std::pair{"pull", knobs::TwoShotVariant::kPull},
                                      std::pair{"1", knobs::TwoShotVariant::kPull},
                                      std::pair{"push", knobs::TwoShotVariant::kPush},
                                      std::pair{"2", knobs::TwoShotVariant::kPush},
                                      std::pair{"0", knobs::TwoShotVariant::kAuto}}) {
    ScopedEnv e("FERRY_TWO_SHOT_VARIANT", text);
    EXPECT_EQ(knobs::kTwoShotVariant.value(), variant) << text;
  }
  {
    ScopedEnv e("FERRY_BOOTSTRAP_ADDR", "10.0.0.7");
    EXPECT_EQ(knobs::kBootstrapAddr.value(), "10.0.0.7");
  }
}

// Each read sees the environment as it is then (tests set a variable, build an object, unset it).
TEST(Knobs, ReadsAreNotCached) {
  {
    ScopedEnv e("FERRY_EP_FUSE_LAYOUT", "0");
    EXPECT_FALSE(knobs::kEpFuseLayout.value());
  }
  {
    ScopedEnv e("FERRY_EP_FUSE_LAYOUT", "1");
    EXPECT_TRUE(knobs::kEpFuseLayout.value());
  }
}

TEST(Knobs, BadValuesAreRejectedNamingTheVariable) {
  const char* const kBad[] = {"abc", "-1", "+1", " 1", "1 ", "1.5", "12abc", "0x10", "1e3", "99999999999999999999999"};
  for (const Info& k : knobs::kRegistry) {
    if (k.type == Type::kString) continue;  // any text is a string
    for (const char* bad : kBad) {
      SCOPED_TRACE(std::string(k.name) + "=" + bad);
      ScopedEnv e(k.name, bad);
      const std::string msg =
          ferry::testing::error_message<ferry::InvalidArgument>([&] { parse_as(k, *knobs::raw(k)); });
      EXPECT_NE(msg.find(k.name), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << "should quote the value: " << msg;
    }
  }
}

TEST(Knobs, OutOfRangeValuesAreRejected) {
  struct Case {
    const char* name;
    const char* value;
    const char* message;
  };
  const Case cases[] = {
      {"FERRY_TIMEOUT_MS", "0", "FERRY_TIMEOUT_MS must be a positive integer (milliseconds), got '0'"},
      {"FERRY_RANKS_PER_NODE", "0", "FERRY_RANKS_PER_NODE must be a positive integer, got '0'"},
      {"FERRY_RANKS_PER_NODE", "2147483648", "FERRY_RANKS_PER_NODE must be at most 2147483647, got '2147483648'"},
      {"FERRY_PROXY_FIFO_ENTRIES", "0", "FERRY_PROXY_FIFO_ENTRIES must be a positive integer (entries), got '0'"},
      {"FERRY_MPI_ALLGATHER_CHUNK_BYTES", "0",
       "FERRY_MPI_ALLGATHER_CHUNK_BYTES must be a positive integer (bytes), got '0'"},
      {"FERRY_EP_DISPATCH_RECV_BLOCKS", "-3",
       "FERRY_EP_DISPATCH_RECV_BLOCKS must be a non-negative integer (blocks), got '-3'"},
      {"FERRY_EP_OVERLAP", "2", "FERRY_EP_OVERLAP must be 0 or 1 (or off/on, false/true), got '2'"},
      {"FERRY_UCX_PEER_FAILURE", "yes", "FERRY_UCX_PEER_FAILURE must be one of off, on, auto (or 0 to 2), got 'yes'"},
      {"FERRY_TWO_SHOT_VARIANT", "3", "FERRY_TWO_SHOT_VARIANT must be one of auto, pull, push (or 0 to 2), got '3'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.name) + "=" + c.value);
    ScopedEnv e(c.name, c.value);
    const Info& k = knobs::kRegistry[knobs::index_of(c.name)];
    const std::string msg = ferry::testing::error_message<ferry::InvalidArgument>([&] { parse_as(k, c.value); });
    EXPECT_EQ(user_part(msg), std::string("ferry: ") + c.message);
  }
  // Through the typed handles too.
  ScopedEnv e("FERRY_TIMEOUT_MS", "soon");
  EXPECT_THROW(knobs::kTimeoutMs.value(), ferry::InvalidArgument);
  ScopedEnv h("FERRY_EP_HIERARCHICAL", "2");
  EXPECT_THROW(knobs::kEpHierarchical.read(), ferry::InvalidArgument);
}

TEST(Knobs, ProblemsNameEveryBadValue) {
  for (const Info& k : knobs::kRegistry) ::unsetenv(k.name);
  EXPECT_TRUE(knobs::problems().empty());
  ScopedEnv a("FERRY_EP_OVERLAP", "maybe");
  ScopedEnv b("FERRY_PROXY_IDLE_SPINS", "-1");
  const std::vector<std::string> problems = knobs::problems();
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], "FERRY_PROXY_IDLE_SPINS must be a non-negative integer (loops), got '-1'");
  EXPECT_EQ(problems[1], "FERRY_EP_OVERLAP must be 0 or 1 (or off/on, false/true), got 'maybe'");
  const std::string table = knobs::table();
  EXPECT_NE(table.find("maybe (INVALID)"), std::string::npos) << table;
}

TEST(Knobs, TableListsEveryKnob) {
  const std::string table = knobs::table();
  for (const Info& k : knobs::kRegistry) EXPECT_NE(table.find(k.name), std::string::npos) << k.name;
}

TEST(Knobs, DocsListEveryKnob) {
  const std::filesystem::path page = kSourceDir / "docs" / "knobs.md";
  ASSERT_TRUE(std::filesystem::exists(page)) << page;
  const std::string docs = read_file(page);
  for (const Info& k : knobs::kRegistry)
    EXPECT_NE(docs.find("| `" + std::string(k.name) + "` |"), std::string::npos) << k.name << " is not in " << page;
  EXPECT_TRUE(docs == knobs::markdown())
      << page << " differs from the registry: regenerate it with `ferry-bench --knobs --markdown > docs/knobs.md`";
}

// Every FERRY_* variable is read through the registry: no getenv("FERRY_...")
// in the library, the bench or the Python module (tests/ may read their own).
TEST(Knobs, NothingElseReadsFerryVariables) {
  const std::regex direct_read(R"(getenv\s*\(\s*"FERRY_)");
  for (const char* dir : {"src", "include", "bench", "python/csrc", "examples"}) {
    const std::filesystem::path root = kSourceDir / dir;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh" && ext != ".h") continue;
      const std::string text = read_file(entry.path());
      EXPECT_FALSE(std::regex_search(text, direct_read))
          << entry.path() << " reads a FERRY_* variable itself: add it to src/common/knobs.hpp and read it there";
    }
  }
}

}  // namespace
