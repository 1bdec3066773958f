# Session 15, call 4: main as submitted (94e96bc + trace/probe changes; the library's PTX without the trace flag
# is identical to f2cbdb4's): the full GPU suite on 2 GPUs; killed peers across nodes over tcp without UCX's
# peer-failure handling (what tcp's zero-copy puts cost, issue 24); the latency probe with the event-record case;
# the low-latency EP bench with the SM clock sampled beside it.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session15_2xH100/scripts/c4.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 420
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
rm -f $CALL_DIR/cfg.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; F=build-device/tests/ferry_gpu_fault_tests
B=build-device/bench/ferry-bench
for r in 1 2; do call_run latency_$r 60 $M -np 2 $B latency --csv $CALL_DIR/latency_$r.csv; tail -16 $CALL_DIR/latency_$r.log; done
nvidia-smi --query-gpu=index,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv -lms 200 > $CALL_DIR/clocks.csv 2>&1 &
SMI=$!
call_run ep_ll 60 $M -np 2 $B ep --mode ll --tokens 1,128 --csv $CALL_DIR/ep_ll.csv
kill $SMI; grep -aE "^ll " $CALL_DIR/ep_ll.log; awk -F, 'NR>1 {print $2}' $CALL_DIR/clocks.csv | sort | uniq -c | sort -rn | head -6
U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
call_run faults_tcp_zc 90 $U UCX_TLS=tcp,self FERRY_UCX_PEER_FAILURE=0 $F --gtest_filter='KilledPeer.AcrossNodes'
grep -aE "OK \]|FAILED|error|Error" $CALL_DIR/faults_tcp_zc.log | head -8
call_run np2 180 $M -np 2 $T
call_end
