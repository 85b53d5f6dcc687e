import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { RouteOptions } from "fastify";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { WebClient } from "./helpers/web-client.ts";

/**
 * A NUL (and other control characters) in any address, search or filter: a 4xx or the door's own
 * refusal, never a 500, on every database (PostgreSQL refuses NUL in text with "invalid byte
 * sequence"). The routes are read from the app itself: every API route of the OpenAPI document
 * and every web page, each path parameter and each query parameter holding a NUL.
 */
const nul = "%00";
const control = "%01";

/** A path parameter's hostile value: an address, a domain or an id, each with a NUL inside. */
function hostile(param: string, bad: string): string {
  if (/email|source|address/i.test(param)) return `a${bad}@example.org`;
  if (/domain|name/i.test(param)) return `exa${bad}mple.org`;
  return `x${bad}`;
}

const fill = (url: string, bad: string) =>
  url.replace(/\{(\w+)\}|:(\w+)/g, (_m, a: string | undefined, b: string | undefined) =>
    hostile(a ?? b ?? "", bad),
  );

describe("NUL and control characters in addresses, searches and filters", () => {
  let service: TestService;
  let tokens: Record<string, string>;
  const webRoutes: RouteOptions[] = [];
  let web: WebClient;

  before(async () => {
    service = await startService({ web: true, onWebRoute: (route) => void webRoutes.push(route) });
    const scopes = ["admin", "mailbox-server", "mta", "webmail", "identity", "retention"] as const;
    tokens = {};
    for (const scope of scopes) tokens[scope] = await service.token(scope);
    await service.services.domains.create("example.org");
    await service.services.users.create({ email: "admin@example.org", password, roles: ["ROLE_ADMIN"] });
    await service.services.users.create({ email: "alice@example.org", password, mailCrypt: false });
    web = new WebClient(service.url);
    await web.signIn("admin@example.org");
  });
  after(() => service.close());

  /** The scope a route of the integration or admin API needs (the token guard answers first otherwise). */
  const tokenFor = (path: string): string | undefined => {
    const group = /^\/api\/([\w-]+)\//.exec(path)?.[1];
    return group === undefined ? undefined : tokens[group];
  };

  for (const [label, bad] of [
    ["NUL", nul],
    ["a control character", control],
  ] as const) {
    test(`the APIs: ${label} in every path and query parameter`, async () => {
      const document = (await service.request("GET", "/api/openapi.json")).body;
      const failures: string[] = [];
      for (const [path, operations] of Object.entries<Record<string, any>>(document.paths)) {
        for (const [method, operation] of Object.entries<any>(operations)) {
          const params: { name: string; in: string }[] = operation.parameters ?? [];
          const query = params
            .filter((p) => p.in === "query")
            .map((p) => `${p.name}=${hostile(p.name, bad)}`)
            .join("&");
          if (!params.some((p) => p.in === "path") && query === "") continue;
          const url = `${fill(path, bad)}${query ? `?${query}` : ""}`;
          const token = tokenFor(path);
          const answer = await service.request(method.toUpperCase(), url, {
            ...(token ? { token } : {}),
            ...(method === "get" || method === "delete" ? {} : { json: {} }),
          });
          if (answer.status >= 500)
            failures.push(`${method.toUpperCase()} ${url}: ${answer.status} ${answer.text}`);
        }
      }
      assert.deepEqual(failures, []);
    });

    test(`the sign-in doors and address bodies: ${label} in the address`, async () => {
      const email = decodeURIComponent(`a${bad}@example.org`);
      const failures: string[] = [];
      for (const [path, token, json] of [
        ["/api/mta/auth", tokens.mta, { email, password }],
        ["/api/webmail/aliases", tokens.webmail, { email, password }],
        ["/api/webmail/password", tokens.webmail, { email, password, newPassword: `${password}x` }],
        ["/api/admin/users", tokens.admin, { email, password }],
        ["/api/admin/aliases", tokens.admin, { source: email, destinations: ["alice@example.org"] }],
        ["/api/admin/aliases", tokens.admin, { source: "new@example.org", destinations: [email] }],
        ["/api/admin/domains", tokens.admin, { name: decodeURIComponent(`exa${bad}mple.net`) }],
      ] as const) {
        const answer = await service.request("POST", path, { token, json });
        if (answer.status >= 500 || answer.status < 400)
          failures.push(`POST ${path}: ${answer.status} ${answer.text}`);
      }
      const identity = await service.request(
        "POST",
        `/api/identity/example.org/validate/${encodeURIComponent(email)}`,
        { token: tokens.identity, json: { credentialType: "password", password } },
      );
      if (identity.status >= 500) failures.push(`identity validate: ${identity.status}`);
      assert.deepEqual(failures, []);
    });

    test(`the web pages: ${label} in every path parameter, search and filter, and in the sign-in form`, async () => {
      const failures: string[] = [];
      const filters = ["search", "email", "domain", "type", "status", "since", "actor", "target", "q"]
        .map((name) => `${name}=${hostile(name, bad)}`)
        .join("&");
      for (const route of webRoutes) {
        const methods = [route.method].flat();
        if (!methods.includes("GET") || route.url.includes("*")) continue;
        const url = `${fill(route.url, bad)}?${filters}`;
        const answer = await web.get(url);
        if (answer.status >= 500) failures.push(`GET ${url}: ${answer.status}`);
      }
      const email = decodeURIComponent(`a${bad}@example.org`);
      const visitor = new WebClient(service.url);
      for (const [page, form] of [
        ["/login", { email, password }],
        ["/recovery", { email, token: "x" }],
      ] as const) {
        await visitor.get(page);
        const answer = await visitor.post(page, form);
        if (answer.status >= 500) failures.push(`POST ${page}: ${answer.status}`);
      }
      assert.deepEqual(failures, []);
    });
  }
});
