import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { wkdHash } from "../src/openpgp/wkd.ts";
import { startService, type TestService } from "./helpers/service.ts";

const vectors = JSON.parse(readFileSync(new URL("./credentials/vectors.json", import.meta.url), "utf8"));

describe("well-known endpoints", () => {
  let service: TestService;
  let binaryKey: Uint8Array;

  before(async () => {
    service = await startService();
    const { domains, database } = service.services;
    const domain = await domains.create("example.org");
    await domains.create("example.com");
    const { publicKey } = await openpgp.generateKey({
      type: "ecc",
      curve: "curve25519Legacy",
      userIDs: [{ email: "alice@example.org" }],
      format: "object",
    });
    binaryKey = publicKey.write();
    const now = Math.floor(Date.now() / 1000);
    await database.db
      .insertInto("openpgp_keys")
      .values({
        email: "alice@example.org",
        domain_id: domain.id,
        key_id: publicKey.getKeyID().toHex().toUpperCase(),
        fingerprint: publicKey.getFingerprint().toUpperCase(),
        expires_at: null,
        key_data: Buffer.from(binaryKey).toString("base64"),
        wkd_hash: wkdHash("alice"),
        uploader_id: null,
        created_at: now,
        updated_at: now,
      })
      .execute();
  });
  after(() => service.close());

  test("the WKD hash matches the known-answer vector", () => {
    assert.equal(wkdHash(vectors.wkd.localPart), vectors.wkd.hash);
    assert.equal(wkdHash("Alice"), vectors.wkd.hash);
  });

  test("WKD serves the binary key with CORS", async () => {
    const res = await fetch(
      `${service.url}/.well-known/openpgpkey/example.org/hu/${vectors.wkd.hash}?l=alice`,
    );
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/octet-stream");
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    assert.deepEqual(new Uint8Array(await res.arrayBuffer()), binaryKey);
    const key = await openpgp.readKey({ binaryKey });
    assert.equal((await key.getPrimaryUser()).user.userID?.email, "alice@example.org");
  });

  test("WKD answers 404 for other domains and unknown hashes", async () => {
    for (const path of [
      `/example.com/hu/${vectors.wkd.hash}`,
      `/example.org/hu/${wkdHash("bob")}`,
      "/example.org/hu/not-a-hash",
    ]) {
      const res = await fetch(`${service.url}/.well-known/openpgpkey${path}`);
      assert.equal(res.status, 404, path);
      assert.equal(res.headers.get("access-control-allow-origin"), "*");
    }
    // A NUL is no input anywhere (http/params.ts): refused before any lookup.
    const nul = await fetch(`${service.url}/.well-known/openpgpkey/exa%00mple/hu/x`);
    assert.equal(nul.status, 400);
  });

  test("WKD policy is empty for any domain", async () => {
    const res = await fetch(`${service.url}/.well-known/openpgpkey/anything.net/policy`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "");
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain/);
  });

  const mtaSts = async (host: string) => {
    const { request } = await import("node:http");
    return new Promise<{ status: number; body: string; type: string }>((resolve, reject) => {
      const url = new URL(service.url);
      const req = request(
        { host: url.hostname, port: url.port, path: "/.well-known/mta-sts.txt", headers: { host } },
        (res) => {
          let body = "";
          res.on("data", (chunk) => (body += chunk));
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, body, type: String(res.headers["content-type"]) }),
          );
        },
      );
      req.on("error", reject);
      req.end();
    });
  };

  test("MTA-STS policy for mta-sts.<managed domain>, CRLF lines", async () => {
    assert.equal((await mtaSts("mta-sts.example.org")).status, 404, "no MX configured yet for mode testing");
    await service.services.settings.update({
      mta_sts_mx: "mx1.example.org\n\n mx2.example.org \n",
      mta_sts_mode: "enforce",
    });
    const res = await mtaSts("MTA-STS.example.org:443");
    assert.equal(res.status, 200);
    assert.match(res.type, /^text\/plain/);
    assert.equal(
      res.body,
      "version: STSv1\r\nmode: enforce\r\nmx: mx1.example.org\r\nmx: mx2.example.org\r\nmax_age: 604800\r\n",
    );
    for (const host of ["example.org", "mta-sts.unmanaged.net", "mta-sts.", "localhost"]) {
      assert.equal((await mtaSts(host)).status, 404, host);
    }
    await service.services.settings.update({ mta_sts_mx: "", mta_sts_mode: "none" });
    assert.equal(
      (await mtaSts("mta-sts.example.com")).body,
      "version: STSv1\r\nmode: none\r\nmax_age: 604800\r\n",
    );
  });
});
