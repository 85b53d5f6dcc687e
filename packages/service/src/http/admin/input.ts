import type { FastifyReply, FastifySchemaValidationError } from "fastify";
import { type TSchema, Type } from "typebox";
import { fieldNumberRefusals, readWholeNumber } from "../../accounts/paging.ts";
import { refusal, type ServiceError } from "../../errors.ts";
import {
  bodyErrors,
  type ErrorStatus,
  errorResponses,
  messages,
  security,
  tokenResponses,
} from "../schemas.ts";

/** A value or null (`anyOf`, which OpenAPI 3.1 reads as "nullable"). */
export const OrNull = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** The SMTP limits of a user or alias as a request gives them: each a whole number or null ("use the setting"). */
export const SmtpQuotaInput = Type.Object(
  {
    per_hour: Type.Optional(OrNull(Type.Integer({ description: "Messages per hour, 0 or more" }))),
    per_day: Type.Optional(OrNull(Type.Integer({ description: "Messages per day, 0 or more" }))),
  },
  { description: "SMTP limits; a missing or null value means the setting's default" },
);

/** `search`, `limit` and `offset` of every admin list, as the query string gives them (paging.ts reads them). */
export const PageQuery = {
  search: Type.Optional(Type.String({ description: "Substring, case-insensitive" })),
  limit: Type.Optional(Type.String({ description: "Whole number, default 50, at most 500" })),
  offset: Type.Optional(Type.String({ description: "Whole number, default 0" })),
};

/** An id in the path: checked in the handler, so a non-number keeps its 400 `id: must be a number`. */
export const IdParams = Type.Object({ id: Type.String({ description: "Numeric id" }) });

/** A query text given and not empty, or undefined. */
/** A time in the query (`since`, `until`): Unix seconds up to the year 9999; -1 when not given. */
export const timeRule = {
  fallback: -1,
  max: 253402300799,
  outOfRange: "refuse" as const,
  refusals: fieldNumberRefusals,
};

/** `?since=` and `?until=` (Unix seconds) of the logs' lists, as the filter's optional fields. */
export function readTimeWindow(query: { since?: unknown; until?: unknown }): {
  since?: number;
  until?: number;
} {
  const since = readWholeNumber(query.since, "since", timeRule);
  const until = readWholeNumber(query.until, "until", timeRule);
  return { ...(since < 0 ? {} : { since }), ...(until < 0 ? {} : { until }) };
}

export const givenText = (value: string | undefined): string | undefined =>
  value === undefined || value === "" ? undefined : value;

export const idNotNumber = refusal("request.id_not_number", "bad_request", () => "id: must be a number");
export const requestFieldRequired = refusal<{ field: string }>(
  "request.field_required",
  "invalid",
  ({ field }) => `${field}: is required`,
);
export const requestBodyNotObject = refusal(
  "request.body_not_object",
  "invalid",
  () => "body: must be a JSON object",
);
/** `expected`: the types or values the field may have, in words ("true or false", "active, deleted or all"). */
export const requestFieldType = refusal<{ field: string; expected: string }>(
  "request.field_type",
  "invalid",
  ({ field, expected }) => `${field}: must be ${expected}`,
);
/** Another schema rule (a length, a pattern): `why` is the schema validator's words. */
export const requestFieldInvalid = refusal<{ field: string; why: string }>(
  "request.field_invalid",
  "invalid",
  ({ field, why }) => `${field}: ${why}`,
);

export const numericId = (raw: string | undefined): number => {
  if (!raw || !/^\d{1,10}$/.test(raw)) throw idNotNumber();
  return Number(raw);
};

export const created = <T>(reply: FastifyReply, payload: T) => reply.code(201).send(payload);

const typeNames: Record<string, string> = {
  boolean: "true or false",
  integer: "a whole number",
  number: "a number",
  string: "a string",
  array: "a list",
  object: "an object",
  null: "null",
};

/** "/smtpQuota/per_hour" -> "smtpQuota.per_hour", "/roles/0" -> "roles[0]". */
function fieldName(instancePath: string, extra?: string): string {
  const parts = instancePath.split("/").slice(1);
  if (extra !== undefined) parts.push(extra);
  let name = "";
  for (const raw of parts) {
    const part = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    name += /^\d+$/.test(part) ? `[${part}]` : name === "" ? part : `.${part}`;
  }
  return name;
}

const depth = (error: FastifySchemaValidationError) =>
  error.instancePath.split("/").length +
  ((error.params as { missingProperty?: string }).missingProperty === undefined ? 0 : 1);

/**
 * A schema validation failure of an admin route as the services word their own 422s,
 * `<field>: <what>` (`passwordChangeRequired: must be true or false`, `status: must be active,
 * deleted or all`), so a type error caught by the schema reads like a rule broken in the service.
 * Of a union's failures, the deepest field is named, with every type it may have.
 */
export function adminValidationError(errors: FastifySchemaValidationError[], where: string): ServiceError {
  const deepest = Math.max(...errors.map(depth));
  const here = errors.filter((error) => depth(error) === deepest);
  const first = here[0] ?? errors[0];
  if (!first) return requestFieldInvalid({ field: where, why: "is invalid" });
  const missing = (first.params as { missingProperty?: string }).missingProperty;
  if (missing !== undefined) return requestFieldRequired({ field: fieldName(first.instancePath, missing) });
  const field = fieldName(first.instancePath) || where;
  if (field === "body" && first.keyword === "type") return requestBodyNotObject();
  const types = here.flatMap((error) => {
    if (error.keyword !== "type") return [];
    const type = (error.params as { type?: string | string[] }).type ?? [];
    return (Array.isArray(type) ? type : type.split(",")).map((t) => typeNames[t] ?? t);
  });
  if (types.length > 0) {
    const or = types.some((t) => t.includes(" or ")) ? ", or " : " or ";
    return requestFieldType({ field, expected: types.join(or) });
  }
  const allowed = (first.params as { allowedValues?: unknown[] }).allowedValues;
  if (first.keyword === "enum" && allowed) {
    const names = allowed.map(String);
    const last = names.pop();
    return requestFieldType({
      field,
      expected: names.length > 0 ? `${names.join(", ")} or ${last}` : String(last),
    });
  }
  return requestFieldInvalid({ field, why: first.message ?? "is invalid" });
}

/**
 * The error statuses of an admin route: the token guard's 401 and 403, the route's own (each with
 * the messages it can carry), the parser's 400/413/415 for a route that reads a body, and 500/503.
 */
export function adminErrors(
  own: Partial<Record<ErrorStatus, readonly string[]>>,
  { body = false, bodyLimit = messages.bodyTooLarge }: { body?: boolean; bodyLimit?: string } = {},
) {
  return {
    ...tokenResponses("admin"),
    ...errorResponses(body ? { ...bodyErrors, 413: [bodyLimit] } : {}, own, {
      500: [messages.internal],
      503: [messages.unavailable],
    }),
  };
}

/** What every admin route's schema starts with. */
export const adminRoute = (tag: string, summary: string, description?: string) => ({
  tags: [tag],
  summary,
  ...(description === undefined ? {} : { description }),
  security: security("admin"),
});

/** 204: done, no body. */
export const NoContent = Type.Null({ description: "Done; no body" });

/** `{"items": [...], "total": N}`, the answer of every paged admin list. */
export const Listing = <T extends TSchema>(item: T, example: unknown) =>
  Type.Object(
    { items: Type.Array(item), total: Type.Integer({ description: "All matches, not only this page" }) },
    { description: "One page of the list", examples: [{ items: [example], total: 1 }] },
  );

/** 204 without a body (the reply's type is the plain one: the schema's `null` has no bytes to send). */
export const noContent = (reply: FastifyReply) => reply.code(204).send();
