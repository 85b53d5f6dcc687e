#!/usr/bin/env bash
# Instructions per request of each lookup and of the bare node:http server (bench/baseline-server.ts)
# answering as many bytes, at CONNECTIONS keep-alive connections, counted with callgrind (issue 30,
# bench/README.md "Issue 30: lookups beside the bare server"). The method of callgrind-lookups.sh,
# for every lookup in one service start and with a concurrent client:
#
#   bench/callgrind-endpoints.sh DIR LABEL
#
# DIR is a checkout with `npm ci` done; LABEL names the build. For each run (RUNS, 1) it seeds a
# fresh SQLite file (domain example.org, user alice@example.org, alias info@example.org -> alice,
# one API token with scopes mta and mailbox-server), starts the service under
# `valgrind --tool=callgrind --separate-threads=yes` (NODE_ENV=production, default configuration),
# then for each lookup: WARMUP (3,000) requests, SETTLE_SECONDS (2), zero the counters, REQUESTS
# (3,000) requests, SETTLE_SECONDS, dump, and divide the main thread's `summary:` by REQUESTS. The
# client (outside valgrind) keeps CONNECTIONS (64) requests in flight over as many sockets. Then
# the bare server the same way, under callgrind, answering the largest body the lookups gave.
# The background work of the service's main thread (the webhook worker polls every second) is
# counted in each window, in proportion to its length (countedSeconds, reported beside it).
# stdout: one JSON line. Needs valgrind and curl. KEEP=1 keeps the work directory.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 CHECKOUT_DIR LABEL   (env: RUNS=1 CONNECTIONS=64 WARMUP=3000 REQUESTS=3000)" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
label="$2"
runs="${RUNS:-1}"
connections="${CONNECTIONS:-64}"
warmup="${WARMUP:-3000}"
requests="${REQUESTS:-3000}"
settle_seconds="${SETTLE_SECONDS:-2}"
start_timeout="${START_TIMEOUT:-900}"
lookups="${LOOKUPS:-domain mailbox alias senders smtp_quota userdb}"

for tool in valgrind callgrind_control curl; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found" >&2; exit 1; }
done
node="$dir/node_modules/node/bin/node"
[ -x "$node" ] || { echo "error: $node missing: run 'npm ci' in $dir" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/callgrind-endpoints.XXXXXX")"
server_pid=""
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$server_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
cleanup() {
  stop_server
  if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
log() { echo "[callgrind-endpoints $label] $*" >&2; }

# The client: COUNT GETs of one path, CONNECTIONS in flight over as many keep-alive sockets; fails
# unless every answer is 200 or 404 (as the lookup answers it) and no more sockets were opened.
cat >"$work/client.mjs" <<'EOF'
import http from "node:http";
const [url, token, countArg, connectionsArg] = process.argv.slice(2);
const count = Number(countArg);
const connections = Number(connectionsArg);
const target = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const seen = new WeakSet();
let answered = 0;
let other = 0;
let sockets = 0;
let bytes = 0;
let next = 0;
const one = () =>
  new Promise((resolve, reject) => {
    const request = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, agent, headers: { authorization: `Bearer ${token}` } },
      (response) => {
        response.on("data", (chunk) => (bytes = Math.max(bytes, chunk.length)));
        response.on("end", () => {
          if (response.statusCode === 200 || response.statusCode === 404) answered++;
          else other++;
          resolve();
        });
      },
    );
    request.on("socket", (socket) => {
      if (!seen.has(socket)) (seen.add(socket), sockets++);
    });
    request.on("error", reject);
    request.end();
  });
const worker = async () => {
  while (next < count) {
    next++;
    await one();
  }
};
const started = performance.now();
await Promise.all(Array.from({ length: connections }, worker));
agent.destroy();
console.log(JSON.stringify({ requests: count, answered, other, sockets, bodyBytes: bytes, seconds: (performance.now() - started) / 1000 }));
if (answered !== count || sockets > connections) process.exit(1);
EOF

free_port() {
  "$node" -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

main_thread_summary() {
  local file="$run_dir/callgrind.out.$1.$2-01"
  [ -f "$file" ] || { log "no dump file $file"; ls "$run_dir" >&2; return 1; }
  grep -q '^thread: 1$' "$file" || { log "$file is not thread 1"; return 1; }
  sed -n 's/^summary: //p' "$file"
}

control() {
  local output
  output="$(callgrind_control "$1" "$server_pid" 2>&1)" || { log "callgrind_control $1 failed: $output"; return 1; }
  grep -q "OK" <<<"$output" || { log "callgrind_control $1: $output"; return 1; }
}

wait_up() {
  local started=$SECONDS
  until curl -s -o /dev/null "$1"; do
    kill -0 "$server_pid" 2>/dev/null || { log "the server exited during start-up"; tail -40 "$run_dir/server.log" >&2; exit 1; }
    [ $((SECONDS - started)) -gt "$start_timeout" ] && { log "not up after $start_timeout s"; exit 1; }
    sleep 2
  done
}

# count NAME URL: warm-up, zero, counted requests, dump number DUMP; sets per_request and json_row.
dump=0
count() {
  local name="$1" url="$2"
  "$node" "$work/client.mjs" "$url" "$token" "$warmup" "$connections" >"$run_dir/$name-warmup.json" \
    || { log "$name warm-up failed: $(cat "$run_dir/$name-warmup.json")"; exit 1; }
  sleep "$settle_seconds"
  control -z
  local zeroed_at
  zeroed_at="$(date +%s.%N)"
  "$node" "$work/client.mjs" "$url" "$token" "$requests" "$connections" >"$run_dir/$name.json" \
    || { log "$name failed: $(cat "$run_dir/$name.json")"; exit 1; }
  sleep "$settle_seconds"
  control -d
  dump=$((dump + 1))
  local seconds total
  seconds="$(awk -v a="$zeroed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  total="$(main_thread_summary "$server_pid" "$dump")"
  per_request=$((total / requests))
  body_bytes="$("$node" -p "JSON.parse(require('node:fs').readFileSync('$run_dir/$name.json', 'utf8')).bodyBytes")"
  log "$name: $per_request instructions per request (window $seconds s, body $body_bytes bytes)"
  json_row="\"$name\":{\"perRequest\":$per_request,\"countedSeconds\":$seconds,\"bodyBytes\":$body_bytes}"
}

commit="$(git -C "$dir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$dir" status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit+uncommitted"; fi
log "$dir ($commit): $runs runs, $requests requests per figure after $warmup, $connections connections"

runs_json=""
for run in $(seq 1 "$runs"); do
  run_dir="$work/run$run"
  mkdir -p "$run_dir"
  db_url="sqlite:$run_dir/service.sqlite"
  seed() { env -i PATH="$PATH" NODE_ENV=production DATABASE_URL="$db_url" "$dir/bin/console" "$@" </dev/null; }
  {
    seed app:domain:create example.org
    seed app:user:create -u alice@example.org --password bench-password-correct-horse
    seed app:alias:create -a info@example.org --destination alice@example.org
  } >"$run_dir/seed.log" 2>&1 || { cat "$run_dir/seed.log" >&2; exit 1; }
  token="$(seed app:api-token:create -t bench -s mta,mailbox-server 2>>"$run_dir/seed.log" | sed -n 's/^Token: //p')"
  [ -n "$token" ] || { log "no API token"; cat "$run_dir/seed.log" >&2; exit 1; }

  port="$(free_port)"
  url="http://127.0.0.1:$port"
  log "run $run: starting the service under callgrind on port $port (load average $(cut -d' ' -f1 /proc/loadavg))"
  (
    cd "$dir"
    exec env -i PATH="$PATH" NODE_ENV=production DATABASE_URL="$db_url" LISTEN_ADDR="127.0.0.1:$port" \
      valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$run_dir/callgrind.out.%p" \
      "$node" packages/service/src/main.ts
  ) >"$run_dir/server.log" 2>&1 &
  server_pid=$!
  wait_up "$url/health"
  dump=0
  rows=""
  largest=20
  for lookup in $lookups; do
    case "$lookup" in
      domain) path="/api/mta/domain/example.org" ;;
      mailbox) path="/api/mta/mailbox/alice@example.org" ;;
      alias) path="/api/mta/alias/info@example.org" ;;
      senders) path="/api/mta/senders/alice@example.org" ;;
      smtp_quota) path="/api/mta/smtp_quota/alice@example.org" ;;
      userdb) path="/api/mailbox-server/alice@example.org" ;;
      *) log "unknown lookup $lookup"; exit 2 ;;
    esac
    count "$lookup" "$url$path"
    rows="${rows:+$rows,}$json_row"
    [ "$body_bytes" -gt "$largest" ] && largest="$body_bytes"
  done
  stop_server

  port="$(free_port)"
  log "run $run: the bare server under callgrind, $largest-byte body"
  (
    exec env -i PATH="$PATH" valgrind --tool=callgrind --separate-threads=yes \
      --callgrind-out-file="$run_dir/callgrind.out.%p" "$node" "$dir/bench/baseline-server.ts" "$port" "$largest"
  ) >"$run_dir/server.log" 2>&1 &
  server_pid=$!
  wait_up "http://127.0.0.1:$port/"
  dump=0
  count bare "http://127.0.0.1:$port/"
  rows="$rows,$json_row"
  stop_server
  runs_json="${runs_json:+$runs_json,}{$rows}"
done

echo "{\"what\":\"Instructions per request (main thread summary, valgrind --tool=callgrind --separate-threads=yes) of each lookup on SQLite (one domain, user, alias) and of bench/baseline-server.ts answering the largest of their bodies; $warmup warm-up requests, counters zeroed, $requests counted, $connections keep-alive connections in flight; client outside valgrind\",\"date\":\"$(date -u +%Y-%m-%d)\",\"label\":\"$label\",\"commit\":\"$commit\",\"node\":\"$("$node" --version)\",\"valgrind\":\"$(valgrind --version)\",\"connections\":$connections,\"warmup\":$warmup,\"requests\":$requests,\"runs\":[$runs_json]}"
