import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LifecycleService } from "../src/accounts/lifecycle.ts";
import { openDatabase } from "../src/db/database.ts";
import { removeInactiveUsers, scheduledJobs } from "../src/jobs/jobs.ts";
import { Scheduler } from "../src/jobs/scheduler.ts";
import { createLogger } from "../src/logger.ts";
import { WebhookOutbox } from "../src/webhooks/outbox.ts";
import { scratchDatabase } from "./helpers/databases.ts";
import { password } from "./helpers/fixtures.ts";
import { runConsole } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";

const day = 86400;

describe("scheduled jobs", () => {
  let service: TestService;
  let clock = Date.now();

  before(async () => {
    service = await startService();
    const { domains, users, database } = service.services;
    await domains.create("example.org");
    const old = Math.floor(Date.now() / 1000) - 738 * day;
    const recent = Math.floor(Date.now() / 1000) - 700 * day;
    const specs: [string, string[], number | null, number][] = [
      ["stale", [], old, old],
      ["never", [], null, old],
      ["admin", ["ROLE_ADMIN"], old, old],
      ["domainadmin", ["ROLE_DOMAIN_ADMIN"], old, old],
      ["permanent", ["ROLE_PERMANENT"], old, old],
      ["recent", [], recent, old],
      ["fresh", [], null, recent],
    ];
    for (const [local, roles, lastLogin, createdAt] of specs) {
      await users.create({ email: `${local}@example.org`, password, roles, mailCrypt: false });
      await database.db
        .updateTable("users")
        .set({ last_login_time: lastLogin, created_at: createdAt })
        .where("email", "=", `${local}@example.org`)
        .execute();
    }
    await service.services.webhooks.create({ url: "http://127.0.0.1:9/none", events: ["user.deleted"] });
  });
  after(() => service.close());

  const scheduler = () =>
    new Scheduler(
      service.services.database.db,
      createLogger("silent"),
      scheduledJobs({
        db: service.services.database.db,
        logger: createLogger("silent"),
        settings: service.services.settings,
        lifecycle: service.services.lifecycle,
        webhooks: service.services.webhooks,
        clock: () => clock,
      }),
      { clock: () => clock },
    );

  test("two schedulers at once: each job runs once per period", async () => {
    const [a, b] = [scheduler(), scheduler()];
    const [ranA, ranB] = await Promise.all([a.runDue(), b.runDue()]);
    assert.deepEqual([...ranA, ...ranB].sort(), [
      "prune-sign-in-state",
      "prune-webhook-deliveries",
      "remove-inactive-users",
    ]);
    assert.deepEqual(await a.runDue(), [], "nothing more in the same period");
    clock += day * 1000;
    const [nextA, nextB] = await Promise.all([a.runDue(), b.runDue()]);
    assert.equal(nextA.length + nextB.length, 3, "next day, once each again");
  });

  test("inactive users were deleted through the normal path; exempt roles and recent users kept", async () => {
    const { db } = service.services.database;
    const rows = await db.selectFrom("users").select(["email", "deleted"]).orderBy("email").execute();
    const deleted = rows.filter((r) => Boolean(r.deleted)).map((r) => r.email);
    assert.deepEqual(deleted, ["never@example.org", "stale@example.org"]);
    const deliveries = await db
      .selectFrom("webhook_deliveries")
      .select("body")
      .where("type", "=", "user.deleted")
      .execute();
    assert.equal(deliveries.length, 2, "user.deleted recorded for each");
  });

  test("a pass that ends after stop() schedules no further pass", async () => {
    let runs = 0;
    let release = () => {};
    let started = () => {};
    const firstStarted = new Promise<void>((resolve) => (started = resolve));
    const job = {
      name: "stop-test",
      periodSeconds: 60,
      run: () => {
        runs++;
        started();
        return new Promise<string>((resolve) => (release = () => resolve("done")));
      },
    };
    const stopClock = { now: Date.now() };
    const scheduler = new Scheduler(service.services.database.db, createLogger("silent"), [job], {
      clock: () => stopClock.now,
      checkIntervalMs: 10,
    });
    scheduler.start();
    await firstStarted;
    const stopped = scheduler.stop();
    release();
    await stopped;
    // A new period is due: a scheduler still ticking would run the job again within milliseconds.
    stopClock.now += 120_000;
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(runs, 1);
  });

  test("the period is a setting", async () => {
    await service.services.settings.update({ inactive_user_days: 600 });
    const result = await scheduler().runNow("remove-inactive-users");
    assert.match(result, /^deleted 2, kept 3 exempt/);
    assert.equal((await service.services.users.get("recent@example.org")).deleted, true);
    assert.equal(
      (await service.services.users.get("fresh@example.org")).deleted,
      true,
      "never signed in, created 700 days ago",
    );
  });
});

describe("the inactive-user job re-checks inactivity when it deletes", () => {
  let service: TestService;
  let mta: string;
  const cutoff = () => Math.floor(Date.now() / 1000) - 737 * day;

  before(async () => {
    service = await startService();
    mta = await service.token("mta");
    await service.services.domains.create("example.org");
  });
  after(() => service.close());

  /** A user created 800 days ago who never signed in: a candidate of the job. */
  const inactiveUser = async (local: string) => {
    await service.services.users.create({ email: `${local}@example.org`, password, mailCrypt: false });
    await service.services.database.db
      .updateTable("users")
      .set({ created_at: Math.floor(Date.now() / 1000) - 800 * day, last_login_time: null })
      .where("email", "=", `${local}@example.org`)
      .execute();
  };
  /** A real sign-in over HTTP (SMTP authentication), which records today as last login. */
  const signIn = async (email: string) => {
    const res = await service.request("POST", "/api/mta/auth", { token: mta, json: { email, password } });
    assert.equal(res.status, 200, res.text);
  };
  const deletedEvents = async (email: string) =>
    (
      await service.services.database.db
        .selectFrom("webhook_deliveries")
        .select("body")
        .where("type", "=", "user.deleted")
        .execute()
    ).filter((d) => d.body.includes(email)).length;

  test("deleteIfInactive evaluates the rule at delete time", async () => {
    await service.services.webhooks.create({ url: "http://127.0.0.1:9/none", events: ["user.deleted"] });
    await inactiveUser("woke");
    await inactiveUser("sleeper");
    await service.services.users.create({
      email: "boss@example.org",
      password,
      mailCrypt: false,
      roles: ["ROLE_ADMIN"],
    });
    const { lifecycle, users } = service.services;
    await signIn("woke@example.org"); // after a selection would have found the user
    assert.equal(await lifecycle.deleteIfInactive("woke@example.org", cutoff()), "skipped");
    assert.equal((await users.get("woke@example.org")).deleted, false);
    assert.equal(await deletedEvents("woke@example.org"), 0, "no user.deleted for a kept user");
    assert.equal(await lifecycle.deleteIfInactive("sleeper@example.org", cutoff()), "deleted");
    assert.equal((await users.get("sleeper@example.org")).deleted, true);
    assert.equal(await deletedEvents("sleeper@example.org"), 1);
    assert.equal(await lifecycle.deleteIfInactive("boss@example.org", cutoff()), "exempt");
    assert.equal(await lifecycle.deleteIfInactive("sleeper@example.org", cutoff()), "skipped");
  });

  test("a user who signs in between the job's selection and the deletion is kept", async () => {
    await inactiveUser("late");
    await inactiveUser("gone");
    const { database, pool, settings, users, webhooks, securityEvents, appPasswords } = service.services;
    // The real deletion, with a real sign-in of the candidate over HTTP right before it runs.
    const signsInFirst = new (class extends LifecycleService {
      override async deleteIfInactive(email: string, cutoff: number) {
        if (email === "late@example.org") await signIn(email);
        return super.deleteIfInactive(email, cutoff);
      }
    })(database.db, pool, settings, users, new WebhookOutbox(), securityEvents, appPasswords);
    const result = await removeInactiveUsers({
      db: database.db,
      logger: createLogger("silent"),
      settings,
      lifecycle: signsInFirst,
      webhooks,
    });
    assert.equal(result, "deleted 1, kept 0 exempt, skipped 1");
    assert.equal((await users.get("late@example.org")).deleted, false, "signed in meanwhile: kept");
    assert.equal((await users.get("gone@example.org")).deleted, true);
  });
});

describe("a restore counts as activity", () => {
  // 00:00 UTC today: what a sign-in records as last login.
  const today = () => Math.floor(Date.now() / 1000 / day) * day;
  const longAgo = () => Math.floor(Date.now() / 1000) - 800 * day;

  test("admin API: the restored user gets today's last login and survives the inactive-user job", async () => {
    const service = await startService();
    try {
      const admin = await service.token("admin");
      const call = (method: string, path: string, json?: unknown) =>
        service.request(method, `/api/admin${path}`, { token: admin, ...(json ? { json } : {}) });
      await call("POST", "/domains", { name: "example.org" });
      assert.equal(
        (await call("POST", "/users", { email: "back@example.org", password, mailCrypt: false })).status,
        201,
      );
      const { db } = service.services.database;
      // Created long ago and never signed in: exactly who the job deletes.
      await db
        .updateTable("users")
        .set({ created_at: longAgo(), last_login_time: null })
        .where("email", "=", "back@example.org")
        .execute();
      assert.equal((await call("DELETE", "/users/back@example.org")).status, 204);
      const restored = await call("POST", "/users/back@example.org/restore", {
        password: "restored password 1",
      });
      assert.equal(restored.status, 200, restored.text);
      const user = await call("GET", "/users/back@example.org");
      assert.equal(user.body.deleted, false);
      assert.equal(user.body.lastLoginTime, today(), "last login is today, day-granular like a sign-in");
      const result = await removeInactiveUsers({
        db,
        logger: createLogger("silent"),
        settings: service.services.settings,
        lifecycle: service.services.lifecycle,
        webhooks: service.services.webhooks,
      });
      assert.equal(result, "deleted 0, kept 0 exempt, skipped 0");
      assert.equal((await call("GET", "/users/back@example.org")).body.deleted, false);
    } finally {
      await service.close();
    }
  });

  test("console: app:users:restore, then app:jobs:run remove-inactive-users keeps the user", async () => {
    const { url, remove } = await scratchDatabase("mas-restore-");
    const ok = (args: string[]) => {
      const result = runConsole(url, args);
      assert.equal(result.status, 0, `${args.join(" ")}: ${result.stderr}`);
      return result.stdout;
    };
    try {
      ok(["app:domain:create", "example.org"]);
      ok(["app:user:create", "--email", "back@example.org", "--password", password]);
      const database = await openDatabase(url, { poolSize: 1 });
      const lastLogin = async () =>
        (
          await database.db
            .selectFrom("users")
            .select("last_login_time")
            .where("email", "=", "back@example.org")
            .executeTakeFirstOrThrow()
        ).last_login_time;
      try {
        await database.db
          .updateTable("users")
          .set({ created_at: longAgo(), last_login_time: null })
          .where("email", "=", "back@example.org")
          .execute();
        ok(["app:users:delete", "-u", "back@example.org"]);
        ok(["app:users:restore", "-u", "back@example.org", "--password", "restored password 1"]);
        assert.equal(Number(await lastLogin()), today());
        assert.match(ok(["app:jobs:run", "remove-inactive-users"]), /deleted 0,/);
        assert.match(ok(["app:users:quota", "-u", "back@example.org"]), /^$/, "still active");
      } finally {
        await database.close();
      }
    } finally {
      await remove();
    }
  });
});

describe("metrics endpoint and console", () => {
  let service: TestService;
  before(async () => {
    service = await startService({ metricsToken: "metrics-secret-token" });
    await service.services.domains.create("example.org");
    await service.services.users.create({ email: "m@example.org", password, mailCrypt: false });
  });
  after(() => service.close());

  test("needs the metrics token and serves account figures and counters", async () => {
    assert.equal((await service.request("GET", "/metrics")).status, 401);
    assert.equal((await service.request("GET", "/metrics", { token: "wrong" })).status, 401);
    const mta = await service.token("mta");
    await service.request("POST", "/api/mta/auth", {
      token: mta,
      json: { email: "m@example.org", password },
    });
    await service.request("POST", "/api/mta/auth", {
      token: mta,
      json: { email: "m@example.org", password: "wrong password!!" },
    });
    const res = await service.request("GET", "/metrics", { token: "metrics-secret-token" });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain/);
    assert.match(res.text, /^userli_users_active_total 1$/m);
    assert.match(res.text, /^userli_domains_total 1$/m);
    assert.match(res.text, /^sign_ins_total\{result="ok"\} 1$/m);
    assert.match(res.text, /^sign_ins_total\{result="wrong_password"\} 1$/m);
    // One Argon2 derivation each: the user's creation, the right and the wrong password.
    assert.ok(
      Number(/^argon2_derivations_total (\d+)$/m.exec(res.text)?.[1]) >= 3,
      "argon2_derivations_total",
    );
    assert.match(res.text, /^http_requests_total\{method="POST",route="\/api\/mta\/auth",status="200"\} 1$/m);
    assert.match(
      res.text,
      /^http_request_duration_seconds_bucket\{le="\+Inf",method="POST",route="\/api\/mta\/auth"\} 2$/m,
    );
  });
});

describe("console for the lifecycle", () => {
  test("delete, reset, restore, password, quota, mailcrypt, alias, openpgp, webhooks, jobs, metrics", async () => {
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const openpgp = await import("openpgp");
    const { dir, url, remove } = await scratchDatabase("mas-console-lc-");
    const ok = (args: string[], input?: string) => {
      const result = runConsole(url, args, input);
      assert.equal(result.status, 0, `${args.join(" ")}: ${result.stderr}`);
      return result.stdout;
    };
    const fails = (args: string[], pattern: RegExp) => {
      const result = runConsole(url, args);
      assert.equal(result.status, 1, args.join(" "));
      assert.match(result.stderr, pattern);
      assert.equal(result.stderr.trim().split("\n").length, 1);
    };
    try {
      ok(["app:domain:create", "example.org"]);
      ok(["app:user:create", "--email", "a@example.org", "--password", password, "--quota", "300"]);
      assert.equal(ok(["app:users:quota", "-u", "a@example.org"]), "300\n");
      const publicKey = ok(["app:users:mailcrypt", "-u", "a@example.org"]).trim();
      const [privateKey, samePublic] = ok(["app:users:mailcrypt", "-u", "a@example.org", password])
        .trim()
        .split("\n");
      assert.equal(samePublic, publicKey);
      assert.match(Buffer.from(privateKey ?? "", "base64").toString(), /BEGIN PRIVATE KEY/);
      fails(["app:users:mailcrypt", "-u", "a@example.org", "wrong password!!"], /authentication failed/);

      ok(["app:user:password", "-u", "a@example.org"], `${password}\nan entirely new password\n`);
      const [privateAfter] = ok(["app:users:mailcrypt", "-u", "a@example.org", "an entirely new password"])
        .trim()
        .split("\n");
      assert.equal(privateAfter, privateKey, "the same key, re-sealed under the new password");
      fails(
        [
          "app:user:password",
          "-u",
          "a@example.org",
          "--old-password",
          "not it at all!",
          "--password",
          "whatever whatever",
        ],
        /Wrong password/,
      );

      const reset = ok(["app:users:reset", "-u", "a@example.org", "--password", "reset password 123"]);
      assert.match(reset, /New recovery token \(please hand over to user\): [0-9a-f-]{36}/);
      ok(["app:alias:create", "--source", "al@example.org", "--owner", "a@example.org"]);
      assert.match(ok(["app:alias:delete", "-a", "al@example.org", "--dry-run"]), /Would delete alias/);
      ok(["app:alias:delete", "-a", "al@example.org"]);
      fails(["app:alias:delete", "-a", "al@example.org"], /not found/);

      const key = await openpgp.generateKey({
        type: "ecc",
        curve: "curve25519Legacy",
        userIDs: [{ email: "a@example.org" }],
        format: "armored",
      });
      writeFileSync(join(dir, "key.asc"), key.publicKey);
      assert.match(
        ok(["app:openpgp:import-key", "a@example.org", join(dir, "key.asc")]),
        /Imported OpenPGP key for email a@example.org: [0-9A-F ]+/,
      );
      assert.match(ok(["app:openpgp:show-key", "a@example.org"]), /OpenPGP key for email a@example.org/);

      assert.match(
        ok(["app:webhook:create", "--url", "http://127.0.0.1:9/x", "--events", "user.deleted,user.reset"]),
        /Secret: [0-9a-f]{64}/,
      );
      assert.match(
        ok(["app:webhook:list"]),
        /http:\/\/127.0.0.1:9\/x\tuser.deleted,user.reset\tall domains\tenabled/,
      );
      fails(["app:webhook:create", "--url", "http://x.org", "--events", "user.boom"], /unknown event/);

      assert.match(
        ok(["app:users:delete", "-u", "a@example.org", "--dry-run"]),
        /Would delete user a@example.org/,
      );
      ok(["app:users:delete", "-u", "a@example.org"]);
      assert.match(ok(["app:openpgp:show-key", "a@example.org"]), /No OpenPGP key found/);
      fails(["app:users:delete", "-u", "a@example.org"], /User not found/);
      fails(
        ["app:users:reset", "-u", "a@example.org", "--password", "reset password 123"],
        /restore it instead/,
      );
      assert.match(
        ok(["app:users:restore", "-u", "a@example.org", "--password", "restored password 1"]),
        /Restored user a@example.org/,
      );
      fails(
        ["app:users:restore", "-u", "a@example.org", "--password", "restored password 1"],
        /reset it instead/,
      );

      assert.match(ok(["app:jobs:run", "prune-webhook-deliveries"]), /pruned 0/);
      fails(["app:jobs:run", "dance"], /Unknown job/);
      const metrics = ok(["app:metrics"]);
      assert.match(metrics, /# TYPE userli_users_total gauge\nuserli_users_total 1\n/);
      fails(["app:domain:delete", "-d", "example.org"], /still has active users \(1\)/);
      assert.match(
        ok(["app:domain:delete", "-d", "example.org", "--dry-run"]),
        /Would delete domain example.org with 1 active users/,
      );
      ok(["app:domain:delete", "-d", "example.org", "--force"]);
      assert.match(ok(["app:webhook:delete", "--id", "1"]), /Deleted webhook 1/);
    } finally {
      await remove();
    }
  });
});
