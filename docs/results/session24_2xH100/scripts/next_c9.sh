# Prepared in session 24 for the next session (NOT run: the device time ran out). Two combine changes, each
# against main, each in its own tree (they touch the same lines of combine.cu):
#   rif   = combine-rows-in-flight_b2b39f9.patch: NOTE [EP combine rows in flight], the two-role and low-latency
#           combine only (session 24's c7 measured this kernel, PTX-identical: two roles 0.967, ll 0.953-0.962;
#           owed: its sanitizers). The one-role and cross-node kernels' PTX is main's.
#   ahead = combine-items-ahead_1d43108.patch: NOTE [EP combine one role: items ahead] (never run; ptxas: 152/164
#           bytes of spills in the one-role kernel, 44/116 on main). The two-role kernel's PTX is main's.
# Before (here): scripts/ab_trees.sh base=main \
#   rif=main+docs/results/session24_2xH100/combine-rows-in-flight_b2b39f9.patch \
#   ahead=main+docs/results/session24_2xH100/combine-items-ahead_1d43108.patch
# run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~470 s: bash docs/results/session24_2xH100/scripts/next_c9.sh
# Merge a tree only if its tests and sanitizers pass and no case of its A/B is slower.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_c9 540
call_build_trees ferry-bench base rif+ferry_gpu_tests ahead+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; R=.ab/rif/build/bench/ferry-bench; A=.ab/ahead/build/bench/ferry-bench
TR=.ab/rif/build/tests/ferry_gpu_tests; TA=.ab/ahead/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# ahead: correctness first (the ticket order's progress with partly resident grids: the restricted-SM test alone).
call_run ahead_restricted 60 $M -np 2 $TA --gtest_filter='EpRestrictedSms*'
call_run ahead_ep_np2 80 $M -np 2 $TA --gtest_filter='Ep*'
call_run ahead_np4_shared 50 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $TA \
  --gtest_filter='Ep.CombineOneRole*:Ep/EpMatrix.*ht*'
for tool in memcheck racecheck; do
  call_run ahead_$tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $TA --gtest_filter='Ep.CombineOneRole*'
  call_run rif_$tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $TR --gtest_filter='Ep.CombineOneRole*'
done
call_ab ahead_ 3 $B $A "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
call_ab rif_two_role_ 2 $B $R "-x FERRY_EP_COMBINE_ONE_ROLE=0" ep --mode ht --layout expanded --dispatch-types bf16 \
  --sms 24
call_ab rif_ll_ 2 $B $R "" ep --mode ll --tokens 128,512
call_end
