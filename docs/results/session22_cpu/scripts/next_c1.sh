# Prepared in session 22 (no device time was left: status showed 164 s and no machine could start), for the
# next session's first call on nvidia-h100-x2 (run(kind nvidia-h100-x2, carry [".deps"]), ~330 s):
#  1. the expanded combine's read rate: ferry-bench nvlink's local_sum4 (register loads, 1024/512/256 threads)
#     against local_sum4_tma and local_sum4_async (the patch beside this folder: bulk copies / cp.async rings),
#     at 8 / 16 / 24 / 32 / 132 SMs. If local_sum4_tma reads well above local_sum4's ~1.4 TB/s at 24 SMs, the
#     expanded combine's send half (471 MB of reads, 405.7 us on 24 SMs, issue 23's <= 400 us target) is worth a
#     bulk-copy design; if not, its floor is the ~330-410 us ep-notes gives and the note says so.
#  2. where the routing layout's 11-13 us go at T=4096 (plain minus routed rank-rows dispatch): Nsight Compute on
#     one rank (scripts/profile_ep.sh), the two layout kernels' durations and stalls beside the send kernel's.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
git apply docs/results/session22_cpu/sum-probes_*.patch 2>&1 || patch -p1 < docs/results/session22_cpu/sum-probes_*.patch
call_build_dir build-device "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
for r in 1 2; do
  call_run nvlink_1024_$r 60 $M $B nvlink --sms 8,16,24,32,132 --bytes 64M --csv $CALL_DIR/nvlink_1024_$r.csv
  call_run nvlink_256_$r 60 $M $B nvlink --sms 8,16,24,32,132 --bytes 64M --threads 256 --csv $CALL_DIR/nvlink_256_$r.csv
  call_run nvlink_512_$r 60 $M $B nvlink --sms 8,16,24,32,132 --bytes 64M --threads 512 --csv $CALL_DIR/nvlink_512_$r.csv
done
OUT=$CALL_DIR/profile FERRY_PROFILE_LINES=400 call_run profile_ht 150 scripts/profile_ep.sh ht --tokens 4096 --layout rank_rows --dispatch-types bf16 --no-nccl
grep -h -E "^(method|local_sum4)" $CALL_DIR/nvlink_*.log
grep -a -E "layout|Duration|dispatch_send|rank_rows" $CALL_DIR/profile_ht.log | head -60
call_end
