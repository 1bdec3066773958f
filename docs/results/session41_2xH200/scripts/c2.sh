# Session 41 c2. run(kind nvidia-h200-x4, carry [".deps", ".ab"]), from a checkout of main 
# (the working tree) with .ab trees made by
#   scripts/ab_trees.sh rep=main+docs/results/session41_2xH200/patches/ll128_report.patch
# (the LL128 AllReduce's timeout report names line 0's flag, shuffled from lane 7 in the poll's cold path).
# 4 GPUs: issue 23 asks for the same figures on a 4-GPU kind, against docs/results/ep_4xH200.txt.
#   1. build main (build-device) and rep side by side;
#   2. main: the whole GPU suite on 4 ranks and on 2 ranks;
#   3. main: ferry-bench ep --check --halves and ferry-bench allreduce --check on 4 ranks (NCCL in the run),
#      the EP SM sweep on 4 ranks;
#   4. A/B main against rep, AllReduce bf16 1-6 MiB on 2 ranks (GPUs 0,1), NCCL in the run, 2 rounds.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
{ nvidia-smi -q | grep -iE "product name|bus id"; nvidia-smi topo -m; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"
call_build_trees ferry-bench rep &
call_build_dir build-device "ferry-bench ferry_gpu_tests"
wait
T=build-device/tests/ferry_gpu_tests; N=$ROOT/build-device/bench/ferry-bench; R=$ROOT/.ab/rep/build/bench/ferry-bench
call_run gpu_np4 170 $M -np 4 $T
call_run gpu_np2 120 $M -np 2 $T
grep -a "FAILED\|Failure\|timed out" $CALL_DIR/gpu_np*.log | head -12
call_run bench_ep_np4 90 $M -np 4 $N ep --csv $CALL_DIR/ep_4xH200.csv --check --halves
call_run bench_ar_np4 60 $M -np 4 $N allreduce --csv $CALL_DIR/allreduce_4xH200.csv --check
call_run bench_ep_sms_np4 60 $M -np 4 $N ep --mode ht --sms 8,24,48 --dispatch-types bf16 --csv $CALL_DIR/ep_sms.csv
call_ab rep_ 2 $N $R "" allreduce --dtypes bf16 --sizes 1M,2M,4M,6M --algos auto --check
call_end
