/**
 * The table of issue 28's before/after figures, from the results directories that
 * bench/guard-compare.sh writes (one directory per build):
 *
 *   node bench/guard-summary.ts bench/results/DATE-issue-28-before [bench/results/DATE-issue-28-after]
 *
 * Each cell is the mean over the repetitions, with their range in brackets. With two directories a
 * last column gives the second's mean against the first's. Markdown on stdout.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

interface Load {
  endpoint: string;
  connections: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  ratio?: number;
  errors: number;
  cpuUsPerRequest: { user: number; system: number };
}
interface Passdb {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  statuses: Record<string, number>;
}
interface Results {
  machine: { loadAverage?: { start: number[]; end: number[] } };
  lookups: { sqlite?: Load[] };
  passdb: null | { service: Passdb; argon2Raw: { rps: number }; ratio: number };
  lookupsDuringPassdb: null | { lookups: { rps: number; p99Ms: number }; passdb: Passdb };
  memory: null | { peakRssMiB: number; burst: Passdb };
  totalSeconds: number;
}

const dirs = process.argv.slice(2);
if (dirs.length < 1 || dirs.length > 2) {
  console.error("usage: node bench/guard-summary.ts RESULTS_DIR [RESULTS_DIR]");
  process.exit(2);
}

const runsOf = (dir: string, name: string): Results[] =>
  readdirSync(dir)
    .filter((file) => new RegExp(`^${name}-run\\d+\\.json$`).test(file))
    .sort()
    .map((file) => JSON.parse(readFileSync(join(dir, file), "utf8")) as Results);

const builds = dirs.map((dir) => {
  const meta = existsSync(join(dir, "meta.json"))
    ? JSON.parse(readFileSync(join(dir, "meta.json"), "utf8"))
    : {};
  const callgrind = existsSync(join(dir, "callgrind.jsonl"))
    ? readFileSync(join(dir, "callgrind.jsonl"), "utf8")
        .split("\n")
        .filter((line) => line.trim())
        .flatMap((line) => (JSON.parse(line) as { perRequest: number[] }).perRequest)
    : [];
  return {
    dir,
    label: String(meta.label ?? dir),
    commit: String(meta.commit ?? "?"),
    plain: runsOf(dir, "lookups-passdb"),
    addressed: runsOf(dir, "passdb-addressed"),
    callgrind,
  };
});

const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
const fmt = (value: number, digits: number) =>
  value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
function cell(values: number[], digits: number): string {
  if (values.length === 0) return "-";
  const m = fmt(mean(values), digits);
  if (values.length === 1) return m;
  return `${m} (${fmt(Math.min(...values), digits)}-${fmt(Math.max(...values), digits)})`;
}

type Build = (typeof builds)[number];
const rows: { name: string; digits: number; of: (b: Build) => number[] }[] = [];
const lookupOf = (r: Results, endpoint: string, c: number) =>
  r.lookups.sqlite?.find((row) => row.endpoint === endpoint && row.connections === c);
const connections = [
  ...new Set(
    builds.flatMap((b) => b.plain.flatMap((r) => (r.lookups.sqlite ?? []).map((row) => row.connections))),
  ),
].sort((a, b) => a - b);
for (const endpoint of ["mailbox", "userdb"])
  for (const c of connections) {
    const pick = (b: Build, f: (row: Load) => number | undefined) =>
      b.plain.flatMap((r) => {
        const row = lookupOf(r, endpoint, c);
        const value = row && f(row);
        return value === undefined ? [] : [value];
      });
    const what = endpoint === "userdb" ? "userdb GET" : `${endpoint}`;
    rows.push({ name: `${what} c=${c} req/s`, digits: 0, of: (b) => pick(b, (row) => row.rps) });
    rows.push({
      name: `${what} c=${c} ratio to bare node:http`,
      digits: 2,
      of: (b) => pick(b, (row) => row.ratio),
    });
    rows.push({ name: `${what} c=${c} p99 ms`, digits: 2, of: (b) => pick(b, (row) => row.p99Ms) });
    rows.push({
      name: `${what} c=${c} server CPU µs/request (user+sys)`,
      digits: 1,
      of: (b) => pick(b, (row) => row.cpuUsPerRequest.user + row.cpuUsPerRequest.system),
    });
  }
const passdbRows = (kind: "plain" | "addressed", what: string) => {
  const each = (b: Build, f: (r: Results) => number | undefined) =>
    b[kind].flatMap((r) => {
      const value = f(r);
      return value === undefined ? [] : [value];
    });
  rows.push({
    name: `passdb ${what}, 16 concurrent, sign-ins/s`,
    digits: 2,
    of: (b) => each(b, (r) => r.passdb?.service.rps),
  });
  rows.push({
    name: `passdb ${what}, p50 ms`,
    digits: 0,
    of: (b) => each(b, (r) => r.passdb?.service.p50Ms),
  });
  rows.push({
    name: `raw Argon2 in the runs of passdb ${what}, sign-ins/s`,
    digits: 2,
    of: (b) => each(b, (r) => r.passdb?.argon2Raw.rps),
  });
  rows.push({ name: `passdb ${what} / raw Argon2`, digits: 3, of: (b) => each(b, (r) => r.passdb?.ratio) });
  rows.push({
    name: `lookup p99 ms while passdb ${what} is saturated`,
    digits: 1,
    of: (b) => each(b, (r) => r.lookupsDuringPassdb?.lookups.p99Ms),
  });
  rows.push({
    name: `peak RSS MiB, 200 concurrent passdb ${what}`,
    digits: 0,
    of: (b) => each(b, (r) => r.memory?.peakRssMiB),
  });
};
passdbRows("plain", "(no X-Client-Address)");
passdbRows("addressed", "(X-Client-Address per user)");
rows.push({ name: "instructions per mailbox lookup, c=1 (callgrind)", digits: 0, of: (b) => b.callgrind });

const lines: string[] = [];
lines.push(
  `| figure (SQLite) | ${builds.map((b) => `${b.label} (\`${b.commit}\`)`).join(" | ")} |${builds.length === 2 ? " change |" : ""}`,
);
lines.push(`|---|${builds.map(() => "--:|").join("")}${builds.length === 2 ? "--:|" : ""}`);
for (const row of rows) {
  const values = builds.map((b) => row.of(b));
  if (values.every((v) => v.length === 0)) continue;
  let change = "";
  if (builds.length === 2) {
    const [a, b] = values as [number[], number[]];
    change = a.length && b.length ? ` ${fmt(((mean(b) - mean(a)) / mean(a)) * 100, 1)}% |` : " - |";
  }
  lines.push(`| ${row.name} | ${values.map((v) => cell(v, row.digits)).join(" | ")} |${change}`);
}
lines.push("");
for (const b of builds) {
  const all = [...b.plain, ...b.addressed];
  const loads = all.flatMap((r) => [r.machine.loadAverage?.start[0], r.machine.loadAverage?.end[0]]);
  const known = loads.filter((v): v is number => v !== undefined);
  const bad = all.flatMap((r) =>
    [r.passdb?.service, r.memory?.burst]
      .filter((p): p is Passdb => Boolean(p))
      .filter((p) => Object.keys(p.statuses).some((s) => s !== "200"))
      .map((p) => JSON.stringify(p.statuses)),
  );
  lines.push(
    `${b.label}: ${b.plain.length} + ${b.addressed.length} runs in ${b.dir}; 1-minute load average at their starts and ends ${known.length ? `${fmt(Math.min(...known), 2)}-${fmt(Math.max(...known), 2)}` : "not recorded"}${bad.length ? `; passdb answers other than 200: ${bad.join(", ")}` : ""}`,
  );
}
process.stdout.write(`${lines.join("\n")}\n`);
