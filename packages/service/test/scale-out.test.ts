/**
 * Two real service processes on one PostgreSQL or MariaDB database, as behind a load balancer:
 * account changes made through either are seen by both at once, every webhook is delivered once
 * although both delivery workers poll the same outbox, and each scheduled job runs once although
 * both schedulers find it due when they start together.
 */
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { flag, toFlag } from "../src/db/schema.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { type RunningService, runConsole, startServiceProcess } from "./helpers/process.ts";
import { type Receiver, startReceiver } from "./helpers/receiver.ts";

const server = process.env.TEST_DATABASE_URL ?? "";
const skip = /^(postgres(ql)?|mysql|mariadb):\/\//.test(server)
  ? false
  : "needs TEST_DATABASE_URL (PostgreSQL or MariaDB): several instances share one database server";

const password = "correct horse battery staple";
const secret = "scale-out-shared-secret";
const userCount = 500;
const inFlight = 20;
const requestTimeoutMs = 15000;
const bulkAddress = (i: number) => `bulk-${String(i).padStart(3, "0")}@example.org`;

interface Answer {
  status: number;
  body: unknown;
}

async function call(
  instance: RunningService,
  method: string,
  path: string,
  token: string,
  json?: unknown,
): Promise<Answer> {
  const response = await fetch(`${instance.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(json === undefined ? {} : { "content-type": "application/json" }),
    },
    body: json === undefined ? undefined : JSON.stringify(json),
    signal: AbortSignal.timeout(requestTimeoutMs),
  });
  const text = await response.text();
  let body: unknown;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, body };
}

function createdToken(databaseUrl: string, name: string, scopes: string): string {
  const result = runConsole(databaseUrl, ["app:api-token:create", "--name", name, "--scopes", scopes]);
  const token = /Token: ([0-9a-f]{64})/.exec(result.stdout)?.[1];
  assert.ok(token, `token not created: ${result.stdout}${result.stderr}`);
  return token;
}

/** The pino lines of a process's output with the given message. */
function logLines(instance: RunningService, message: string): Record<string, unknown>[] {
  const lines: Record<string, unknown>[] = [];
  for (const line of instance.output().split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if (entry.msg === message) lines.push(entry);
    } catch {
      // Not a log line.
    }
  }
  return lines;
}

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

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const title = "two service instances on one database";
// Skipped as one test (not a skipped suite), so the run's summary counts it and prints the reason.
if (skip) test(title, { skip }, () => {});
else
  describe(title, () => {
    let databaseUrl: string;
    let dropDatabase: () => Promise<void> = async () => {};
    let database: DatabaseHandle | undefined;
    let receiver: Receiver | undefined;
    let adminToken: string;
    let mailboxToken: string;
    const instances: RunningService[] = [];
    let a: RunningService;
    let b: RunningService;

    before(async () => {
      const fresh = await freshDatabaseUrl(join(tmpdir(), "unused.sqlite"));
      databaseUrl = fresh.url;
      dropDatabase = fresh.drop;
      receiver = await startReceiver();

      assert.equal(runConsole(databaseUrl, ["app:domain:create", "example.org"]).status, 0);
      const webhook = runConsole(databaseUrl, [
        "app:webhook:create",
        "--url",
        receiver.url,
        "--events",
        "user.deleted",
        "--secret",
        secret,
      ]);
      assert.equal(webhook.status, 0, webhook.stderr);
      adminToken = createdToken(databaseUrl, "admin", "admin");
      mailboxToken = createdToken(databaseUrl, "dovecot", "mailbox-server");

      // One real user through the console (one Argon2id hash), then 499 copies of its row with other
      // addresses and the same password hash. This only shortens the set-up (500 Argon2id hashes
      // would dominate the run); the copies are rows exactly as app:user:create writes them.
      const first = runConsole(databaseUrl, [
        "app:user:create",
        "--email",
        bulkAddress(0),
        "--password",
        password,
      ]);
      assert.equal(first.status, 0, first.stderr);
      database = await openDatabase(databaseUrl, { poolSize: 2 });
      const { id: _id, ...row } = await database.db
        .selectFrom("users")
        .selectAll()
        .where("email", "=", bulkAddress(0))
        .executeTakeFirstOrThrow();
      for (let start = 1; start < userCount; start += 100) {
        const batch = [];
        for (let i = start; i < Math.min(start + 100, userCount); i++) {
          batch.push({
            ...row,
            email: bulkAddress(i),
            // Flags read back as booleans on PostgreSQL; they are written as 0/1.
            password_change_required: toFlag(flag(row.password_change_required)),
            mail_crypt: toFlag(flag(row.mail_crypt)),
            totp_confirmed: toFlag(flag(row.totp_confirmed)),
            deleted: toFlag(flag(row.deleted)),
            app_passwords_required:
              row.app_passwords_required === null ? null : toFlag(flag(row.app_passwords_required)),
            passkey_sign_in: toFlag(flag(row.passkey_sign_in)),
            password_app_form: toFlag(flag(row.password_app_form)),
          });
        }
        await database.db.insertInto("users").values(batch).execute();
      }

      // Both instances start together: both schedulers find every job due at the same moment.
      const env = { DATABASE_URL: databaseUrl, WEBHOOK_RETRY_DELAYS: "1,1,1", CRYPTO_POOL_SIZE: "2" };
      const started = await Promise.allSettled([startServiceProcess(env), startServiceProcess(env)]);
      for (const result of started) if (result.status === "fulfilled") instances.push(result.value);
      for (const result of started) if (result.status === "rejected") throw result.reason;
      [a, b] = instances as [RunningService, RunningService];
    });

    after(async () => {
      await Promise.all(instances.map(stopProcess));
      await receiver?.close();
      await database?.close();
      await dropDatabase();
    });

    test(`${userCount} users deleted through both instances at once: each user.deleted delivered once`, async (t) => {
      const active = await database!.db
        .selectFrom("users")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("deleted", "=", 0)
        .executeTakeFirstOrThrow();
      assert.equal(Number(active.n), userCount);

      const started = performance.now();
      const statuses: number[] = new Array(userCount);
      const failures: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          for (let i = next++; i < userCount; i = next++) {
            const instance = i % 2 === 0 ? a : b;
            const answer = await call(instance, "DELETE", `/api/admin/users/${bulkAddress(i)}`, adminToken);
            statuses[i] = answer.status;
            if (answer.status !== 204)
              failures.push(`${bulkAddress(i)}: ${answer.status} ${JSON.stringify(answer.body)}`);
          }
        }),
      );
      const deletedMs = performance.now() - started;
      assert.deepEqual(failures, []);
      assert.equal(statuses.filter((status) => status === 204).length, userCount);

      const received = await receiver!.waitFor(userCount, 60000);
      const deliveredMs = performance.now() - started;
      // Both workers have had more than a poll interval to send anything twice.
      await waitUntil(
        "every delivery row to be settled",
        async () => {
          const open = await database!.db
            .selectFrom("webhook_deliveries")
            .select("id")
            .where("status", "!=", "success")
            .execute();
          return open.length === 0;
        },
        30000,
      );
      await new Promise((resolve) => setTimeout(resolve, 2500));

      assert.equal(received.length, userCount, "deliveries received");
      const ids = new Set<string>();
      const addresses = new Set<string>();
      for (const delivery of received) {
        const raw = delivery.body.toString("utf8");
        const payload = JSON.parse(raw) as { type: string; data: { email: string } };
        assert.equal(payload.type, "user.deleted");
        assert.equal(
          delivery.headers["x-webhook-signature"],
          createHmac("sha256", secret).update(raw, "utf8").digest("hex"),
        );
        assert.equal(delivery.headers["x-webhook-attempt"], "1");
        ids.add(String(delivery.headers["x-webhook-id"]));
        addresses.add(payload.data.email);
      }
      assert.equal(ids.size, userCount, "each X-Webhook-Id once");
      assert.equal(addresses.size, userCount, "each address once");
      for (let i = 0; i < userCount; i++) assert.ok(addresses.has(bulkAddress(i)), bulkAddress(i));

      const rows = await database!.db
        .selectFrom("webhook_deliveries")
        .select(["status", "attempts"])
        .execute();
      assert.equal(rows.length, userCount);
      assert.ok(rows.every((row) => row.status === "success" && row.attempts === 1));
      const sentBy = [a, b].map((instance) => logLines(instance, "webhook delivered").length);
      assert.equal(sentBy[0]! + sentBy[1]!, userCount, "delivery log lines across both instances");
      t.diagnostic(
        `${userCount} deletions (${inFlight} in flight, half per instance) took ${Math.round(deletedMs)} ms; ` +
          `all deliveries received after ${Math.round(deliveredMs)} ms; sent by A ${sentBy[0]}, by B ${sentBy[1]}`,
      );
    });

    test("a write on one instance is seen by the other in the very next request", async () => {
      const before = receiver!.received.length;
      const rounds = 4;
      for (let round = 0; round < rounds; round++) {
        const [writer, reader] = round % 2 === 0 ? [a, b] : [b, a];
        const email = `fresh-${round}@example.org`;
        const userdb = `/api/mailbox-server/${email}`;
        assert.equal((await call(reader, "GET", userdb, mailboxToken)).status, 404);

        const created = await call(writer, "POST", "/api/admin/users", adminToken, { email, password });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const seen = await call(reader, "GET", userdb, mailboxToken);
        assert.equal(seen.status, 200, JSON.stringify(seen.body));
        assert.equal((seen.body as { body: { user: string } }).body.user, email);

        assert.equal((await call(writer, "DELETE", `/api/admin/users/${email}`, adminToken)).status, 204);
        const gone = await call(reader, "GET", userdb, mailboxToken);
        assert.equal(gone.status, 404, JSON.stringify(gone.body));
      }
      // A bulk user deleted on A is gone on B too (and the other way round).
      assert.equal((await call(b, "GET", `/api/mailbox-server/${bulkAddress(0)}`, mailboxToken)).status, 404);
      assert.equal((await call(a, "GET", `/api/mailbox-server/${bulkAddress(1)}`, mailboxToken)).status, 404);

      const received = await receiver!.waitFor(before + rounds, 30000);
      const late = received
        .slice(before)
        .map((d) => (JSON.parse(d.body.toString()) as { data: { email: string } }).data.email);
      assert.deepEqual(
        late.sort(),
        Array.from({ length: rounds }, (_, round) => `fresh-${round}@example.org`),
      );
    });

    test("each scheduled job ran once across both instances although both found it due at start", async () => {
      const period = Math.floor(Date.now() / 1000 / 86400) * 86400;
      await waitUntil(
        "every job to finish",
        async () => {
          const runs = await database!.db.selectFrom("job_runs").select("finished_at").execute();
          return runs.length === 3 && runs.every((run) => run.finished_at !== null);
        },
        20000,
      );
      const runs = await database!.db.selectFrom("job_runs").selectAll().orderBy("name").execute();
      assert.deepEqual(
        runs.map((run) => [run.name, Number(run.period_start)]),
        [
          ["prune-sign-in-state", period],
          ["prune-webhook-deliveries", period],
          ["remove-inactive-users", period],
        ],
      );
      for (const run of runs) assert.notEqual(run.result, null);

      // By now (the tests above took seconds) both schedulers have long finished their start pass.
      for (const message of ["job started", "job finished"]) {
        const jobs = [a, b].flatMap((instance) =>
          logLines(instance, message).map((line) => String(line.job)),
        );
        assert.deepEqual(
          jobs.sort(),
          ["prune-sign-in-state", "prune-webhook-deliveries", "remove-inactive-users"],
          message,
        );
      }
      for (const instance of [a, b]) assert.equal(logLines(instance, "scheduler pass failed").length, 0);
    });
  });
