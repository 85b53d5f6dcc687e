import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { RetentionService } from "../../../accounts/retention.ts";
import { refusal } from "../../../errors.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { requireAddress } from "../../params.ts";
import { bodyErrors, EmailParams } from "../../schemas.ts";
import {
  AddressList,
  addressErrors,
  errorResponses,
  guardResponses,
  integrationRoute,
  unavailable,
} from "../route-schemas.ts";

const timestampProblem = "timestamp: must be a whole number of Unix seconds";

/**
 * Documents the optional body; the handler reads it itself (`attachValidation`), so no body or a
 * bad one keeps its 400 as userli's janitor expects, not the 422 of a schema check.
 */
const TouchBody = Type.Object(
  {
    timestamp: Type.Optional(
      Type.Union([Type.Integer({ minimum: 0 }), Type.String({ pattern: "^\\d{1,12}$" })], {
        description: "Unix seconds of the activity (a string in form bodies); absent or 0 = now",
      }),
    ),
  },
  { examples: [{ timestamp: 1795443121 }, {}] },
);

/** Activity reports and the inactive-user list (spec 4.5). */
export async function retentionRoutes(
  scope: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { retention: RetentionService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  requireScope(app, tokenCheck, "retention");

  app.put(
    "/:email/touch",
    {
      attachValidation: true,
      schema: {
        ...integrationRoute(
          "retention",
          "Report a user's activity",
          "Stores the time as the user's last login if it is later than the stored one. The body is optional.",
        ),
        params: EmailParams,
        body: TouchBody,
        response: {
          200: Type.Array(Type.Never(), { maxItems: 0, description: "Done", examples: [[]] }),
          ...guardResponses("retention"),
          ...errorResponses(
            bodyErrors,
            addressErrors,
            { 400: ["timestamp in future", timestampProblem, "body must be a JSON object"] },
            { 404: ["user not found"] },
            unavailable,
          ),
        },
      },
    },
    async (request) => {
      const { email } = request.params;
      await services.retention.touch(requireAddress(email).email, touchTimestamp(request.body as unknown));
      return [];
    },
  );

  app.get(
    "/users",
    {
      schema: {
        ...integrationRoute(
          "retention",
          "Inactive users",
          "Active users whose last login is older than the listing period, for the mailbox janitor.",
        ),
        response: {
          200: AddressList("Addresses of inactive users", ["carol@example.org", "dave@example.com"]),
          ...guardResponses("retention"),
          ...errorResponses(unavailable),
        },
      },
    },
    async () => services.retention.inactiveUsers(),
  );
}

const touchBodyNotObject = refusal(
  "touch.body_not_object",
  "bad_request",
  () => "body must be a JSON object",
);
const touchTimestampInvalid = refusal("touch.timestamp_invalid", "bad_request", () => timestampProblem);

/** The optional `timestamp`: a whole number of Unix seconds (form bodies carry it as a string). */
function touchTimestamp(body: unknown): number | null {
  if (body === undefined || body === null || body === "") return null;
  if (typeof body !== "object" || Array.isArray(body)) throw touchBodyNotObject();
  const value = (body as Record<string, unknown>).timestamp;
  if (value === undefined || value === null) return null;
  const number = typeof value === "string" && /^\d{1,12}$/.test(value) ? Number(value) : value;
  if (typeof number !== "number" || !Number.isSafeInteger(number) || number < 0) {
    throw touchTimestampInvalid();
  }
  return number;
}
