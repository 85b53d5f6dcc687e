import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { mtaStsPolicy } from "../accounts/mta-sts.ts";
import type { SettingsService } from "../accounts/settings.ts";
import type { DatabaseHandle } from "../db/database.ts";
import type { WkdService } from "../openpgp/wkd.ts";

const text = (description: string, example: string) => ({
  description,
  content: { "text/plain": { schema: Type.String({ examples: [example] }) } },
});
const nothing = (description: string) => text(description, "");

const mtaStsExample = "version: STSv1\nmode: enforce\nmx: mail.example.org\nmax_age: 604800\n";

/** Public, unauthenticated documents: WKD keys and policy, MTA-STS policy (spec 4.6). */
export async function wellKnownRoutes(
  app: FastifyInstance,
  { wkd, database, settings }: { wkd: WkdService; database: DatabaseHandle; settings: SettingsService },
) {
  app.get(
    "/.well-known/openpgpkey/:domain/hu/:hash",
    {
      // The query is documented, not checked: WKD clients' extras never turn a key lookup into an error.
      attachValidation: true,
      schema: {
        tags: ["well-known"],
        summary: "WKD: a user's OpenPGP key",
        description: "Web Key Directory, advanced method; `Access-Control-Allow-Origin: *`.",
        params: Type.Object({
          domain: Type.String({ examples: ["example.org"] }),
          hash: Type.String({
            description: "z-base-32 of the SHA-1 of the lower-cased local part",
            examples: ["kei1q4tipxxu1yj79k9kfukdhfy631xe"],
          }),
        }),
        querystring: Type.Object({
          l: Type.Optional(Type.String({ description: "The local part (not needed)", examples: ["alice"] })),
        }),
        response: {
          200: {
            description: "The binary OpenPGP key",
            content: {
              "application/octet-stream": {
                schema: Type.String({ format: "binary", examples: ["<binary key>"] }),
              },
            },
          },
          404: nothing("No key: empty body"),
        },
      },
    },
    async (request, reply) => {
      const { domain, hash } = request.params as { domain: string; hash: string };
      const key = await wkd.find(domain, hash);
      reply.header("Access-Control-Allow-Origin", "*");
      if (!key) return reply.code(404).type("text/plain; charset=utf-8").send("");
      return reply.type("application/octet-stream").send(key);
    },
  );

  app.get(
    "/.well-known/openpgpkey/:domain/policy",
    {
      schema: {
        tags: ["well-known"],
        summary: "WKD policy",
        description: "Empty for every domain: the directory exists, without policy flags.",
        params: Type.Object({ domain: Type.String({ examples: ["example.org"] }) }),
        response: { 200: nothing("The empty policy") },
      },
    },
    async (_request, reply) =>
      reply.header("Access-Control-Allow-Origin", "*").type("text/plain; charset=utf-8").send(""),
  );

  app.get(
    "/.well-known/mta-sts.txt",
    {
      schema: {
        tags: ["well-known"],
        summary: "MTA-STS policy",
        description:
          "For `Host: mta-sts.<managed domain>` when MTA-STS is enabled in the settings; otherwise 404 with an empty body.",
        response: {
          200: text("The policy", mtaStsExample),
          404: nothing("No policy for this host: empty body"),
        },
      },
    },
    async (request, reply) => {
      const policy = await mtaStsPolicy(request.headers.host, database.db, settings);
      if (policy === null) return reply.code(404).type("text/plain; charset=utf-8").send("");
      return reply.type("text/plain; charset=utf-8").send(policy);
    },
  );
}
