/**
 * The database becomes unreachable while mail software keeps asking: the service answers 503 with
 * a JSON message (never a 500, never a hang, never a crash) and answers 200 again by itself once
 * the database is back. The shared PostgreSQL / MariaDB server is never stopped (other test files
 * use it in parallel): a TCP proxy written here stands between the service and the server, and
 * "stopping the database" closes the proxy's listener and cuts every connection through it.
 */
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { type RunningService, runConsole, startServiceProcess } from "./helpers/process.ts";
import { TcpProxy } from "./helpers/tcp-proxy.ts";

const server = process.env.TEST_DATABASE_URL ?? "";
const skip = /^(postgres(ql)?|mysql|mariadb):\/\//.test(server)
  ? false
  : "needs TEST_DATABASE_URL (PostgreSQL or MariaDB): several instances share one database server";

const password = "correct horse battery staple";
const email = "alice@example.org";
/** Bounds a hang: a request that takes longer fails the test. Not a timing assertion. */
const requestTimeoutMs = 15000;
/**
 * While the database is silent rather than gone, a lookup waits for the driver's limits: up to 5 s
 * for a pool connection plus 10 s for the query (db/database.ts); beyond this the request hangs.
 */
const silentTimeoutMs = 20000;
const recoveryDeadlineMs = 20000;

/** SIGTERM, and SIGKILL if the process has not exited within 10 s: no test leaves a process behind. */
async function stopProcess(instance: RunningService): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const exited = await Promise.race([
    instance.stop().then(() => true),
    new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), 10000);
    }),
  ]);
  clearTimeout(timer);
  if (!exited) await instance.stop("SIGKILL");
}

interface Answer {
  path: string;
  status: number;
  body: unknown;
  ms: number;
}

const title = "the database becomes unreachable during lookups";
// Skipped as one test (not a skipped suite), so the run's summary counts it and prints the reason.
if (skip) test(title, { skip }, () => {});
else
  describe(title, () => {
    let dropDatabase: () => Promise<void> = async () => {};
    let proxy: TcpProxy | undefined;
    let service: RunningService | undefined;
    let token: string;

    before(async () => {
      const fresh = await freshDatabaseUrl(join(tmpdir(), "unused.sqlite"));
      dropDatabase = fresh.drop;
      // Set-up goes straight to the server; only the service talks through the proxy.
      assert.equal(runConsole(fresh.url, ["app:domain:create", "example.org"]).status, 0);
      assert.equal(
        runConsole(fresh.url, ["app:user:create", "--email", email, "--password", password]).status,
        0,
      );
      const created = runConsole(fresh.url, [
        "app:api-token:create",
        "--name",
        "mail server",
        "--scopes",
        "mta,mailbox-server",
      ]);
      const plain = /Token: ([0-9a-f]{64})/.exec(created.stdout)?.[1];
      assert.ok(plain, created.stderr);
      token = plain;

      const direct = new URL(fresh.url);
      proxy = new TcpProxy({ host: direct.hostname, port: Number(direct.port) });
      await proxy.start();
      const proxied = new URL(fresh.url);
      proxied.port = String(proxy.port);
      service = await startServiceProcess({ DATABASE_URL: proxied.toString(), WEBHOOK_RETRY_DELAYS: "1" });
    });

    after(async () => {
      proxy?.thaw();
      if (service) await stopProcess(service);
      await proxy?.stop();
      await dropDatabase();
    });

    const lookups = [
      `/api/mta/mailbox/${email}`,
      `/api/mailbox-server/${email}`,
      "/api/mailbox-server/status",
    ];

    async function get(path: string, authorized = true, timeoutMs = requestTimeoutMs): Promise<Answer> {
      const started = performance.now();
      const response = await fetch(`${service!.url}${path}`, {
        headers: authorized ? { authorization: `Bearer ${token}` } : {},
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await response.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
      return { path, status: response.status, body, ms: performance.now() - started };
    }

    function assertUnavailable(answer: Answer) {
      assert.equal(answer.status, 503, `${answer.path}: ${answer.status} ${JSON.stringify(answer.body)}`);
      const message = (answer.body as { message?: unknown } | undefined)?.message;
      assert.equal(typeof message, "string", `${answer.path}: ${JSON.stringify(answer.body)}`);
      assert.notEqual(message, "");
    }

    async function assertAllAnswer() {
      for (const path of lookups) {
        const answer = await get(path);
        assert.equal(answer.status, 200, `${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
      }
      const health = await get("/health", false);
      assert.equal(health.status, 200);
      assert.deepEqual(health.body, { status: "ok", database: "reachable" });
    }

    /** Polls every lookup until all answer 200; returns how long that took. */
    async function waitForRecovery(): Promise<number> {
      const started = performance.now();
      const deadline = Date.now() + recoveryDeadlineMs;
      for (;;) {
        const answers = await Promise.all([...lookups.map((path) => get(path)), get("/health", false)]);
        if (answers.every((answer) => answer.status === 200)) return performance.now() - started;
        for (const answer of answers) {
          assert.ok([200, 503].includes(answer.status), `${answer.path}: ${answer.status}`);
        }
        if (Date.now() > deadline) {
          throw new Error(`not recovered after ${recoveryDeadlineMs} ms: ${JSON.stringify(answers)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }

    test("lookups answer while the database is reachable", async () => {
      await assertAllAnswer();
    });

    test("an outage in the middle of steady lookups: 503 with a message, no 500, no hang, no crash; then 200 again", async (t) => {
      // Steady traffic, as from Postfix and Dovecot, running across the whole outage.
      const seen: Answer[] = [];
      let load = true;
      const traffic = Promise.all(
        Array.from({ length: 4 }, async (_, worker) => {
          for (let i = worker; load; i++) seen.push(await get(lookups[i % lookups.length]!));
        }),
      );
      traffic.catch(() => {}); // Awaited below; this only keeps an early failure from being "unhandled".
      try {
        await new Promise((resolve) => setTimeout(resolve, 300));
        await proxy!.stop();
        const downAt = performance.now();

        // Every lookup, several times over: the first find pooled connections cut, later ones refused.
        const down: Answer[] = [];
        for (let round = 0; round < 3; round++) {
          for (const path of lookups) down.push(await get(path));
          const health = await get("/health", false);
          assert.equal(health.status, 503, JSON.stringify(health.body));
          assert.equal((health.body as { status: string }).status, "unavailable");
          assert.equal((health.body as { database: string }).database, "unreachable");
          down.push(health);
        }
        for (const answer of down.filter((d) => d.path !== "/health")) assertUnavailable(answer);
        // Down for a few seconds under steady traffic: the webhook worker's polls fail meanwhile too.
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, 3000 - (performance.now() - downAt))));
        assert.equal(service!.child.exitCode, null, "the service process is still running");
        assert.equal(service!.child.signalCode, null);

        await proxy!.start();
        const recoveredMs = await waitForRecovery();
        const outageMs = performance.now() - downAt;
        await assertAllAnswer();

        load = false;
        await traffic;
        const statuses = new Map<number, number>();
        for (const answer of seen) statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        for (const answer of seen) {
          if (answer.status === 503) assertUnavailable(answer);
          else
            assert.equal(
              answer.status,
              200,
              `${answer.path}: ${answer.status} ${JSON.stringify(answer.body)}`,
            );
        }
        assert.ok((statuses.get(503) ?? 0) > 0, "the steady traffic saw the outage");
        const slowest = Math.max(...[...seen, ...down].map((answer) => answer.ms));
        t.diagnostic(
          `outage ${Math.round(outageMs)} ms; back to 200 ${Math.round(recoveredMs)} ms after the database returned; ` +
            `during the outage answers took up to ${Math.round(Math.max(...down.map((d) => d.ms)))} ms; ` +
            `steady traffic: ${JSON.stringify(Object.fromEntries(statuses))}, slowest ${Math.round(slowest)} ms`,
        );
      } finally {
        load = false;
        await traffic.catch(() => {});
      }
    });

    test("a second outage is survived the same way", async (t) => {
      await proxy!.stop();
      for (const path of lookups) assertUnavailable(await get(path));
      assert.equal((await get("/health", false)).status, 503);
      await proxy!.start();
      const recoveredMs = await waitForRecovery();
      await assertAllAnswer();
      assert.equal(service!.child.exitCode, null);
      t.diagnostic(`back to 200 ${Math.round(recoveredMs)} ms after the database returned`);
    });

    test("the database stops answering (a partition): 503 once the query timeout passes, then 200 again", async (t) => {
      proxy!.freeze();
      const rounds: Answer[][] = [];
      try {
        // The first round waits on pooled connections that went silent, the second on new ones.
        for (let round = 0; round < 2; round++) {
          const answers = await Promise.all([
            ...lookups.map((path) => get(path, true, silentTimeoutMs)),
            get("/health", false, silentTimeoutMs),
          ]);
          for (const answer of answers.slice(0, lookups.length)) assertUnavailable(answer);
          assert.equal(answers[lookups.length]!.status, 503);
          rounds.push(answers);
        }
        assert.equal(service!.child.exitCode, null);
      } finally {
        proxy!.thaw();
      }
      const recoveredMs = await waitForRecovery();
      await assertAllAnswer();
      const took = rounds.map((answers) => answers.map((a) => `${a.path} ${Math.round(a.ms)} ms`).join(", "));
      t.diagnostic(
        `answers while silent: ${took.join(" | ")}; back to 200 ${Math.round(recoveredMs)} ms after`,
      );
    });

    test("the service logged the outage as unavailability, never as a failed request", () => {
      const output = service!.output();
      assert.doesNotMatch(output, /"msg":"request failed"/);
      assert.doesNotMatch(output, /unhandled|uncaught/i);
      assert.match(output, /"msg":"database unavailable"/);
      // The background webhook worker met the outage too, and kept polling.
      assert.match(output, /"msg":"webhook worker pass failed"/);
    });
  });
