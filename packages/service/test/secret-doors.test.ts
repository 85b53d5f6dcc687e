/**
 * The census of the doors that check a secret: every route that takes a password, a code or a token
 * from its caller is listed here as a door of the sign-in guard (accounts/sign-in-guard.ts) or as a
 * route that only sets a secret; a new route fails this test until it is placed. Outside the
 * services that run under the guard, no code calls a verifier of a secret.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { after, before, describe, test } from "node:test";
import type { RouteOptions } from "fastify";
import { startService, type TestService } from "./helpers/service.ts";

const src = join(import.meta.dirname, "../src");

/** Web forms that check a secret, and the kind the guard counts them as. */
const guardedPages: Record<string, string> = {
  "POST /login": "password",
  "POST /2fa": "second factor",
  "POST /recovery": "recovery token",
  "POST /recovery/reset": "recovery token",
  "POST /": "invite code",
  "POST /register/:code": "invite code",
  // Every re-confirmation of the current password (web/password-confirmation.ts).
  "POST /account/password": "password",
  "POST /account/recovery-token": "password",
  "POST /account/delete": "password",
  "POST /account/twofactor/enable": "password",
  "POST /account/twofactor/disable": "password",
  "POST /account/openpgp/delete/:email": "password",
  "POST /account/passkeys/:id/remove": "password",
  "POST /account/app-passwords": "password",
  "POST /admin/domains/:name/delete": "password",
  "POST /account/passkeys/options": "password",
  // A passkey's answer (accounts/passkeys.ts), counted as a second factor.
  "POST /2fa/passkey": "second factor",
  "POST /login/passkey": "second factor",
};

/** API operations whose body carries a password the guard checks. */
const guardedOperations: Record<string, string> = {
  "POST /api/mailbox-server/{email}": "password (passdb)",
  "POST /api/mta/auth": "password (SMTP auth)",
  "POST /api/webmail/aliases": "password",
  "POST /api/webmail/password": "password",
  "POST /api/identity/{domain}/validate/{email}": "password or second factor",
};

/** Calls of a verifier of a secret; each must sit in a service that runs it under the guard. */
const verifiers =
  /\b(checkPassword|verifyPassword|verifyDummy|findBackupCode|totpStepFor|openSecretBox|openWithAppPassword|appPasswordLookupHash)\(/;
const allowedVerifierCalls: Record<string, string> = {
  "accounts/sign-in.ts": "sign-ins, re-confirmations and second factors, inside SignInGuard.attempt",
  "accounts/recovery.ts": "the recovery token, inside SignInGuard.attempt",
  "accounts/two-factor.ts": "enrolment: the signed-in user proves the new secret works (nothing to guess)",
  "accounts/lifecycle.ts": "re-seals the key with a password already confirmed (ConfirmedPassword)",
  "accounts/app-passwords.ts":
    "match() runs inside the guard (sign-in.ts: attemptCheap, or attempt); a new one opens the key with a ConfirmedPassword",
  "import/userli.ts": "the importer maps userli's backup codes (no caller, no guessing)",
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith(".ts")
        ? [join(dir, entry.name)]
        : [],
  );
}

describe("every door that checks a secret passes the sign-in guard", () => {
  let service: TestService;
  const webRoutes: string[] = [];

  before(async () => {
    service = await startService({
      web: true,
      onWebRoute: (route: RouteOptions) => {
        for (const method of [route.method].flat()) webRoutes.push(`${method} ${route.url}`);
      },
    });
  });
  after(async () => service?.close());

  test("no code outside the guarded services calls a verifier of a secret", () => {
    const found: string[] = [];
    for (const file of sourceFiles(src)) {
      const name = relative(src, file);
      if (name.startsWith("credentials/")) continue;
      if (verifiers.test(readFileSync(file, "utf8")) && !(name in allowedVerifierCalls)) found.push(name);
    }
    assert.deepEqual(found, [], "verifiers called outside the guard");
  });

  test("every web form that takes a secret is a door of the guard, and no form takes one unlisted", () => {
    const posts = webRoutes.filter((route) => route.startsWith("POST "));
    for (const door of Object.keys(guardedPages)) assert.ok(posts.includes(door), `${door} exists`);
    // A form takes a secret when its page has a password, code or token field.
    const templates = join(src, "web/templates");
    const secretForms = readdirSync(templates, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith(".eta"))
      .map((entry) => join(entry.parentPath, entry.name))
      .filter((file) =>
        /type: ["']password|name: ["'](code|token|password|currentPassword)["']|name="(code|token|password)"/.test(
          readFileSync(file, "utf8"),
        ),
      )
      .map((file) => relative(templates, file));
    // Pages whose secret fields only set a new secret or show one.
    const setsOnly = new Set([
      "account/twofactor-confirm.eta",
      "account/app-password-show.eta",
      "admin/invite-codes.eta",
      "admin/users/form.eta",
      "admin/users/password.eta",
      "init/admin.eta",
      "recovery-token-show.eta",
    ]);
    // Pages posting to a guarded door (the recovery's reset form checks the token again).
    const guardedTemplates = new Set([
      "login.eta",
      "two-factor.eta",
      "recovery/start.eta",
      "recovery/reset.eta",
      "register/form.eta",
      "account/password.eta",
      "account/recovery-token.eta",
      "account/delete.eta",
      "account/twofactor.eta",
      "account/openpgp-delete.eta",
      "account/passkey-remove.eta",
      "account/passkeys.eta",
      "account/app-passwords.eta",
      "admin/confirm.eta",
    ]);
    const unplaced = secretForms.filter((file) => !setsOnly.has(file) && !guardedTemplates.has(file));
    assert.deepEqual(
      unplaced,
      [],
      "templates with a secret field that are neither a guarded door nor a setter",
    );
  });

  test("every API operation that takes a password to check is a door of the guard, with its 400, 429 and 503", async () => {
    const answer = await service.request("GET", "/api/openapi.json");
    const document = answer.body as {
      paths: Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>;
    };
    const checking: string[] = [];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const body = JSON.stringify(operation.requestBody ?? {});
        if (!/"password"/.test(body) || path.startsWith("/api/admin/")) continue;
        checking.push(`${method.toUpperCase()} ${path}`);
        for (const status of ["400", "429", "503"])
          assert.ok(status in operation.responses, `${method} ${path} documents ${status}`);
      }
    }
    assert.deepEqual(checking.sort(), Object.keys(guardedOperations).sort());
  });
});
