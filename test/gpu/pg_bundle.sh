#!/bin/bash
# pg_bundle.sh -- pack this machine's PostgreSQL 15 server, with mop (and
# mop_gpu.so) installed, into one archive for a GPU machine that has no
# PostgreSQL, so that the end-to-end GPU test (test/gpu/pg_e2e.sh) can run
# there.  Libraries the server needs are packed too, except the C and C++
# runtimes, which the target has (newer ones run these binaries).
#
#   make install && bash test/gpu/pg_bundle.sh OUTDIR   ->  OUTDIR/pg15.tar.xz
set -eu
out=${1:?usage: pg_bundle.sh OUTDIR}
bin=/usr/lib/postgresql/15/bin
lib=/usr/lib/postgresql/15/lib
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out" "$tmp/usr/lib/postgresql/15/bin" "$tmp/usr/lib/postgresql/15/lib" \
	"$tmp/usr/share/postgresql" "$tmp/mop-libs"
for b in postgres initdb pg_ctl psql; do
	cp "$bin/$b" "$tmp/usr/lib/postgresql/15/bin/"
done
for l in plpgsql dict_snowball mop mop_gpu; do
	cp "$lib/$l.so" "$tmp/usr/lib/postgresql/15/lib/"
done
cp -r /usr/share/postgresql/15 "$tmp/usr/share/postgresql/"
for f in "$bin/postgres" "$bin/psql" "$bin/initdb" /usr/lib/x86_64-linux-gnu/libopenblas.so.0; do
	ldd "$f" | awk '/=>/ {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
	while read -r so; do cp -L "$so" "$tmp/mop-libs/"; done
cp -L /usr/lib/x86_64-linux-gnu/libopenblas.so.0 "$tmp/mop-libs/"
chmod 755 "$tmp"
tar -C "$tmp" -cJf "$out/pg15.tar.xz" usr mop-libs
ls -la "$out/pg15.tar.xz"
