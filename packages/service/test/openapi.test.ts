import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { after, before, describe, test } from "node:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import * as openpgp from "openpgp";
import { currentTotpCode } from "../src/credentials/totp.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * The OpenAPI document against the service: it is valid OpenAPI 3.1, and every answer of every
 * route, given to real requests on a real server and database, is documented (path, method,
 * status, content type) and fits the document's schema. Problems are collected and reported
 * together, one line per route and status, rather than stopping at the first.
 */

type Json = any;
interface Operation {
  tags?: string[];
  security?: Record<string, string[]>[];
  requestBody?: Json;
  responses: Record<
    string,
    {
      description: string;
      content?: Record<string, { schema?: Json; example?: Json; examples?: Record<string, { value: Json }> }>;
    }
  >;
}
interface Document {
  openapi: string;
  info: Json;
  components?: Json;
  tags?: { name: string }[];
  paths: Record<string, Record<string, Operation>>;
}

interface Answer {
  status: number;
  type: string;
  text: string;
}

const methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
const metricsToken = "metrics-token-for-the-openapi-test";

/** Plain node:http, so paths go out exactly as written (`%zz`) and `Host` can be set. */
function send(
  base: string,
  method: string,
  path: string,
  options: { token?: string; type?: string; body?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const url = new URL(base);
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.type) headers["content-type"] = options.type;
  if (options.body !== undefined) headers["content-length"] = String(Buffer.byteLength(options.body));
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          type: String(res.headers["content-type"] ?? ""),
          text: Buffer.concat(chunks).toString("utf8"),
        }),
      );
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

/** `/api/mta/alias/:email` -> `/api/mta/alias/{email}` */
const openApiPath = (fastifyUrl: string) => fastifyUrl.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

/** The route table as Fastify prints it: every path with every method it answers. */
function routeTable(printed: string): Map<string, string[]> {
  const table = new Map<string, string[]>();
  const stack: string[] = [];
  for (const line of printed.split("\n")) {
    const match = /^([│ ]*)[├└]── (\S+)(?: \(([^)]*)\))?/.exec(line);
    if (!match) continue;
    const depth = (match[1] ?? "").length / 4;
    stack.length = depth;
    stack.push(match[2] ?? "");
    if (match[3]) table.set(stack.join(""), match[3].split(", "));
  }
  return table;
}

describe("OpenAPI document", () => {
  let service: TestService;
  let document: Document;

  before(async () => {
    service = await startService({ metricsToken });
    const answer = await send(service.url, "GET", "/api/openapi.json");
    assert.equal(answer.status, 200);
    assert.match(answer.type, /^application\/json/);
    document = JSON.parse(answer.text);
  });
  after(() => service.close());

  test("is valid OpenAPI 3.1 by an independent validator", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as Json);
    assert.deepEqual(result.errors ?? [], []);
    assert.equal(result.valid, true);
    assert.equal(validator.version, "3.1");
    // The validator applies 3.1's own rules: a licence has an identifier or a URL, not both.
    const broken = structuredClone(document);
    broken.info.license.url = "https://www.gnu.org/licenses/agpl-3.0.html";
    assert.equal((await new Validator().validate(broken as Json)).valid, false);
  });

  test("says what it is: version, licence, security schemes, the scope of each tag", async () => {
    const { serviceVersion } = await import("../src/version.ts");
    assert.equal(document.openapi, "3.1.0");
    assert.equal(document.info.version, serviceVersion);
    assert.equal(document.info.license.identifier, "AGPL-3.0-or-later");
    assert.equal(document.components.securitySchemes.apiToken.scheme, "bearer");
    const declared = new Set((document.tags ?? []).map((tag) => tag.name));
    const problems: string[] = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (!methods.includes(method)) continue;
        const where = `${method.toUpperCase()} ${path}`;
        if (!operation.tags?.length) problems.push(`${where}: no tag`);
        for (const tag of operation.tags ?? [])
          if (!declared.has(tag)) problems.push(`${where}: tag "${tag}" not declared`);
        const group = /^\/api\/([a-z-]+)\//.exec(path)?.[1];
        const scope = path === "/api/openapi.json" ? undefined : group;
        const needs = operation.security?.flatMap((requirement) => requirement.apiToken ?? []) ?? [];
        if (scope && needs.join() !== scope)
          problems.push(`${where}: security should be apiToken [${scope}], is [${needs}]`);
        if (!scope && path !== "/metrics" && operation.security?.length)
          problems.push(`${where}: public, but has security`);
      }
    }
    assert.deepEqual(problems, []);
  });

  test("every response has a realistic example that fits its schema", () => {
    const problems: string[] = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (!methods.includes(method) || path === "/api/openapi.json") continue;
        for (const [status, response] of Object.entries(operation.responses)) {
          for (const [type, media] of Object.entries(response.content ?? {})) {
            const where = `${method.toUpperCase()} ${path} ${status} ${type}`;
            const examples = [
              ...(media.example === undefined ? [] : [media.example]),
              ...Object.values(media.examples ?? {}).map((example) => example.value),
              ...(Array.isArray(media.schema?.examples) ? media.schema.examples : []),
            ];
            if (examples.length === 0 && type.includes("json")) problems.push(`${where}: no example`);
            for (const example of examples) {
              const error = schemaError(document, media.schema, example);
              if (error) problems.push(`${where}: example ${JSON.stringify(example).slice(0, 80)} ${error}`);
            }
          }
        }
      }
    }
    assert.deepEqual(problems, []);
  });

  test("with USERLI_COMPAT the document is the same: userli's prefixes are named, not listed", async () => {
    const compat = await startService({ metricsToken, userliCompat: true });
    try {
      const answer = await send(compat.url, "GET", "/api/openapi.json");
      assert.deepEqual(JSON.parse(answer.text), document);
      assert.match(document.info.description, /USERLI_COMPAT=true/);
      const userli: Record<string, string> = {
        dovecot: "mailbox-server",
        postfix: "mta",
        roundcube: "webmail",
        keycloak: "identity",
      };
      const undocumented: string[] = [];
      let compatRoutes = 0;
      for (const [url, answered] of routeTable(compat.app.printRoutes({ commonPrefix: false }))) {
        const prefix = /^\/api\/(dovecot|postfix|roundcube|keycloak)\//.exec(url)?.[1];
        if (!prefix) continue;
        compatRoutes++;
        const neutral = openApiPath(url).replace(`/api/${prefix}/`, `/api/${userli[prefix]}/`);
        for (const method of answered) {
          if (method === "HEAD" || document.paths[neutral]?.[method.toLowerCase()]) continue;
          const probe = await send(compat.url, method, url.replace(/:[A-Za-z]+/g, "x@example.org"));
          if (probe.status !== 405) undocumented.push(`${method} ${url}: no neutral twin in the document`);
        }
      }
      assert.ok(compatRoutes > 0, "USERLI_COMPAT adds the userli-prefixed routes");
      assert.deepEqual(undocumented, []);
    } finally {
      await compat.close();
    }
  });

  test("every route answers as documented (real requests on a real database)", {
    timeout: 180_000,
  }, async () => {
    const contract = new Contract(service, document);
    await exercise(contract, service);
    await contract.probeGuards();
    await contract.probeRouteTable();
    assert.deepEqual(contract.problems(), []);
  });
});

// ---------------------------------------------------------------------------------------------

const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
addFormats.default(ajv);
ajv.addFormat("binary", true);
ajv.addFormat("password", true);
const compiled = new Map<unknown, ReturnType<typeof ajv.compile>>();
let documentRegistered: Document | undefined;

/** null when `value` fits `schema` (refs resolved against the document), else what is wrong. */
function schemaError(document: Document, schema: Json, value: unknown): string | null {
  if (schema === undefined) return null;
  if (documentRegistered !== document) {
    ajv.removeSchema("openapi-document");
    ajv.addSchema({ $id: "openapi-document", components: document.components ?? {} });
    documentRegistered = document;
  }
  let validate = compiled.get(schema);
  if (!validate) {
    const text = JSON.stringify(schema).replaceAll('"#/components/', '"openapi-document#/components/');
    validate = ajv.compile(JSON.parse(text));
    compiled.set(schema, validate);
  }
  if (validate(value)) return null;
  return ajv.errorsText(validate.errors);
}

interface Exchange {
  method: string;
  path: string;
  expected: number;
  answer: Answer;
  note: string;
  /** The Content-Type of the request body, if any. */
  sent: string | undefined;
}

/** Sends requests, records what came back, and checks each answer against the document. */
class Contract {
  readonly exchanges: Exchange[] = [];
  private readonly extra: string[] = [];
  /** Documented statuses the test cannot bring about, with why. */
  readonly unreachable = new Map<string, string>();
  readonly tokens = new Map<string, string>();

  private readonly service: TestService;
  readonly document: Document;

  constructor(service: TestService, document: Document) {
    this.service = service;
    this.document = document;
  }

  async token(scope: string): Promise<string> {
    let token = this.tokens.get(scope);
    if (!token) {
      token = await this.service.token(scope as never);
      this.tokens.set(scope, token);
    }
    return token;
  }

  /**
   * One request: `path` is the document's path with `{name}` parameters, filled from `params`
   * exactly as given (no encoding, so malformed escapes can be sent).
   */
  async expect(
    expected: number,
    method: string,
    path: string,
    params: Record<string, string | number> = {},
    options: {
      token?: string;
      json?: unknown;
      form?: Record<string, string>;
      body?: string | Buffer;
      type?: string;
      query?: string;
      headers?: Record<string, string>;
      note?: string;
    } = {},
  ): Promise<Answer> {
    let concrete = path.replace(/\{([^}]+)\}/g, (_whole, name: string) => {
      const value = params[name];
      if (value === undefined) throw new Error(`${path}: no value for {${name}}`);
      return String(value);
    });
    if (options.query) concrete += `?${options.query}`;
    let body = options.body;
    let type = options.type;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      type ??= "application/json";
    } else if (options.form) {
      body = new URLSearchParams(options.form).toString();
      type ??= "application/x-www-form-urlencoded";
    }
    const answer = await send(this.service.url, method, concrete, {
      token: options.token,
      type,
      body,
      headers: options.headers,
    });
    this.exchanges.push({ method, path, expected, answer, note: options.note ?? concrete, sent: type });
    return answer;
  }

  /** For every operation that needs a token: 401 without one, 401 with a wrong one, 403 with another scope. */
  async probeGuards(): Promise<void> {
    for (const [path, method, operation] of this.operations()) {
      const scope = operation.security?.[0]?.apiToken?.[0];
      const params = this.sampleParams(path);
      if (!scope) continue;
      const upper = method.toUpperCase();
      await this.expect(401, upper, path, params, { note: "no token" });
      await this.expect(401, upper, path, params, { token: "0".repeat(64), note: "unknown token" });
      await this.expect(403, upper, path, params, {
        token: await this.token(scope === "mta" ? "webmail" : "mta"),
        note: "token of another scope",
      });
      // Every method that can carry a body (DELETE included) reads it before the handler runs.
      if (["POST", "PUT", "PATCH", "DELETE"].includes(upper)) {
        const token = await this.token(scope);
        const limit = path.startsWith("/api/admin/openpgp-keys/")
          ? 2 * 1024 * 1024
          : path === "/api/admin/users/import"
            ? 1024 * 1024
            : 64 * 1024;
        await this.expect(413, upper, path, params, {
          token,
          type: "application/json",
          body: `{"x":"${"a".repeat(limit)}"}`,
          note: "body over the limit",
        });
        await this.expect(415, upper, path, params, {
          token,
          type: "application/xml",
          body: "<x/>",
          note: "unsupported content type",
        });
        await this.expect(400, upper, path, params, {
          token,
          type: "application/json",
          body: '{"unfinished": ',
          note: "malformed JSON",
        });
      }
    }
  }

  /** Every path and method the server answers is documented, or is the app's own 405 (or a HEAD twin of a GET). */
  async probeRouteTable(): Promise<void> {
    const documented = new Set(this.operations().map(([path, method]) => `${method.toUpperCase()} ${path}`));
    for (const [url, answered] of routeTable(this.service.app.printRoutes({ commonPrefix: false }))) {
      const path = openApiPath(url);
      for (const method of answered) {
        if (documented.has(`${method} ${path}`)) continue;
        // HEAD is Fastify's twin of a GET: documented (or reported) with the GET.
        if (method === "HEAD" && answered.includes("GET")) continue;
        const concrete = path.replace(
          /\{([^}]+)\}/g,
          (_whole, name: string) => this.sampleParams(path)[name] ?? "x",
        );
        const answer = await send(this.service.url, method, concrete);
        if (answer.status !== 405) {
          this.extra.push(`${method} ${path}: route missing from the document`);
        }
      }
    }
  }

  /** A value for each path parameter: existing resources, so the guard probes reach the guard only. */
  sampleParams(path: string): Record<string, string> {
    const samples: Record<string, string> = {
      email: "alice@example.org",
      domain: "example.org",
      name: "example.org",
      source: "team@example.org",
      id: "1",
      hash: "kei1q4tipxxu1yj79k9kfukdhfy631xe",
      credentialType: "password",
    };
    const params: Record<string, string> = {};
    for (const [, name] of path.matchAll(/\{([^}]+)\}/g))
      params[name as string] = samples[name as string] ?? "x";
    return params;
  }

  operations(): [string, string, Operation][] {
    const list: [string, string, Operation][] = [];
    for (const [path, item] of Object.entries(this.document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (methods.includes(method)) list.push([path, method, operation]);
      }
    }
    return list;
  }

  /** Everything wrong, one line each. */
  problems(): string[] {
    const problems = new Set(this.extra);
    const exercised = new Map<string, Set<string>>();
    for (const { method, path, expected, answer, note, sent } of this.exchanges) {
      const where = `${method} ${path} ${answer.status} (${note})`;
      if (answer.status !== expected) {
        problems.add(
          `${method} ${path} (${note}): expected ${expected}, got ${answer.status} ${answer.text.slice(0, 120)}`,
        );
      }
      const operation = this.document.paths[path]?.[method.toLowerCase()];
      if (!operation) {
        problems.add(`${method} ${path}: route missing from the document`);
        continue;
      }
      const key = `${method} ${path}`;
      const statuses = exercised.get(key) ?? new Set<string>();
      statuses.add(String(answer.status));
      exercised.set(key, statuses);
      // A body the route took must be of a documented request content type.
      if (sent && answer.status < 300 && !operation.requestBody?.content?.[sent]) {
        problems.add(`${method} ${path}: request content type "${sent}" missing from the document`);
      }
      const response = operation.responses[String(answer.status)];
      if (!response) {
        problems.add(`${where}: status missing from the document`);
        continue;
      }
      const type = answer.type.split(";")[0]?.trim() ?? "";
      if (answer.text === "" && (answer.status === 204 || !response.content)) continue;
      const media = response.content?.[type];
      if (!media) {
        problems.add(`${where}: content type "${type}" missing from the document`);
        continue;
      }
      const value = type.includes("json") ? JSON.parse(answer.text) : answer.text;
      const error = schemaError(this.document, media.schema, value);
      if (error)
        problems.add(`${where}: body ${answer.text.slice(0, 120)} does not fit the schema: ${error}`);
    }
    for (const [path, method, operation] of this.operations()) {
      const key = `${method.toUpperCase()} ${path}`;
      const statuses = exercised.get(key);
      if (!statuses) {
        problems.add(`${key}: documented, never exercised`);
        continue;
      }
      for (const status of Object.keys(operation.responses)) {
        if (statuses.has(status)) continue;
        if (this.unreachable.has(`${key} ${status}`) || this.unreachable.has(`* ${status}`)) continue;
        problems.add(`${key} ${status}: documented, never exercised`);
      }
    }
    return [...problems];
  }
}

// ---------------------------------------------------------------------------------------------

/** The requests: each route's answers, success and errors, with the set-up they need. */
async function exercise(c: Contract, service: TestService): Promise<void> {
  c.unreachable.set("* 500", "an unexpected failure; no request brings it about");
  c.unreachable.set("* 503", "the database unreachable; database-faults.test.ts covers it");

  const admin = await c.token("admin");
  const scoped = {
    mailboxServer: await c.token("mailbox-server"),
    mta: await c.token("mta"),
    webmail: await c.token("webmail"),
    identity: await c.token("identity"),
    retention: await c.token("retention"),
  };
  const A = (
    expected: number,
    method: string,
    path: string,
    params: Record<string, string | number> = {},
    options: Parameters<Contract["expect"]>[4] = {},
  ) => c.expect(expected, method, path, params, { token: admin, ...options });

  // ---- admin: domains
  await A(201, "POST", "/api/admin/domains", {}, { json: { name: "example.org" } });
  await A(201, "POST", "/api/admin/domains", {}, { json: { name: "spare.example" } });
  await A(409, "POST", "/api/admin/domains", {}, { json: { name: "example.org" } });
  await A(422, "POST", "/api/admin/domains", {}, { json: { name: "not a domain" } });
  await A(
    400,
    "POST",
    "/api/admin/domains",
    {},
    { type: "application/json", body: "{", note: "malformed JSON" },
  );
  await A(200, "GET", "/api/admin/domains", {}, { query: "search=example&limit=5&offset=0" });
  await A(422, "GET", "/api/admin/domains", {}, { query: "limit=501" });
  await A(200, "GET", "/api/admin/domains/{name}", { name: "example.org" });
  await A(404, "GET", "/api/admin/domains/{name}", { name: "nowhere.example" });

  // ---- admin: webhooks (before the users, so their creation queues deliveries)
  const endpoint = await A(
    201,
    "POST",
    "/api/admin/webhooks",
    {},
    {
      json: { url: "https://hooks.example.net/mail", events: ["user.created", "user.deleted"] },
    },
  );
  const endpointId = JSON.parse(endpoint.text).id as number;
  await A(422, "POST", "/api/admin/webhooks", {}, { json: { url: "ftp://x", events: [] } });
  await A(200, "GET", "/api/admin/webhooks");
  await A(200, "GET", "/api/admin/webhooks/{id}", { id: endpointId });
  await A(404, "GET", "/api/admin/webhooks/{id}", { id: 9999 });
  await A(400, "GET", "/api/admin/webhooks/{id}", { id: "abc" });
  await A(
    200,
    "PATCH",
    "/api/admin/webhooks/{id}",
    { id: endpointId },
    { json: { events: ["user.created", "user.deleted", "user.reset"] } },
  );
  await A(422, "PATCH", "/api/admin/webhooks/{id}", { id: endpointId }, { json: { enabled: "yes" } });
  await A(404, "PATCH", "/api/admin/webhooks/{id}", { id: 9999 }, { json: { enabled: true } });

  // ---- admin: users
  await A(
    201,
    "POST",
    "/api/admin/users",
    {},
    { json: { email: "alice@example.org", password, mailCrypt: true, quota: 1024 } },
  );
  await A(
    201,
    "POST",
    "/api/admin/users",
    {},
    { json: { email: "bob@example.org", password, mailCrypt: false } },
  );
  await A(
    201,
    "POST",
    "/api/admin/users",
    {},
    { json: { email: "spam@example.org", password, roles: ["ROLE_SPAM"] } },
  );
  await A(
    201,
    "POST",
    "/api/admin/users",
    {},
    { json: { email: "change@example.org", password, passwordChangeRequired: true } },
  );
  await A(201, "POST", "/api/admin/users", {}, { json: { email: "gone@example.org", password } });
  await A(
    201,
    "POST",
    "/api/admin/users",
    {},
    { json: { email: "broken@example.org", password, mailCrypt: true } },
  );
  await A(409, "POST", "/api/admin/users", {}, { json: { email: "alice@example.org", password } });
  await A(
    422,
    "POST",
    "/api/admin/users",
    {},
    { json: { email: "carol@example.org", password, passwordChangeRequired: "false" } },
  );
  await A(200, "GET", "/api/admin/users", {}, { query: "domain=example.org&status=all&limit=10" });
  await A(422, "GET", "/api/admin/users", {}, { query: "status=sleeping" });
  await A(200, "GET", "/api/admin/users/{email}", { email: "alice@example.org" });
  await A(404, "GET", "/api/admin/users/{email}", { email: "nobody@example.org" });
  await A(
    200,
    "PATCH",
    "/api/admin/users/{email}",
    { email: "bob@example.org" },
    { json: { quota: 2048, smtpQuota: { per_hour: 10, per_day: 100 } } },
  );
  await A(422, "PATCH", "/api/admin/users/{email}", { email: "bob@example.org" }, { json: { quota: -1 } });
  await A(404, "PATCH", "/api/admin/users/{email}", { email: "nobody@example.org" }, { json: { quota: 1 } });
  await A(204, "DELETE", "/api/admin/users/{email}", { email: "gone@example.org" });
  await A(404, "DELETE", "/api/admin/users/{email}", { email: "gone@example.org" });
  await A(
    200,
    "POST",
    "/api/admin/users/{email}/reset",
    { email: "bob@example.org" },
    { json: { password } },
  );
  await A(
    422,
    "POST",
    "/api/admin/users/{email}/reset",
    { email: "bob@example.org" },
    { json: { password: "short" } },
  );
  await A(
    404,
    "POST",
    "/api/admin/users/{email}/reset",
    { email: "gone@example.org" },
    { json: { password } },
  );
  await A(
    409,
    "POST",
    "/api/admin/users/{email}/restore",
    { email: "bob@example.org" },
    { json: { password } },
  );
  await A(
    404,
    "POST",
    "/api/admin/users/{email}/restore",
    { email: "nobody@example.org" },
    { json: { password } },
  );
  await A(422, "POST", "/api/admin/users/{email}/restore", { email: "gone@example.org" }, { json: {} });
  await A(201, "POST", "/api/admin/users", {}, { json: { email: "back@example.org", password } });
  await A(204, "DELETE", "/api/admin/users/{email}", { email: "back@example.org" });
  await A(
    200,
    "POST",
    "/api/admin/users/{email}/restore",
    { email: "back@example.org" },
    { json: { password } },
  );
  const totp = await A(
    200,
    "PUT",
    "/api/admin/users/{email}/totp",
    { email: "bob@example.org" },
    { json: {} },
  );
  const totpSecret = JSON.parse(totp.text).secret as string;
  await A(
    422,
    "PUT",
    "/api/admin/users/{email}/totp",
    { email: "bob@example.org" },
    { json: { secret: "too short" } },
  );
  await A(404, "PUT", "/api/admin/users/{email}/totp", { email: "gone@example.org" }, { json: {} });
  await A(201, "POST", "/api/admin/users", {}, { json: { email: "otpoff@example.org", password } });
  await A(200, "PUT", "/api/admin/users/{email}/totp", { email: "otpoff@example.org" }, { json: {} });
  await A(204, "DELETE", "/api/admin/users/{email}/totp", { email: "otpoff@example.org" });
  await A(404, "DELETE", "/api/admin/users/{email}/totp", { email: "nobody@example.org" });
  // ---- admin: a user's app passwords and "mail apps must use app passwords"
  const appPassword = await A(
    201,
    "POST",
    "/api/admin/users/{email}/app-passwords",
    { email: "bob@example.org" },
    { json: { name: "Printer", scope: "smtp" } },
  );
  await A(
    409,
    "POST",
    "/api/admin/users/{email}/app-passwords",
    { email: "alice@example.org" },
    { json: { name: "Phone", scope: "mail" } },
  );
  await A(
    422,
    "POST",
    "/api/admin/users/{email}/app-passwords",
    { email: "bob@example.org" },
    { json: { name: "", scope: "smtp" } },
  );
  await A(
    404,
    "POST",
    "/api/admin/users/{email}/app-passwords",
    { email: "nobody@example.org" },
    { json: { name: "Phone", scope: "smtp" } },
  );
  await A(200, "GET", "/api/admin/users/{email}/app-passwords", { email: "bob@example.org" });
  await A(404, "GET", "/api/admin/users/{email}/app-passwords", { email: "nobody@example.org" });
  const appPasswordId = String(JSON.parse(appPassword.text).id);
  await A(204, "DELETE", "/api/admin/users/{email}/app-passwords/{id}", {
    email: "bob@example.org",
    id: appPasswordId,
  });
  await A(404, "DELETE", "/api/admin/users/{email}/app-passwords/{id}", {
    email: "bob@example.org",
    id: appPasswordId,
  });
  await A(400, "DELETE", "/api/admin/users/{email}/app-passwords/{id}", {
    email: "bob@example.org",
    id: "abc",
  });
  await A(
    200,
    "PATCH",
    "/api/admin/users/{email}",
    { email: "bob@example.org" },
    { json: { appPasswordsRequired: true } },
  );
  await A(
    422,
    "PATCH",
    "/api/admin/users/{email}",
    { email: "bob@example.org" },
    { json: { appPasswordsRequired: "yes" } },
  );
  // Back to the domain's default (off), so bob's password still opens his mailbox further down.
  await A(
    200,
    "PATCH",
    "/api/admin/users/{email}",
    { email: "bob@example.org" },
    { json: { appPasswordsRequired: null } },
  );
  await A(
    200,
    "PATCH",
    "/api/admin/domains/{name}",
    { name: "example.org" },
    { json: { appPasswordsRequired: false } },
  );
  await A(
    422,
    "PATCH",
    "/api/admin/domains/{name}",
    { name: "example.org" },
    { json: { appPasswordsRequired: null } },
  );
  await A(
    404,
    "PATCH",
    "/api/admin/domains/{name}",
    { name: "nowhere.example" },
    { json: { appPasswordsRequired: true } },
  );
  const csv = { type: "text/csv" };
  await A(
    200,
    "POST",
    "/api/admin/users/import",
    {},
    { ...csv, body: "email,password\r\nbulk1@example.org,\r\n" },
  );
  await A(
    200,
    "POST",
    "/api/admin/users/import",
    {},
    { json: { users: [{ email: "bulk2@example.org", password, mailCrypt: false }] } },
  );
  await A(
    422,
    "POST",
    "/api/admin/users/import",
    {},
    { ...csv, body: "email\r\nnot an address\r\nalice@example.org\r\n", note: "the report of the bad lines" },
  );
  await A(
    422,
    "POST",
    "/api/admin/users/import",
    {},
    { json: { users: [{ email: "x@example.org", quota: "lots" }] }, note: "a value of the wrong type" },
  );

  // ---- admin: aliases
  await A(
    201,
    "POST",
    "/api/admin/aliases",
    {},
    { json: { source: "team@example.org", owner: "alice@example.org" } },
  );
  await A(
    201,
    "POST",
    "/api/admin/aliases",
    {},
    { json: { source: "old@example.org", destinations: ["bob@example.org"] } },
  );
  await A(
    409,
    "POST",
    "/api/admin/aliases",
    {},
    { json: { source: "alice@example.org", destinations: ["bob@example.org"] } },
  );
  await A(422, "POST", "/api/admin/aliases", {}, { json: { source: "x@example.org" } });
  await A(200, "GET", "/api/admin/aliases", {}, { query: "domain=example.org&owner=alice@example.org" });
  await A(422, "GET", "/api/admin/aliases", {}, { query: "limit=501" });
  await A(200, "GET", "/api/admin/aliases/{source}", { source: "team@example.org" });
  await A(404, "GET", "/api/admin/aliases/{source}", { source: "none@example.org" });
  await A(
    200,
    "PATCH",
    "/api/admin/aliases/{source}",
    { source: "team@example.org" },
    { json: { destinations: ["alice@example.org", "bob@example.org"] } },
  );
  await A(
    422,
    "PATCH",
    "/api/admin/aliases/{source}",
    { source: "team@example.org" },
    { json: { destinations: ["not an address"] } },
  );
  await A(
    404,
    "PATCH",
    "/api/admin/aliases/{source}",
    { source: "none@example.org" },
    { json: { owner: null } },
  );
  await A(204, "DELETE", "/api/admin/aliases/{source}", { source: "old@example.org" });
  await A(404, "DELETE", "/api/admin/aliases/{source}", { source: "old@example.org" });

  // ---- admin: domains (delete)
  await A(409, "DELETE", "/api/admin/domains/{name}", { name: "example.org" });
  await A(
    422,
    "DELETE",
    "/api/admin/domains/{name}",
    { name: "example.org" },
    { query: "force=true&force=true" },
  );
  await A(204, "DELETE", "/api/admin/domains/{name}", { name: "spare.example" });
  await A(404, "DELETE", "/api/admin/domains/{name}", { name: "spare.example" });

  // ---- admin: settings
  await A(200, "GET", "/api/admin/settings");
  await A(
    200,
    "PATCH",
    "/api/admin/settings",
    {},
    { json: { mta_sts_mode: "enforce", mta_sts_mx: "mx.example.org" } },
  );
  await A(422, "PATCH", "/api/admin/settings", {}, { json: { nope: 1 } });

  // ---- admin: api tokens
  const created = await A(
    201,
    "POST",
    "/api/admin/api-tokens",
    {},
    { json: { name: "janitor", scopes: ["retention"] } },
  );
  const tokenId = JSON.parse(created.text).id as number;
  await A(422, "POST", "/api/admin/api-tokens", {}, { json: { name: "x", scopes: ["everything"] } });
  await A(200, "GET", "/api/admin/api-tokens");
  await A(204, "DELETE", "/api/admin/api-tokens/{id}", { id: tokenId });
  await A(404, "DELETE", "/api/admin/api-tokens/{id}", { id: tokenId });
  await A(400, "DELETE", "/api/admin/api-tokens/{id}", { id: "abc" });

  // ---- admin: webhook deliveries (creating users above queued some, pending)
  const deliveries = await A(
    200,
    "GET",
    "/api/admin/webhooks/{id}/deliveries",
    { id: endpointId },
    { query: "status=pending&limit=5" },
  );
  const pending = JSON.parse(deliveries.text).items[0]?.id as string;
  await A(404, "GET", "/api/admin/webhooks/{id}/deliveries", { id: 9999 });
  await A(400, "GET", "/api/admin/webhooks/{id}/deliveries", { id: "abc" });
  await A(422, "GET", "/api/admin/webhooks/{id}/deliveries", { id: endpointId }, { query: "status=lost" });
  await A(
    409,
    "POST",
    "/api/admin/webhook-deliveries/{id}/retry",
    { id: pending },
    { note: "pending, not failed" },
  );
  await service.services.database.db
    .updateTable("webhook_deliveries")
    .set({ status: "failed", response_code: 503, next_attempt_at: null })
    .where("id", "=", pending)
    .execute();
  await A(200, "POST", "/api/admin/webhook-deliveries/{id}/retry", { id: pending });
  await A(404, "POST", "/api/admin/webhook-deliveries/{id}/retry", { id: "01M84C02EV1BW5K0GR3YPFHCYX" });
  const spareEndpoint = await A(
    201,
    "POST",
    "/api/admin/webhooks",
    {},
    { json: { url: "https://hooks.example.net/spare", events: ["user.reset"] } },
  );
  await A(204, "DELETE", "/api/admin/webhooks/{id}", { id: JSON.parse(spareEndpoint.text).id });
  await A(404, "DELETE", "/api/admin/webhooks/{id}", { id: JSON.parse(spareEndpoint.text).id });

  // ---- admin: OpenPGP keys
  const { publicKey } = await openpgp.generateKey({
    userIDs: [{ email: "alice@example.org" }],
    format: "armored",
  });
  const { publicKey: otherKey } = await openpgp.generateKey({
    userIDs: [{ email: "eve@example.net" }],
    format: "armored",
  });
  const key = await A(
    200,
    "PUT",
    "/api/admin/openpgp-keys/{email}",
    { email: "alice@example.org" },
    { type: "text/plain", body: publicKey },
  );
  const wkdHash = JSON.parse(key.text).wkdHash as string;
  await A(
    200,
    "PUT",
    "/api/admin/openpgp-keys/{email}",
    { email: "alice@example.org" },
    { json: { key: publicKey } },
  );
  await A(
    422,
    "PUT",
    "/api/admin/openpgp-keys/{email}",
    { email: "alice@example.org" },
    { type: "text/plain", body: otherKey },
  );
  await A(200, "GET", "/api/admin/openpgp-keys/{email}", { email: "alice@example.org" });
  await A(404, "GET", "/api/admin/openpgp-keys/{email}", { email: "bob@example.org" });
  await A(404, "DELETE", "/api/admin/openpgp-keys/{email}", { email: "bob@example.org" });

  // ---- admin: audit log (the changes above are in it)
  await A(200, "GET", "/api/admin/audit-log", {}, { query: "action=user.create&domain=example.org&limit=5" });
  await A(200, "GET", "/api/admin/audit-log", {}, { query: "since=0&until=99999999999&target=alice" });
  await A(422, "GET", "/api/admin/audit-log", {}, { query: "action=user.exploded" });
  await A(200, "GET", "/api/admin/security-events", {}, { query: "type=password.changed&since=0&limit=5" });
  await A(
    200,
    "GET",
    "/api/admin/security-events",
    {},
    { query: "email=alice@example.org&until=99999999999" },
  );
  await A(422, "GET", "/api/admin/security-events", {}, { query: "type=sign_in.exploded" });

  // ---- well-known (public)
  await c.expect(200, "GET", "/.well-known/openpgpkey/{domain}/hu/{hash}", {
    domain: "example.org",
    hash: wkdHash,
  });
  await c.expect(404, "GET", "/.well-known/openpgpkey/{domain}/hu/{hash}", {
    domain: "example.org",
    hash: "kei1q4tipxxu1yj79k9kfukdhfy631xy",
  });
  await c.expect(200, "GET", "/.well-known/openpgpkey/{domain}/policy", { domain: "example.org" });
  await c.expect(200, "GET", "/.well-known/mta-sts.txt", {}, { headers: { host: "mta-sts.example.org" } });
  await c.expect(404, "GET", "/.well-known/mta-sts.txt", {}, { headers: { host: "mta-sts.unmanaged.net" } });
  await A(204, "DELETE", "/api/admin/openpgp-keys/{email}", { email: "alice@example.org" });

  // A MailCrypt key that cannot be opened: the passdb 500 (a row as a damaged database leaves it).
  await service.services.database.db
    .updateTable("users")
    .set({ mail_crypt_secret_box: "bm90IGEgc2VjcmV0IGJveA==" })
    .where("email", "=", "broken@example.org")
    .execute();

  // ---- mailbox-server
  const M = (
    expected: number,
    method: string,
    path: string,
    params: Record<string, string | number> = {},
    options: Parameters<Contract["expect"]>[4] = {},
  ) => c.expect(expected, method, path, params, { token: scoped.mailboxServer, ...options });
  await M(200, "GET", "/api/mailbox-server/status");
  await M(200, "GET", "/api/mailbox-server/{email}", { email: "alice@example.org" });
  await M(404, "GET", "/api/mailbox-server/{email}", { email: "nobody@example.org" });
  await M(400, "GET", "/api/mailbox-server/{email}", { email: "no-at-sign" });
  await M(
    400,
    "GET",
    "/api/mailbox-server/{email}",
    { email: "%zz@example.org" },
    { note: "malformed escape" },
  );
  await M(200, "POST", "/api/mailbox-server/{email}", { email: "alice@example.org" }, { json: { password } });
  await M(200, "POST", "/api/mailbox-server/{email}", { email: "bob@example.org" }, { form: { password } });
  for (let i = 0; i < 5; i++)
    await M(
      404,
      "POST",
      "/api/mailbox-server/{email}",
      { email: "guessed-imap@example.org" },
      {
        json: { password: "wrong password 123" },
        headers: { "x-client-address": "198.51.100.24" },
      },
    );
  await M(
    429,
    "POST",
    "/api/mailbox-server/{email}",
    { email: "guessed-imap@example.org" },
    {
      json: { password },
      headers: { "x-client-address": "198.51.100.24" },
      note: "throttled",
    },
  );
  await M(
    401,
    "POST",
    "/api/mailbox-server/{email}",
    { email: "alice@example.org" },
    { json: { password: "wrong password 123" } },
  );
  await M(403, "POST", "/api/mailbox-server/{email}", { email: "spam@example.org" }, { json: { password } });
  await M(
    403,
    "POST",
    "/api/mailbox-server/{email}",
    { email: "change@example.org" },
    { json: { password } },
  );
  await M(
    404,
    "POST",
    "/api/mailbox-server/{email}",
    { email: "nobody@example.org" },
    { json: { password } },
  );
  await M(422, "POST", "/api/mailbox-server/{email}", { email: "alice@example.org" }, { json: {} });
  await M(400, "POST", "/api/mailbox-server/{email}", { email: "no-at-sign" }, { json: { password } });
  await M(
    400,
    "POST",
    "/api/mailbox-server/{email}",
    { email: "alice@example.org" },
    { type: "application/json", body: "{", note: "malformed JSON" },
  );
  await M(
    500,
    "POST",
    "/api/mailbox-server/{email}",
    { email: "broken@example.org" },
    { json: { password } },
  );

  // ---- mta
  const T = (
    expected: number,
    method: string,
    path: string,
    params: Record<string, string | number> = {},
    options: Parameters<Contract["expect"]>[4] = {},
  ) => c.expect(expected, method, path, params, { token: scoped.mta, ...options });
  await T(200, "GET", "/api/mta/domain/{domain}", { domain: "example.org" });
  await T(200, "GET", "/api/mta/domain/{domain}", { domain: "unmanaged.example" });
  await T(400, "GET", "/api/mta/domain/{domain}", { domain: "not%20a%20domain" });
  for (const lookup of ["mailbox", "alias", "senders"]) {
    await T(200, "GET", `/api/mta/${lookup}/{email}`, { email: "alice@example.org" });
    await T(200, "GET", `/api/mta/${lookup}/{email}`, { email: "team@example.org" });
    await T(400, "GET", `/api/mta/${lookup}/{email}`, { email: "no-at-sign" });
  }
  await T(200, "GET", "/api/mta/smtp_quota/{email}", { email: "bob@example.org" });
  await T(404, "GET", "/api/mta/smtp_quota/{email}", { email: "nobody@example.org" });
  await T(400, "GET", "/api/mta/smtp_quota/{email}", { email: "no-at-sign" });
  await T(200, "POST", "/api/mta/auth", {}, { json: { email: "alice@example.org", password } });
  await T(
    401,
    "POST",
    "/api/mta/auth",
    {},
    { json: { email: "alice@example.org", password: "wrong password 123" } },
  );
  await T(403, "POST", "/api/mta/auth", {}, { json: { email: "spam@example.org", password } });
  await T(422, "POST", "/api/mta/auth", {}, { json: { email: "alice@example.org" } });
  await T(400, "POST", "/api/mta/auth", {}, { type: "application/json", body: "{", note: "malformed JSON" });
  // The brute-force policy: five failures for one address, then the door answers 429 for a while.
  for (let i = 0; i < 5; i++)
    await T(
      401,
      "POST",
      "/api/mta/auth",
      {},
      {
        json: { email: "guessed-smtp@example.org", password: "wrong password 123" },
        headers: { "x-client-address": "198.51.100.25" },
      },
    );
  await T(
    429,
    "POST",
    "/api/mta/auth",
    {},
    {
      json: { email: "guessed-smtp@example.org", password },
      headers: { "x-client-address": "198.51.100.25" },
      note: "throttled",
    },
  );

  // ---- webmail
  const W = (expected: number, options: Parameters<Contract["expect"]>[4]) =>
    c.expect(expected, "POST", "/api/webmail/aliases", {}, { token: scoped.webmail, ...options });
  await W(200, { json: { email: "alice@example.org", password } });
  await W(401, { json: { email: "alice@example.org", password: "wrong password 123" } });
  await W(403, { json: { email: "spam@example.org", password } });
  await W(422, { json: { email: "alice@example.org" } });
  await W(400, { type: "application/json", body: "[", note: "malformed JSON" });
  for (let i = 0; i < 5; i++)
    await W(401, {
      json: { email: "guessed-aliases@example.org", password: "wrong password 123" },
      headers: { "x-client-address": "198.51.100.27" },
    });
  await W(429, {
    json: { email: "guessed-aliases@example.org", password },
    headers: { "x-client-address": "198.51.100.27" },
    note: "throttled",
  });
  // The password plugin's change: a user of its own, so no other section's password changes.
  await service.services.users.create({ email: "webmail-pw@example.org", password, mailCrypt: true });
  const P = (expected: number, options: Parameters<Contract["expect"]>[4]) =>
    c.expect(expected, "POST", "/api/webmail/password", {}, { token: scoped.webmail, ...options });
  const renewed = "a brand new passphrase";
  await P(401, {
    json: { email: "webmail-pw@example.org", password: "wrong password 123", newPassword: renewed },
  });
  await P(403, { json: { email: "spam@example.org", password, newPassword: renewed } });
  await P(422, { json: { email: "webmail-pw@example.org", password, newPassword: "short" } });
  await P(422, { json: { email: "webmail-pw@example.org", password } });
  await P(409, {
    json: { email: "broken@example.org", password, newPassword: renewed },
    note: "key cannot be opened",
  });
  await P(400, { type: "application/json", body: "{", note: "malformed JSON" });
  await P(200, { form: { email: "webmail-pw@example.org", password, newPassword: renewed } });
  for (let i = 0; i < 5; i++)
    await P(401, {
      json: { email: "guessed-webmail@example.org", password: "wrong password 123", newPassword: renewed },
    });
  await P(429, {
    json: { email: "guessed-webmail@example.org", password, newPassword: renewed },
    note: "throttled",
  });

  // ---- identity
  const I = (
    expected: number,
    method: string,
    path: string,
    params: Record<string, string | number> = {},
    options: Parameters<Contract["expect"]>[4] = {},
  ) => c.expect(expected, method, path, params, { token: scoped.identity, ...options });
  const org = { domain: "example.org" };
  await I(200, "GET", "/api/identity/{domain}", org, { query: "search=ali&max=5&first=0" });
  await I(400, "GET", "/api/identity/{domain}", org, { query: "max=many" });
  await I(400, "GET", "/api/identity/{domain}", { domain: "not%20a%20domain" });
  await I(404, "GET", "/api/identity/{domain}", { domain: "unmanaged.example" });
  await I(200, "GET", "/api/identity/{domain}/count", org);
  await I(404, "GET", "/api/identity/{domain}/count", { domain: "unmanaged.example" });
  await I(400, "GET", "/api/identity/{domain}/count", { domain: "not%20a%20domain" });
  await I(200, "GET", "/api/identity/{domain}/user/{email}", { ...org, email: "alice" });
  await I(404, "GET", "/api/identity/{domain}/user/{email}", { ...org, email: "nobody@example.org" });
  await I(400, "GET", "/api/identity/{domain}/user/{email}", { domain: "not%20a%20domain", email: "alice" });
  const validate = "/api/identity/{domain}/validate/{email}";
  for (let i = 0; i < 5; i++)
    await I(
      403,
      "POST",
      validate,
      { ...org, email: "guessed-sso@example.org" },
      {
        json: { password: "wrong password 123" },
        headers: { "x-client-address": "198.51.100.26" },
      },
    );
  await I(
    429,
    "POST",
    validate,
    { ...org, email: "guessed-sso@example.org" },
    {
      json: { password },
      headers: { "x-client-address": "198.51.100.26" },
      note: "throttled",
    },
  );
  await I(200, "POST", validate, { ...org, email: "alice@example.org" }, { json: { password } });
  await I(
    200,
    "POST",
    validate,
    { ...org, email: "bob@example.org" },
    { json: { credentialType: "otp", password: currentTotpCode(totpSecret, Date.now()) } },
  );
  await I(
    403,
    "POST",
    validate,
    { ...org, email: "alice@example.org" },
    { json: { password: "wrong password 123" } },
  );
  await I(403, "POST", validate, { ...org, email: "change@example.org" }, { json: { password } });
  await I(
    400,
    "POST",
    validate,
    { ...org, email: "alice@example.org" },
    { json: { credentialType: "webauthn", password } },
  );
  await I(
    404,
    "POST",
    validate,
    { domain: "unmanaged.example", email: "alice@example.org" },
    { json: { password } },
  );
  await I(
    422,
    "POST",
    validate,
    { ...org, email: "alice@example.org" },
    { json: { credentialType: "password" } },
  );
  const configured = "/api/identity/{domain}/configured/{credentialType}/{email}";
  await I(200, "GET", configured, { ...org, credentialType: "password", email: "alice@example.org" });
  await I(200, "GET", configured, { ...org, credentialType: "otp", email: "bob@example.org" });
  await I(404, "GET", configured, { ...org, credentialType: "otp", email: "alice@example.org" });
  await I(404, "GET", configured, { ...org, credentialType: "webauthn", email: "alice@example.org" });
  await I(404, "GET", configured, { ...org, credentialType: "password", email: "nobody@example.org" });
  await I(403, "GET", configured, { ...org, credentialType: "password", email: "change@example.org" });
  await I(400, "GET", configured, { domain: "not%20a%20domain", credentialType: "password", email: "alice" });

  // ---- retention
  const R = (
    expected: number,
    method: string,
    path: string,
    params: Record<string, string | number> = {},
    options: Parameters<Contract["expect"]>[4] = {},
  ) => c.expect(expected, method, path, params, { token: scoped.retention, ...options });
  const touch = "/api/retention/{email}/touch";
  await R(200, "PUT", touch, { email: "alice@example.org" });
  await R(200, "PUT", touch, { email: "alice@example.org" }, { json: { timestamp: 1_700_000_000 } });
  await R(200, "PUT", touch, { email: "alice@example.org" }, { form: { timestamp: "1700000000" } });
  await R(
    400,
    "PUT",
    touch,
    { email: "alice@example.org" },
    { json: { timestamp: 4_000_000_000 }, note: "timestamp in future" },
  );
  await R(400, "PUT", touch, { email: "alice@example.org" }, { json: { timestamp: "soon" } });
  await R(400, "PUT", touch, { email: "no-at-sign" });
  await R(404, "PUT", touch, { email: "nobody@example.org" });
  await R(200, "GET", "/api/retention/users");

  // ---- public: health, metrics, this document
  await c.expect(200, "GET", "/health");
  await c.expect(200, "GET", "/metrics", {}, { token: metricsToken });
  await c.expect(401, "GET", "/metrics", {}, { token: "wrong" });
  await c.expect(200, "GET", "/api/openapi.json");
  // The app's 404 for an unknown path is not an operation: it is checked here only to be {"message"}.
  const unknown = await send(service.url, "GET", "/api/nothing-here");
  assert.deepEqual([unknown.status, JSON.parse(unknown.text)], [404, { message: "Not found" }]);
}
