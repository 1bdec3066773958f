# Session 43 c2. run(kind nvidia-h200, carry [".deps"]), ~60 s, no GPU work: is loopback tcp over UCX bound by one
# thread per process? ucx_perftest ucp_put_bw (UCX 1.22, tcp, ferry's 64 KiB segments), 16 MiB and 4 MiB puts:
# one pair one way, then two pairs at once in opposite directions (4 processes, each its own thread), 3 runs each.
# c1 measured ferry's proxy both ways at once (one thread per rank sends and receives): 2.47-2.97 GB/s per
# direction against 3.9-4.4 for one pair one way.
source scripts/common.sh; ferry_export_env
OUT=${OUT:-./out}; mkdir -p $OUT/c2; D=$OUT/c2
P=$ROOT/.deps/ucx/bin/ucx_perftest
export LD_LIBRARY_PATH=$ROOT/.deps/ucx/lib:$LD_LIBRARY_PATH UCX_TLS=tcp,self UCX_TCP_TX_SEG_SIZE=65536 UCX_TCP_RX_SEG_SIZE=65536
nproc > $D/host.txt
pt() {  # port size log
  $P -p $1 > /dev/null 2>&1 &
  sleep 0.5
  timeout 60 $P localhost -p $1 -t ucp_put_bw -s $2 -n $3 -w 10 2>&1 | grep Final: > $4
}
for run in 1 2 3; do
  for s in 16777216 4194304; do
    n=$((1 << 30)); n=$((n / s))
    pt $((14000 + run * 10)) $s $n $D/one_${s}_$run.txt; wait
    pt $((14001 + run * 10)) $s $n $D/two_a_${s}_$run.txt & pt $((14002 + run * 10)) $s $n $D/two_b_${s}_$run.txt &
    wait
  done
done
for f in $D/*.txt; do echo "$(basename $f) $(awk '{print $7 * 1.048576 / 1000 " GB/s"}' $f)"; done | sort
cd $OUT && tar czf c2.tgz -C c2 . && rm -rf c2
