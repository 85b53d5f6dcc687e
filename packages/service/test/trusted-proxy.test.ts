import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { scratchDatabase } from "./helpers/databases.ts";
import { password } from "./helpers/fixtures.ts";
import { startServiceProcess } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";

/** The client address the admin API recorded for its last change (the audit log's newest entry). */
async function recordedAddress(service: TestService, token: string, forwardedFor?: string) {
  const name = `proxy${Math.random().toString(36).slice(2, 8)}.org`;
  const created = await service.request("POST", "/api/admin/domains", {
    token,
    json: { name },
    headers: forwardedFor ? { "x-forwarded-for": forwardedFor } : {},
  });
  assert.equal(created.status, 201, created.text);
  const log = await service.request("GET", "/api/admin/audit-log?limit=1", { token });
  return log.body.items[0]?.clientAddress as string;
}

/** A form posted as a browser does, the redirect not followed. */
const postForm = (
  service: TestService,
  path: string,
  headers: Record<string, string>,
  form: Record<string, string>,
) =>
  fetch(`${service.url}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { ...headers, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(form).toString(),
  });

/** Cookies of an answer by name: the whole Set-Cookie line of each. */
const setCookies = (headers: Headers) =>
  new Map(headers.getSetCookie().map((line) => [line.split("=")[0] ?? "", line]));

describe("TRUST_PROXY with the proxies' addresses", () => {
  let service: TestService;
  let token: string;
  before(async () => {
    service = await startService({ web: true, trustProxy: "127.0.0.1,10.0.0.0/8" });
    token = await service.token("admin");
    await service.services.domains.create("example.org");
    await service.services.users.create({ email: "alice@example.org", password, mailCrypt: false });
  });
  after(() => service.close());

  test("the client is the right-most X-Forwarded-For address not in the list", async () => {
    // The left-most entries are whatever the client wrote; 10.1.2.3 is a listed (inner) proxy.
    assert.equal(
      await recordedAddress(service, token, "198.51.100.66, 203.0.113.9, 10.1.2.3"),
      "203.0.113.9",
    );
    assert.equal(await recordedAddress(service, token, "203.0.113.9"), "203.0.113.9");
    assert.equal(await recordedAddress(service, token), "127.0.0.1");
  });

  test("over TLS (X-Forwarded-Proto: https) the CSRF cookie is __Host-csrf and Secure, like the session's", async () => {
    const https = { "x-forwarded-proto": "https" };
    const page = await service.request("GET", "/login", { headers: https });
    const cookies = setCookies(page.headers);
    const csrf = cookies.get("__Host-csrf");
    assert.ok(csrf, [...cookies.keys()].join(", "));
    assert.match(csrf, /; Path=\/(;|$)/);
    assert.match(csrf, /; Secure(;|$)/);
    assert.match(csrf, /; HttpOnly(;|$)/);
    assert.doesNotMatch(csrf, /; Domain=/i, "host-only");
    assert.equal(cookies.has("csrf"), false, "no plain csrf cookie over TLS");
    const secret = csrf.split(";")[0] ?? "";
    const csrfToken = /name="_csrf" value="([^"]+)"/.exec(page.text)?.[1] ?? "";

    // The form posted back with the __Host- cookie signs in (and sets the __Host- session).
    const form = { _csrf: csrfToken, email: "alice@example.org", password };
    const signIn = await postForm(service, "/login", { ...https, cookie: secret }, form);
    assert.equal(signIn.status, 303);
    assert.equal(signIn.headers.get("location"), "/account");
    assert.ok(setCookies(signIn.headers).get("__Host-session")?.includes("; Secure"));

    // A plain `csrf` cookie (one a sibling host or a plain-HTTP answer could plant) does not count over TLS.
    const planted = await postForm(
      service,
      "/login",
      { ...https, cookie: `csrf=${secret.split("=")[1]}` },
      form,
    );
    assert.equal(planted.status, 403);
  });

  test("over plain HTTP the CSRF cookie stays `csrf`, without Secure", async () => {
    const page = await service.request("GET", "/login");
    const csrf = setCookies(page.headers).get("csrf");
    assert.ok(csrf);
    assert.doesNotMatch(csrf, /Secure/);
    assert.equal(setCookies(page.headers).has("__Host-csrf"), false);
  });
});

describe("TRUST_PROXY=true", () => {
  let service: TestService;
  before(async () => {
    service = await startService({ trustProxy: true });
  });
  after(() => service.close());

  test("takes the left-most X-Forwarded-For entry, which the client wrote (why the docs recommend a list)", async () => {
    const token = await service.token("admin");
    assert.equal(await recordedAddress(service, token, "198.51.100.66, 203.0.113.9"), "198.51.100.66");
  });

  test("the service warns at start, naming the risk", async () => {
    const scratch = await scratchDatabase("mas-proxy-");
    const running = await startServiceProcess({ DATABASE_URL: scratch.url, TRUST_PROXY: "true" });
    try {
      const deadline = Date.now() + 10_000;
      while (!running.output().includes('"listening"') && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      const warning = running
        .output()
        .split("\n")
        .find((line) => line.includes("TRUST_PROXY=true"));
      assert.ok(warning, running.output());
      assert.equal(JSON.parse(warning).level, 40, "a warning");
      assert.match(warning, /left-most X-Forwarded-For/);
    } finally {
      await running.stop("SIGKILL");
      await scratch.remove();
    }
  });
});
