import { type TObject, type TSchema, Type } from "typebox";
import type { Scope } from "../tokens/tokens.ts";

/**
 * The TypeBox pieces every route's schema is built from. Response schemas also drive Fastify's
 * serializer (fast-json-stringify): it writes keys in the order listed here and drops keys not
 * listed, so each body lists its fields in the order the code produces them.
 */

/** The error answer everywhere: `{"message": ...}`, nothing else (no codes, URLs or internals). */
export const ErrorBody = errorBody("An error", "invalid e-mail address");

/** The API token guard's 401: userli's adapters read `error`, others `message`; both say the same. */
export const TokenErrorBody = Type.Object(
  { message: Type.String(), error: Type.String() },
  {
    additionalProperties: false,
    description: "Missing or invalid API token",
    examples: [
      { message: "No API token provided", error: "No API token provided" },
      { message: "Invalid API token", error: "Invalid API token" },
    ],
  },
);

/** passdb's 500 when the MailCrypt key cannot be decrypted: the reason in both fields. */
export const PassdbFailureBody = Type.Object(
  { message: Type.String(), error: Type.String() },
  {
    additionalProperties: false,
    description: "The user's MailCrypt private key cannot be decrypted",
    examples: [
      {
        message: "decryption of mailCryptSecretBox failed",
        error: "decryption of mailCryptSecretBox failed",
      },
      { message: "secret should not be null", error: "secret should not be null" },
    ],
  },
);

/** `{"message":"success"}`: the answer of the checks (mta auth, identity validate, status). */
export const SuccessBody = Type.Object(
  { message: Type.Literal("success") },
  { additionalProperties: false, description: "Success", examples: [{ message: "success" }] },
);

/** An address in the path, checked by the handler (`requireAddress`) so a bad one is 400 `invalid e-mail address`, not a 422. */
export const EmailParams = Type.Object({
  email: Type.String({ description: "E-mail address", examples: ["alice@example.org"] }),
});

/** A domain in the path, checked by the handler (`requireDomain`): a bad one is 400 `invalid domain name`. */
export const DomainParams = Type.Object({
  domain: Type.String({ description: "Domain name", examples: ["example.org"] }),
});

/** A `{"message": ...}` body with its description and the messages it can carry as examples. */
export function errorBody(
  description: string,
  ...messages: string[]
): TObject<{ message: ReturnType<typeof Type.String> }> {
  return Type.Object(
    { message: Type.String() },
    {
      additionalProperties: false,
      description,
      examples: messages.map((message) => ({ message })),
    },
  );
}

/** What each error status means, the description a response gets unless a route says more. */
export const statusDescriptions = {
  400: "Bad request",
  401: "Not authenticated",
  403: "Forbidden",
  404: "Not found",
  405: "Method not allowed",
  409: "Conflict",
  413: "Request body too large",
  415: "Unsupported content type",
  422: "Invalid input",
  429: "Too many failed sign-ins: try again after Retry-After seconds",
  500: "Internal error",
  503: "Database unavailable, try again",
} as const;
export type ErrorStatus = keyof typeof statusDescriptions;

/**
 * Error responses for a route's `response` map: each status with the messages it can carry (the
 * first is the first example). Several maps are merged per status, e.g.
 * `errorResponses(bodyErrors, { 400: [messages.invalidAddress], 404: ["user not found"] })`.
 */
export function errorResponses<S extends ErrorStatus>(
  ...maps: Partial<Record<S, readonly string[]>>[]
): Record<S, TObject> {
  const merged = new Map<S, string[]>();
  for (const map of maps) {
    for (const status of Object.keys(map).map(Number) as S[]) {
      merged.set(status, [...(merged.get(status) ?? []), ...(map[status] ?? [])]);
    }
  }
  const responses = {} as Record<S, TObject>;
  for (const [status, list] of merged) responses[status] = errorBody(statusDescriptions[status], ...list);
  return responses;
}

/** The messages the shared parts of the app give, to spread into `errorResponses`. */
export const messages = {
  invalidAddress: "invalid e-mail address",
  invalidDomain: "invalid domain name",
  invalidJson: 'Request payload contains invalid "json" data.',
  invalidForm: 'Request payload contains invalid "form" data.',
  bodyTooLarge: "Request body too large (limit 64 KiB).",
  unsupportedFormat: "Unsupported format.",
  unavailable: "database unavailable, try again",
  internal: "internal error",
} as const;

/** The statuses every route with a body can give before its handler runs (parsing, size, type). */
export const bodyErrors = {
  400: [messages.invalidJson, messages.invalidForm],
  413: [messages.bodyTooLarge],
  415: [messages.unsupportedFormat],
} as const;

/**
 * The token guard's answers for a route of `scope`: 401 (no or invalid token) and 403 (scope
 * missing). A route that gives a 401 or 403 of its own as well (`authentication failed`,
 * `user disabled due to spam role`) passes those messages: the status then carries either body.
 */
export function tokenResponses(
  scope: Scope,
  own: { 401?: readonly string[]; 403?: readonly string[] } = {},
): { 401: TSchema; 403: TObject } {
  const forbidden = errorBody(
    statusDescriptions[403],
    `Token does not have required scope: ${scope}`,
    ...(own[403] ?? []),
  );
  if (!own[401]?.length) return { 401: TokenErrorBody, 403: forbidden };
  return {
    401: Type.Union([TokenErrorBody, errorBody("Authentication failed", ...own[401])], {
      description: "Missing or invalid API token, or the user's credentials were refused",
    }),
    403: forbidden,
  };
}

/** The security requirement of a route needing `scope` (OpenAPI 3.1 allows role names for bearer schemes). */
export function security(scope: Scope): { apiToken: Scope[] }[] {
  return [{ apiToken: [scope] }];
}

/** The OpenAPI document's tags, one per endpoint group: every route's schema names one (`tags: ["mta"]`). */
export const apiTags = [
  "mailbox-server",
  "mta",
  "webmail",
  "identity",
  "retention",
  "admin: domains",
  "admin: users",
  "admin: aliases",
  "admin: settings",
  "admin: API tokens",
  "admin: webhooks",
  "admin: OpenPGP keys",
  "admin: audit log",
  "admin: security events",
  "well-known",
  "health",
  "metrics",
  "openapi",
] as const;
export type ApiTag = (typeof apiTags)[number];

/**
 * The sign-in doors' optional header naming the client that tries to sign in (Dovecot's `remote_ip`,
 * Postfix's `client_address`): the sign-in guard counts failures per client (IPv4 address, IPv6 /64),
 * and a client that signed in before is not held back by others' failures (docs/security.md).
 */
export const ClientAddressHeaders = Type.Object({
  "x-client-address": Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 64,
      description:
        "IP address (IPv4 or IPv6) of the client signing in (IMAP, SMTP, webmail or identity provider user). " +
        "Anything that is not an IP address is refused with 400 `X-Client-Address: must be an IP address`. " +
        "Without it, the door counts as a client of its own for each account. See docs/security.md.",
      examples: ["203.0.113.7"],
    }),
  ),
});
