# Prepared in session 43, NOT run. run(kind any, carry [".deps"]), ~60 s, no GPU work. Before building several tcp
# streams per direction (docs/internode.md Session 43, "What is left over tcp at 64 MB"): does loopback tcp on the
# device host move more per direction with 2 or 4 streams (ucx_perftest pairs, one thread each) than with one, while
# the other direction runs too? c2 of session 43 measured one pair per direction: 4.4-5.5 GB/s each.
source scripts/common.sh; ferry_export_env
OUT=${OUT:-./out}; mkdir -p $OUT/streams; D=$OUT/streams
P=$ROOT/.deps/ucx/bin/ucx_perftest
export LD_LIBRARY_PATH=$ROOT/.deps/ucx/lib:$LD_LIBRARY_PATH UCX_TLS=tcp,self UCX_TCP_TX_SEG_SIZE=65536 UCX_TCP_RX_SEG_SIZE=65536
nproc > $D/host.txt
pt() {  # port log
  $P -p $1 > /dev/null 2>&1 &
  sleep 0.5
  timeout 60 $P localhost -p $1 -t ucp_put_bw -s 16777216 -n 64 -w 8 2>&1 | grep Final: > $2
}
for run in 1 2; do
  for streams in 1 2 4; do  # per direction; both directions at once
    for i in $(seq 1 $((2 * streams))); do pt $((15000 + run * 100 + streams * 10 + i)) $D/s${streams}_${run}_$i.txt & done
    wait
  done
done
for f in $D/s*.txt; do echo "$(basename $f) $(awk '{print $7 * 1.048576 / 1000 " GB/s"}' $f)"; done | sort
cd $OUT && tar czf streams.tgz -C streams . && rm -rf streams
