import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { settingDefinitions } from "../src/accounts/settings.ts";
import type { Database } from "../src/db/schema.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * Every field of every admin body, sent with values of the wrong JSON type: each answers 422 with
 * a message that names the field, and writes nothing. (Before the schemas, `"false"` or `[false]`
 * for `passwordChangeRequired` created a user who had to change the password.)
 */

// Wrong values by the type a field has. `null` is wrong only where the field does not take it.
const notString = [5, true, [], {}, ["x"]];
const notBoolean = ["false", [false], 0, 1, "true", {}];
const notInteger = ["5", 1.5, true, [1], {}];
const notStringList = ["x", [5], [null], [["x"]], {}, true];
const notObject = ["x", 5, [], true];
const withNull = (values: unknown[]) => [...values, null];

interface Case {
  route: string;
  method: string;
  path: string;
  /** A body that is valid apart from the field under test (or at least type-correct). */
  base: Record<string, unknown>;
  fields: Record<string, unknown[]>;
}

const smtpQuotaFields = {
  smtpQuota: notObject,
  "smtpQuota.per_hour": notInteger,
  "smtpQuota.per_day": notInteger,
};

const cases: Case[] = [
  {
    route: "POST /domains",
    method: "POST",
    path: "/domains",
    base: { name: "typed.org" },
    fields: { name: withNull(notString) },
  },
  {
    route: "POST /users",
    method: "POST",
    path: "/users",
    base: { email: "typed@example.org", password },
    fields: {
      email: withNull(notString),
      password: withNull(notString),
      roles: withNull(notStringList),
      mailCrypt: withNull(notBoolean),
      quota: notInteger,
      passwordChangeRequired: withNull(notBoolean),
      ...smtpQuotaFields,
    },
  },
  {
    route: "PATCH /users/{email}",
    method: "PATCH",
    path: "/users/bob@example.org",
    base: {},
    fields: {
      roles: withNull(notStringList),
      quota: notInteger,
      passwordChangeRequired: withNull(notBoolean),
      mailCrypt: withNull(notBoolean),
      lastLoginTime: notInteger,
      ...smtpQuotaFields,
    },
  },
  {
    route: "POST /users/{email}/reset",
    method: "POST",
    path: "/users/bob@example.org/reset",
    base: {},
    fields: { password: withNull(notString) },
  },
  {
    route: "POST /users/{email}/restore",
    method: "POST",
    path: "/users/gone@example.org/restore",
    base: {},
    fields: { password: withNull(notString) },
  },
  {
    route: "PUT /users/{email}/totp",
    method: "PUT",
    path: "/users/bob@example.org/totp",
    base: {},
    fields: { secret: notString, backupCodes: notStringList },
  },
  {
    route: "POST /aliases",
    method: "POST",
    path: "/aliases",
    base: { source: "typed-alias@example.org", destinations: ["bob@example.org"] },
    fields: {
      source: withNull(notString),
      destinations: withNull(notStringList),
      owner: notString,
      ...smtpQuotaFields,
    },
  },
  {
    route: "PATCH /aliases/{source}",
    method: "PATCH",
    path: "/aliases/team@example.org",
    base: {},
    fields: {
      destinations: withNull(notStringList),
      owner: notString,
      ...smtpQuotaFields,
    },
  },
  {
    route: "PATCH /settings",
    method: "PATCH",
    path: "/settings",
    base: {},
    fields: Object.fromEntries(
      Object.entries(settingDefinitions).map(([name, definition]) => [
        name,
        withNull(
          definition.type === "integer" ? notInteger : definition.type === "boolean" ? notBoolean : notString,
        ),
      ]),
    ),
  },
  {
    route: "POST /api-tokens",
    method: "POST",
    path: "/api-tokens",
    base: { name: "typed", scopes: ["mta"] },
    // `scopes` may be a list or a comma-separated string.
    fields: { name: withNull(notString), scopes: [5, true, {}, [5], [null], null] },
  },
  {
    route: "POST /webhooks",
    method: "POST",
    path: "/webhooks",
    base: { url: "http://127.0.0.1:9/typed", events: ["user.deleted"] },
    fields: {
      url: withNull(notString),
      events: withNull(notStringList),
      secret: notString,
      domains: notStringList,
      enabled: withNull(notBoolean),
    },
  },
  {
    route: "PATCH /webhooks/{id}",
    method: "PATCH",
    path: "/webhooks/1",
    base: {},
    fields: {
      url: withNull(notString),
      events: withNull(notStringList),
      secret: withNull(notString),
      domains: notStringList,
      enabled: withNull(notBoolean),
    },
  },
  {
    route: "PUT /openpgp-keys/{email} (JSON)",
    method: "PUT",
    path: "/openpgp-keys/bob@example.org",
    base: {},
    fields: { key: withNull(notString) },
  },
];

/** Sets `field` ("a" or "a.b") of a copy of `base` to `value`, making the parent object if needed. */
function withField(base: Record<string, unknown>, field: string, value: unknown): Record<string, unknown> {
  const [head, tail] = field.split(".") as [string, string | undefined];
  if (tail === undefined) return { ...base, [head]: value };
  return { ...base, [head]: { [tail]: value } };
}

const tables: (keyof Database)[] = [
  "domains",
  "users",
  "aliases",
  "api_tokens",
  "openpgp_keys",
  "settings",
  "webhook_endpoints",
  "webhook_endpoint_domains",
  "webhook_deliveries",
];

describe("admin API: every body field is checked for its type", () => {
  let service: TestService;
  let admin: string;
  const call = (method: string, path: string, options: { json?: unknown; form?: Record<string, string> }) =>
    service.request(method, `/api/admin${path}`, { token: admin, ...options });

  /** Every row of every table the admin API writes (the token's last use aside), in a stable order. */
  const snapshot = async () => {
    const { db } = service.services.database;
    const result: Record<string, string[]> = {};
    for (const table of tables) {
      const rows = await db.selectFrom(table).selectAll().execute();
      result[table] = rows
        .map((row) =>
          JSON.stringify({ ...row, last_used_at: undefined }, (_key, value) =>
            Buffer.isBuffer(value) ? value.toString("base64") : value,
          ),
        )
        .sort();
    }
    return result;
  };

  before(async () => {
    service = await startService();
    admin = await service.token("admin");
    const setup = async (method: string, path: string, json: unknown, status: number) => {
      const answer = await call(method, path, { json });
      assert.equal(answer.status, status, `${method} ${path}: ${answer.text}`);
    };
    await setup("POST", "/domains", { name: "example.org" }, 201);
    await setup("POST", "/users", { email: "bob@example.org", password, mailCrypt: false }, 201);
    await setup("POST", "/users", { email: "gone@example.org", password, mailCrypt: false }, 201);
    await setup("DELETE", "/users/gone@example.org", undefined, 204);
    await setup("POST", "/aliases", { source: "team@example.org", destinations: ["bob@example.org"] }, 201);
    await setup("POST", "/webhooks", { url: "http://127.0.0.1:9/hook", events: ["user.deleted"] }, 201);
    const { publicKey } = await openpgp.generateKey({
      type: "ecc",
      curve: "curve25519Legacy",
      userIDs: [{ email: "bob@example.org" }],
      format: "armored",
    });
    await setup("PUT", "/openpgp-keys/bob@example.org", { key: publicKey }, 200);
  });
  after(() => service.close());

  for (const { route, method, path, base, fields } of cases) {
    test(route, async () => {
      const before = await snapshot();
      for (const [field, values] of Object.entries(fields)) {
        for (const value of values) {
          const json = withField(base, field, value);
          const answer = await call(method, path, { json });
          const sent = `${route} ${JSON.stringify(json)}`;
          assert.equal(answer.status, 422, `${sent}: ${answer.status} ${answer.text}`);
          assert.deepEqual(Object.keys(answer.body), ["message"], sent);
          // The field itself, or an item ("roles[0]") or part ("smtpQuota.per_hour") of it.
          const named = new RegExp(`^${field.replaceAll(".", "\\.")}(\\[\\d+\\])?: `);
          assert.match(answer.body.message, named, sent);
        }
      }
      assert.deepEqual(await snapshot(), before, `${route}: a refused request changes nothing`);
    });
  }

  test('POST /users with "passwordChangeRequired": "false" or [false] creates no user (it used to set the flag)', async () => {
    for (const value of ["false", [false], "0", 0]) {
      const answer = await call("POST", "/users", {
        json: { email: "flag@example.org", password, passwordChangeRequired: value },
      });
      assert.equal(answer.status, 422, `${JSON.stringify(value)}: ${answer.text}`);
      assert.deepEqual(answer.body, { message: "passwordChangeRequired: must be true or false" });
    }
    // Form fields arrive as strings: the flag cannot be given that way, and nothing is created.
    const form = await call("POST", "/users", {
      form: { email: "flag@example.org", password, passwordChangeRequired: "false" },
    });
    assert.equal(form.status, 422);
    assert.deepEqual(form.body, { message: "passwordChangeRequired: must be true or false" });
    assert.equal((await call("GET", "/users/flag@example.org", {})).status, 404);
    // PATCH says the same for the same values.
    const patch = await call("PATCH", "/users/bob@example.org", {
      json: { passwordChangeRequired: "false" },
    });
    assert.deepEqual(patch.body, { message: "passwordChangeRequired: must be true or false" });
    // And true and false still do what they say.
    const created = await call("POST", "/users", {
      json: { email: "flag@example.org", password, mailCrypt: false, passwordChangeRequired: false },
    });
    assert.equal(created.status, 201);
    assert.equal(created.body.passwordChangeRequired, false);
  });

  test("the service refuses a non-boolean flag itself (the console calls it without the schema)", async () => {
    await assert.rejects(
      service.services.users.create({
        email: "console@example.org",
        password,
        passwordChangeRequired: "false" as unknown as boolean,
      }),
      { message: "passwordChangeRequired: must be true or false" },
    );
  });

  test("the type messages: what each field must be", async () => {
    const message = async (method: string, path: string, json: unknown) =>
      (await call(method, path, { json })).body.message;
    assert.equal(
      await message("POST", "/users", { email: "m@example.org", password, quota: "5" }),
      "quota: must be a whole number or null",
    );
    assert.equal(
      await message("POST", "/users", { email: "m@example.org", password, smtpQuota: { per_hour: "many" } }),
      "smtpQuota.per_hour: must be a whole number or null",
    );
    assert.equal(
      await message("POST", "/users", { email: "m@example.org", password, roles: ["ROLE_ADMIN", 5] }),
      "roles[1]: must be a string",
    );
    assert.equal(await message("POST", "/users", { password }), "email: is required");
    assert.equal(await message("POST", "/users", [1]), "body: must be a JSON object");
    assert.equal(
      await message("PATCH", "/settings", { weekly_report_enabled: "yes" }),
      "weekly_report_enabled: must be true or false",
    );
    assert.equal(
      await message("PATCH", "/settings", { smtp_quota_limit_per_hour: "50" }),
      "smtp_quota_limit_per_hour: must be a whole number",
    );
    assert.equal(
      await message("POST", "/api-tokens", { name: "t", scopes: 5 }),
      "scopes: must be a list or a string",
    );
    // The services' own rules keep their words.
    assert.equal(
      await message("POST", "/users", { email: "m@example.org", password, quota: -1 }),
      "quota: must be a whole number of MiB, 0 or more",
    );
  });

  test("a binary or text body on a JSON route is 'body: must be a JSON object' (a binary PATCH was a silent no-op)", async () => {
    for (const contentType of ["application/octet-stream", "application/pgp-keys", "text/plain"]) {
      for (const [method, path] of [
        ["PATCH", "/users/bob@example.org"],
        ["POST", "/domains"],
        ["PATCH", "/settings"],
      ] as const) {
        const answer = await service.request(method, `/api/admin${path}`, {
          token: admin,
          headers: { "content-type": contentType },
          body: '{"quota":1}',
        });
        assert.equal(answer.status, 422, `${contentType} ${method} ${path}`);
        assert.deepEqual(answer.body, { message: "body: must be a JSON object" });
      }
    }
  });

  test("list queries: declared parameters of the wrong shape are 422 naming the parameter", async () => {
    const get = (path: string) => service.request("GET", `/api/admin${path}`, { token: admin });
    assert.deepEqual((await get("/users?status=weird")).body, {
      message: "status: must be active, deleted or all",
    });
    assert.deepEqual((await get("/webhooks/1/deliveries?status=odd")).body, {
      message: "status: must be success, failed or pending",
    });
    const repeated = await get("/users?domain=example.org&domain=example.net");
    assert.equal(repeated.status, 422);
    assert.deepEqual(repeated.body, { message: "domain: must be a string" });
    assert.equal((await get("/aliases?owner=a@example.org&owner=b@example.org")).status, 422);
    assert.equal((await get("/domains?search=a&search=b")).status, 422);
    assert.equal((await get("/users?status=all&domain=example.org")).status, 200);
    const force = await service.request("DELETE", "/api/admin/domains/example.org?force=true&force=true", {
      token: admin,
    });
    assert.deepEqual([force.status, force.body], [422, { message: "force: must be a string" }]);
    assert.equal((await get("/domains/example.org")).status, 200, "the domain is still there");
  });
});
