import type { FastifyInstance } from "fastify";
import { invalid } from "../../errors.ts";
import { maxKeyUploadBodyBytes, type OpenPgpKeyService } from "../../openpgp/keys.ts";
import type { Body, Params } from "./input.ts";

/** Keys arrive as armored text, as the binary key (parsers in plugin.ts), or as JSON {"key": ...}. */
export async function openPgpKeyRoutes(
  app: FastifyInstance,
  { openPgpKeys }: { openPgpKeys: OpenPgpKeyService },
) {
  // Keys may be far larger than the 64 KiB of other bodies (many user IDs, photos): this route
  // takes bodies up to the importer's limit, and the importer checks the key itself.
  app.put("/api/admin/openpgp-keys/:email", { bodyLimit: maxKeyUploadBodyBytes }, async (request) => {
    const raw = request.body;
    const data =
      raw instanceof Buffer
        ? new Uint8Array(raw)
        : typeof raw === "string"
          ? raw
          : typeof (raw as Body | undefined)?.key === "string"
            ? ((raw as Body).key as string)
            : null;
    if (data === null)
      throw invalid('key: send the key as the body (armored text or binary), or JSON {"key": "<armored>"}');
    return openPgpKeys.import((request.params as Params).email ?? "", data);
  });
  app.get("/api/admin/openpgp-keys/:email", async (request) =>
    openPgpKeys.get((request.params as Params).email ?? ""),
  );
  app.delete("/api/admin/openpgp-keys/:email", async (request, reply) => {
    await openPgpKeys.delete((request.params as Params).email ?? "");
    return reply.code(204).send();
  });
}
