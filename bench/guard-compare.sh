#!/usr/bin/env bash
# Issue 28's before/after figures for one build: passdb throughput on the honest path (right
# passwords, MailCrypt users) and the lookups, SQLite only, then instructions per mailbox lookup.
#
#   bench/guard-compare.sh DIR LABEL          # e.g. bench/guard-compare.sh ../guard after
#   node bench/guard-summary.ts RESULTS_DIR [RESULTS_DIR]   # the table (two dirs: side by side)
#
# DIR is a checkout of the service with `npm ci` done; LABEL names the build ("before", "after").
# The bench code is always this checkout's (bench/ of the script's own repository), run against DIR's
# service, migrations and credential functions: a temporary tree holds a copy of this bench/ beside
# symlinks to DIR's packages, bin and node_modules, so both builds are measured by the same client.
# Results go to bench/results/<date>-issue-28-LABEL/ of this checkout (OUT overrides):
#   lookups-passdb-runN.json    npm run bench -- --databases sqlite --endpoints mailbox,userdb
#                               --connections 1,16 --skip-postfix-adapter --skip-import --skip-web:
#                               lookups at c=1 and c=16 (each paired with the bare node:http server),
#                               raw Argon2, passdb at 16 concurrent, lookups while passdb is
#                               saturated, 200 concurrent passdb (peak RSS). Sign-ins carry no
#                               X-Client-Address (the bench's default; userli's Dovecot adapter).
#   passdb-addressed-runN.json  the passdb phases only (--endpoints none), each sign-in with an
#                               X-Client-Address of its user's own (as the contrib Dovecot adapter).
#   callgrind.jsonl             bench/callgrind-lookups.sh DIR LABEL, CALLGRIND_RUNS runs (1).
#   runs.tsv                    each run's wall time, exit code and load average before and after.
#   meta.json, summary.md       the build measured; the table of guard-summary.ts.
# REPS (3) repetitions of the two bench runs, alternating; CALLGRIND_RUNS=0 leaves callgrind out.
# Everything runs under `nice`. About 5 min per repetition and 5-10 min per callgrind run on 2 vCPUs.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 CHECKOUT_DIR LABEL   (env: REPS=3 CALLGRIND_RUNS=1 CONNECTIONS=1,16 OUT=dir)" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
label="$2"
reps="${REPS:-3}"
callgrind_runs="${CALLGRIND_RUNS:-1}"
connections="${CONNECTIONS:-1,16}"
self="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$self/bench/results/$(date -u +%Y-%m-%d)-issue-28-$label}"

node="$dir/node_modules/node/bin/node"
[ -x "$node" ] || { echo "error: $node missing: run 'npm ci' in $dir" >&2; exit 1; }
[ -f "$dir/packages/service/src/main.ts" ] || { echo "error: $dir is not a checkout of the service" >&2; exit 1; }
command -v wrk >/dev/null || { echo "error: wrk not found (apt-get install -y wrk): the figures need it" >&2; exit 1; }
mkdir -p "$out"

# The temporary tree: this bench/, DIR's everything else. bench/run.ts takes its parent as the
# repository root (the service it starts, the baseline and raw Argon2 scripts it runs).
tree="$(mktemp -d "${TMPDIR:-/tmp}/guard-compare.XXXXXX")"
trap 'rm -rf "$tree"' EXIT
cp -r "$self/bench" "$tree/bench"
rm -rf "$tree/bench/results"
for entry in packages bin node_modules package.json tsconfig.json; do
  [ -e "$dir/$entry" ] && ln -s "$dir/$entry" "$tree/$entry"
done

commit="$(git -C "$dir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$dir" status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit+uncommitted"; fi
bench_commit="$(git -C "$self" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$self" status --porcelain --untracked-files=no -- bench 2>/dev/null)" ]; then bench_commit="$bench_commit+uncommitted"; fi
"$node" -e 'const [o, ...v] = process.argv.slice(1); const k = ["label","dir","commit","benchCommit","reps","connections","started"];
  require("node:fs").writeFileSync(o, JSON.stringify(Object.fromEntries(k.map((n, i) => [n, v[i]])), null, 2) + "\n")' \
  "$out/meta.json" "$label" "$dir" "$commit" "$bench_commit" "$reps" "$connections" "$(date -u +%FT%TZ)"
log() { echo "[guard-compare $label] $*" >&2; }
log "build $commit in $dir, bench code $bench_commit; results in $out"

[ -f "$out/runs.tsv" ] || printf 'label\trun\trep\tseconds\texit\tload_before\tload_after\n' >"$out/runs.tsv"
# One bench run: its JSON, stdout table and stderr log beside each other; a failed run is recorded
# and the next one goes on.
bench_run() {
  local name="$1" rep="$2"
  shift 2
  local file="$out/$name-run$rep" started=$SECONDS load_before code=0
  load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  log "$name run $rep (load $load_before)"
  (cd "$tree" && nice "$node" bench/run.ts --databases sqlite --skip-postfix-adapter --skip-import --skip-web \
    --out "$file.json" "$@") >"$file.txt" 2>"$file.log" || code=$?
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$name" "$rep" "$((SECONDS - started))" "$code" \
    "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/runs.tsv"
  log "$name run $rep: exit $code after $((SECONDS - started)) s"
}

for rep in $(seq 1 "$reps"); do
  bench_run lookups-passdb "$rep" --endpoints mailbox,userdb --connections "$connections"
  bench_run passdb-addressed "$rep" --endpoints none --passdb-client-addresses
done

if [ "$callgrind_runs" -gt 0 ]; then
  started=$SECONDS
  load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  code=0
  RUNS="$callgrind_runs" nice "$self/bench/callgrind-lookups.sh" "$dir" "$label" >>"$out/callgrind.jsonl" \
    2>>"$out/callgrind.log" || code=$?
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" callgrind 1 "$((SECONDS - started))" "$code" \
    "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/runs.tsv"
  log "callgrind: exit $code after $((SECONDS - started)) s"
fi

"$node" "$self/bench/guard-summary.ts" "$out" | tee "$out/summary.md"
