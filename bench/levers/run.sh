#!/usr/bin/env bash
# The levers of issue 53 against the baseline, interleaved round by round: bench/turns.ts's
# concurrency phase, sessionlog alone, one load shape, each lever in a fresh process and Temporal
# dev server. A lever is a patch in this folder (applied for its run and reverted after) or
# worker options. Prints one line per run: lever, turns/s, p50, p99, CPU per turn (worker + client).
#
#   bench/levers/run.sh [ROUNDS=3] [LOAD=100x10] [LEVERS="baseline codec-no-deflate …"]
#
# Run it on a clean tree (it applies and reverts patches in place) and a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}
LOAD=${LOAD:-100x10}
LEVERS=${LEVERS:-baseline codec-no-deflate sqlite-wal-sync-off-loop thread-pool-2 no-reuse-v8-context}

applied=''
revert() {
  if [ -n "$applied" ]; then
    git apply -R "$applied"
    applied=''
  fi
}
trap revert EXIT

for round in $(seq "$ROUNDS"); do
  for lever in $LEVERS; do
    options='{}'
    case "$lever" in
      baseline) ;;
      thread-pool-2) options='{"workflowThreadPoolSize":2}' ;;
      no-reuse-v8-context) options='{"reuseV8Context":false}' ;;
      *)
        git apply "bench/levers/$lever.patch"
        applied="bench/levers/$lever.patch"
        ;;
    esac
    row=$(scripts/temporal-dev-server run -- npx tsx bench/turns.ts --phases concurrency --loads "$LOAD" \
      --systems sessionlog --worker-options "$options" 2>&1 | grep -E '^\| [0-9,]+ sessions × .*\| sessionlog ' || true)
    revert
    # | shape | system | turns | failed | turns/s | p50 | p99 | CPU per turn | peak RSS |
    echo "round $round · $lever · $(echo "$row" | awk -F'|' '{gsub(/ +/, " "); print "turns " $4 "· failed " $5 "· turns/s " $6 "· p50 " $7 "· p99 " $8 "· CPU/turn " $9}') · load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
