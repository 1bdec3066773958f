// Every FERRY_* environment variable the library and ferry-bench read, in one
// table (name, type, default, one-line meaning) with one way to read each:
// Knob<T>::read() / value(). docs/knobs.md and `ferry-bench --knobs` are printed
// from this table (knobs.cpp); tests/unit/test_knobs.cpp checks that the page
// matches it and that no FERRY_* variable is read anywhere else.
// Host only, plain C++17: nvcc compiles it too (bench/net_bench.cu).
//
// NOTE [Knobs]
// - Unset or empty: the default. Any other value must parse as the knob's type
//   and lie in its range, or the read throws InvalidArgument naming the variable
//   and the value. Types: bool (0/1, off/on, false/true), int and size (decimal,
//   no sign, no suffix), string (as it is), enum (a choice by name or position).
// - A value is parsed where it is used, when the object that uses it is built
//   (Communicator, proxy, AllReduce, EpBuffer, bootstrap), never per call, and
//   it is not cached across objects: a test may set a variable, build an object,
//   and unset it again.
// - A default given as a literal (default_value) parses as the knob's type;
//   nullptr means the default is computed where the knob is read (default_note).
// - New knobs: add a row to kRegistry, a handle below it, and regenerate
//   docs/knobs.md (`ferry-bench --knobs --markdown > docs/knobs.md`).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ferry::knobs {

enum class Type { kBool, kInt, kSize, kString, kEnum };

struct Info {
  const char* name;
  Type type;
  const char* area;           // who reads it and when: one of kAreas
  const char* default_value;  // parses as `type`; nullptr: computed where it is read
  const char* default_note;   // the default in words ("" when default_value says it all)
  const char* meaning;        // one line
  const char* unit;           // int/size: what the number counts, for messages ("" none)
  uint64_t min;               // int/size: the accepted range
  uint64_t max;
  std::array<const char*, 4> choices;  // enum: the names, by position (nullptr after the last)
};

struct Area {
  const char* name;
  const char* when;  // when its knobs are read
};

inline constexpr Area kAreas[] = {
    {"communicator", "read when a Communicator is created"},
    {"bootstrap", "read when a bootstrap or its unique id is created"},
    {"net", "read when a Communicator whose ranks span nodes starts its UCX transport and proxy thread"},
    {"allreduce", "read when an AllReduce is constructed"},
    {"ep", "read when an EpBuffer is constructed"},
    {"bench", "read by ferry-bench"},
    {"nccl_shim", "read by libferry_nccl.so (the NCCL drop-in) when it loads NCCL or creates a communicator"},
    {"test", "testing hooks the library reads"},
};

inline constexpr uint64_t kIntMax = static_cast<uint64_t>(std::numeric_limits<int>::max());
inline constexpr uint64_t kSizeMax = std::numeric_limits<uint64_t>::max();

constexpr Info bool_knob(const char* name, const char* area, const char* default_value, const char* default_note,
                       const char* meaning) {
  return Info{name, Type::kBool, area, default_value, default_note, meaning, "", 0, 1, {}};
}
constexpr Info int_knob(const char* name, const char* area, uint64_t min, uint64_t max, const char* default_value,
                       const char* default_note, const char* unit, const char* meaning) {
  return Info{name, Type::kInt, area, default_value, default_note, meaning, unit, min, max, {}};
}
constexpr Info size_knob(const char* name, const char* area, uint64_t min, const char* default_value,
                    const char* default_note, const char* unit, const char* meaning) {
  return Info{name, Type::kSize, area, default_value, default_note, meaning, unit, min, kSizeMax, {}};
}
constexpr Info string_knob(const char* name, const char* area, const char* default_value, const char* default_note,
                    const char* meaning) {
  return Info{name, Type::kString, area, default_value, default_note, meaning, "", 0, 0, {}};
}
constexpr Info enum_knob(const char* name, const char* area, std::array<const char*, 4> choices,
                      const char* default_value, const char* default_note, const char* meaning) {
  return Info{name, Type::kEnum, area, default_value, default_note, meaning, "", 0, 0, choices};
}

// The table. Names, defaults and meanings are those the readers had before the
// registry; where the default is computed, the reader computes it (default_note
// says how) and the row has no default_value.
inline constexpr Info kRegistry[] = {
    // ---- communicator
    int_knob("FERRY_TIMEOUT_MS", "communicator", 1, kSizeMax >> 1, "10000", "", "milliseconds",
        "deadline of every device-side wait (CommunicatorOptions::timeout overrides it); on expiry the call "
        "throws TimeoutError naming rank, peer and phase, and the communicator refuses further work"),
    int_knob("FERRY_RANKS_PER_NODE", "communicator", 1, kIntMax, nullptr, "by hostname", "",
        "group consecutive ranks into nodes of this many (virtual nodes); must divide the world size and be "
        "the same on every rank"),
    // ---- bootstrap
    string_knob("FERRY_BOOTSTRAP_ADDR", "bootstrap", "127.0.0.1", "",
        "address rank 0 listens on for TcpBootstrap, when create_unique_id is given none"),
    // ---- net
    enum_knob("FERRY_UCX_PEER_FAILURE", "net", {"off", "on", "auto", nullptr}, "auto", "",
        "UCX endpoints with peer-failure handling (a dead peer fails requests, not the process): auto where a lane "
        "is not tcp (RDMA), while tcp-only endpoints connect again without it for UCX's zero-copy tcp puts, 3-5x "
        "faster (NOTE [tcp without UCX's peer-failure handling]); on (1) everywhere UCX allows it; off (0) never"),
    enum_knob("FERRY_UCX_GPU_MEMORY", "net", {"auto", "on", "off", nullptr}, "auto", "",
        "windows in GPU memory, which UCX reads and writes itself (no host staging): auto where every remote "
        "endpoint has a GPUDirect RDMA transport (rc/dc/ud), on where every one has one or cuda_ipc (an error "
        "where one has neither), off never"),
    size_knob("FERRY_UCX_TCP_SEG_SIZE", "net", 0, "65536", "", "bytes",
        "UCX's tcp segment size (UCX_TCP_TX_SEG_SIZE and UCX_TCP_RX_SEG_SIZE, where those are unset): with "
        "peer-failure handling UCX emulates tcp puts in segments, and its default 8 KiB moves well under half of "
        "what 64 KiB does (NOTE [tcp segments]); 0: UCX's own"),
    bool_knob("FERRY_UCX_RECEIVE_THREAD", "net", "1", "",
        "where every remote endpoint is tcp alone, a second UCX worker receives the peers' puts on a thread of its "
        "own, so sending and receiving copy on two cores (NOTE [A receive worker for tcp]); 0: one worker"),
    int_knob("FERRY_UCX_TCP_STREAMS", "net", 0, 16, "0", "auto: 1 per 4 CPUs of the rank, 1-4", "streams",
        "with the receive worker (tcp alone): tcp connections to each peer, each sent by a thread of its own and "
        "received by a receive worker of its own; puts go round-robin over them (NOTE [Several tcp streams]). "
        "0: one per 4 CPUs this process may use, shared by the ranks on the machine, at least 1, at most 4 (NOTE "
        "[tcp streams by default]); every rank takes the fewest any rank asks for"),
    bool_knob("FERRY_UCX_SHM_DIRECT", "net", "1", "",
        "staged windows: landing buffers UCX allocates, so a peer on the same host over UCX shared memory maps "
        "them (ucp_rkey_ptr) and its kernels store put data straight into them (NOTE [Mapped peers]); 0: every "
        "put through the proxy"),
    bool_knob("FERRY_PROXY_STATS", "net", "0", "",
        "1: the proxy also times its UCX calls and completions (Proxy::stats; ferry-bench net turns it on); 0: it "
        "only counts"),
    size_knob("FERRY_PROXY_FIFO_ENTRIES", "net", 1, "1024", "", "entries",
        "descriptors the proxy FIFO holds (CommunicatorOptions::proxy_fifo_entries overrides it); a full FIFO "
        "makes producers wait"),
    size_knob("FERRY_PROXY_IDLE_SPINS", "net", 0, "1048576", "", "loops",
        "idle loops before the proxy thread naps 20 us at a time; 0: never naps"),
    size_knob("FERRY_PROXY_HOLD_SIGNALS_BYTES", "net", 0, "1048576", "", "bytes",
        "the proxy holds the signals of the descriptors it finds ready at once and sends them behind one fence "
        "after the batch's puts, until this many bytes were put since the last fence (NOTE [Signals after the "
        "batch's puts]); 0: a fence before every signal"),
    size_knob("FERRY_PROXY_PUT_CHUNK_BYTES", "net", 0, "4194304", "", "bytes",
        "largest single UCX put the proxy issues (less than 4096 counts as 4096); larger puts go out in pieces. "
        "Unset: 4194304, or 262144 where every remote endpoint is tcp with peer-failure handling (NOTE [Put pieces "
        "over tcp]), or 1048576 on several tcp streams (NOTE [Several tcp streams])"),
    // ---- allreduce
    size_knob("FERRY_ALLREDUCE_ONE_SHOT_MAX_BYTES", "allreduce", 0, nullptr,
        "by ranks in the node: 32 MiB (2), 512 KiB (3-4), 256 KiB (more)", "bytes",
        "largest call auto sends to one-shot (larger ones take two-shot)"),
    size_knob("FERRY_ALLREDUCE_LL_MAX_BYTES", "allreduce", 0, nullptr, "64 KiB on two ranks in a node, else 16 KiB",
        "bytes",
        "largest one-shot call using the LL protocol (at most its capacity); 0: never"),
    bool_knob("FERRY_ALLREDUCE_PDL", "allreduce", "1", "",
        "one-shot AllReduce kernels (fenced, LL and pipelined) start while the previous grid on the stream finishes (programmatic dependent "
        "launch, compute capability 9.0+); 0: plain launches (for comparisons)"),
    size_knob("FERRY_ALLREDUCE_LL128_MAX_BYTES", "allreduce", 0, nullptr, "6 MiB", "bytes",
        "two ranks in a node: largest one-shot call using the LL128 protocol (128-byte flagged lines), above the LL "
        "protocol's; 0: never"),
    size_knob("FERRY_ALLREDUCE_PIPELINED_MIN_BYTES", "allreduce", 0, nullptr, "2 MiB", "bytes",
        "two ranks in a node: one-shot calls above this run the pipelined one-shot"),
    size_knob("FERRY_ALLREDUCE_FIRST_EPOCH", "allreduce", 0, "0", "", "launches",
        "launches the AllReduce's device counter counts as done before its first (tests: the 32-bit tag wrap)"),
    size_knob("FERRY_ONE_SHOT_PIPELINED_STEP_PACKS", "allreduce", 0, "0",
        "built-in: 1024", "packs",
        "pipelined one-shot: 16-byte packs one block moves per step (measurements)"),
    size_knob("FERRY_HIERARCHICAL_LAUNCH_BYTES", "allreduce", 0, "0",
        "built-in: up to 16 MiB, keeping the window under 64 MiB", "bytes",
        "bytes one launch of the hierarchical AllReduce carries; bigger calls run as several launches"),
    int_knob("FERRY_HIERARCHICAL_BLOCKS", "allreduce", 0, kIntMax, "0",
        "built-in: 16; 32 where every node peer is mapped; 64 in pieces; 4 over tcp alone", "blocks",
        "hierarchical AllReduce: most blocks per launch (at most 64), within the SM budget (measurements)"),
    size_knob("FERRY_HIERARCHICAL_BLOCK_BYTES", "allreduce", 0, "0", "built-in: 64 KiB; 256 KiB over tcp alone",
        "bytes", "hierarchical AllReduce: a launch takes one block per this many bytes of a shard, up to its most "
        "blocks (larger: fewer puts per call)"),
    int_knob("FERRY_HIERARCHICAL_PIECES", "allreduce", 1, 64, "16", "", "pieces",
        "hierarchical AllReduce where every node peer's landing and signals are mapped (UCX shared memory): pieces "
        "per block chunk, written and read at once (NOTE [Hierarchical AllReduce in pieces]); 1: one put per block"),
    int_knob("FERRY_ONE_SHOT_PACKS_PER_THREAD", "allreduce", 0, kIntMax, "0", "built-in: 1", "packs",
        "one-shot: 16-byte packs per thread when sizing its grid (measurements)"),
    int_knob("FERRY_ONE_SHOT_BLOCKS", "allreduce", 0, kIntMax, "0", "built-in: 64", "blocks",
        "one-shot: most blocks per launch, within the SM budget (measurements)"),
    int_knob("FERRY_ONE_SHOT_LL_BLOCKS", "allreduce", 0, kIntMax, "0", "built-in: 64", "blocks",
        "one-shot LL protocol: most blocks per launch, within the SM budget (measurements)"),
    int_knob("FERRY_ONE_SHOT_LL_THREADS", "allreduce", 0, 256, "0", "built-in: 256", "threads",
        "one-shot LL protocol: threads per block, a multiple of 32 (measurements)"),
    int_knob("FERRY_TWO_SHOT_BLOCKS", "allreduce", 0, kIntMax, "0", "built-in: the SM budget", "blocks",
        "two-shot: most blocks per launch, at most 256 (measurements)"),
    size_knob("FERRY_TWO_SHOT_MAX_CHUNK_PACKS", "allreduce", 0, "0", "built-in: 2048, 8192 for shards of 2M+ packs",
        "packs", "two-shot: most 16-byte packs one block moves per step (measurements)"),
    enum_knob("FERRY_TWO_SHOT_VARIANT", "allreduce", {"auto", "pull", "push", nullptr}, "auto", "built-in: push",
        "two-shot all-gather by pull or by push (measurements)"),
    // ---- ep
    int_knob("FERRY_EP_CHUNK_COLS", "ep", 0, kIntMax, nullptr, "8192 high-throughput; low-latency 2048 (1024 on 2 ranks of one node up to 128 tokens per rank, bf16 up to 512)", "columns",
        "columns per ready-flagged chunk of a row, rounded down to a multiple of 256 (at least 256)"),
    int_knob("FERRY_EP_COMBINE_CHUNK_COLS", "ep", 0, kIntMax, nullptr,
        "1024 on 2 ranks of one node up to 512 tokens per rank; elsewhere the dispatch's chunk (FERRY_EP_CHUNK_COLS)",
        "columns",
        "low-latency combine inside one node (expanded rows): columns per ready-flagged chunk of a partial, rounded "
        "down to a multiple of 256 (at least 256)"),
    int_knob("FERRY_EP_DISPATCH_RECV_BLOCKS", "ep", 0, kIntMax, nullptr,
        "2/3 of num_sms; 1/2 across nodes unless the network writes GPU memory", "blocks",
        "blocks of num_sms dispatch's receive half gets while both halves run at once (1 to num_sms - 1)"),
    int_knob("FERRY_EP_COMBINE_RECV_BLOCKS", "ep", 0, kIntMax, nullptr,
        "1/3 of num_sms (1/4 on 2 ranks); 1/2 in low-latency, with rank rows or across nodes unless the network "
        "writes GPU memory", "blocks",
        "blocks of num_sms combine's receive half gets while both halves run at once (1 to num_sms - 1)"),
    int_knob("FERRY_EP_COMBINE_PREFETCH_MAX_BLOCKS", "ep", 0, kIntMax, "48", "", "blocks",
        "one-role combine: grids of at most this many blocks ask the L2 for each row's next step (NOTE [EP combine "
        "L2 prefetch]; faster on 8-48 SMs, slower on 132); 0: never"),
    int_knob("FERRY_EP_RANK_ROWS_LOCAL_BLOCKS", "ep", 0, kIntMax, nullptr,
        "ceil(8 / (W - 1)) where 8 send blocks remain for the peers and nothing is quantized, else 0", "blocks",
        "rank-rows dispatch: send blocks that write only this rank's own rows while the others write only "
        "the peers' (SMs split by role); 0: every block writes every destination"),
    int_knob("FERRY_EP_OWN_ROWS_COPY_PERCENT", "ep", 0, 100, nullptr,
        "100 where the send grid has at most 10 blocks, else 0", "percent",
        "rank rows with EpConfig::own_rows_first, where nothing is quantized (bf16, or fp8 input): the share of "
        "the call's own rows (the first ones) the copy engine writes; the send kernel's SMs write the rest"),
    bool_knob("FERRY_EP_OVERLAP", "ep", "1", "",
        "dispatch()/combine() run both halves at once (compute capability 9.0+, num_sms >= 2); 0: one after "
        "the other, each with all num_sms"),
    bool_knob("FERRY_EP_FUSE_LAYOUT", "ep", "1", "",
        "a call of at most 1024 tokens (256 experts; fewer with more) gets its routing layout from the send "
        "kernel's first block; 0: from the layout kernels (for comparisons)"),
    bool_knob("FERRY_EP_PAIR_LAYOUT", "ep", "1", "",
        "a fused layout whose block has a thread for every (token, k) takes one thread per pair (NOTE [EP pair "
        "layout]; low latency up to 128 tokens at top-8); 0: one thread per token (for comparisons)"),
    bool_knob("FERRY_EP_LL_STAGED", "ep", nullptr,
        "buffers whose largest call has at most 8 MiB of rows (NOTE [EP staged low latency])",
        "low latency inside a node: senders write each chunk into a staging row per (source, token) at once, "
        "with no layout on the way, and the receive half lays every source out itself and copies it into the "
        "expert rows (NOTE [EP staged low latency]; shapes whose layout fits its shared memory); 0: straight into "
        "the output rows once every rank's counts are in"),
    bool_knob("FERRY_EP_COMBINE_ONE_ROLE", "ep", "1", "",
        "combine() in high-throughput mode inside a node: every SM reduces rows, this rank's own tokens last, "
        "summed into out by the block that reduced them (NOTE [EP combine one role]); 0: a send half and a "
        "receive half of their own SMs"),
    bool_knob("FERRY_EP_SPREAD_ITEMS", "ep", "1", "",
        "the send half spreads its items over the blocks; 0: block-major order (for comparisons)"),
    size_knob("FERRY_EP_NET_RANGE_BYTES", "ep", 0, "0",
        "built-in: 512 KiB where every peer of another node is mapped, else 4 MiB",
        "bytes", "direct path across nodes, high-throughput: least bytes of records (or partial rows) one range carries, "
        "one signal (and one proxy put) per range; low-latency sends one box per destination"),
    bool_knob("FERRY_EP_HIERARCHICAL", "ep", nullptr, "on across nodes of several ranks each",
        "high-throughput across nodes: 0 takes the direct path (one put per destination rank); 1 insists on "
        "the hierarchical one (nodes of unequal sizes then throw NotSupported)"),
    // ---- bench
    string_knob("FERRY_UCX_PERFTEST", "bench", nullptr, "the ucx_perftest found at build time",
        "ucx_perftest executable `ferry-bench net` compares against"),
    // ---- test
    // ---- nccl_shim
    enum_knob("FERRY_NCCL_SHIM", "nccl_shim", {"on", "off", nullptr, nullptr}, "on", "",
        "on: ncclAllReduce runs on ferry where ferry handles the call; off: every call goes to NCCL (A/B)"),
    bool_knob("FERRY_NCCL_SHIM_LOG", "nccl_shim", "0", "",
        "1: print each ncclAllReduce's route (ferry or NCCL, and why) to stderr"),
    string_knob("FERRY_NCCL_LIBRARY", "nccl_shim", nullptr, "the NCCL found at build time, else libnccl.so.2",
        "the real NCCL the shim loads (dlopen) and forwards to"),
    size_knob("FERRY_NCCL_SHIM_MAX_BYTES", "nccl_shim", 0, "67108864", "", "bytes",
        "ferry's AllReduce max_bytes per communicator (its memory); larger ncclAllReduce calls run on ferry in "
        "pieces of this size"),
    size_knob("FERRY_MPI_ALLGATHER_CHUNK_BYTES", "test", 1, "1073741824", "", "bytes",
        "largest piece one MPI_Allgather of MpiBootstrap moves per rank (above INT_MAX counts as INT_MAX); lower "
        "it to exercise the chunked path"),
};
inline constexpr int kNumKnobs = static_cast<int>(sizeof(kRegistry) / sizeof(kRegistry[0]));

// Position of `name` in kRegistry, or -1.
constexpr int index_of(std::string_view name) {
  for (int i = 0; i < kNumKnobs; ++i)
    if (name == kRegistry[i].name) return i;
  return -1;
}

// ---- reading (knobs.cpp)

// The variable as set: nullopt when unset or empty.
std::optional<std::string> raw(const Info& knob);
// Parsers: InvalidArgument "<NAME> must be ..., got '<value>'" when `value` does not parse or is out of range.
bool parse_bool(const Info& knob, std::string_view value);
uint64_t parse_number(const Info& knob, std::string_view value);  // int and size
int parse_choice(const Info& knob, std::string_view value);       // enum: the position in `choices`
// The knob's default_value; Error for a knob whose default is computed where it is read.
const char* fixed_default(const Info& knob);

template <typename T>
constexpr Type type_of() {
  if constexpr (std::is_same_v<T, bool>) return Type::kBool;
  else if constexpr (std::is_same_v<T, int64_t>) return Type::kInt;
  else if constexpr (std::is_same_v<T, uint64_t>) return Type::kSize;
  else if constexpr (std::is_same_v<T, std::string>) return Type::kString;
  else {
    static_assert(std::is_enum_v<T>, "a knob is bool, int64_t, uint64_t, std::string or an enum");
    return Type::kEnum;
  }
}

template <typename T>
T parse(const Info& knob, std::string_view value) {
  if constexpr (std::is_same_v<T, bool>) return parse_bool(knob, value);
  else if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(parse_number(knob, value));
  else if constexpr (std::is_same_v<T, uint64_t>) return parse_number(knob, value);
  else if constexpr (std::is_same_v<T, std::string>) return std::string(value);
  else return static_cast<T>(parse_choice(knob, value));
}

// A handle on one row of kRegistry, typed by what it reads.
template <typename T>
struct Knob {
  int index;

  const Info& info() const { return kRegistry[index]; }
  const char* name() const { return info().name; }
  // The value set in the environment, parsed; nullopt when unset or empty.
  std::optional<T> read() const {
    const std::optional<std::string> v = raw(info());
    if (!v) return std::nullopt;
    return parse<T>(info(), *v);
  }
  // The value set, else `fallback` (knobs whose default is computed here).
  T read_or(T fallback) const {
    std::optional<T> v = read();
    return v ? *v : fallback;
  }
  // The value set, else the registry's default (knobs with a default_value).
  T value() const {
    std::optional<T> v = read();
    return v ? *v : parse<T>(info(), fixed_default(info()));
  }
};

// The handle of `name`; a name missing from kRegistry, or of another type, does not compile.
template <typename T>
constexpr Knob<T> handle(std::string_view name) {
  const int i = index_of(name);
  if (i < 0) throw "no such knob in kRegistry";
  if (kRegistry[i].type != type_of<T>()) throw "the knob's type in kRegistry differs";
  return Knob<T>{i};
}

enum class TwoShotVariant : int { kAuto = 0, kPull = 1, kPush = 2 };
enum class UcxGpuMemory : int { kAuto = 0, kOn = 1, kOff = 2 };
enum class UcxPeerFailure : int { kOff = 0, kOn = 1, kAuto = 2 };  // "off" or 0, "on" or 1, "auto" or 2

inline constexpr Knob<int64_t> kTimeoutMs = handle<int64_t>("FERRY_TIMEOUT_MS");
inline constexpr Knob<int64_t> kRanksPerNode = handle<int64_t>("FERRY_RANKS_PER_NODE");
inline constexpr Knob<std::string> kBootstrapAddr = handle<std::string>("FERRY_BOOTSTRAP_ADDR");
inline constexpr Knob<UcxPeerFailure> kUcxPeerFailure = handle<UcxPeerFailure>("FERRY_UCX_PEER_FAILURE");
inline constexpr Knob<UcxGpuMemory> kUcxGpuMemory = handle<UcxGpuMemory>("FERRY_UCX_GPU_MEMORY");
inline constexpr Knob<bool> kUcxShmDirect = handle<bool>("FERRY_UCX_SHM_DIRECT");
inline constexpr Knob<uint64_t> kUcxTcpSegSize = handle<uint64_t>("FERRY_UCX_TCP_SEG_SIZE");
inline constexpr Knob<bool> kUcxReceiveThread = handle<bool>("FERRY_UCX_RECEIVE_THREAD");
inline constexpr Knob<int64_t> kUcxTcpStreams = handle<int64_t>("FERRY_UCX_TCP_STREAMS");
inline constexpr Knob<bool> kProxyStats = handle<bool>("FERRY_PROXY_STATS");
inline constexpr Knob<uint64_t> kProxyFifoEntries = handle<uint64_t>("FERRY_PROXY_FIFO_ENTRIES");
inline constexpr Knob<uint64_t> kProxyIdleSpins = handle<uint64_t>("FERRY_PROXY_IDLE_SPINS");
inline constexpr Knob<uint64_t> kProxyHoldSignalsBytes = handle<uint64_t>("FERRY_PROXY_HOLD_SIGNALS_BYTES");
inline constexpr Knob<uint64_t> kProxyPutChunkBytes = handle<uint64_t>("FERRY_PROXY_PUT_CHUNK_BYTES");
inline constexpr Knob<uint64_t> kAllReduceOneShotMaxBytes = handle<uint64_t>("FERRY_ALLREDUCE_ONE_SHOT_MAX_BYTES");
inline constexpr Knob<uint64_t> kAllReduceLlMaxBytes = handle<uint64_t>("FERRY_ALLREDUCE_LL_MAX_BYTES");
inline constexpr Knob<bool> kAllReducePdl = handle<bool>("FERRY_ALLREDUCE_PDL");
inline constexpr Knob<uint64_t> kAllReduceLl128MaxBytes = handle<uint64_t>("FERRY_ALLREDUCE_LL128_MAX_BYTES");
inline constexpr Knob<uint64_t> kAllReducePipelinedMinBytes = handle<uint64_t>("FERRY_ALLREDUCE_PIPELINED_MIN_BYTES");
inline constexpr Knob<uint64_t> kAllReduceFirstEpoch = handle<uint64_t>("FERRY_ALLREDUCE_FIRST_EPOCH");
inline constexpr Knob<uint64_t> kOneShotPipelinedStepPacks = handle<uint64_t>("FERRY_ONE_SHOT_PIPELINED_STEP_PACKS");
inline constexpr Knob<uint64_t> kHierarchicalLaunchBytes = handle<uint64_t>("FERRY_HIERARCHICAL_LAUNCH_BYTES");
inline constexpr Knob<int64_t> kHierarchicalBlocks = handle<int64_t>("FERRY_HIERARCHICAL_BLOCKS");
inline constexpr Knob<int64_t> kHierarchicalPieces = handle<int64_t>("FERRY_HIERARCHICAL_PIECES");
inline constexpr Knob<uint64_t> kHierarchicalBlockBytes = handle<uint64_t>("FERRY_HIERARCHICAL_BLOCK_BYTES");
inline constexpr Knob<int64_t> kOneShotPacksPerThread = handle<int64_t>("FERRY_ONE_SHOT_PACKS_PER_THREAD");
inline constexpr Knob<int64_t> kOneShotBlocks = handle<int64_t>("FERRY_ONE_SHOT_BLOCKS");
inline constexpr Knob<int64_t> kOneShotLlBlocks = handle<int64_t>("FERRY_ONE_SHOT_LL_BLOCKS");
inline constexpr Knob<int64_t> kOneShotLlThreads = handle<int64_t>("FERRY_ONE_SHOT_LL_THREADS");
inline constexpr Knob<int64_t> kTwoShotBlocks = handle<int64_t>("FERRY_TWO_SHOT_BLOCKS");
inline constexpr Knob<uint64_t> kTwoShotMaxChunkPacks = handle<uint64_t>("FERRY_TWO_SHOT_MAX_CHUNK_PACKS");
inline constexpr Knob<TwoShotVariant> kTwoShotVariant = handle<TwoShotVariant>("FERRY_TWO_SHOT_VARIANT");
inline constexpr Knob<int64_t> kEpChunkCols = handle<int64_t>("FERRY_EP_CHUNK_COLS");
inline constexpr Knob<int64_t> kEpCombineChunkCols = handle<int64_t>("FERRY_EP_COMBINE_CHUNK_COLS");
inline constexpr Knob<int64_t> kEpDispatchRecvBlocks = handle<int64_t>("FERRY_EP_DISPATCH_RECV_BLOCKS");
inline constexpr Knob<int64_t> kEpCombineRecvBlocks = handle<int64_t>("FERRY_EP_COMBINE_RECV_BLOCKS");
inline constexpr Knob<int64_t> kEpRankRowsLocalBlocks = handle<int64_t>("FERRY_EP_RANK_ROWS_LOCAL_BLOCKS");
inline constexpr Knob<int64_t> kEpCombinePrefetchMaxBlocks = handle<int64_t>("FERRY_EP_COMBINE_PREFETCH_MAX_BLOCKS");
inline constexpr Knob<int64_t> kEpOwnRowsCopyPercent = handle<int64_t>("FERRY_EP_OWN_ROWS_COPY_PERCENT");
inline constexpr Knob<bool> kEpOverlap = handle<bool>("FERRY_EP_OVERLAP");
inline constexpr Knob<bool> kEpFuseLayout = handle<bool>("FERRY_EP_FUSE_LAYOUT");
inline constexpr Knob<bool> kEpCombineOneRole = handle<bool>("FERRY_EP_COMBINE_ONE_ROLE");
inline constexpr Knob<bool> kEpPairLayout = handle<bool>("FERRY_EP_PAIR_LAYOUT");
inline constexpr Knob<bool> kEpLlStaged = handle<bool>("FERRY_EP_LL_STAGED");
inline constexpr Knob<bool> kEpSpreadItems = handle<bool>("FERRY_EP_SPREAD_ITEMS");
inline constexpr Knob<bool> kEpHierarchical = handle<bool>("FERRY_EP_HIERARCHICAL");
inline constexpr Knob<uint64_t> kEpNetRangeBytes = handle<uint64_t>("FERRY_EP_NET_RANGE_BYTES");
inline constexpr Knob<std::string> kUcxPerftest = handle<std::string>("FERRY_UCX_PERFTEST");
inline constexpr Knob<uint64_t> kMpiAllgatherChunkBytes = handle<uint64_t>("FERRY_MPI_ALLGATHER_CHUNK_BYTES");
enum class NcclShimMode : int { kOn = 0, kOff = 1 };
inline constexpr Knob<NcclShimMode> kNcclShim = handle<NcclShimMode>("FERRY_NCCL_SHIM");
inline constexpr Knob<bool> kNcclShimLog = handle<bool>("FERRY_NCCL_SHIM_LOG");
inline constexpr Knob<std::string> kNcclLibrary = handle<std::string>("FERRY_NCCL_LIBRARY");
inline constexpr Knob<uint64_t> kNcclShimMaxBytes = handle<uint64_t>("FERRY_NCCL_SHIM_MAX_BYTES");

// ---- printing (knobs.cpp)

const char* type_name(Type type);
// The type as the tables show it, with the range or the choices ("int >= 1", "enum: auto, pull, push").
std::string type_text(const Info& knob);
// The default as the tables show it: the value and/or the note.
std::string default_text(const Info& knob);
// What `ferry-bench --knobs` prints: every knob by area, with the value set in this environment
// (and why it does not parse, where it does not).
std::string table();
// docs/knobs.md.
std::string markdown();
// One message per variable set here whose value does not parse (what reading it would throw).
std::vector<std::string> problems();

}  // namespace ferry::knobs
