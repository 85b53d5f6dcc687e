import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { fieldError, WebClient } from "./helpers/web-client.ts";

/**
 * The web's multipart forms (a reserved-names file and a key file in the admin area, a key file on
 * /account/openpgp), on the database TEST_DATABASE_URL names: one parser for them, with the same
 * limits (2 MiB a file or field, one file, 8 fields) and the same answers to what is
 * broken or too large: the form again with the reason next to its field, or the error page.
 */

const boundary = "----upload-test-boundary";
const contentType = `multipart/form-data; boundary=${boundary}`;
type Part = { name: string; value: string; filename?: string };

/** A multipart body as a browser sends it; `cut` leaves off the closing boundary. */
function multipart(parts: Part[], { cut = false } = {}): string {
  const body = parts.map((part) => {
    const file =
      part.filename === undefined
        ? ""
        : `; filename="${part.filename}"\r\nContent-Type: application/octet-stream`;
    return `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"${file}\r\n\r\n${part.value}\r\n`;
  });
  return body.join("") + (cut ? "" : `--${boundary}--\r\n`);
}

const overLimit = "x".repeat(2 * 1024 * 1024 + 1);
const file = (name: string, value: string, filename = "f.txt"): Part => ({ name, value, filename });
const fields = (count: number): Part[] =>
  Array.from({ length: count }, (_, i) => ({ name: `f${i}`, value: "x" }));

/** A case: the parts sent, and the answer: the status with a field's error, or with a text of the error page. */
type Case = [what: string, parts: Part[], status: number, at: string | RegExp, options?: { cut: boolean }];

describe("multipart forms: one parser, its limits and its answers to bad input", () => {
  let service: TestService;
  let admin: WebClient;
  let user: WebClient;

  before(async () => {
    service = await startService({ web: true });
    const { domains, users } = service.services;
    await domains.create("example.org");
    await users.create({ email: "admin@example.org", password, roles: ["ROLE_ADMIN"] });
    await users.create({ email: "ivy@example.org", password });
    admin = new WebClient(service.url);
    user = new WebClient(service.url);
    await admin.signIn("admin@example.org");
    await user.signIn("ivy@example.org");
  });
  after(async () => {
    await service?.close();
  });

  /** Posts `parts` after the CSRF token of a fresh `page`, as that page's form does. */
  const send = async (client: WebClient, page: string, path: string, parts: Part[], options = {}) => {
    await client.get(page);
    return client.postBody(
      path,
      contentType,
      multipart([{ name: "_csrf", value: client.csrf }, ...parts], options),
    );
  };

  /** Each case's answer, then the answers every upload form gives to a body the parser cannot read or that lacks the token. */
  async function expectAnswers(client: WebClient, page: string, path: string, cases: Case[]) {
    const broken: Case[] = [
      ["two files", [file("a", "one"), file("b", "two")], 413, /The upload is too large\./],
      ["more than 8 fields", fields(8), 413, /The upload is too large\./],
      ["a body cut short", [file("a", "x")], 400, /The request could not be understood\./, { cut: true }],
    ];
    for (const [what, parts, status, at, options] of [...cases, ...broken]) {
      const answer = await send(client, page, path, parts, options);
      assert.equal(answer.status, status, `${what}: ${answer.text}`);
      if (typeof at === "string") assert.ok(fieldError(answer.text, at), `${what}: an error next to ${at}`);
      else assert.match(answer.text, at, what);
    }
    await client.get(page);
    const noBoundary = await client.postBody(path, "multipart/form-data", "x");
    assert.equal(noBoundary.status, 400);
    assert.match(noBoundary.text, /The request could not be understood\./);
    const noToken = await client.postBody(path, contentType, multipart([file("a", "x")]));
    assert.equal(noToken.status, 403);
    assert.match(noToken.text, /The form has expired\./);
  }

  test("admin area, reserved-names file: missing, empty, too large, broken; a good one imported", async () => {
    await expectAnswers(admin, "/admin/reserved-names", "/admin/reserved-names/import", [
      ["no file", [], 422, "file"],
      // A browser sends an empty part without a file name when no file was chosen.
      ["no file chosen", [file("file", "", "")], 422, "file"],
      ["over the page's 1 MB", [file("file", "n\n".repeat(512 * 1024 + 1))], 413, "file"],
      ["over the parser's limit", [file("file", overLimit)], 413, "file"],
    ]);
    const none = await send(admin, "/admin/reserved-names", "/admin/reserved-names/import", []);
    assert.equal(fieldError(none.text, "file"), "Choose a file.");
    const over = await send(admin, "/admin/reserved-names", "/admin/reserved-names/import", [
      file("file", overLimit),
    ]);
    assert.equal(fieldError(over.text, "file"), "The file is larger than 1 MB.");
    const good = await send(admin, "/admin/reserved-names", "/admin/reserved-names/import", [
      file("file", "uploadtest\n"),
    ]);
    assert.equal(good.status, 303, good.text);
    assert.ok((await admin.get("/admin/reserved-names?search=uploadtest")).text.includes("uploadtest"));
  });

  test("admin area, key file: too large or none, named next to its field; a good one published", async () => {
    const email = { name: "email", value: "ivy@example.org" };
    const noText = { name: "keyText", value: "" };
    await expectAnswers(admin, "/admin/openpgp-keys", "/admin/openpgp-keys", [
      ["a file over the limit", [email, noText, file("keyFile", overLimit)], 422, "keyFile"],
      ["neither file nor text", [email, noText, file("keyFile", "", "")], 422, "keyText"],
    ]);
    const over = await send(admin, "/admin/openpgp-keys", "/admin/openpgp-keys", [
      email,
      noText,
      file("keyFile", overLimit),
    ]);
    assert.equal(fieldError(over.text, "keyFile"), "The key is too large (1 MiB at most).");
    const { publicKey } = await openpgp.generateKey({ userIDs: [{ email: "ivy@example.org" }] });
    const good = await send(admin, "/admin/openpgp-keys", "/admin/openpgp-keys", [
      email,
      noText,
      file("keyFile", publicKey, "key.asc"),
    ]);
    assert.equal(good.status, 303, good.text);
    assert.equal((await service.services.openPgpKeys.get("ivy@example.org")).email, "ivy@example.org");
    await admin.get("/admin/openpgp-keys");
    assert.equal((await admin.post("/admin/openpgp-keys/ivy%40example.org/delete")).status, 303);
  });

  test("/account/openpgp: file or field too large, neither or both, broken; a good file published", async () => {
    const email = { name: "email", value: "ivy@example.org" };
    const noText = { name: "keyText", value: "" };
    await expectAnswers(user, "/account/openpgp", "/account/openpgp", [
      ["a file over the limit", [email, noText, file("keyFile", overLimit)], 413, "keyFile"],
      ["a field over the limit", [email, { name: "keyText", value: overLimit }], 413, "keyText"],
      ["neither file nor text", [email, noText, file("keyFile", "", "")], 422, "keyFile"],
      ["both", [email, { name: "keyText", value: "key" }, file("keyFile", "key")], 422, "keyFile"],
      // A file under another name than the form's is no key file.
      ["a file in another field", [email, noText, file("other", "key")], 422, "keyFile"],
    ]);
    const over = await send(user, "/account/openpgp", "/account/openpgp", [
      email,
      noText,
      file("keyFile", overLimit),
    ]);
    assert.equal(fieldError(over.text, "keyFile"), "The key is too large.");
    const { publicKey } = await openpgp.generateKey({ userIDs: [{ email: "ivy@example.org" }] });
    const good = await send(user, "/account/openpgp", "/account/openpgp", [
      email,
      noText,
      file("keyFile", publicKey),
    ]);
    assert.equal(good.status, 303, good.text);
    assert.equal((await service.services.openPgpKeys.get("ivy@example.org")).email, "ivy@example.org");
  });
});
