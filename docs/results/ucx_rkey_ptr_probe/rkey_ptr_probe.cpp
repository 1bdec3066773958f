// Probe: can UCX (sm) give rank 1 a local pointer into memory rank 0 registered
// (ucp_rkey_ptr)? Cases: memory UCX allocated (UCP_MEM_MAP_ALLOCATE) and user memory.
#include <mpi.h>
#include <ucp/api/ucp.h>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>
#define CK(x) do { ucs_status_t s_ = (x); if (s_ != UCS_OK) { std::printf("rank %d: %s -> %s\n", rank, #x, ucs_status_string(s_)); } } while (0)
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ucp_params_t p{}; p.field_mask = UCP_PARAM_FIELD_FEATURES; p.features = UCP_FEATURE_RMA;
  ucp_config_t* cfg; ucp_config_read(nullptr, nullptr, &cfg);
  ucp_context_h ctx; CK(ucp_init(&p, cfg, &ctx)); ucp_config_release(cfg);
  ucp_worker_params_t wp{}; ucp_worker_h w; CK(ucp_worker_create(ctx, &wp, &w));
  ucp_address_t* addr; size_t alen; CK(ucp_worker_get_address(w, &addr, &alen));
  std::vector<char> peer_addr(4096); int plen = (int)alen;
  int other = 1 - rank;
  MPI_Sendrecv(addr, (int)alen, MPI_BYTE, other, 0, peer_addr.data(), 4096, MPI_BYTE, other, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ucp_ep_params_t ep{}; ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS; ep.address = (ucp_address_t*)peer_addr.data();
  ucp_ep_h e; CK(ucp_ep_create(w, &ep, &e));
  for (int mode = 0; mode < 2; ++mode) {
    const size_t bytes = 1 << 20;
    ucp_mem_map_params_t mp{};
    void* user = nullptr;
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.length = bytes;
    if (mode == 0) { mp.address = nullptr; mp.flags = UCP_MEM_MAP_ALLOCATE; }
    else { user = aligned_alloc(4096, bytes); mp.address = user; mp.flags = 0; }
    ucp_mem_h memh; CK(ucp_mem_map(ctx, &mp, &memh));
    ucp_mem_attr_t at{}; at.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS; ucp_mem_query(memh, &at);
    char* base = (char*)at.address;
    if (rank == 0) std::memset(base, 0, bytes);
    void* rk; size_t rklen; CK(ucp_rkey_pack(ctx, memh, &rk, &rklen));
    std::vector<char> peer_rk(8192); uint64_t my_base = (uint64_t)base, peer_base = 0;
    MPI_Sendrecv(rk, (int)rklen, MPI_BYTE, other, 1, peer_rk.data(), 8192, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&my_base, 8, MPI_BYTE, other, 2, &peer_base, 8, MPI_BYTE, other, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ucp_rkey_h rkey; CK(ucp_ep_rkey_unpack(e, peer_rk.data(), &rkey));
    void* local = nullptr;
    ucs_status_t s = ucp_rkey_ptr(rkey, peer_base + 64, &local);
    std::printf("rank %d mode %s: ucp_rkey_ptr -> %s\n", rank, mode == 0 ? "ucx-allocated" : "user memory", ucs_status_string(s));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1 && s == UCS_OK) std::memcpy(local, "hello-from-1", 13);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) std::printf("rank 0 mode %d sees: '%s'\n", mode, base + 64);
    MPI_Barrier(MPI_COMM_WORLD);
    ucp_rkey_destroy(rkey); ucp_rkey_buffer_release(rk); ucp_mem_unmap(ctx, memh); free(user);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
