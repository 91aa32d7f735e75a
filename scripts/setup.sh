#!/bin/bash
# setup.sh -- install the Debian 12 packages mop needs (idempotent, quiet).
#
# Run as root (or with sudo available).  Packages already installed are not
# touched; apt-get runs only when something is missing.
set -euo pipefail

PACKAGES=(
	build-essential
	postgresql-15
	postgresql-server-dev-15	# PGXS; pulls clang-14 and llvm-14 for the bitcode step
	libpq-dev			# libpq, to reach segments (other servers)
	libopenblas0			# the engine dlopens libopenblas.so.0
	libopenblas-dev
	python3-numpy
	python3-torch			# engine cross-checks and benchmarks
	python3-sklearn
	python3-psycopg2
	dataset-fashion-mnist		# /usr/share/datasets/fashion-mnist, for the demo
	postgresql-15-cron
	libipc-run-perl			# PostgreSQL TAP tests
	chromium			# the chart tests render the SVGs in a headless browser
)

missing=()
for p in "${PACKAGES[@]}"; do
	[[ "$p" == \#* ]] && continue
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
