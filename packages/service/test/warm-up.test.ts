import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { CryptoPool } from "../src/credentials/crypto-pool.ts";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { buildApp } from "../src/http/app.ts";
import { warmUpRounds } from "../src/http/integration/warm-up.ts";
import { createLogger } from "../src/logger.ts";
import { createServices, type Services } from "../src/services.ts";
import { scratchDatabase } from "./helpers/databases.ts";
import { password } from "./helpers/fixtures.ts";
import { installationSecret } from "./helpers/service.ts";

/**
 * Warm at start (issue 30): before the app is ready, each per-message lookup is asked through the
 * whole app. It must run, and change nothing anyone can see: no row written, no security event,
 * no request counted in the metrics, and the token check as strict as ever afterwards.
 */
describe("the lookups' warm-up before the service listens", () => {
  let database: DatabaseHandle;
  let services: Services;
  let app: FastifyInstance;
  let remove: () => Promise<void>;
  const statements: string[] = [];
  const logLines: { msg?: string; route?: string; status?: number }[] = [];
  let token: string;
  let tablesBefore: Record<string, unknown[]>;

  const tables = ["domains", "users", "aliases", "api_tokens", "security_events", "audit_log"] as const;
  const snapshot = async () => {
    const rows: Record<string, unknown[]> = {};
    for (const table of tables) rows[table] = await database.db.selectFrom(table).selectAll().execute();
    return rows;
  };

  before(async () => {
    const scratch = await scratchDatabase("mas-warm-up-");
    remove = scratch.remove;
    database = await openDatabase(scratch.url, {
      poolSize: 4,
      log: (event) => {
        if (event.level === "query") statements.push(event.query.sql);
      },
    });
    await migrateToLatest(database);
    services = createServices(database, new CryptoPool(2), { installationSecret: installationSecret() });
    await services.domains.create("example.org");
    await services.users.create({ email: "user@example.org", password, mailCrypt: false });
    await services.aliases.create({ source: "alias@example.org", destinations: ["user@example.org"] });
    token = (await services.tokens.create("mail servers", ["mta", "mailbox-server"])).plainToken;
    tablesBefore = await snapshot();
    // Every request line (debug) the app writes: the warm-up's requests show here.
    const lines = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split("\n")) if (line) logLines.push(JSON.parse(line));
        done();
      },
    });
    statements.length = 0;
    app = await buildApp({ logger: createLogger("debug", lines), services, warmUp: true });
  });
  after(async () => {
    await app.close();
    await database.close();
    await remove();
  });

  test("each lookup route is asked, for a known key and an unknown one, before the app is ready", () => {
    const requests = logLines.filter((line) => line.msg === "request");
    const answered = (route: string, status: number) =>
      requests.filter((line) => line.route === route && line.status === status).length;
    for (const route of [
      "/api/mta/domain/:domain",
      "/api/mta/mailbox/:email",
      "/api/mta/alias/:email",
      "/api/mta/senders/:email",
      "/api/mta/smtp_quota/:email",
      "/api/mailbox-server/:email",
    ])
      assert.ok(answered(route, 200) >= warmUpRounds, `${route}: ${answered(route, 200)} answers 200`);
    // The unknown address (and, for userdb, the alias): "no such user" from userdb and smtp_quota.
    assert.ok(answered("/api/mailbox-server/:email", 404) >= warmUpRounds);
    assert.ok(answered("/api/mta/smtp_quota/:email", 404) >= warmUpRounds);
    assert.ok(requests.every((line) => line.status === 200 || line.status === 404));
  });

  test("it writes nothing: only reads, and every table as it was", async () => {
    const writes = statements.filter((sql) => !/^\s*(select|with)\b/i.test(sql));
    assert.deepEqual(writes, []);
    assert.deepEqual(await snapshot(), tablesBefore);
  });

  test("the metrics count no request of it", async () => {
    const text = await services.metrics.text();
    assert.doesNotMatch(text, /^http_requests_total\{/m);
    assert.doesNotMatch(text, /^http_request_duration_seconds_count\{/m);
    const answer = await app.inject({
      method: "GET",
      url: "/api/mta/mailbox/user@example.org",
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(answer.json(), true);
    assert.match(
      await services.metrics.text(),
      /^http_requests_total\{method="GET",route="\/api\/mta\/mailbox\/:email",status="200"\} 1$/m,
    );
  });

  test("afterwards the token check is as before: a made-up token is refused", async () => {
    const answer = await app.inject({
      method: "GET",
      url: "/api/mta/mailbox/user@example.org",
      headers: { authorization: `Bearer ${"ab".repeat(32)}` },
    });
    assert.equal(answer.statusCode, 401);
  });
});
