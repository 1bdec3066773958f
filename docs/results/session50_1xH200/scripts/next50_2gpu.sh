# For the next session with 2 GPUs (nvidia-h100-x2 or nvidia-h200-x2): run(kind ..., carry [".deps", ".ab"]), ~560 s.
# Supersedes session48_1xH200/scripts/next48_2gpu.sh (everything it ran is here). Trees (scripts/ab_trees.sh
# ovl=main+docs/results/session48_1xH200/scripts/ll_overlap_sm.patch rdy=exp/ll-ready-words; main is this
# checkout, built here: three trees and the results pass the carry's 64 MiB). One virtual node per GPU over UCX
# shared memory, NCCL beside on the same transport (NCCL_P2P_DISABLE=1):
#  - ovl (session 48: the low-latency halves overlapped where every peer's landing is mapped; one H200 0.93-0.97)
#    and rdy (ready words: the receive places each item as it lands; session 50 mended its chunks' meta wait):
#    the low-latency tests as 2x1 (rdy's include Ep.LowLatencyOnOneSendBlock, also run inside one node);
#  - one sweep, 3 rounds in turn, main against ovl, rdy and rdy with its send grid on 1 / 2 / 4 of the 132 SMs
#    (FERRY_EP_DISPATCH_RECV_BLOCKS = the rest; a fence per item or per 4, FERRY_EP_NET_READY_BATCH, session 50 c6; the
#    next item prefetched, FERRY_EP_NET_READY_PREFETCH): on 2 GPUs each GPU's write queue holds only its own rank's
#    stores, and session 50's pcie-latency read a fence of 0.7 us behind ONE writer SM (49.7 GB/s) against 18-30 behind
#    2-8 (52.7 GB/s), so a send on 1-2 SMs may let the receive see items while they are written (on one GPU both ranks
#    share one queue: 1.2-2.5x slower there). ovl lands with no case slower than main and NCCL beside; rdy only if it
#    beats ovl;
#  - pcie (SM and copy-engine rates, both GPUs at once), pcie-peer (own_load_alone: one GPU at a time against both
#    at once), pcie-ce (a box by copy engines end to end, new in session 50) and pcie-latency on each GPU.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next50 ${NEXT50_BUDGET:-560}
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
(call_build_dir $ROOT/build-main ferry-bench > $CALL_DIR/build_main_dir.log 2>&1) &
call_build_trees ferry-bench ovl+ferry_gpu_tests rdy+ferry_gpu_tests
wait
MAIN=$ROOT/build-main/bench/ferry-bench A=$ROOT/.ab
call_mps_start 2  # only where fewer than 2 GPUs: then a direction, and NCCL stays out
NCCL_FLAG=""
[ "$CALL_MPS" = 1 ] && NCCL_FLAG="--no-nccl"
call_virtual_nodes
LL_TESTS="Ep.LowLatency*:Ep/EpMatrix.*ll*:Ep.Staged*:Ep.BadExpert*:Ep.ZeroTokenRanks:EpRestricted*"
for tree in ovl rdy; do
  call_run ${tree}_ll_2x1 90 $M2 $SM $A/$tree/build/tests/ferry_gpu_tests --gtest_filter="$LL_TESTS"
  grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/${tree}_ll_2x1.log | head -6
done
SHARE=""
[ "$CALL_MPS" = 1 ] && SHARE="-x FERRY_TEST_SHARE_GPUS=1"
call_run rdy_one_node 60 $M2 $SHARE $A/rdy/build/tests/ferry_gpu_tests --gtest_filter="Ep.LowLatencyOnOneSendBlock"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/rdy_one_node.log | head -4
sms=$(python3 -c "import torch; print(torch.cuda.get_device_properties(0).multi_processor_count)" 2>/dev/null)
[[ "$sms" =~ ^[0-9]+$ ]] || sms=132  # H100 / H200
[ "$CALL_MPS" = 1 ] && sms=$((sms / 2))
# rdy's send on s blocks, b items a fence, p: the next item prefetched (session 50 c6: batches of 4 took a 1-block
# send from 2.36x to 1.72x slower on one GPU; the prefetch, branch fdca3be, not yet run on a GPU)
send_configs=()
for sbp in 1:1:0 1:4:0 1:4:1 2:4:0 2:4:1 4:4:0; do
  IFS=: read -r s b pf <<< "$sbp"
  send_configs+=("rdy_s${s}_b${b}_p$pf=$A/rdy/build/bench/ferry-bench@-x FERRY_EP_DISPATCH_RECV_BLOCKS=$((sms - s)) \
-x FERRY_EP_NET_READY_BATCH=$b -x FERRY_EP_NET_READY_PREFETCH=$pf")
done
call_sweep sm_ll_ 3 $MAIN "$SM" "ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 $NCCL_FLAG" \
  ovl=$A/ovl/build/bench/ferry-bench rdy_half=$A/rdy/build/bench/ferry-bench "${send_configs[@]}"
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
call_mps_stop
if [ "$CALL_MPS" = 0 ]; then
  call_run pcie 60 $M2 $MAIN pcie --sms 8,32,132 --bytes 16M  # both GPUs at once; ce_* rows: copy engines
  call_run pcie_peer 60 $M2 $MAIN pcie-peer --sms 8,32,66,132 --bytes 16M --item-bytes 1792
  # Copy engines end to end for a low-latency box (docs/internode.md, session 50; pcie-ce not yet run when written)
  call_run pcie_ce 60 $M2 $MAIN pcie-ce --bytes 1M --pieces 1,2,4,8
  call_run pcie_ce_4m 60 $M2 $MAIN pcie-ce --bytes 4M --pieces 1,4,16
  tail -6 $CALL_DIR/pcie_ce.log
  call_run pcie_peer_rows 60 $M2 $MAIN pcie-peer --sms 8,32,132 --bytes 16M
  grep -hE "^(own|peer)_" $CALL_DIR/pcie_peer*.log
  for g in 0 1; do
    call_run pcie_latency_gpu$g 30 env CUDA_VISIBLE_DEVICES=$g ${M:-mpirun --allow-run-as-root --bind-to none} -np 1 \
      $MAIN pcie-latency --sms 1,2,4,8,32,131 --bytes 256M
    tail -7 $CALL_DIR/pcie_latency_gpu$g.log
  done
fi
call_end
