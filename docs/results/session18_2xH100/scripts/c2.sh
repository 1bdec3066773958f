# Session 18, call 2 (nvidia-h100-x2): own rows first, the copy engine's share and pieces swept (c1: the copy
# engine's local copy of all own rows bounded the call at 24 and 48 SMs: bf16 261 / 241 us against main's 215 / 195).
#   FERRY_EP_OWN_ROWS_COPY_PERCENT (the copy engine's share, the first rows), FERRY_EP_OWN_ROWS_COPY_STREAMS (the
#   copy in that many pieces on as many streams), FERRY_EP_RANK_ROWS_LOCAL_BLOCKS (send blocks for the own rest).
# Before: rm -rf .ab; for t in base:main new:exp/own-rows-first; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session18_2xH100/scripts/c2.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 480
ferry_nccl_library_path
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
E="ep --layout rank_rows --mode ht"
show() { grep -h -E "^ht " "$CALL_DIR/$1.log" | awk '{printf "%s %s sms=%s %s | ", $3, $4, $6, $8} END {print ""}'; }
call_run base 40 $M -np 2 $B $E --sms 8,24,48; show base
for s in 1 2 4; do
  call_run own_s$s 40 $M -np 2 -x FERRY_EP_OWN_ROWS_COPY_STREAMS=$s $N $E --own-rows-first --sms 8,24,48 --no-nccl; show own_s$s
done
for pc in 50 67 80; do for lb in 2 4; do
  call_run own_p${pc}_l$lb 40 $M -np 2 -x FERRY_EP_OWN_ROWS_COPY_PERCENT=$pc -x FERRY_EP_OWN_ROWS_COPY_STREAMS=2 \
    -x FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=$lb $N $E --own-rows-first --sms 24,48 --no-nccl; show own_p${pc}_l$lb
done; done
call_run own_np2 90 $M -np 2 $T --gtest_filter='EpOwnRowsFirst.*'
call_run base2 40 $M -np 2 $B $E --sms 8,24,48; show base2
call_end
