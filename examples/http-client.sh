#!/usr/bin/env bash
# The gateway's HTTP API with curl: create a session, watch its live event stream (SSE) while a
# message is answered, then read the derived history and the stored events.
#
#   sessionlog dev                                   # in the clone; then anywhere below it:
#   bash examples/http-client.sh "What is 6 times 7?"
#
# The gateway is the running `sessionlog dev`'s, found as the CLI finds it (the nearest
# .sessionlog/dev.json here or above, or SESSIONLOG_HOME's), whatever its port; else
# http://127.0.0.1:8787. GATEWAY=http://host:port names another one.
#
# Against docker compose (or any gateway beyond loopback) pass the token:
#
#   GATEWAY=http://127.0.0.1:8787 SESSIONLOG_GATEWAY_TOKEN=… bash examples/http-client.sh
#
# Every route is described by the OpenAPI document at $GATEWAY/v1/openapi.json.
set -euo pipefail

# Prints the gateway URL of the running `sessionlog dev` (as examples/find-dev.ts finds it).
dev_gateway() {
  node -e '
    const { readFileSync } = require("node:fs");
    const { dirname, join, resolve } = require("node:path");
    const homes = [];
    if (process.env.SESSIONLOG_HOME) homes.push(resolve(process.env.SESSIONLOG_HOME));
    else for (let dir = process.cwd(); ; dir = dirname(dir)) {
      homes.push(join(dir, ".sessionlog"));
      if (dirname(dir) === dir) break;
    }
    for (const home of homes) {
      let state;
      try { state = JSON.parse(readFileSync(join(home, "dev.json"), "utf8")); } catch { continue; }
      try { process.kill(state.pid, 0); } catch (error) { if (error.code !== "EPERM") continue; }
      process.stdout.write(state.gatewayUrl);
      process.exit(0);
    }
    process.exit(1);'
}

GATEWAY="${GATEWAY:-$(dev_gateway || echo http://127.0.0.1:8787)}"
TEXT="${*:-Hello over HTTP! How many words are in this sentence?}"
SESSION_ID="${SESSION_ID:-http-$(date +%s)-$RANDOM}"

# Loopback gateways started without a token accept requests without one.
auth=()
if [ -n "${SESSIONLOG_GATEWAY_TOKEN:-}" ]; then
  auth=(-H "Authorization: Bearer $SESSIONLOG_GATEWAY_TOKEN")
fi

# A JSON string literal for any text (quotes, backslashes, newlines), without needing jq.
json_string() { node -e 'process.stdout.write(JSON.stringify(process.argv[1]))' "$1"; }

echo "== create session $SESSION_ID"
curl -fsS -X POST "$GATEWAY/v1/sessions" ${auth[@]+"${auth[@]}"} \
  -H 'Content-Type: application/json' \
  -d "{\"id\": \"$SESSION_ID\"}"
echo

echo "== live events (SSE: one 'id: <seq>', 'event: <type>', 'data: <json>' frame per log event)"
# -N: print each frame as it arrives. Ctrl-C ends a stream like this one; here it is stopped
# once the reply is in.
curl -sS -N -X GET "$GATEWAY/v1/sessions/$SESSION_ID/events" ${auth[@]+"${auth[@]}"} \
  -H 'Accept: text/event-stream' > >(sed -u -n 's/^event: /  event: /p') &
stream=$!
trap 'kill "$stream" 2>/dev/null || true' EXIT
sleep 0.5

echo "== send a message and wait for the reply"
curl -fsS -X POST "$GATEWAY/v1/sessions/$SESSION_ID/messages?wait=true" ${auth[@]+"${auth[@]}"} \
  -H 'Content-Type: application/json' \
  -d "{\"text\": $(json_string "$TEXT")}"
echo
sleep 0.5
kill "$stream" 2>/dev/null || true
wait "$stream" 2>/dev/null || true

echo "== derived history"
curl -fsS -X GET "$GATEWAY/v1/sessions/$SESSION_ID/messages" ${auth[@]+"${auth[@]}"}
echo

echo "== the first stored events"
curl -fsS -X GET "$GATEWAY/v1/sessions/$SESSION_ID/events?from=0&limit=5" ${auth[@]+"${auth[@]}"}
echo
