# Call 5 (same warm machine, builds kept): final figures on 2 GPUs, cross-node figures, sanitizer on the mapped-peer path.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
ferry_device_cmake_args build-device; ferry_nccl_library_path
[ -x build-device/bench/ferry-bench ] || cmake --build build-device -j30 --target ferry-bench ferry_gpu_window_tests > /dev/null 2>&1
O=$OUT/x; mkdir -p $O; t0=$(date +%s)
M="mpirun --allow-run-as-root --bind-to none -np 2"; V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
B=build-device/bench/ferry-bench
$M $B ep --halves --check --csv $O/ep_2xH200_2ranks.csv > $O/ep_2xH200_2ranks.txt 2>&1; echo "ep rc=$?"; grep -E "^(ht|ll) |check" $O/ep_2xH200_2ranks.txt
$M $B ep --mode ht --sms 4,8,16,24,48,132 --csv $O/ep_sms_2xH200_2ranks.csv > $O/ep_sms_2xH200_2ranks.txt 2>&1; echo "sms rc=$?"
for tls in sm tcp; do
  N="-x NCCL_P2P_DISABLE=1"; [ $tls = tcp ] && N="$N -x NCCL_SHM_DISABLE=1"
  timeout 150 $M $V -x UCX_TLS=$tls,self $N $B allreduce --sizes 256K,1M,16M,64M --dtypes bf16 --csv $O/crossnode_ar_$tls.csv > $O/crossnode_ar_$tls.txt 2>&1; echo "ar $tls rc=$?"; grep -E "^bf16" $O/crossnode_ar_$tls.txt
  timeout 200 $M $V -x UCX_TLS=$tls,self $N $B ep --layout expanded --stages --halves --csv $O/crossnode_ep_$tls.csv > $O/crossnode_ep_$tls.txt 2>&1; echo "ep $tls rc=$?"; grep -E "^(ht|ll) " $O/crossnode_ep_$tls.txt
done
timeout 150 $M $V -x UCX_TLS=sm,self -x FERRY_TEST_EXPECT_MAPPED_PEERS=1 compute-sanitizer --tool memcheck --error-exitcode 3 build-device/tests/ferry_gpu_window_tests > $O/san_window_sm.log 2>&1; echo "memcheck window sm rc=$?"; grep -E "ERROR SUMMARY|PASSED  \]" $O/san_window_sm.log | head -3
echo "total $(( $(date +%s) - t0 )) s"
cd $O && tar czf /tmp/c5.tgz . && find . -mindepth 1 -delete && mv /tmp/c5.tgz .
