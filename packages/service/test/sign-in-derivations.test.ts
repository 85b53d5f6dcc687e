import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { CheckOrigin } from "../src/accounts/sign-in.ts";
import { derivationsSoFar } from "../src/credentials/derivations.ts";
import { sealSecretBox } from "../src/credentials/mailcrypt.ts";
import { md5Crypt } from "../src/credentials/md5-crypt.ts";
import { secretBoxBinding } from "../src/credentials/password-check.ts";
import { hashPassword } from "../src/credentials/passwords.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * One Argon2 derivation per sign-in (docs/design.md, "One derivation per sign-in"), counted, not
 * timed: for every kind of account, at the mail server's door (the MailCrypt key opened) and at the
 * web's, a right and a wrong password start the same number of derivations, and an account in the
 * current form (or no account at all) costs exactly one. Accounts in older forms (userli's hashes,
 * a box not bound to its hash yet) cost more, the same for right and wrong, until their first right
 * sign-in brings them to the current form. Through the real sign-in service, guard included, on the
 * database TEST_DATABASE_URL names; each attempt comes from its own address so the guard's delays
 * never answer unchecked.
 */

const vectors = JSON.parse(readFileSync(new URL("./credentials/vectors.json", import.meta.url), "utf8")) as {
  passwordHashes: { password: string; argon2id: string };
  mailCryptKeyPair: { privateKey: string; publicKey: string };
};

let nextClient = 0;
const passdb = (): CheckOrigin & { unlockMailCrypt: true } => ({
  door: "passdb",
  client: { address: `10.9.${Math.floor(++nextClient / 250)}.${(nextClient % 250) + 1}` },
  unlockMailCrypt: true,
});
const web = (): CheckOrigin & { deferActivity: true } => ({
  door: "web",
  client: { address: `10.8.${Math.floor(++nextClient / 250)}.${(nextClient % 250) + 1}` },
  deferActivity: true,
});

describe("sign-in: the same number of Argon2 derivations for a right and a wrong password", () => {
  let service: TestService;

  const counted = async <T>(work: () => Promise<T>): Promise<{ result: T; derivations: number }> => {
    const before = derivationsSoFar();
    const result = await work();
    return { result, derivations: derivationsSoFar() - before };
  };
  const signIn = (email: string, secret: string, origin: CheckOrigin) =>
    counted(() => service.services.signIn.signIn(email, secret, origin));
  const stored = (email: string) =>
    service.services.database.db
      .selectFrom("users")
      .select(["password", "mail_crypt_secret_box", "secret_box_binding"])
      .where("email", "=", email)
      .executeTakeFirstOrThrow();
  const setStored = (email: string, values: { password?: string; mail_crypt_secret_box?: string | null }) =>
    service.services.database.db.updateTable("users").set(values).where("email", "=", email).execute();

  /** Right and wrong at both doors: the counts, which must be equal door by door. */
  async function rightAndWrong(email: string, right = password) {
    const counts: Record<string, { right: number; wrong: number }> = {};
    for (const [name, origin] of [
      ["passdb", passdb],
      ["web", web],
    ] as const) {
      const wrong = await signIn(email, `${right} but wrong`, origin());
      assert.notEqual(wrong.result.kind, "ok");
      assert.notEqual(wrong.result.kind, "throttled");
      const good = await signIn(email, right, origin());
      assert.notEqual(good.result.kind, "throttled");
      counts[name] = { right: good.derivations, wrong: wrong.derivations };
      assert.equal(
        good.derivations,
        wrong.derivations,
        `${email} at ${name}: right ${good.derivations}, wrong ${wrong.derivations}`,
      );
    }
    return counts;
  }

  /**
   * An account as userli stores it: its Argon2id hash (t=4) and the vectors' key pair in a box sealed
   * under the same password; `bound` as if a box had been bound to that older hash. Returns the box.
   */
  async function userliAccount(email: string, { bound }: { bound: boolean }): Promise<string> {
    const userli = vectors.passwordHashes;
    await service.services.users.create({ email, password, mailCrypt: false });
    const { pool } = service.services;
    const box = await sealSecretBox(vectors.mailCryptKeyPair.privateKey, userli.password, pool);
    await service.services.database.db
      .updateTable("users")
      .set({
        password: userli.argon2id,
        mail_crypt: 1,
        mail_crypt_public_key: vectors.mailCryptKeyPair.publicKey,
        mail_crypt_secret_box: box,
        secret_box_binding: bound ? secretBoxBinding(userli.argon2id, box) : null,
      })
      .where("email", "=", email)
      .execute();
    return box;
  }

  before(async () => {
    service = await startService();
    const { domains, settings } = service.services;
    await domains.create("example.org");
    await settings.update({ mail_crypt: 2 });
  });
  after(() => service?.close());

  test("an account in the current form costs one, with MailCrypt (the box) or without (the hash), right or wrong", async () => {
    const { users } = service.services;
    await users.create({ email: "plain@example.org", password, mailCrypt: false });
    await users.create({ email: "crypt@example.org", password, mailCrypt: true });
    assert.match((await stored("crypt@example.org")).secret_box_binding ?? "", /^[\w-]{43}$/);
    for (const email of ["plain@example.org", "crypt@example.org"])
      assert.deepEqual(await rightAndWrong(email), {
        passdb: { right: 1, wrong: 1 },
        web: { right: 1, wrong: 1 },
      });
    // The one derivation opened the box: passdb hands out the key without a second.
    const { result, derivations } = await signIn("crypt@example.org", password, passdb());
    assert.equal(derivations, 1);
    assert.equal(result.kind === "ok" && result.mailCrypt.state, "unlocked");
  });

  test("an unknown address costs the decoy's one; an empty or over-long password costs nothing anywhere", async () => {
    for (const origin of [passdb, web]) {
      const unknown = await signIn("nobody@example.org", password, origin());
      assert.equal(unknown.result.kind, "unknown");
      assert.equal(unknown.derivations, 1);
    }
    for (const email of ["nobody@example.org", "plain@example.org", "crypt@example.org"])
      for (const secret of ["", "x".repeat(4097)]) {
        const { derivations } = await signIn(email, secret, web());
        assert.equal(derivations, 0, `${email}, ${secret.length} characters`);
      }
  });

  test("a right password refused for the account's state costs what a wrong one does", async () => {
    const { users } = service.services;
    await users.create({ email: "spam@example.org", password, mailCrypt: true, roles: ["ROLE_SPAM"] });
    await users.create({
      email: "change@example.org",
      password,
      mailCrypt: false,
      passwordChangeRequired: true,
    });
    const spam = await signIn("spam@example.org", password, passdb());
    assert.equal(spam.result.kind, "spam");
    const change = await signIn("change@example.org", password, passdb());
    assert.equal(change.result.kind, "password_change_required");
    for (const email of ["spam@example.org", "change@example.org"])
      assert.deepEqual(await rightAndWrong(email), {
        passdb: { right: 1, wrong: 1 },
        web: { right: 1, wrong: 1 },
      });
  });

  test("userli's forms: equal for right and wrong, then the first right sign-in brings the account to one", async () => {
    const { users } = service.services;
    // An md5-crypt hash without MailCrypt: the crypt plus the new hash (or the decoy for a wrong one).
    await users.create({ email: "md5@example.org", password, mailCrypt: false });
    await setStored("md5@example.org", { password: md5Crypt(password, "$1$aB3.dE/9$") ?? "" });
    const md5Wrong = await signIn("md5@example.org", "not it", web());
    const md5Right = await signIn("md5@example.org", password, web());
    assert.deepEqual([md5Wrong.derivations, md5Right.derivations], [1, 1]);
    assert.equal(md5Right.result.kind, "ok");
    assert.match((await stored("md5@example.org")).password, /^\$argon2id\$v=19\$m=65536,t=2,p=1\$/);
    assert.deepEqual(await rightAndWrong("md5@example.org"), {
      passdb: { right: 1, wrong: 1 },
      web: { right: 1, wrong: 1 },
    });

    // userli's own account: its Argon2id at t=4 and its box (sealed under the same password), unbound.
    const userli = vectors.passwordHashes;
    const box = await userliAccount("userli@example.org", { bound: false });
    const wrong = await signIn("userli@example.org", "not it", passdb());
    assert.equal(wrong.result.kind, "wrong_password");
    const right = await signIn("userli@example.org", userli.password, passdb());
    // The hash, the box, and the new hash (the decoy in its place for the wrong one).
    assert.deepEqual([wrong.derivations, right.derivations], [3, 3]);
    assert.equal(right.result.kind === "ok" && right.result.mailCrypt.state, "unlocked");
    assert.equal(
      right.result.kind === "ok" &&
        right.result.mailCrypt.state === "unlocked" &&
        right.result.mailCrypt.privateKey,
      vectors.mailCryptKeyPair.privateKey,
    );
    const now = await stored("userli@example.org");
    assert.match(now.password, /^\$argon2id\$v=19\$m=65536,t=2,p=1\$/);
    assert.equal(now.mail_crypt_secret_box, box, "the box itself is userli's, unchanged");
    assert.match(now.secret_box_binding ?? "", /^[\w-]{43}$/);
    assert.deepEqual(await rightAndWrong("userli@example.org", userli.password), {
      passdb: { right: 1, wrong: 1 },
      web: { right: 1, wrong: 1 },
    });
  });

  test("a box bound to a hash not in the current form is checked in full, so that hash is replaced", async () => {
    const userli = vectors.passwordHashes;
    await userliAccount("bound-old@example.org", { bound: true });
    const wrong = await signIn("bound-old@example.org", "not it", web());
    const right = await signIn("bound-old@example.org", userli.password, web());
    assert.deepEqual([wrong.derivations, right.derivations], [3, 3]);
    assert.match((await stored("bound-old@example.org")).password, /^\$argon2id\$v=19\$m=65536,t=2,p=1\$/);
    assert.deepEqual(await rightAndWrong("bound-old@example.org", userli.password), {
      passdb: { right: 1, wrong: 1 },
      web: { right: 1, wrong: 1 },
    });
  });

  test("a box sealed under an old password (userli's bug 8) never lets the old password in, and stays unbound", async () => {
    const { users } = service.services;
    await users.create({ email: "reset@example.org", password, mailCrypt: true });
    const before = await stored("reset@example.org");
    // userli's reset below level 2: a new hash, the box still sealed under the old password.
    await setStored("reset@example.org", {
      password: await hashPassword("the new password", service.services.pool),
    });
    const old = await signIn("reset@example.org", password, passdb());
    assert.equal(old.result.kind, "wrong_password");
    const fresh = await signIn("reset@example.org", "the new password", passdb());
    assert.equal(fresh.result.kind, "ok");
    assert.equal(fresh.result.kind === "ok" && fresh.result.mailCrypt.state, "failed");
    // The hash and the box, right or wrong: the box does not open with the new password.
    assert.deepEqual([old.derivations, fresh.derivations], [2, 2]);
    const now = await stored("reset@example.org");
    assert.equal(now.secret_box_binding, before.secret_box_binding, "no new binding was written");
    assert.deepEqual(await rightAndWrong("reset@example.org", "the new password"), {
      passdb: { right: 2, wrong: 2 },
      web: { right: 2, wrong: 2 },
    });
  });

  test("level 3: a right password that makes the keys costs what a wrong one does; the new box is bound", async () => {
    const { users, settings } = service.services;
    await settings.update({ mail_crypt: 0 });
    await users.create({ email: "later@example.org", password, mailCrypt: false });
    await users.create({ email: "later-spam@example.org", password, mailCrypt: false, roles: ["ROLE_SPAM"] });
    await settings.update({ mail_crypt: 3 });
    try {
      const wrong = await signIn("later@example.org", "not it", passdb());
      const spam = await signIn("later-spam@example.org", password, passdb());
      assert.equal(spam.result.kind, "spam");
      const right = await signIn("later@example.org", password, passdb());
      // The hash, then the keys' box (the decoy in its place for a refusal).
      assert.deepEqual([wrong.derivations, spam.derivations, right.derivations], [2, 2, 2]);
      assert.equal(right.result.kind === "ok" && right.result.mailCrypt.state, "unlocked");
      assert.match((await stored("later@example.org")).secret_box_binding ?? "", /^[\w-]{43}$/);
      assert.deepEqual(await rightAndWrong("later@example.org"), {
        passdb: { right: 1, wrong: 1 },
        web: { right: 1, wrong: 1 },
      });
    } finally {
      await settings.update({ mail_crypt: 2 });
    }
  });

  test("a binding that no longer matches its hash and box is not trusted: the box's password alone is refused", async () => {
    const { users } = service.services;
    await users.create({ email: "moved@example.org", password, mailCrypt: true });
    // A write that replaced the hash and forgot the box and its binding.
    await setStored("moved@example.org", {
      password: await hashPassword("another password", service.services.pool),
    });
    const boxOnly = await signIn("moved@example.org", password, web());
    assert.equal(boxOnly.result.kind, "wrong_password");
    const hashOnly = await signIn("moved@example.org", "another password", web());
    assert.equal(hashOnly.result.kind, "ok");
    assert.deepEqual([boxOnly.derivations, hashOnly.derivations], [2, 2]);
  });

  test("re-confirming the password costs one, right or wrong, and brings an old form to the current one", async () => {
    const { users, signIn: signInService } = service.services;
    await users.create({ email: "confirm@example.org", password, mailCrypt: true });
    const user = await users.findByEmail("confirm@example.org");
    assert.ok(user);
    const confirm = (secret: string) =>
      counted(() =>
        signInService.confirmPassword(user, secret, web()).then(
          () => "ok",
          () => "refused",
        ),
      );
    assert.deepEqual(await confirm("not it"), { result: "refused", derivations: 1 });
    assert.deepEqual(await confirm(password), { result: "ok", derivations: 1 });
    await setStored("confirm@example.org", { password: md5Crypt(password, "$1$xY3.dE/9$") ?? "" });
    // The crypt, the box, and the new hash (the decoy for the wrong one).
    assert.deepEqual(await confirm("not it"), { result: "refused", derivations: 2 });
    assert.deepEqual(await confirm(password), { result: "ok", derivations: 2 });
    assert.deepEqual(await confirm(password), { result: "ok", derivations: 1 });
  });
});
