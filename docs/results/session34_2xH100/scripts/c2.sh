# Session 34, call 2. run(kind nvidia-h100-x2, carry [".deps"]), ~250 s.
# The floor of the cross-node paths that land in host memory (issue 24's sm / tcp rows): ferry-bench pcie (new),
# every rank at once and one rank alone; the host's topology; then the EP over UCX shared memory with its halves
# timed apart on today's main (session 30's split is older code), NCCL's shared memory beside.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 560
{ nvidia-smi topo -m; lscpu | grep -iE "numa|socket|model name"; nvidia-smi -q | grep -iE "link width|pcie gen" -A2 | head -40; } > $CALL_DIR/topology.txt 2>&1
call_build_dir build-device "ferry-bench"
B=build-device/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,clocks_throttle_reasons.active --format=csv > $CALL_DIR/clocks.txt
call_run pcie_2ranks 120 $M -np 2 $B pcie --sms 2,4,8,12,16,24,32,66,132 --csv $CALL_DIR/pcie_2ranks.csv
call_run pcie_1rank 90 $M -np 1 $B pcie --sms 2,4,8,12,16,24,32,66,132 --csv $CALL_DIR/pcie_1rank.csv
call_run pcie_2ranks_2m 60 $M -np 2 $B pcie --bytes 2M --item-bytes 14336 --sms 12,24,66,132 --csv $CALL_DIR/pcie_2ranks_2m.csv
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
call_run ep_sm_ll 120 $M -np 2 $VN $B ep --mode ll --layout expanded --tokens 128 --stages --halves --csv $CALL_DIR/ep_sm_ll.csv
call_run ep_sm_ht 150 $M -np 2 $VN $B ep --mode ht --layout expanded --stages --halves --csv $CALL_DIR/ep_sm_ht.csv
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,clocks_throttle_reasons.active --format=csv >> $CALL_DIR/clocks.txt
for f in pcie_2ranks pcie_1rank pcie_2ranks_2m; do echo "== $f"; grep -v "^\[" $CALL_DIR/$f.log | tail -9; done
call_end
