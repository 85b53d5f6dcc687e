import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { openDatabase } from "../src/db/database.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { runConsole } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";

const password = "correct horse battery staple";

describe("one owner per account rule", () => {
  let service: TestService;
  let admin: string;
  const call = (method: string, path: string, json?: unknown) =>
    service.request(method, `/api/admin${path}`, { token: admin, ...(json ? { json } : {}) });

  before(async () => {
    service = await startService();
    admin = await service.token("admin");
    await service.services.domains.create("example.org");
    await service.services.webhooks.create({
      url: "http://127.0.0.1:9/hook",
      events: ["user.created"],
      secret: "a webhook secret of some length",
    });
  });
  after(() => service.close());

  describe("user.created", () => {
    const createdRows = async (email: string) =>
      (
        await service.services.database.db
          .selectFrom("webhook_deliveries")
          .select("body")
          .where("type", "=", "user.created")
          .execute()
      ).filter((row) => JSON.parse(row.body).data.email === email);

    test("is recorded for every creation path: admin API, console, the service itself", async () => {
      const viaApi = await call("POST", "/users", { email: "api@example.org", password, mailCrypt: false });
      assert.equal(viaApi.status, 201, viaApi.text);
      assert.equal((await createdRows("api@example.org")).length, 1);

      // A caller of UserService.create that passes nothing (as the web interface will).
      await service.services.users.create({ email: "direct@example.org", password, mailCrypt: false });
      assert.equal((await createdRows("direct@example.org")).length, 1);
    });

    test("console-created users produce a user.created delivery too", async () => {
      const dir = mkdtempSync(join(tmpdir(), "mas-rules-"));
      const { url, drop } = await freshDatabaseUrl(join(dir, "console.sqlite"));
      try {
        for (const args of [
          ["app:migrate"],
          ["app:domain:create", "example.org"],
          ["app:webhook:create", "--url", "http://127.0.0.1:9/hook", "--events", "user.created"],
          ["app:user:create", "--user", "console@example.org", "--password", password],
        ]) {
          const result = runConsole(url, args);
          assert.equal(result.status, 0, `${args[0]}: ${result.stderr}`);
        }
        const database = await openDatabase(url);
        try {
          const rows = await database.db.selectFrom("webhook_deliveries").select(["type", "body"]).execute();
          assert.deepEqual(
            rows.map((row) => [row.type, JSON.parse(row.body).data.email]),
            [["user.created", "console@example.org"]],
          );
        } finally {
          await database.close();
        }
      } finally {
        await drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
