# Session 18, call 3 (nvidia-h100-x2): own rows first by SM count, to place the copy engine's rule (c2: it wins at
# 8 SMs, loses at 24 and 48 whatever its share or pieces), and one send block more (9 SMs = 8 send blocks: what a
# dispatch without a separate receive block would have at 8). Is the local device-to-device copy a copy-engine
# operation or a kernel (nsys)?
# Before: rm -rf .ab; for t in base:main new:exp/own-rows-first; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session18_2xH100/scripts/c3.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 300
ferry_nccl_library_path
call_build_trees ferry-bench base new
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"
E="ep --layout rank_rows --mode ht"
show() { grep -h -E "^ht " "$CALL_DIR/$1.log" | awk '{printf "%s %s sms=%s %s | ", $3, $4, $6, $8} END {print ""}'; }
call_run base 60 $M -np 2 $B $E --sms 8,9,12,16,20,24,48 --no-nccl; show base
call_run own_p100 60 $M -np 2 -x FERRY_EP_OWN_ROWS_COPY_PERCENT=100 $N $E --own-rows-first --sms 8,9,12,16,20,24 --no-nccl; show own_p100
call_run own_p0 60 $M -np 2 -x FERRY_EP_OWN_ROWS_COPY_PERCENT=0 $N $E --own-rows-first --sms 8,9,12,16,20,24,48 --no-nccl; show own_p0
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
if [ -n "$NSYS" ]; then
  call_run nsys 60 $M -np 1 $NSYS profile -t cuda -o $CALL_DIR/own1 --force-overwrite true --stats=true $N $E --own-rows-first --sms 24 --no-graph --iters 20 --warmup 2 --no-nccl --csv ''
  grep -i -E "memcpy|copy|DtoD" $CALL_DIR/nsys.log | head -12
  rm -f $CALL_DIR/own1.nsys-rep $CALL_DIR/own1.sqlite
fi
call_run base2 60 $M -np 2 $B $E --sms 8,9,24 --no-nccl; show base2
call_end
