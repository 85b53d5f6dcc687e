import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ownerOrigin } from "../src/accounts/security-events.ts";
import type { CheckOrigin } from "../src/accounts/sign-in.ts";
import { derivationsSoFar } from "../src/credentials/derivations.ts";
import { hashPassword } from "../src/credentials/passwords.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * Review of the one-derivation sign-in (issue 30): an old password must never sign in, nor yield a
 * proof, once the password changed, however the writes interleave.
 */

let nextClient = 0;
const web = (): CheckOrigin => ({
  door: "web",
  client: { address: `10.7.${Math.floor(++nextClient / 250)}.${(nextClient % 250) + 1}` },
});

/** Resolves once the process has started a derivation since `since` (the sign-in is past its read). */
async function derivationStarted(since: number): Promise<void> {
  while (derivationsSoFar() === since) await new Promise((resolve) => setImmediate(resolve));
}

describe("sign-in racing a password change", () => {
  let service: TestService;
  before(async () => {
    service = await startService();
    await service.services.domains.create("example.org");
  });
  after(() => service?.close());

  test("level 3: a sign-in with the old password that loses the key-making race to a password change is refused, and its proof binds nothing", async () => {
    const { users, settings, signIn, lifecycle, database, pool } = service.services;
    await settings.update({ mail_crypt: 0 });
    await users.create({ email: "raced@example.org", password, mailCrypt: false });
    await settings.update({ mail_crypt: 3 });
    const newHash = await hashPassword("the owner's new password", pool);
    try {
      const since = derivationsSoFar();
      // The attacker signs in with the old (stolen) password, the account's first at level 3 ...
      const racing = signIn.signIn("raced@example.org", password, web());
      await derivationStarted(since);
      // ... while the owner's password change (no keys: none are made by it) is written.
      await database.db
        .updateTable("users")
        .set({ password: newHash })
        .where("email", "=", "raced@example.org")
        .execute();
      const raced = await racing;
      // What an attacker does with the proof: a new recovery token makes keys sealed under the old
      // password and binds them to the new hash.
      if (raced.kind === "ok" && raced.proof)
        await lifecycle
          .renewRecoveryToken(raced.proof, ownerOrigin("web", "10.7.9.9"))
          .catch(() => undefined);
      const old = await signIn.signIn("raced@example.org", password, web());
      const owner = await signIn.signIn("raced@example.org", "the owner's new password", web());
      assert.deepEqual(
        { raced: raced.kind, oldAfterwards: old.kind, owner: owner.kind },
        { raced: "wrong_password", oldAfterwards: "wrong_password", owner: "ok" },
      );
    } finally {
      await settings.update({ mail_crypt: 2 });
    }
  });
  test("level 3: a sign-in racing the account's deletion is refused", async () => {
    const { users, settings, signIn, lifecycle } = service.services;
    await settings.update({ mail_crypt: 0 });
    await users.create({ email: "going@example.org", password, mailCrypt: false });
    await settings.update({ mail_crypt: 3 });
    try {
      const since = derivationsSoFar();
      const racing = signIn.signIn("going@example.org", password, web());
      await derivationStarted(since);
      await lifecycle.delete("going@example.org", ownerOrigin("console"));
      assert.equal((await racing).kind, "wrong_password");
    } finally {
      await settings.update({ mail_crypt: 2 });
    }
  });
});
