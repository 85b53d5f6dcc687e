import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { md5Crypt } from "../src/credentials/md5-crypt.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * A wrong password for an imported legacy hash costs what an unknown address costs (one Argon2
 * verification), so the time of a "no" does not tell an imported account from no account; a right
 * one still signs in and is rehashed to Argon2id. Through the real sign-in service on the database
 * TEST_DATABASE_URL names, without the throttle (it would answer early and hide the work).
 */

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

describe("legacy password hashes: the time of a wrong password", () => {
  let service: TestService;

  before(async () => {
    service = await startService();
    const { domains, users, database } = service.services;
    await domains.create("example.org");
    await users.create({ email: "legacy@example.org", password, mailCrypt: false });
    const legacy = md5Crypt(password, "$1$aB3.dE/9$") ?? "";
    assert.match(legacy, /^\$1\$/);
    await database.db
      .updateTable("users")
      .set({ password: legacy })
      .where("email", "=", "legacy@example.org")
      .execute();
  });
  after(() => service?.close());

  test("a wrong password on a $1$ user takes about as long as one on an unknown address (median of 7, within 0.5-2x)", async () => {
    const { signIn } = service.services;
    const timed = async (email: string) => {
      const start = process.hrtime.bigint();
      const result = await signIn.signIn(email, "not the password at all");
      const took = Number(process.hrtime.bigint() - start) / 1e6;
      return { kind: result.kind, took };
    };
    // Warm both paths (the legacy crypt's worker thread starts on first use).
    await timed("legacy@example.org");
    await timed("nobody@example.org");
    const legacy: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 7; i++) {
      const a = await timed("legacy@example.org");
      const b = await timed("nobody@example.org");
      assert.equal(a.kind, "wrong_password");
      assert.equal(b.kind, "unknown");
      legacy.push(a.took);
      unknown.push(b.took);
    }
    const ratio = median(legacy) / median(unknown);
    assert.ok(
      ratio >= 0.5 && ratio <= 2,
      `legacy ${median(legacy).toFixed(1)} ms, unknown ${median(unknown).toFixed(1)} ms (ratio ${ratio.toFixed(2)})`,
    );
  });

  test("the right password still signs in and the hash becomes Argon2id", async () => {
    const result = await service.services.signIn.signIn("legacy@example.org", password);
    assert.equal(result.kind, "ok");
    const stored = await service.services.users.findByEmail("legacy@example.org");
    assert.match(stored?.passwordHash ?? "", /^\$argon2id\$v=19\$m=65536,t=4,p=1\$/);
    assert.equal((await service.services.signIn.signIn("legacy@example.org", password)).kind, "ok");
  });
});
