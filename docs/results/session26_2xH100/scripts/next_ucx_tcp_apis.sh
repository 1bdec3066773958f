# Prepared in session 26 for the next session (NOT run). run(kind nvidia-h100-x2, carry [".deps"]), ~90 s; no GPU
# used. Issue 24's tcp rows: with peer-failure handling (ferry's default) UCX emulates puts over tcp. Session 25
# measured on the 2-core CI machine (docs/results/ucx_tcp_errhandling_cpu_2cores.txt): 1 MiB put -e 0.42-0.60 GB/s,
# tag -e 1.02-1.10, am -e 0.64-1.17; at 4 MiB put -e 0.72, tag -e 0.71-0.85: too noisy on 2 cores to choose an API.
# This measures the same on the device's host (loopback tcp, more cores), 3 runs each, before any transport is
# built on tagged sends or active messages. Note for that design (docs/internode.md, session 26): a put emulated by
# a send completes at the sender before the receiver has placed it, so a quiet would need an acknowledgement.
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_ucx_tcp_apis 300
export LD_LIBRARY_PATH=$ROOT/.deps/ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} UCX_TLS=tcp,self UCX_NET_DEVICES=lo
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
cat $OUT
call_end
