# Session 23, call 4 (nvidia-h100-x2; run(carry [".deps"])), the last of the session's device time: measurements
# only, nothing to merge. (1) The rank-rows dispatch plain and with its routing layout made ahead, today (issue 23's
# 1.2 / 4.1 us gaps are the layout step). (2) Nsight Compute of the two layout kernels at T=4096 on one rank, caches
# kept warm (--cache-control none), so their durations can be set against the 11-13 us the step costs inside the
# call. (3) ferry-bench nvlink with session 22's read probes (sum-probes_0367d2c.patch: local_sum4_tma,
# local_sum4_async), to tell whether loads kept in flight by cp.async or bulk copies read faster than registers at
# all, after c2's cp.async combine was slower.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 470
patch -p1 -s < docs/results/session22_cpu/sum-probes_0367d2c.patch || echo "the probe patch did not apply"
grep -c local_sum4_async bench/*.cu bench/*.cpp 2>/dev/null | grep -v ":0"
call_build_dir build-device "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
call_run route_ahead 60 $M $B ep --mode ht --layout rank_rows --route-ahead --sms 24 --csv $CALL_DIR/route_ahead.csv
grep -a -E "^ht |route" $CALL_DIR/route_ahead.log | head -12
OUT=$CALL_DIR/profile FERRY_PROFILE_KERNELS=layout FERRY_PROFILE_SKIP=4 FERRY_PROFILE_COUNT=2 \
  FERRY_NCU_ARGS="--cache-control none" FERRY_PROFILE_LINES=120 \
  call_run profile_layout 150 scripts/profile_ep.sh ht --tokens 4096 --layout rank_rows --dispatch-types bf16 --no-nccl
grep -a -E "layout_|Duration|Elapsed Cycles|Registers|Stall|kernel [0-9]" $CALL_DIR/profile_layout.log | head -30
call_run nvlink_1024 70 $M $B nvlink --sms 8,24,132 --bytes 64M --csv $CALL_DIR/nvlink_1024.csv
call_run nvlink_256 70 $M $B nvlink --sms 8,24,132 --bytes 64M --threads 256 --csv $CALL_DIR/nvlink_256.csv
grep -h -a -E "^(method|local_sum)" $CALL_DIR/nvlink_*.log
call_end
