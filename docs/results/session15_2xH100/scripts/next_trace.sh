# Prepared in session 15 for the next one (not run): where the ~6.5 us between low-latency ops go. The EP trace's
# receive kernels now stamp the moment the send grid is complete (dispatch_recv point 4, combine_recv point 2, trace
# builds only), so each op splits into: send items done -> send grid complete (its last blocks' arrivals and the
# flush of its NVLink stores) -> receive report -> next op's first block (the receive grid's own arrival and
# completion, the event node ~0.7 us, the launch ~1 us).
# The same build and runs as call 6 (c6.sh); the full trace logs come back gzipped in its tarball (the receive
# kernels' lines and every launch's span are there, not in the printed tail).
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session15_2xH100/scripts/next_trace.sh 2>&1 | tail -60
# Then the latency probe's halves_pdl vs one_grid (the two-grid structure's cost with empty bodies), from the
# same build (the trace flag only touches the EP kernels).
bash "$(dirname "${BASH_SOURCE[0]}")/c6.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_nccl_library_path
for r in 1 2; do mpirun --allow-run-as-root --bind-to none -np 2 build-trace/bench/ferry-bench latency 2>&1 | tail -18; done
