#!/usr/bin/env bash
# The machine's speed, for comparing timings of runs: the wall seconds of a fixed one-core workload
# (SHA-256 of 256 MiB by coreutils), the fastest of three; the share of CPU time the hypervisor has
# stolen since boot (steal ticks of /proc/stat); and the milliseconds of one synced 4 KiB write on the
# checkout's disk (200 of them: the stack's databases sync every commit). Runs of the same code on a
# machine slower that day (another guest on the host, a lower clock, a busier disk) are so told apart
# from slower code.
# usage: speed.sh          prints "<seconds> <steal ticks> <all ticks> <ms per synced write>"
set -euo pipefail
bin=$(cd "$(dirname "$0")/../../.." && pwd)/bin
best=""
for _ in 1 2 3; do
  t0=$(date +%s%N)
  head -c 268435456 /dev/zero | sha256sum >/dev/null
  d=$(( $(date +%s%N) - t0 ))
  if [ -z "$best" ] || [ "$d" -lt "$best" ]; then best=$d; fi
done
mkdir -p "$bin"
probe=$bin/.sync-probe
t0=$(date +%s%N)
dd if=/dev/zero of="$probe" bs=4k count=200 oflag=dsync 2>/dev/null
sync_us=$((($(date +%s%N) - t0) / 200000))
rm -f "$probe"
# cpu user nice system idle iowait irq softirq steal (guest time is inside user already)
read -r _ u n s i w q sq st _ </proc/stat
printf '%d.%02d %d %d %d.%02d\n' $((best / 1000000000)) $(((best / 10000000) % 100)) "$st" $((u + n + s + i + w + q + sq + st)) \
  $((sync_us / 1000)) $(((sync_us / 10) % 100))
