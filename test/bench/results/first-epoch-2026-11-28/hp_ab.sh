source /work/main/test/bench/mop_bench_lib.sh
echo 700 > /proc/sys/vm/nr_hugepages; grep HugePages_Total /proc/meminfo
for turn in 1 2 3; do
for hp in on off; do
  mopb_cluster_down
  sed -i '/^huge_pages/d' $MOPB_DIR/data/postgresql.conf; echo "huge_pages = $hp" >> $MOPB_DIR/data/postgresql.conf
  $AS_PG $PGBIN/pg_ctl -D $MOPB_DIR/data -l $MOPB_DIR/server.log -w -t 60 start >/dev/null || { tail $MOPB_DIR/server.log; exit 1; }
  $PSQL -tAc "show huge_pages" ; grep HugePages_Free /proc/meminfo
  $PSQL -tAc "SELECT sum(octet_length(x)+octet_length(y)) FROM mop.buffers WHERE dataset_id = 1" >/dev/null
  echo "== turn $turn huge_pages=$hp"
  /usr/bin/python3 /tmp/exp/fe.py 5 0 | tail -1
done; done
mopb_cluster_down; sed -i '/^huge_pages/d' $MOPB_DIR/data/postgresql.conf
echo 0 > /proc/sys/vm/nr_hugepages
$AS_PG $PGBIN/pg_ctl -D $MOPB_DIR/data -l $MOPB_DIR/server.log -w -t 60 start >/dev/null
