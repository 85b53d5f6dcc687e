import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import type { Browser, Page } from "playwright-core";
import { wkdHash } from "../../src/openpgp/wkd.ts";
import {
  browserUnavailable,
  fillByLabel,
  launchBrowser,
  newContextPage,
  screenshot,
  seriousViolations,
  signInOnPage,
} from "../helpers/browser.ts";
import { password } from "../helpers/fixtures.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

const spaced = (hex: string) => {
  const groups = hex.toUpperCase().match(/.{4}/g) ?? [];
  return `${groups.slice(0, 5).join(" ")}  ${groups.slice(5).join(" ")}`;
};

describe("web: the user's OpenPGP keys, published through WKD (real Chromium)", {
  skip: skip ?? false,
}, () => {
  let service: TestService;
  let browser: Browser;
  let randomAlias: string;

  before(async () => {
    service = await startService({ web: true });
    browser = await launchBrowser();
    const { domains, users, userAliases } = service.services;
    await domains.create("example.org");
    const { user: carol } = await users.create({ email: "carol@example.org", password, mailCrypt: false });
    await users.create({ email: "alice@example.org", password, mailCrypt: false });
    await userAliases.createCustom(carol, "carol.pgp");
    randomAlias = (await userAliases.createRandom(carol)).source;
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  const wkd = (localPart: string) =>
    fetch(`${service.url}/.well-known/openpgpkey/example.org/hu/${wkdHash(localPart)}?l=${localPart}`);

  const upload = async (page: Page, input: { identity?: string; text?: string; file?: Buffer }) => {
    if (input.identity) await page.getByLabel("For the address").selectOption(input.identity);
    await page.getByLabel("Or paste the key").fill(input.text ?? "");
    if (input.file)
      await page.getByLabel("Key file").setInputFiles({
        name: "key.gpg",
        mimeType: "application/octet-stream",
        buffer: input.file,
      });
    await page.getByRole("button", { name: "Upload key" }).click();
  };

  test("a key pasted on the page is served by WKD at once (only the address's user ID); a binary key file for a custom alias too", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "carol@example.org", password);
    await page.getByRole("link", { name: "OpenPGP key" }).click();
    await page.waitForURL(`${service.url}/account/openpgp`);
    const options = await page.getByLabel("For the address").locator("option").allInnerTexts();
    assert.deepEqual(
      options,
      ["carol@example.org", "carol.pgp@example.org"],
      "random aliases are no identities",
    );
    assert.ok(!options.includes(randomAlias));
    assert.deepEqual(await seriousViolations(page), []);
    assert.equal((await wkd("carol")).status, 404);

    const { publicKey } = await openpgp.generateKey({
      userIDs: [{ name: "Carol", email: "carol@example.org" }, { email: "carol@elsewhere.example" }],
      format: "armored",
    });
    const key = await openpgp.readKey({ armoredKey: publicKey });
    await upload(page, { identity: "carol@example.org", text: publicKey });
    await page.waitForURL(`${service.url}/account/openpgp`);
    assert.match(await page.locator(".flash-success").innerText(), /Your OpenPGP key got uploaded/);
    const card = page.locator(".identities li", { hasText: "carol@example.org" }).first();
    const shown = await card.innerText();
    assert.match(shown, new RegExp(key.getKeyID().toHex().toUpperCase()));
    assert.ok(shown.includes(spaced(key.getFingerprint())), shown);
    assert.match(shown, /Expires\s+never/);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "openpgp");

    const served = await wkd("carol");
    assert.equal(served.status, 200);
    const published = await openpgp.readKey({ binaryKey: new Uint8Array(await served.arrayBuffer()) });
    assert.equal(published.getFingerprint(), key.getFingerprint());
    assert.deepEqual(
      published.users.map((user) => user.userID?.email),
      ["carol@example.org"],
      "the other address's user ID is not published",
    );

    // A binary key file, expiring, for the custom alias.
    const expiring = await openpgp.generateKey({
      userIDs: [{ email: "carol.pgp@example.org" }],
      keyExpirationTime: 3600 * 24 * 365,
      format: "binary",
    });
    await upload(page, { identity: "carol.pgp@example.org", file: Buffer.from(expiring.publicKey) });
    await page.waitForURL(`${service.url}/account/openpgp`);
    const aliasCard = page.locator(".identities li", { hasText: "carol.pgp@example.org" });
    assert.match(await aliasCard.innerText(), /Expires\s+\d{1,2} \w{3} \d{4}/);
    const aliasServed = await wkd("carol.pgp");
    assert.equal(aliasServed.status, 200);
    assert.deepEqual(new Uint8Array(await aliasServed.arrayBuffer()).length > 100, true);
    await context.close();
  });

  test("refusals next to the field: none or both given, no OpenPGP data, no key for the address, more than one; only own identities", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "carol@example.org", password);
    await page.goto(`${service.url}/account/openpgp`);
    const { publicKey: mine } = await openpgp.generateKey({ userIDs: [{ email: "carol@example.org" }] });
    const { publicKey: another } = await openpgp.generateKey({ userIDs: [{ email: "carol@example.org" }] });
    const { publicKey: foreign } = await openpgp.generateKey({ userIDs: [{ email: "dave@example.net" }] });
    const errorOf = (field: string) => page.locator(`#field-${field}-error`).innerText();

    await upload(page, {});
    assert.match(await errorOf("keyFile"), /choose a file or paste a key, not both/);
    assert.deepEqual(await seriousViolations(page), []);
    await upload(page, { text: mine, file: Buffer.from(mine) });
    assert.match(await errorOf("keyFile"), /not both/);
    await upload(page, { text: "hello, this is no key" });
    assert.match(await errorOf("keyText"), /doesn't contain OpenPGP data/);
    assert.equal(await page.getByLabel("Or paste the key").inputValue(), "hello, this is no key");
    await upload(page, { file: Buffer.from("not a key either") });
    assert.match(await errorOf("keyFile"), /doesn't contain OpenPGP data/);
    // Past the importer's limit (1 MiB binary): cut at the upload limit and refused, not parsed.
    await upload(page, { file: Buffer.alloc(3 * 1024 * 1024, 0x99) });
    assert.match(await errorOf("keyFile"), /The key is too large/);
    await upload(page, { text: foreign });
    assert.match(await errorOf("keyText"), /No key for \S+ found in the uploaded data/);
    await upload(page, { text: `${mine}\n${another}` });
    assert.match(await errorOf("keyText"), /More than one key for your mail address/);
    assert.deepEqual(await seriousViolations(page), []);

    // The identity field is a choice, but the server decides: another user's address and a random
    // alias are refused with the form's own CSRF token.
    const token = await page.locator('input[name="_csrf"]').first().inputValue();
    for (const email of ["alice@example.org", randomAlias]) {
      const answer = await page.request.post(`${service.url}/account/openpgp`, {
        multipart: { _csrf: token, email, keyText: mine },
      });
      assert.equal(answer.status(), 403, email);
      assert.match(await answer.text(), /not authorized to manage this identity/);
    }
    assert.equal((await wkd("alice")).status, 404);
    const withoutToken = await page.request.post(`${service.url}/account/openpgp`, {
      multipart: { email: "carol@example.org", keyText: mine },
    });
    assert.equal(withoutToken.status(), 403);
    await context.close();
  });

  test("deleting a key needs the password; WKD stops serving it at once", async () => {
    const { context, page } = await newContextPage(browser, { width: 375 });
    await signInOnPage(page, service.url, "carol@example.org", password);
    await page.goto(`${service.url}/account/openpgp`);
    assert.equal((await wkd("carol")).status, 200);
    await page.getByRole("link", { name: "Delete key (carol@example.org)" }).click();
    await page.waitForURL(`${service.url}/account/openpgp/delete/carol%40example.org`);
    assert.deepEqual(await seriousViolations(page), []);
    await fillByLabel(page, "Confirm with your password", "not the password");
    await page.getByRole("button", { name: "Delete key" }).click();
    assert.match(await page.locator("#field-password-error").innerText(), /Wrong password/);
    assert.equal((await wkd("carol")).status, 200);
    await page.getByRole("button", { name: "Delete key" }).click();
    assert.match(await page.locator("#field-password-error").innerText(), /required/);
    await fillByLabel(page, "Confirm with your password", password);
    await page.getByRole("button", { name: "Delete key" }).click();
    await page.waitForURL(`${service.url}/account/openpgp`);
    assert.match(await page.locator(".flash-success").innerText(), /has been deleted/);
    assert.equal((await wkd("carol")).status, 404);
    assert.match(
      await page.locator(".identities li", { hasText: "carol@example.org" }).first().innerText(),
      /No key published/,
    );
    const again = await page.goto(`${service.url}/account/openpgp/delete/carol%40example.org`);
    assert.equal(again?.status(), 404);
    const other = await page.goto(`${service.url}/account/openpgp/delete/alice%40example.org`);
    assert.equal(other?.status(), 403);
    await context.close();
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
  });
});
