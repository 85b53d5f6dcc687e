import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import type { Kysely } from "kysely";
import { Type } from "typebox";
import type { PasswordPolicy } from "../../accounts/password-policy.ts";
import type { AdminService } from "../../admin/service.ts";
import type { Database } from "../../db/schema.ts";
import { importUsers } from "../../import/bulk-users.ts";
import { actorOf } from "./actor.ts";
import { adminErrors, adminRoute, OrNull } from "./input.ts";

const tag = "admin: users";

/** Users per request: each costs about a second of Argon2 work; larger lists go through the console. */
export const maxImportUsers = 1000;
const bodyLimit = 1024 * 1024;

const csvExample =
  "email,password,quota,mailCrypt,aliases\r\nbob@example.net,,1024,true,info@example.net sales@example.net\r\ncarol@example.net,correct horse battery staple,,,\r\n";

const ImportJson = Type.Object(
  {
    users: Type.Array(
      Type.Object(
        {
          email: Type.String({ description: "A new address in a managed domain" }),
          password: Type.Optional(
            OrNull(
              Type.String({ description: "At least 12 characters; empty or absent: a random one is made" }),
            ),
          ),
          quota: Type.Optional(OrNull(Type.Integer({ description: "MiB, 0 or more" }))),
          mailCrypt: Type.Optional(
            OrNull(
              Type.Boolean({ description: "Make a MailCrypt key pair; default from the setting mail_crypt" }),
            ),
          ),
          aliases: Type.Optional(
            Type.Array(Type.String(), {
              description: "New alias addresses, owned by the user and delivered to it",
            }),
          ),
        },
        { additionalProperties: false },
      ),
      { maxItems: maxImportUsers },
    ),
  },
  {
    examples: [
      {
        users: [
          { email: "bob@example.net", quota: 1024, mailCrypt: true, aliases: ["info@example.net"] },
          { email: "carol@example.net", password: "correct horse battery staple" },
        ],
      },
    ],
  },
);

const ImportCsv = Type.String({
  description: `CSV: a header line naming the columns email,password,quota,mailCrypt,aliases (email required, the others optional), then one user per line; aliases separated by spaces. At most ${maxImportUsers} users.`,
  examples: [csvExample],
});

const Problems = Type.Array(
  Type.Object({
    line: Type.Integer({
      description: "Line of the CSV (header = 1), or position in the JSON list (from 1)",
    }),
    email: Type.String(),
    problems: Type.Array(Type.String()),
  }),
);

const Imported = Type.Object(
  {
    users: Type.Array(
      Type.Object({
        line: Type.Integer(),
        email: Type.String(),
        password: OrNull(
          Type.String({ description: "The password made for the user, shown this once; null when given" }),
        ),
        recoveryToken: OrNull(
          Type.String({ description: "The MailCrypt recovery token, shown this once; null without keys" }),
        ),
        aliases: Type.Array(Type.String()),
      }),
    ),
    failed: Type.Array(
      Type.Object({ line: Type.Integer(), email: Type.String(), problems: Type.Array(Type.String()) }),
      {
        description: "Lines that passed the check but failed when created (an address taken meanwhile)",
      },
    ),
  },
  {
    description: "The users created, with the credentials to hand out",
    examples: [
      {
        users: [
          {
            line: 2,
            email: "bob@example.net",
            password: "Xk7pQ2mNv9RtLw4sHj8c",
            recoveryToken: "0b3e8a52-5a0c-4d5e-9d2f-6f1a7c2e4b90",
            aliases: ["info@example.net", "sales@example.net"],
          },
        ],
        failed: [],
      },
    ],
  },
);

const reportExamples = [
  {
    message: "2 of 3 lines cannot be imported; nothing was created",
    lines: [
      { line: 3, email: "carol@example.net", problems: ["password: must be at least 12 characters"] },
      {
        line: 4,
        email: "dave@nowhere.example",
        problems: [
          "email: domain nowhere.example is not managed here",
          "address info@example.net is already taken",
        ],
      },
    ],
  },
];

const Report = Type.Object(
  { message: Type.String(), lines: Problems },
  {
    additionalProperties: false,
    description: "Lines that cannot be imported, each with all its problems; nothing was created",
    examples: reportExamples,
  },
);

/** `POST /api/admin/users/import`: the bulk provisioning of app:users:import, as CSV or JSON. */
export async function userImportRoutes(
  scope: FastifyInstance,
  services: { db: Kysely<Database>; admin: AdminService; passwordPolicy: PasswordPolicy },
) {
  scope.addContentTypeParser("text/csv", { parseAs: "string", bodyLimit }, (_request, body, done) =>
    done(null, body),
  );
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  const errors = adminErrors(
    { 422: ["users: must have at most 1000 items", "users[0].quota: must be a whole number or null"] },
    { body: true, bodyLimit: "Request body too large (limit 1 MiB)." },
  );
  app.post(
    "/api/admin/users/import",
    {
      bodyLimit,
      schema: {
        ...adminRoute(
          tag,
          "Create many users at once",
          `The whole list is checked first, with the rules of a single creation; while any line is bad nothing is created and the answer (422) names every problem of every line. Then each user is created as by \`POST /api/admin/users\` (fires \`user.created\`), with its aliases. An empty password means a random one, returned with the recovery tokens this once. At most ${maxImportUsers} users; the console's \`app:users:import\` takes any number.`,
        ),
        body: { content: { "application/json": { schema: ImportJson }, "text/csv": { schema: ImportCsv } } },
        response: {
          200: Imported,
          ...errors,
          422: Type.Union([errors[422], Report], {
            description: "Invalid input: a value of the wrong type, or the lines that cannot be imported",
            examples: [{ message: "users[0].quota: must be a whole number or null" }, ...reportExamples],
          }),
        },
      },
    },
    async (request, reply) => {
      const body: unknown = request.body;
      // As POST /api/admin/users and /api/admin/aliases do it: the token's reach, the audit log.
      const result = await importUsers(
        services,
        actorOf(request),
        typeof body === "string" ? { csv: body } : { json: body },
        { maxUsers: maxImportUsers },
      );
      if (result.outcome === "too_many")
        return reply.code(422).send({
          message: `users: at most ${result.max} per request; use bin/console app:users:import for more`,
        });
      if (result.outcome === "refused")
        return reply.code(422).send({ message: result.summary, lines: result.lines });
      return { users: result.created, failed: result.failed };
    },
  );
}
