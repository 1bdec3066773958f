# Session 14, call 6: does NUMA placement explain call 5's slower host-memory rows? Each rank pinned (taskset) to
# the CPUs local to its GPU (sysfs local_cpulist) against no binding (--bind-to none alone), alternating, 2 rounds:
# EP high throughput and AllReduce over sm on 2 virtual nodes, NCCL (NCCL_P2P_DISABLE=1) in the same processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 300
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
rm -f $CALL_DIR/cfg.log $CALL_DIR/build.log; echo "built in $(call_elapsed) s"
for g in 0 1; do
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i $g | sed 's/^0000//' | tr A-F a-f)
  echo "GPU$g $bus numa_node=$(cat /sys/bus/pci/devices/$bus/numa_node) cpus=$(cat /sys/bus/pci/devices/$bus/local_cpulist)"
done | tee $CALL_DIR/topology.txt
(lscpu | grep -i -E "numa|socket|model name"; nvidia-smi topo -m) >> $CALL_DIR/topology.txt 2>&1
cat > $CALL_DIR/bound <<'EOS'
#!/usr/bin/env bash
g=${OMPI_COMM_WORLD_LOCAL_RANK:-0}
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i $g | sed 's/^0000//' | tr A-F a-f)
exec taskset -c "$(cat /sys/bus/pci/devices/$bus/local_cpulist)" "$@"
EOS
chmod +x $CALL_DIR/bound
B=$ROOT/build-device/bench/ferry-bench
printf '#!/usr/bin/env bash\nexec %s "$@"\n' "$B" > $CALL_DIR/plain; printf '#!/usr/bin/env bash\nexec %s %s "$@"\n' "$CALL_DIR/bound" "$B" > $CALL_DIR/numa
chmod +x $CALL_DIR/plain $CALL_DIR/numa
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x NCCL_P2P_DISABLE=1"
call_ab ep_sm_ 2 $CALL_DIR/plain $CALL_DIR/numa "$V -x UCX_TLS=sm,self" ep --layout expanded --mode ht
call_ab ar_sm_ 2 $CALL_DIR/plain $CALL_DIR/numa "$V -x UCX_TLS=sm,self" allreduce --sizes 1M,16M,64M --dtypes bf16
call_end
