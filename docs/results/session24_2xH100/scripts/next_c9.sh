# Prepared in session 24 for the next session (NOT run: the device time ran out). Two combine changes, each
# against main, each in its own tree (they touch the same lines of combine.cu):
#   w640  = combine-one-role-640_e59e818.patch: NOTE [EP combine rows in flight] (an item's rows loaded 4 at a
#           time, 2 units each) in the two-role, low-latency AND one-role combine, the one-role kernel on 640
#           threads (NOTE [EP combine one role: 640 threads]; ptxas: 96 registers, 4 bytes of spills). Session 24's
#           c7 measured the two-role kernel of this tree (PTX identical): two roles 0.967, ll 0.953-0.962; with
#           1024 threads the one-role kernel spilled 804 bytes and ran 3.6x slower. (Rows in flight alone, one
#           role untouched: combine-rows-in-flight_b2b39f9.patch, the fallback if the one-role part loses.)
#   ahead = combine-items-ahead_36cbfc3.patch: NOTE [EP combine one role: items ahead] (ptxas: 152/164 bytes of
#           spills in the one-role kernel, 44/116 on main). The two-role kernel's PTX is main's.
# Neither ran on a GPU. Before (here): scripts/ab_trees.sh base=main \
#   w640=main+docs/results/session24_2xH100/combine-one-role-640_e59e818.patch \
#   ahead=main+docs/results/session24_2xH100/combine-items-ahead_36cbfc3.patch
# run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~520 s: bash docs/results/session24_2xH100/scripts/next_c9.sh
# Merge a tree only if its tests and sanitizers pass and no case of its A/B is slower.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_c9 560
call_build_trees ferry-bench base w640+ferry_gpu_tests ahead+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; W=.ab/w640/build/bench/ferry-bench; A=.ab/ahead/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# Correctness first: the restricted-SM test alone (the ticket order's progress with partly resident grids), the
# suite, 4 ranks sharing the GPUs, memcheck and racecheck (Ep.CombineOneRole* runs both roles).
for tree in w640 ahead; do
  T=.ab/$tree/build/tests/ferry_gpu_tests
  call_run ${tree}_restricted 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
  call_run ${tree}_ep_np2 80 $M -np 2 $T --gtest_filter='Ep*'
  call_run ${tree}_np4_shared 50 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep.CombineOneRole*:Ep/EpMatrix.*ht*'
  for tool in memcheck racecheck; do
    call_run ${tree}_$tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.CombineOneRole*'
  done
done
call_ab w640_ 3 $B $W "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
call_ab ahead_ 3 $B $A "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
call_ab w640_two_role_ 2 $B $W "-x FERRY_EP_COMBINE_ONE_ROLE=0" ep --mode ht --layout expanded \
  --dispatch-types bf16 --sms 24
call_ab w640_ll_ 2 $B $W "" ep --mode ll --tokens 128,512
call_end
