# Prepared in session 17 for the next one (not run): issue 23's and 24's tables from one run of main after session
# 17's two kernel merges (3a36de3: the cross-node receive halves' range helpers; d935654: the rank-rows receive block
# writes the offsets while the rows move, A/B 0.979-0.991). Session 17's c4 (issue 23's table) predates d935654, and
# issue 24's table (session 16's c5) predates both.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session17_2xH100/scripts/next_regen.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin regen 575
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
call_run ep_table 150 $M $B ep --halves --check --csv $CALL_DIR/ep_2xH100_2ranks.csv
for r in 1 2 3; do call_run ep_ll_$r 40 $M $B ep --mode ll --tokens 1,128,512 --csv $CALL_DIR/ep_ll_$r.csv; done
call_run ep_sms 150 $M $B ep --mode ht --sms 4,8,16,24,48,132 --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=100 BUILD_DIR=build-device \
  FERRY_CROSSNODE_STAGES="ar_sm ar_tcp ep_sm ep_tcp ep_cuda_ipc ep_nvlink ar_tcp_zc ep_tcp_zc" \
  timeout 240 scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1; echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp|cuda_ipc) " $CALL_DIR/crossnode/crossnode_table.txt
grep -h -E "^(ht|ll) " $CALL_DIR/ep_table.log | head -12
call_end
# DeepEP does not fit this call beside the cross-node stages: run scripts/device_deepep.sh in the next call (its
# figures then come from another machine start; say so beside them).
