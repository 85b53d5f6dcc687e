import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from "fastify";

/**
 * Fields of an answer that carry a secret shown once: a new API token, a recovery token, a TOTP
 * secret and backup codes, a webhook's signing secret, an imported user's generated password, the
 * MailCrypt private key passdb hands to Dovecot.
 */
const secretFields = new Set([
  "token",
  "recoveryToken",
  "secret",
  "backupCodes",
  "password",
  "mailCryptPrivateKey",
]);

/**
 * onRoute: a route whose success answer may carry a secret (its response schema names a secret
 * field) answers with `Cache-Control: no-store`, so no cache on the way or in the client keeps it.
 * Read from the schema the route declares anyway, so a new route with such a field cannot forget it.
 */
export function noStoreForSecrets(route: RouteOptions): void {
  if (!carriesSecret(route)) return;
  const own = route.onRequest;
  route.onRequest = [...(own === undefined ? [] : [own].flat()), sendNoStore];
}

/** Whether a route's success answer may carry a secret. */
const carriesSecret = (route: RouteOptions): boolean => successAnswers(route).some(namesSecret);

function sendNoStore(_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) {
  reply.header("cache-control", "no-store");
  done();
}

function successAnswers(route: RouteOptions): unknown[] {
  const responses = (route.schema?.response ?? {}) as Record<string, unknown>;
  return Object.entries(responses)
    .filter(([status]) => status.startsWith("2"))
    .map(([, schema]) => schema);
}

/** Whether a JSON schema has a secret field anywhere (nested objects, unions, arrays). */
function namesSecret(schema: unknown): boolean {
  if (schema === null || typeof schema !== "object") return false;
  const node = schema as Record<string, unknown>;
  const properties = (node.properties ?? {}) as Record<string, unknown>;
  if (Object.keys(properties).some((name) => secretFields.has(name))) return true;
  const nested = [
    ...Object.values(properties),
    ...(["anyOf", "oneOf", "allOf"] as const).flatMap((key) => (node[key] as unknown[] | undefined) ?? []),
    node.items,
  ];
  return nested.some(namesSecret);
}
