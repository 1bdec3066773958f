# Session 27 c2: session 26's next_ar_ramp.sh, then next_ucx_tcp_apis.sh's measurement and next_prefetch_threshold.sh's A/B
# in one call, on branch exp/ar-ramp (git checkout exp/ar-ramp first; its EP code is main's). run(kind nvidia-h100-x2, carry [".deps"]).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 590
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for f in 128 256; do
  call_run tests_f$f 60 $M -np 2 -x FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS=$f $T --gtest_filter="*AllReduce*"
done
call_run racecheck_f128 90 $M -np 2 -x FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS=128 $SAN --tool racecheck \
  --error-exitcode 86 $T --gtest_filter="AllReduce.OneShotAboveTwoMiBEveryTypeAndOp"
for f in 0 64 128 256 512; do  # one wrapper per ramp: call_ab compares two binaries
  printf '#!/usr/bin/env bash\nexport FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS=%s\nexec %s "$@"\n' $f \
    "$ROOT/build-device/bench/ferry-bench" > $CALL_DIR/f$f
  chmod +x $CALL_DIR/f$f
done
for f in 128 256 64 512; do
  call_ab f${f}_ 2 $CALL_DIR/f0 $CALL_DIR/f$f "" allreduce --dtypes bf16 --sizes 2M,4M,8M,16M,32M --check
done
rm -f $CALL_DIR/f0 $CALL_DIR/f64 $CALL_DIR/f128 $CALL_DIR/f256 $CALL_DIR/f512
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for f in 0 128; do  # set BEST to the A/B's winner if it is not 128
  [ "$(call_left)" -gt 70 ] || break
  FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS=$f call_run torch_ar_f$f 60 python3 -m torch.distributed.run --standalone \
    --nproc-per-node 2 bench/python/ferry_torch_bench.py --what allreduce --sizes 2M:32M:2 --out $CALL_DIR/torch_ar_f$f
done
# ucx_perftest over loopback tcp (next_ucx_tcp_apis.sh), no GPU
(export LD_LIBRARY_PATH=$ROOT/.deps/ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} UCX_TLS=tcp,self UCX_NET_DEVICES=lo
P=$ROOT/.deps/ucx/bin/ucx_perftest; OUT=$CALL_DIR/ucx_tcp_apis.txt; port=13370
echo "# size test err run MB/s (ucx_perftest Final column 6; loopback tcp on the device host; $(nproc) cores)" > $OUT
for size in 262144 1048576 4194304; do
  for run in 1 2 3; do
    for test in ucp_put_bw tag_bw ucp_am_bw; do
      for e in no-e -e; do
        [ "$(call_left)" -gt 15 ] || break 4
        port=$((port + 1)); flag=""; [ "$e" = "-e" ] && flag="-e"
        timeout 20 $P -p $port $flag > /dev/null 2>&1 & server=$!; sleep 0.3
        mbs=$(timeout 20 $P localhost -p $port -t $test -s $size -n 200 $flag 2>/dev/null | awk '/Final:/{print $6}' | tail -1)
        wait $server 2>/dev/null
        echo "$size $test $e $run ${mbs:-failed}" >> $OUT
      done
    done
  done
done
cat $OUT)
# the prefetch threshold (next_prefetch_threshold.sh), 2 rounds
B=$ROOT/build-device/bench/ferry-bench
for v in 0 1000; do
  printf '#!/usr/bin/env bash\nexport FERRY_EP_COMBINE_PREFETCH_MAX_BLOCKS=%s\nexec %s "$@"\n' $v "$B" > $CALL_DIR/pf$v
  chmod +x $CALL_DIR/pf$v
done
call_ab threshold_ 2 $CALL_DIR/pf0 $CALL_DIR/pf1000 "" ep --mode ht --layout expanded --dispatch-types bf16 \
  --sms 24,28,32,36,40,44,48
rm -f $CALL_DIR/pf0 $CALL_DIR/pf1000
call_end
