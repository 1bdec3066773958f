# Session 41 c7. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), from a checkout of main, trees made by
#   scripts/ab_trees.sh base=main clean=exp/oah-cleanup
# The last 272 s of device time: exp/oah-cleanup's A/B on 2 GPUs (its tests and sanitizers ran in c6), LL
# T=1/128/256/512, base and clean alternating, 2 rounds, --check, NCCL in the run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 200
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base clean
call_ab oah_ 2 $ROOT/.ab/base/build/bench/ferry-bench $ROOT/.ab/clean/build/bench/ferry-bench "" \
  ep --mode ll --tokens 1,128,256,512 --check
call_end
