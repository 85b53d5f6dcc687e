/**
 * `npm test`: every test file of every package on SQLite, then the database-backed suites again on
 * PostgreSQL and MariaDB when TEST_POSTGRES_URL / TEST_MARIADB_URL are set (CI sets both, and there
 * a missing one fails the run). Arguments are passed to `node --test` (e.g. --test-name-pattern).
 */
import { spawn } from "node:child_process";
import { globSync } from "node:fs";

const all = ["packages/*/test/**/*.test.ts", "bench/**/*.test.ts"].flatMap((p) => globSync(p)).sort();
// Suites whose behaviour depends on the database; pure units (units, layers), SQLite's own (sqlite-*), the browser
// suites (pages over the same services; their database work is covered by web-* suites), the
// janitor and the mail host (real Dovecot and Postfix over the service on SQLite) run once.
const databaseSuites = all.filter(
  (f) =>
    f.startsWith("packages/service/test/") &&
    !/\/(units|layers\.|credentials\/|sqlite-|browser\/|mail-host\/)/.test(f),
);
const extra = process.argv.slice(2);

interface Run {
  name: string;
  files: string[];
  env: Record<string, string>;
  /** Test files run at once (default 2). */
  concurrency?: number;
}

// The mail host's files each run a whole Postfix and Dovecot as root: one at a time, so two
// Dovecot instances never meet (and their minutes-long flows do not compete for the two CPUs).
const mailHost = all.filter((f) => f.includes("/mail-host/"));
const runs: Run[] = [
  { name: "sqlite", files: all.filter((f) => !mailHost.includes(f)), env: {} },
  ...(mailHost.length > 0 ? [{ name: "mail host", files: mailHost, env: {}, concurrency: 1 }] : []),
];
const skipped: string[] = [];
for (const [name, variable] of [
  ["postgres", "TEST_POSTGRES_URL"],
  ["mariadb", "TEST_MARIADB_URL"],
] as const) {
  const url = process.env[variable];
  if (url) runs.push({ name, files: databaseSuites, env: { TEST_DATABASE_URL: url } });
  else skipped.push(`${name} (set ${variable})`);
}
if (skipped.length > 0 && process.env.CI === "true") {
  console.error(`CI needs every database suite; missing: ${skipped.join(", ")}`);
  process.exit(1);
}

function runSuite(run: Run): Promise<{ passed: number; failed: number; code: number }> {
  return new Promise((resolve) => {
    console.log(`\n=== ${run.name}: ${run.files.length} test files ===`);
    const concurrency = `--test-concurrency=${run.concurrency ?? 2}`;
    const child = spawn(process.execPath, ["--test", concurrency, ...extra, ...run.files], {
      env: { ...process.env, ...run.env },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let passed = 0;
    let failed = 0;
    let buffer = "";
    child.stdout.on("data", (chunk: Buffer) => {
      process.stdout.write(chunk);
      buffer += chunk.toString();
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        const pass = /^ℹ pass (\d+)$/.exec(line);
        const fail = /^ℹ fail (\d+)$/.exec(line);
        if (pass) passed = Number(pass[1]);
        if (fail) failed = Number(fail[1]);
      }
    });
    child.on("close", (code) => resolve({ passed, failed, code: code ?? 1 }));
  });
}

let passed = 0;
let failed = 0;
let exitCode = 0;
for (const run of runs) {
  const result = await runSuite(run);
  passed += result.passed;
  failed += result.failed;
  if (result.code !== 0) exitCode = 1;
}
console.log(`\ndatabases tested: ${runs.map((r) => r.name).join(", ")}`);
if (skipped.length > 0) {
  console.log(`skipped database suites: ${skipped.join(", ")}; see README "Running the tests"`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(exitCode);
