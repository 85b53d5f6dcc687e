import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { fieldError, WebClient } from "./helpers/web-client.ts";

/**
 * The web's multipart forms (a reserved-names file and a key file in the admin area, a key file on
 * /account/openpgp), on the database TEST_DATABASE_URL names: one parser for them, with the same
 * limits (2 MiB a file or field, one file, 8 fields, 10 parts) and the same answers to what is
 * broken or too large: the form again with the reason next to its field, or the error page.
 */

const boundary = "----upload-test-boundary";
type Part = { name: string; value: string | Uint8Array; filename?: string };

/** A multipart body as a browser sends it; `cut` leaves off the closing boundary. */
function multipart(parts: Part[], { cut = false } = {}): Uint8Array {
  const chunks: (string | Uint8Array)[] = [];
  for (const part of parts) {
    const file = part.filename === undefined ? "" : `; filename="${part.filename}"`;
    const type = part.filename === undefined ? "" : "\r\nContent-Type: application/octet-stream";
    chunks.push(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"${file}${type}\r\n\r\n`);
    chunks.push(part.value, "\r\n");
  }
  if (!cut) chunks.push(`--${boundary}--\r\n`);
  return Buffer.concat(chunks.map((c) => (typeof c === "string" ? Buffer.from(c) : c)));
}

const contentType = `multipart/form-data; boundary=${boundary}`;
const overLimit = "x".repeat(2 * 1024 * 1024 + 1);

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

  /** Posts `parts` (after the CSRF token of a fresh form) to `path`, as the page at `form` sends it. */
  const send = async (client: WebClient, form: string, path: string, parts: Part[], options = {}) => {
    await client.get(form);
    return client.postBody(
      path,
      contentType,
      multipart([{ name: "_csrf", value: client.csrf }, ...parts], options),
    );
  };

  test("admin area, reserved-names file: missing, empty, too large, broken, too many parts", async () => {
    const post = (parts: Part[], options = {}) =>
      send(admin, "/admin/reserved-names", "/admin/reserved-names/import", parts, options);
    const none = await post([]);
    assert.equal(none.status, 422);
    assert.equal(fieldError(none.text, "file"), "Choose a file.");
    // A browser sends an empty part without a file name when no file was chosen.
    const unchosen = await post([{ name: "file", value: "", filename: "" }]);
    assert.equal(unchosen.status, 422);
    assert.equal(fieldError(unchosen.text, "file"), "Choose a file.");
    const overNames = await post([{ name: "file", value: "n\n".repeat(512 * 1024 + 1), filename: "n.txt" }]);
    assert.equal(overNames.status, 413);
    assert.equal(fieldError(overNames.text, "file"), "The file is larger than 1 MB.");
    const overParser = await post([{ name: "file", value: overLimit, filename: "n.txt" }]);
    assert.equal(overParser.status, 413);
    assert.equal(fieldError(overParser.text, "file"), "The file is larger than 1 MB.");
    const twoFiles = await post([
      { name: "file", value: "one\n", filename: "a.txt" },
      { name: "other", value: "two\n", filename: "b.txt" },
    ]);
    assert.equal(twoFiles.status, 413);
    assert.match(twoFiles.text, /The upload is too large\./);
    const manyFields = await post(Array.from({ length: 8 }, (_, i) => ({ name: `f${i}`, value: "x" })));
    assert.equal(manyFields.status, 413);
    assert.match(manyFields.text, /The upload is too large\./);
    const cut = await post([{ name: "file", value: "cut\n", filename: "c.txt" }], { cut: true });
    assert.equal(cut.status, 400);
    assert.match(cut.text, /The request could not be understood\./);
    await admin.get("/admin/reserved-names");
    const noBoundary = await admin.postBody("/admin/reserved-names/import", "multipart/form-data", "x");
    assert.equal(noBoundary.status, 400);
    assert.match(noBoundary.text, /The request could not be understood\./);
    const noToken = await admin.postBody(
      "/admin/reserved-names/import",
      contentType,
      multipart([{ name: "file", value: "cut\n", filename: "c.txt" }]),
    );
    assert.equal(noToken.status, 403);
    assert.match(noToken.text, /The form has expired\./);
    const good = await post([{ name: "file", value: "uploadtest\n", filename: "names.txt" }]);
    assert.equal(good.status, 303, good.text);
    assert.ok((await admin.get("/admin/reserved-names?search=uploadtest")).text.includes("uploadtest"));
  });

  test("admin area, key file: too large is named next to the file field", async () => {
    const post = (parts: Part[]) => send(admin, "/admin/openpgp-keys", "/admin/openpgp-keys", parts);
    const over = await post([
      { name: "email", value: "ivy@example.org" },
      { name: "keyText", value: "" },
      { name: "keyFile", value: overLimit, filename: "key.asc" },
    ]);
    assert.equal(over.status, 422);
    assert.equal(fieldError(over.text, "keyFile"), "The key is too large (1 MiB at most).");
    const neither = await post([
      { name: "email", value: "ivy@example.org" },
      { name: "keyText", value: "" },
      { name: "keyFile", value: "", filename: "" },
    ]);
    assert.equal(neither.status, 422);
    assert.equal(fieldError(neither.text, "keyText"), "Give exactly one: a key file or the pasted key.");
    const { publicKey } = await openpgp.generateKey({ userIDs: [{ email: "ivy@example.org" }] });
    const good = await post([
      { name: "email", value: "ivy@example.org" },
      { name: "keyText", value: "" },
      { name: "keyFile", value: publicKey, filename: "key.asc" },
    ]);
    assert.equal(good.status, 303, good.text);
    assert.equal((await service.services.openPgpKeys.get("ivy@example.org")).email, "ivy@example.org");
    await admin.get("/admin/openpgp-keys");
    assert.equal((await admin.post("/admin/openpgp-keys/ivy%40example.org/delete")).status, 303);
  });

  test("/account/openpgp: file or field too large, neither or both, broken, too many parts", async () => {
    const post = (parts: Part[], options = {}) =>
      send(user, "/account/openpgp", "/account/openpgp", parts, options);
    const email = { name: "email", value: "ivy@example.org" };
    const overFile = await post([
      email,
      { name: "keyText", value: "" },
      { name: "keyFile", value: overLimit, filename: "key.asc" },
    ]);
    assert.equal(overFile.status, 413);
    assert.equal(fieldError(overFile.text, "keyFile"), "The key is too large.");
    const overField = await post([email, { name: "keyText", value: overLimit }]);
    assert.equal(overField.status, 413);
    assert.equal(fieldError(overField.text, "keyText"), "The key is too large.");
    const neither = await post([
      email,
      { name: "keyText", value: "" },
      { name: "keyFile", value: "", filename: "" },
    ]);
    assert.equal(neither.status, 422);
    assert.equal(fieldError(neither.text, "keyFile"), "Please choose a file or paste a key, not both.");
    const both = await post([
      email,
      { name: "keyText", value: "key" },
      { name: "keyFile", value: "key", filename: "key.asc" },
    ]);
    assert.equal(both.status, 422);
    assert.equal(fieldError(both.text, "keyFile"), "Please choose a file or paste a key, not both.");
    // A file under another name than the form's is no key file.
    const otherName = await post([
      email,
      { name: "keyText", value: "" },
      { name: "other", value: "key", filename: "k" },
    ]);
    assert.equal(otherName.status, 422);
    assert.equal(fieldError(otherName.text, "keyFile"), "Please choose a file or paste a key, not both.");
    const twoFiles = await post([
      email,
      { name: "keyFile", value: "one", filename: "a.asc" },
      { name: "other", value: "two", filename: "b.asc" },
    ]);
    assert.equal(twoFiles.status, 413);
    assert.match(twoFiles.text, /The upload is too large\./);
    const manyParts = await post(Array.from({ length: 10 }, (_, i) => ({ name: `f${i}`, value: "x" })));
    assert.equal(manyParts.status, 413);
    assert.match(manyParts.text, /The upload is too large\./);
    const cut = await post([email, { name: "keyText", value: "key" }], { cut: true });
    assert.equal(cut.status, 400);
    assert.match(cut.text, /The request could not be understood\./);
    const noBoundary = await user.postBody("/account/openpgp", "multipart/form-data", "x");
    assert.equal(noBoundary.status, 400);
    assert.match(noBoundary.text, /The request could not be understood\./);
    const { publicKey } = await openpgp.generateKey({ userIDs: [{ email: "ivy@example.org" }] });
    const good = await post([
      email,
      { name: "keyText", value: "" },
      { name: "keyFile", value: publicKey, filename: "k.asc" },
    ]);
    assert.equal(good.status, 303, good.text);
    assert.equal((await service.services.openPgpKeys.get("ivy@example.org")).email, "ivy@example.org");
  });
});
