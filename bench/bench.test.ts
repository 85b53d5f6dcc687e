/**
 * The benchmark in smoke mode (tiny data set, 1 s runs): proves `npm run bench` still works end to
 * end. Timings on a shared machine are noise, so nothing here asserts a time or a ratio; it checks
 * that every phase ran and measured something real.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { lookupEndpoints } from "./dataset.ts";

const repoRoot = fileURLToPath(new URL("../", import.meta.url));

function runBench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(repoRoot, "bench/run.ts"), ...args], {
      cwd: repoRoot,
      // The PostgreSQL/MariaDB repeats are exercised when the suite runs with their URLs set.
      env: process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

test("npm run bench --smoke: every phase runs and writes its results", { timeout: 600_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "mas-bench-test-"));
  try {
    const out = join(dir, "smoke.json");
    const run = await runBench(["--smoke", "--out", out]);
    assert.equal(run.code, 0, `bench failed:\n${run.stderr.slice(-4000)}`);
    const results = JSON.parse(readFileSync(out, "utf8"));
    assert.equal(results.mode, "smoke");

    // SQLite and its paired baseline: every lookup endpoint at 1, 16 and 64 connections, with real
    // answers.
    for (const rows of [results.baseline.sqlite, results.lookups.sqlite]) {
      for (const endpoint of lookupEndpoints)
        for (const connections of [1, 16, 64]) {
          const row = rows.find((r: any) => r.endpoint === endpoint && r.connections === connections);
          assert.ok(row, `missing ${endpoint} at ${connections} connections`);
          assert.ok(row.requests > 0, `${endpoint} c=${connections} served nothing`);
          assert.equal(row.errors, 0, `${endpoint} c=${connections} had connection errors`);
        }
    }
    // The random keys mix existing and unknown/deleted addresses. The Postfix lookups answer both
    // with 200 (true/false, a list or []); smtp_quota and userdb answer unknown ones with 404.
    for (const endpoint of lookupEndpoints) {
      const check = results.keyChecks[`sqlite ${endpoint}`];
      assert.ok(check.statuses["200"] > 0, `${endpoint}: ${JSON.stringify(check)}`);
      if (endpoint === "smtp_quota" || endpoint === "userdb")
        assert.ok(check.statuses["404"] > 0, `${endpoint}: ${JSON.stringify(check)}`);
    }
    for (const row of results.lookups.sqlite) assert.ok(row.ratio > 0);

    // passdb really signed in (every answer 200), and the raw Argon2 rate was measured beside it.
    assert.ok(results.passdb.service.completed > 0);
    assert.deepEqual(Object.keys(results.passdb.service.statuses), ["200"]);
    assert.ok(results.passdb.argon2Raw.rps > 0);
    assert.ok(results.passdb.argon2One.rps > 0);
    // Issue 30: one Argon2 derivation per passdb sign-in, counted by the service, right or wrong.
    assert.deepEqual(results.passdb.derivations, { right: 1, wrong: 1 });
    assert.ok(results.lookupsDuringPassdb.lookups.requests > 0);
    assert.ok(results.memory.peakRssMiB > 0);

    // Issue 29: passdb with mail app passwords (a few made through AppPasswordService, checked to
    // unlock the same key as the password before the load), every answer 200, beside the mailbox
    // lookup and with the paced lookups alone and during.
    const app = results.appPasswords;
    assert.equal(app.users, 50);
    assert.equal(app.madeThroughServices, 2);
    for (const run of [app.passdb, app.mailbox, app.lookupsAlone, app.lookupsDuring, app.passdbDuring]) {
      assert.ok(run.requests > 0, JSON.stringify(run));
      assert.equal(run.errors, 0, JSON.stringify(run));
    }
    assert.equal(app.passdb.connections, 16);
    assert.equal(app.passdb.non2xx, 0);
    assert.equal(app.passdbDuring.non2xx, 0);
    assert.ok(app.passdb.cpuUsPerRequest.user > 0);
    assert.equal(app.ratio, app.passdb.rps / app.mailbox.rps);
    assert.match(
      run.stdout,
      /app-password passdb \/ mailbox lookup rate \(c=16\): [\d.]+ \(>= 0\.5\); \d+ against \d+ req\/s/,
    );
    assert.match(
      run.stdout,
      /lookup p99 while app-password passdb runs \/ the same lookups alone: [\d.]+ \(<= 2\)/,
    );
    assert.match(run.stdout, /\| passdb, mail app password \| \d+/);
    assert.match(run.stdout, /\| passdb, account password \(8 concurrent\) \| [\d.]+/);

    // The Postfix adapter's phase (bench/postfix-adapter.ts): socketmap lookups answered both ways,
    // with real OK and NOTFOUND answers, and policy answers.
    for (const row of results.postfixAdapter.socketmap) {
      assert.ok(row.direct.requests > 0 && row.adapter.requests > 0);
      assert.equal(row.adapter.errors, 0);
      assert.ok(
        row.adapter.answers.OK > 0 && row.adapter.answers.NOTFOUND > 0,
        JSON.stringify(row.adapter.answers),
      );
    }
    assert.ok(results.postfixAdapter.policy.memory.requests > 0);
    assert.match(run.stdout, /postfix adapter: socketmap p99 ms through the adapter \(c=16, SQLite\): \d/);

    for (const [name, variable] of [
      ["postgres", "TEST_POSTGRES_URL"],
      ["mariadb", "TEST_MARIADB_URL"],
    ] as const)
      if (process.env[variable]) {
        assert.equal(results.lookups[name]?.length, lookupEndpoints.length * 3);
        assert.equal(results.baseline[name]?.length, lookupEndpoints.length * 3);
      }

    // The printed table names every target with its figure.
    assert.match(run.stdout, /\| baseline \(sqlite\) \| domain \| 64 \|/);
    assert.match(run.stdout, /passdb \(MailCrypt\) \/ the two-derivation pair of before \(t=4 \+ t=2\): \d/);
    assert.match(run.stdout, /derivations per sign-in, right 1\.00, wrong 1\.00/);
    assert.match(run.stdout, /peak RSS MiB with \d+ concurrent passdb/);
    // Each p99 target carries the bare server's p99 of its paired run, in the file and the table.
    for (const endpoint of lookupEndpoints) {
      const target = results.targets.find((t: any) => t.name === `sqlite ${endpoint} p99 ms (c=64)`);
      const bare = results.baseline.sqlite.find((r: any) => r.endpoint === endpoint && r.connections === 64);
      assert.equal(target?.baselineValue, bare.p99Ms, endpoint);
    }
    assert.match(
      run.stdout,
      /sqlite mailbox p99 ms \(c=64\): [\d.]+ \(< 5\); bare node:http in the paired run: \d/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
