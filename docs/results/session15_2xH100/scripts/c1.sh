# Session 15, call 1 (prepared in session 14): issue 23's figures from one run on main, to regenerate
# docs/results/ep_2xH100.txt (last made in session 11; the intranode EP kernels changed in session 12, and session
# 14's channel layer left their PTX identical) and the AllReduce-vs-torch rows. DeepEP beside it when .deps/DeepEP
# holds its 567632d export (scripts/device_deepep.sh says how; about 75 s to build). Then issue 24's tcp rows with
# and without UCX's zero-copy puts, if time is left (else run that part in a second call).
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session15_2xH100/scripts/c1.sh 2>&1 | tail -60 (prepared in session 14 as next_figures.sh, moved here when it ran)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin figures 570
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c; git log --oneline -1 2>/dev/null
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_python ferry_python_files > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
rm -f $CALL_DIR/cfg.log $CALL_DIR/build.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
call_run ep_table 150 $M $B ep --halves --check --csv $CALL_DIR/ep_2xH100_2ranks.csv
call_run ep_sms 120 $M $B ep --mode ht --sms 4,8,16,24,48,132 --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
for r in 1 2 3; do call_run ep_ll_$r 40 $M $B ep --mode ll --tokens 1,128,512 --csv $CALL_DIR/ep_ll_$r.csv; done
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
call_run torch_ar 60 python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/python/ferry_torch_bench.py \
  --what allreduce --sizes 2M:32M:2 --out $CALL_DIR/torch_ar
# The copy-engine AllReduce probe (bench/ce_allreduce_probe.cu, session 14, never run): chunked CE pushes with
# stream-written flags and a reduce kernel, beside ferry's AllReduce in the same process, outputs checked.
call_run ce_probe 90 $M $B ce-allreduce --csv $CALL_DIR/ce_allreduce.csv
# The low-latency building blocks (bench/latency_probe.cu, session 14, never run): launches, a dependent launch,
# load chains, last-block arrivals, NVLink flag round trips.
call_run latency_probe 60 $M $B latency --csv $CALL_DIR/latency.csv
[ -f .deps/DeepEP/setup.py ] && [ "$(call_left)" -gt 200 ] && { OUT=$CALL_DIR/deepep timeout 190 scripts/device_deepep.sh > $CALL_DIR/deepep.log 2>&1; echo "deepep rc=$? ($(call_elapsed) s)"; }
# Issue 24, tcp with UCX's zero-copy puts (FERRY_UCX_PEER_FAILURE=0) beside the default segmented ones, same run.
mkdir -p $CALL_DIR/crossnode; [ "$(call_left)" -gt 150 ] && { OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=70 \
  FERRY_CROSSNODE_STAGES="ar_tcp ar_tcp_zc ep_tcp ep_tcp_zc" timeout 300 scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1; \
  echo "crossnode rc=$? ($(call_elapsed) s)"; grep -E "^tcp" $CALL_DIR/crossnode/crossnode_table.txt; }
grep -h -E "^(ht|ll) " $CALL_DIR/ep_table.log | head -20
call_end
