# Session 21, call 1: branch exp/net-ll-ranges (recreated in session 21 from session 20's description; that branch was lost with its checkout): one commit on main 9959ce6:
# on main: (1) the low-latency halves across nodes overlap in dispatch() and combine() (the receive grid launched
# while the send grid runs; session 20's trace had it start 9 us after the send's last report at T=1 over sm);
# (2) low latency takes ranges where every peer of another node is stored to (landing and signal words mapped:
# over sm), 128 KiB by default, so the receive reads host memory while the send still writes it (at T=128 each
# half alone moves ~1.8 MB over PCIe in ~35 us, one after the other now). Over tcp and cuda_ipc only (1) applies.
# The receive share (num_sms / 2) and the range size are unmeasured for low latency: knob runs below.
# Before: rm -rf .ab; for t in base:main new:exp/net-ll-ranges; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session21_2xH100/scripts/c1.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_fault_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; F=.ab/new/build/tests/ferry_gpu_fault_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$V -x UCX_TLS=sm,self"; TCP="$V -x UCX_TLS=tcp,self"
IPC="$V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run ep_2x1_sm 60 $M -np 2 $SM $T --gtest_filter='Ep*'
call_run ep_2x2 80 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
call_run ep_2x1_tcp 50 $M -np 2 $TCP $T --gtest_filter='Ep*'
call_run ep_2x1_ipc 40 $M -np 2 $IPC $T --gtest_filter='Ep*'
call_run faults 40 env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY $F --gtest_filter='KilledPeer.AcrossNodes'
call_run san_memcheck 50 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.DispatchCombine/*:Ep.HandleReuse'
call_run san_racecheck 60 $M -np 2 $SM $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.DispatchCombine/*bf16*:Ep.HandleReuse'
call_ab ll_ 4 $B $N "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ll --tokens 1,128,512
call_ab tcpll_ 2 $B $N "$TCP -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1" ep --layout expanded --mode ll --tokens 1,128
call_ab ipcll_ 2 $B $N "$IPC" ep --layout expanded --mode ll --tokens 1,128 --no-nccl
for knob in FERRY_EP_NET_RANGE_BYTES=65536 FERRY_EP_NET_RANGE_BYTES=524288 FERRY_EP_NET_RANGE_BYTES=1073741824 \
  FERRY_EP_DISPATCH_RECV_BLOCKS=44 FERRY_EP_DISPATCH_RECV_BLOCKS=88; do  # range 64K / 512K / one per box; receive 1/3, 2/3
  tag=${knob#FERRY_EP_}; tag=${tag//=/_}
  call_run knob_$tag 40 $M -np 2 $SM -x NCCL_P2P_DISABLE=1 -x $knob $N ep --layout expanded --mode ll \
    --tokens 1,128,512
  grep -a -E "^ll " $CALL_DIR/knob_$tag.log
done
call_end
