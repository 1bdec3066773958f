// Bootstrap: how the processes of one group find each other and exchange small
// amounts of host data (IPC handles, hostnames, ids). Not a data path.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ferry {

// What a bootstrap can tell about the other ranks' processes (Bootstrap::probe_liveness).
struct PeerLiveness {
  bool known = false;       // every other rank was checked (false: MPI, callbacks; then `gone`
                            // holds only what could be seen, often nothing)
  std::vector<int> gone;    // ranks whose process exited or left the group (ascending)
  std::vector<int> silent;  // ranks that did not answer within the budget (a host down, or overloaded)
};

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank contributes `bytes_per_rank` bytes from `send`; `recv` receives
  // size() * bytes_per_rank bytes, rank r's contribution at offset r * bytes_per_rank.
  // Every rank must pass the same bytes_per_rank.
  virtual void all_gather(const void* send, void* recv, size_t bytes_per_rank) = 0;
  virtual void barrier() = 0;

  // Not collective, for error paths: which other ranks are gone, found within
  // about `budget` without the other ranks' help and without disturbing what
  // they are doing; never throws. The default cannot tell (known = false).
  // TcpBootstrap can: NOTE [Bootstrap liveness] (src/bootstrap/tcp_bootstrap.cpp).
  // Communicator::check calls it, also where the Python bindings released the
  // GIL: an override that calls into Python must take the GIL itself.
  virtual PeerLiveness probe_liveness(std::chrono::milliseconds budget) noexcept {
    (void)budget;
    return {};
  }

  // Convenience: gather one trivially copyable value from every rank.
  template <typename T>
  std::vector<T> all_gather_value(const T& value) {
    std::vector<T> out(static_cast<size_t>(size()));
    all_gather(&value, out.data(), sizeof(T));
    return out;
  }
};

// MPI_COMM_WORLD (or a duplicate of a given communicator). Calls MPI_Init only if
// MPI is not initialized yet, and MPI_Finalize only if it called MPI_Init.
class MpiBootstrap : public Bootstrap {
 public:
  MpiBootstrap();
  // `mpi_comm` is a pointer to an MPI_Comm (kept opaque so this header needs no mpi.h).
  explicit MpiBootstrap(const void* mpi_comm);
  ~MpiBootstrap() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override;
  void barrier() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
};

// A unique id names the root's address and port, like ncclUniqueId. Rank 0 (or any
// process) creates it and passes it to every rank out of band.
struct TcpUniqueId {
  std::array<uint8_t, 128> bytes{};
};

struct TcpBootstrapOptions {
  // How long to wait for every rank to connect and for each message.
  std::chrono::milliseconds timeout{30000};
  // Largest frame accepted from a peer; larger frames are rejected as malformed.
  size_t max_frame_bytes = size_t{1} << 30;
};

// Star topology around rank 0: non-root ranks connect to the root, which gathers
// and broadcasts. Messages are framed (magic, kind, sender rank, length) and checked.
class TcpBootstrap : public Bootstrap {
 public:
  // `address`: the IPv4 address or hostname rank 0 listens on (empty: the
  // FERRY_BOOTSTRAP_ADDR environment variable, else 127.0.0.1). `port` 0 picks a free
  // port: the id then owns a listening socket in this process, which must become
  // rank 0. With a nonzero port, rank 0 may be another process and binds it itself.
  static TcpUniqueId create_unique_id(const std::string& address = "", int port = 0);
  // Id as hex string, to pass through environment variables or the command line.
  static std::string id_to_string(const TcpUniqueId& id);
  static TcpUniqueId id_from_string(const std::string& text);

  TcpBootstrap(const TcpUniqueId& id, int rank, int size, TcpBootstrapOptions options = {});
  ~TcpBootstrap() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override;
  void barrier() override;
  // Gone: a rank whose bootstrap connection hung up or whose liveness listener
  // refuses connections (NOTE [Bootstrap liveness]); known = false on a member when
  // the group formed with a peer that advertised no listener (an older build).
  PeerLiveness probe_liveness(std::chrono::milliseconds budget) noexcept override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
};

// all_gather and barrier given as functions (the Python layer wraps torch.distributed).
class CallbackBootstrap : public Bootstrap {
 public:
  using AllGatherFn = std::function<void(const void* send, void* recv, size_t bytes_per_rank)>;
  using BarrierFn = std::function<void()>;
  CallbackBootstrap(int rank, int size, AllGatherFn all_gather, BarrierFn barrier);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override;
  void barrier() override;

 private:
  int rank_;
  int size_;
  AllGatherFn all_gather_;
  BarrierFn barrier_;
};

}  // namespace ferry
