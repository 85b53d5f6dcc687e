import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { isSitePath } from "../src/http/site-location.ts";
import { startService, type TestService } from "./helpers/service.ts";

/** A GET written byte for byte (no client normalises the path): its status and Location. */
function rawGet(url: string, path: string): Promise<{ status: number; location: string | null }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () =>
      socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`),
    );
    socket.setTimeout(5000, () => socket.destroy());
    let data = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      data += chunk;
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(data)?.[1];
      if (!status) return reject(new Error(`no answer to ${path}`));
      const location = /\r\nlocation: ([^\r]*)\r\n/i.exec(data)?.[1] ?? null;
      resolve({ status: Number(status), location });
    });
  });
}

describe("no redirect leaves the site", () => {
  let service: TestService;
  before(async () => {
    service = await startService({ web: true });
  });
  after(() => service.close());

  // Each would have been answered with a Location of `//evil.example` (the language switch resolves
  // the path, and /static/* matches any rest of it).
  for (const path of [
    "/static/..//evil.example?lang=de",
    "/static/../\\evil.example?lang=en",
    "/static/x/../..//evil.example?lang=de",
    "/static/%2e%2e//evil.example?lang=de",
    "/static/..%2f%2fevil.example?lang=de",
    "/static/..%2F%5Cevil.example?lang=de",
    "/static/..//evil.example",
    "/static//evil.example",
    "//evil.example/?lang=de",
  ]) {
    test(`GET ${path}`, async () => {
      const { status, location } = await rawGet(service.url, path);
      if (location === null) return assert.ok(status >= 400, `${status} without Location`);
      assert.ok(isSitePath(location), `${status} to ${location}`);
      assert.doesNotMatch(location, /evil/);
    });
  }

  test("redirects within the site keep their target", async () => {
    assert.deepEqual(await rawGet(service.url, "/login?lang=de&x=1"), {
      status: 303,
      location: "/login?x=1",
    });
    assert.deepEqual(await rawGet(service.url, "/static/style.css?lang=en"), {
      status: 303,
      location: "/static/style.css",
    });
    assert.deepEqual(await rawGet(service.url, "/account"), { status: 303, location: "/login" });
  });

  test("the rule", () => {
    for (const good of ["/", "/login", "/?notice=x", "/admin/users/a%2Fb", "/static/style.css"])
      assert.equal(isSitePath(good), true, good);
    for (const bad of [
      "//evil.example",
      "/\\evil.example",
      "/%2F%2Fevil.example",
      "/%2f/evil.example",
      "/%5Cevil.example",
      "/\t/evil.example",
      "/a/..//evil.example",
      "/a/../\\evil.example",
      "https://evil.example/",
      "evil.example",
      "/\u0000",
    ])
      assert.equal(isSitePath(bad), false, JSON.stringify(bad));
  });
});
