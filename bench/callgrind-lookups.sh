#!/usr/bin/env bash
# Instructions per GET /api/mta/mailbox/{email} lookup at one connection, counted with callgrind
# (bench/README.md, "Comparing two builds"): the method of results/2026-11-27-callgrind-c1-*.json.
#
#   bench/callgrind-lookups.sh DIR LABEL
#
# DIR is a checkout of this repository with `npm ci` done (its pinned Node in node_modules/node);
# LABEL names the build in the output (e.g. "before", "after", a commit). For each run (RUNS, 2) it:
#   - seeds a fresh SQLite file with the checkout's own console: domain example.org, user
#     alice@example.org, an API token with scope mta;
#   - starts the checkout's service under `valgrind --tool=callgrind --separate-threads=yes`,
#     NODE_ENV=production and otherwise the default configuration (as bench/run.ts starts it; the
#     environment is not inherited), on a free port of 127.0.0.1;
#   - sends WARMUP (300) lookups of alice@example.org, one at a time over one keep-alive connection
#     (the client runs outside valgrind), waits SETTLE_SECONDS (2), zeroes the counters
#     (`callgrind_control -z`), sends REQUESTS (1,000) lookups the same way, waits SETTLE_SECONDS,
#     dumps (`callgrind_control -d`) and divides the main thread's (thread 1) `summary:` by REQUESTS;
#   - then, unless IDLE_SECONDS=0, zeroes again, waits IDLE_SECONDS (20) without requests and dumps:
#     the main thread's instructions per second while idle (the webhook worker polls its table every
#     second, the job scheduler every minute). That work is counted in the lookup window too, in
#     proportion to its length (countedSeconds), which grows with the host's load; it is reported
#     beside the figure, not subtracted from it.
# Each run's figure goes to stderr as it comes; stdout gets one JSON line at the end, e.g.
#   bench/callgrind-lookups.sh ../wt/after after >> /tmp/callgrind-lookups.jsonl
# Under valgrind the service needs 2-4 minutes to start on a busy 2-vCPU host; a run takes ~5 min.
# Needs valgrind (callgrind_control comes with it) and curl. KEEP=1 keeps the work directory.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 CHECKOUT_DIR LABEL   (env: RUNS=2 WARMUP=300 REQUESTS=1000 IDLE_SECONDS=20)" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
label="$2"
runs="${RUNS:-2}"
warmup="${WARMUP:-300}"
requests="${REQUESTS:-1000}"
idle_seconds="${IDLE_SECONDS:-20}"
settle_seconds="${SETTLE_SECONDS:-2}"
start_timeout="${START_TIMEOUT:-900}"
email="alice@example.org"

for tool in valgrind callgrind_control curl; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found (apt-get install -y valgrind curl)" >&2; exit 1; }
done
node="$dir/node_modules/node/bin/node"
[ -x "$node" ] || { echo "error: $node missing: run 'npm ci' in $dir" >&2; exit 1; }
[ -f "$dir/packages/service/src/main.ts" ] || { echo "error: $dir is not a checkout of the service" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/callgrind-lookups.XXXXXX")"
service_pid=""
cleanup() {
  if [ -n "$service_pid" ] && kill -0 "$service_pid" 2>/dev/null; then
    kill -TERM "$service_pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$service_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$service_pid" 2>/dev/null || true
  fi
  if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
log() { echo "[callgrind-lookups $label] $*" >&2; }

# The client: COUNT sequential GETs over one keep-alive socket; fails unless every answer is a 200
# and one socket carried them all.
cat >"$work/client.mjs" <<'EOF'
import http from "node:http";
const [url, token, countArg] = process.argv.slice(2);
const count = Number(countArg);
const target = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const seen = new WeakSet();
let ok = 0;
let other = 0;
let sockets = 0;
const one = () =>
  new Promise((resolve, reject) => {
    const request = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, agent, headers: { authorization: `Bearer ${token}` } },
      (response) => {
        response.resume();
        response.on("end", () => {
          if (response.statusCode === 200) ok++;
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
const started = performance.now();
for (let i = 0; i < count; i++) await one();
agent.destroy();
const result = { requests: count, ok, other, sockets, seconds: (performance.now() - started) / 1000 };
console.log(JSON.stringify(result));
if (ok !== count || sockets !== 1) process.exit(1);
EOF

free_port() {
  "$node" -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# The main thread's `summary:` of dump number $2 of process $1 (callgrind.out.PID.N-01 = thread 1).
main_thread_summary() {
  local file="$run_dir/callgrind.out.$1.$2-01"
  [ -f "$file" ] || { log "no dump file $file"; ls "$run_dir" >&2; return 1; }
  grep -q '^thread: 1$' "$file" || { log "$file is not thread 1"; return 1; }
  sed -n 's/^summary: //p' "$file"
}

control() {
  local output
  output="$(callgrind_control "$1" "$service_pid" 2>&1)" || { log "callgrind_control $1 failed: $output"; return 1; }
  grep -q "OK" <<<"$output" || { log "callgrind_control $1: $output"; return 1; }
}

commit="$(git -C "$dir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$dir" status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit+uncommitted"; fi
node_version="$("$node" --version)"
valgrind_version="$(valgrind --version)"
log "$dir ($commit, Node $node_version, $valgrind_version): $runs runs of $requests lookups after $warmup"

runs_json=""
per_request_json=""
for run in $(seq 1 "$runs"); do
  run_dir="$work/run$run"
  mkdir -p "$run_dir"
  db_url="sqlite:$run_dir/service.sqlite"
  seed() { env -i PATH="$PATH" NODE_ENV=production DATABASE_URL="$db_url" "$dir/bin/console" "$@" </dev/null; }
  seed app:domain:create example.org >"$run_dir/seed.log" 2>&1 || { cat "$run_dir/seed.log" >&2; exit 1; }
  seed app:user:create -u "$email" --password bench-password-correct-horse >>"$run_dir/seed.log" 2>&1 \
    || { cat "$run_dir/seed.log" >&2; exit 1; }
  token="$(seed app:api-token:create -t bench-mta -s mta 2>>"$run_dir/seed.log" | sed -n 's/^Token: //p')"
  [ -n "$token" ] || { log "no API token from app:api-token:create"; cat "$run_dir/seed.log" >&2; exit 1; }

  port="$(free_port)"
  url="http://127.0.0.1:$port"
  load_at_start="$(cut -d' ' -f1 /proc/loadavg)"
  log "run $run: starting the service under callgrind on port $port (load average $load_at_start)"
  started=$SECONDS
  (
    cd "$dir"
    exec env -i PATH="$PATH" NODE_ENV=production DATABASE_URL="$db_url" LISTEN_ADDR="127.0.0.1:$port" \
      valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$run_dir/callgrind.out.%p" \
      "$node" packages/service/src/main.ts
  ) >"$run_dir/service.log" 2>&1 &
  service_pid=$!
  until curl -sf -o /dev/null "$url/health"; do
    if ! kill -0 "$service_pid" 2>/dev/null; then
      log "the service exited during start-up; its log:"
      tail -40 "$run_dir/service.log" >&2
      service_pid=""
      exit 1
    fi
    if [ $((SECONDS - started)) -gt "$start_timeout" ]; then log "not up after $start_timeout s"; exit 1; fi
    sleep 2
  done
  startup_seconds=$((SECONDS - started))
  log "run $run: up after $startup_seconds s; $warmup warm-up lookups"
  lookup="$url/api/mta/mailbox/$email"
  "$node" "$work/client.mjs" "$lookup" "$token" "$warmup" >"$run_dir/warmup.json" \
    || { log "warm-up failed: $(cat "$run_dir/warmup.json")"; exit 1; }
  sleep "$settle_seconds"
  control -z
  zeroed_at="$(date +%s.%N)"
  "$node" "$work/client.mjs" "$lookup" "$token" "$requests" >"$run_dir/counted.json" \
    || { log "counted lookups failed: $(cat "$run_dir/counted.json")"; exit 1; }
  sleep "$settle_seconds"
  control -d
  counted_seconds="$(awk -v a="$zeroed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  total="$(main_thread_summary "$service_pid" 1)"
  per_request=$((total / requests))
  client_seconds="$("$node" -p "JSON.parse(require('node:fs').readFileSync('$run_dir/counted.json', 'utf8')).seconds.toFixed(1)")"
  log "run $run: $per_request instructions per lookup (main thread $total / $requests; window $counted_seconds s)"

  idle_json="null"
  if [ "$idle_seconds" -gt 0 ]; then
    control -z
    sleep "$idle_seconds"
    control -d
    idle_total="$(main_thread_summary "$service_pid" 2)"
    idle_json=$((idle_total / idle_seconds))
    log "run $run: idle, $idle_json instructions per second on the main thread"
  fi

  kill -TERM "$service_pid"
  for _ in $(seq 1 60); do kill -0 "$service_pid" 2>/dev/null || break; sleep 1; done
  kill -KILL "$service_pid" 2>/dev/null || true
  wait "$service_pid" 2>/dev/null || true
  service_pid=""

  run_json="{\"perRequest\":$per_request,\"mainThreadSummary\":$total,\"countedWindowSeconds\":$counted_seconds,\"clientSeconds\":$client_seconds,\"idleMainPerSecond\":$idle_json,\"startupSeconds\":$startup_seconds,\"loadAverageAtStart\":$load_at_start}"
  runs_json="${runs_json:+$runs_json,}$run_json"
  per_request_json="${per_request_json:+$per_request_json,}$per_request"
done

label_json="$("$node" -p 'JSON.stringify(process.argv[1])' "$label")"
dir_json="$("$node" -p 'JSON.stringify(process.argv[1])' "$dir")"
echo "{\"what\":\"Instructions per GET /api/mta/mailbox/$email at 1 connection (keep-alive), SQLite, one domain, one user; valgrind --tool=callgrind --separate-threads=yes, main thread summary, $warmup warm-up lookups, counters zeroed, $requests counted; client outside valgrind\",\"date\":\"$(date -u +%Y-%m-%d)\",\"label\":$label_json,\"dir\":$dir_json,\"commit\":\"$commit\",\"node\":\"$node_version\",\"valgrind\":\"$valgrind_version\",\"warmup\":$warmup,\"requests\":$requests,\"perRequest\":[$per_request_json],\"runs\":[$runs_json]}"
