#!/usr/bin/env bash
# The levers of issue 53 against the baseline, interleaved round by round, each lever in a fresh
# process and Temporal dev server, sessionlog alone. A lever is a patch in this folder (applied
# for its run and reverted after), worker options or session tunables.
#
# - BENCH=turns (default): bench/turns.ts's concurrency phase at one load shape; one line per run:
#   turns/s, p50, p99, CPU per turn (worker + client).
# - BENCH=idle: bench/idle.ts at IDLE_ARGS (default 1,000 sessions, workflow cache 50); one line
#   per run: cold and cached p50 and their ratio, and the worker's RSS, heap and external memory
#   after setup.
#
#   [ROUNDS=3] [LOAD=100x10] [LEVERS="baseline codec-no-deflate …"] [BENCH=turns|idle] bench/levers/run.sh
#
# Run it on a clean tree (it applies and reverts patches in place) and a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}
LOAD=${LOAD:-100x10}
LEVERS=${LEVERS:-baseline codec-no-deflate sqlite-wal-sync-off-loop thread-pool-2 no-reuse-v8-context}
BENCH=${BENCH:-turns}
IDLE_ARGS=${IDLE_ARGS:---sessions 1000 --cache 50 --measured 100}

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
    tunables='{}'
    case "$lever" in
      baseline) ;;
      thread-pool-2) options='{"workflowThreadPoolSize":2}' ;;
      no-reuse-v8-context) options='{"reuseV8Context":false}' ;;
      continue-as-new-after-*) tunables="{\"continueAsNewAfterTurns\":${lever#continue-as-new-after-}}" ;;
      *)
        git apply "bench/levers/$lever.patch"
        applied="bench/levers/$lever.patch"
        ;;
    esac
    if [ "$BENCH" = idle ]; then
      # shellcheck disable=SC2086
      out=$(scripts/temporal-dev-server run -- npx tsx bench/idle.ts $IDLE_ARGS --systems sessionlog \
        --tunables "$tunables" 2>&1 || true)
      revert
      # | system | cold p50 | cold p99 | cached p50 | cached p99 | ratio p50 | ratio p99 |
      row=$(echo "$out" | grep -E '^\| sessionlog .*\| [0-9.]+× +\|' | head -1 || true)
      # | system | RSS after setup | heap used / total | external | RSS after turns | … (the memory grid)
      memory=$(echo "$out" | grep -E '^\| sessionlog .* / ' | head -1 || true)
      echo "round $round · $lever · $(echo "$row" | awk -F'|' '{gsub(/ +/, " "); print "cold p50 " $3 "· cached p50 " $5 "· cold ÷ cached p50 " $7 "· p99 " $8}') · $(echo "$memory" | awk -F'|' '{gsub(/ +/, " "); print "worker RSS " $3 "· heap " $4 "· external " $5}') · load $(cut -d' ' -f1 /proc/loadavg)"
      continue
    fi
    row=$(scripts/temporal-dev-server run -- npx tsx bench/turns.ts --phases concurrency --loads "$LOAD" \
      --systems sessionlog --worker-options "$options" --tunables "$tunables" 2>&1 |
      grep -E '^\| [0-9,]+ sessions × .*\| sessionlog ' || true)
    revert
    # | shape | system | turns | failed | turns/s | p50 | p99 | CPU per turn | peak RSS |
    echo "round $round · $lever · $(echo "$row" | awk -F'|' '{gsub(/ +/, " "); print "turns " $4 "· failed " $5 "· turns/s " $6 "· p50 " $7 "· p99 " $8 "· CPU/turn " $9}') · load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
