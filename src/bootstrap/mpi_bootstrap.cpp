// MpiBootstrap: the group of an MPI communicator (a private duplicate, so ferry's
// traffic never matches the application's messages). MPI can be initialized only
// once per process life, so ferry initializes it only when nobody did, and
// finalizes only what it initialized: when the last MpiBootstrap goes away.

// Only the C API is used: skip the deprecated C++ bindings.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <mutex>

#include "common/knobs.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

#define FERRY_MPI_CALL(call)                                                                                     \
  do {                                                                                                           \
    int ferry_mpi_rc_ = (call);                                                                                  \
    if (ferry_mpi_rc_ != MPI_SUCCESS)                                                                            \
      FERRY_THROW(::ferry::BootstrapError, "MpiBootstrap: " #call " failed: " << mpi_error_text(ferry_mpi_rc_)); \
  } while (0)

// Who owns MPI's lifetime: shared by every MpiBootstrap in the process.
struct MpiLifetime {
  std::mutex mutex;
  int live_bootstraps = 0;
  bool ferry_initialized_mpi = false;
};
MpiLifetime& mpi_lifetime() {
  static MpiLifetime lifetime;
  return lifetime;
}

void acquire_mpi() {
  auto& life = mpi_lifetime();
  std::lock_guard lock(life.mutex);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  FERRY_CHECK(!finalized, BootstrapError,
              "MpiBootstrap: MPI was already finalized in this process; it cannot be initialized again");
  if (!initialized) {
    FERRY_MPI_CALL(MPI_Init(nullptr, nullptr));
    life.ferry_initialized_mpi = true;
  }
  ++life.live_bootstraps;
}

void release_mpi() noexcept {
  auto& life = mpi_lifetime();
  std::lock_guard lock(life.mutex);
  if (--life.live_bootstraps > 0 || !life.ferry_initialized_mpi) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  life.ferry_initialized_mpi = false;
}

// Largest piece one MPI_Allgather moves per rank (counts are int). Testing hook:
// FERRY_MPI_ALLGATHER_CHUNK_BYTES lowers it so the chunked path runs on small data.
size_t allgather_chunk_bytes() {
  // A positive size, 1 GiB unless set.
  return static_cast<size_t>(std::min<uint64_t>(knobs::kMpiAllgatherChunkBytes.value(), INT_MAX));
}

}  // namespace

struct MpiBootstrap::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  size_t chunk_bytes = 0;
};

// MPI_COMM_WORLD may be an rvalue (Open MPI) or an int constant (MPICH): keep an lvalue.
static const MPI_Comm* world_comm() {
  static const MPI_Comm world = MPI_COMM_WORLD;
  return &world;
}

MpiBootstrap::MpiBootstrap() : MpiBootstrap(world_comm()) {}

MpiBootstrap::MpiBootstrap(const void* mpi_comm) : impl_(std::make_unique<Impl>()) {
  FERRY_ARG_CHECK(mpi_comm != nullptr, "MpiBootstrap: mpi_comm must point to an MPI_Comm, got nullptr");
  impl_->chunk_bytes = allgather_chunk_bytes();
  acquire_mpi();
  try {
    const MPI_Comm user_comm = *static_cast<const MPI_Comm*>(mpi_comm);
    FERRY_ARG_CHECK(user_comm != MPI_COMM_NULL, "MpiBootstrap: mpi_comm is MPI_COMM_NULL");
    FERRY_MPI_CALL(MPI_Comm_dup(user_comm, &impl_->comm));
    // Report errors as exceptions instead of MPI's default abort.
    FERRY_MPI_CALL(MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN));
    FERRY_MPI_CALL(MPI_Comm_rank(impl_->comm, &rank_));
    FERRY_MPI_CALL(MPI_Comm_size(impl_->comm, &size_));
  } catch (...) {
    if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
    release_mpi();
    throw;
  }
}

MpiBootstrap::~MpiBootstrap() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
  release_mpi();
}

void MpiBootstrap::all_gather(const void* send, void* recv, size_t bytes_per_rank) {
  FERRY_ARG_CHECK(bytes_per_rank == 0 || (send != nullptr && recv != nullptr),
                  "MpiBootstrap::all_gather: null buffer with bytes_per_rank " << bytes_per_rank);
  auto* out = static_cast<char*>(recv);
  // MPI forbids overlapping send and receive buffers; a rank's own slot means in place.
  const bool in_place = bytes_per_rank > 0 && send == out + static_cast<size_t>(rank_) * bytes_per_rank;
  if (bytes_per_rank <= impl_->chunk_bytes) {
    const int count = static_cast<int>(bytes_per_rank);
    FERRY_MPI_CALL(MPI_Allgather(in_place ? MPI_IN_PLACE : send, count, MPI_BYTE, out, count, MPI_BYTE, impl_->comm));
    return;
  }
  // Too large for one int count: gather piece by piece. Each rank's piece lands at
  // r * bytes_per_rank + offset through a byte type whose extent is bytes_per_rank.
  for (size_t offset = 0; offset < bytes_per_rank; offset += impl_->chunk_bytes) {
    const int count = static_cast<int>(std::min(impl_->chunk_bytes, bytes_per_rank - offset));
    MPI_Datatype piece = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL;
    FERRY_MPI_CALL(MPI_Type_contiguous(count, MPI_BYTE, &piece));
    FERRY_MPI_CALL(MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(bytes_per_rank), &strided));
    MPI_Type_free(&piece);
    FERRY_MPI_CALL(MPI_Type_commit(&strided));
    const void* source = in_place ? MPI_IN_PLACE : static_cast<const char*>(send) + offset;
    int rc = MPI_Allgather(source, count, MPI_BYTE, out + offset, 1, strided, impl_->comm);
    MPI_Type_free(&strided);
    FERRY_MPI_CALL(rc);
  }
}

void MpiBootstrap::barrier() { FERRY_MPI_CALL(MPI_Barrier(impl_->comm)); }

}  // namespace ferry
