import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { AdminService } from "../../admin/service.ts";
import { refusal } from "../../errors.ts";
import { maxKeyUploadBodyBytes, type OpenPgpKeyService } from "../../openpgp/keys.ts";
import { EmailParams } from "../schemas.ts";
import { actorOf } from "./actor.ts";
import { adminErrors, adminRoute, NoContent, noContent } from "./input.ts";

const tag = "admin: OpenPGP keys";

/** A key as `OpenPgpKeyService` gives it, keys in that order. */
const KeyInfo = Type.Object(
  {
    email: Type.String(),
    keyId: Type.String({ description: "16 hex digits" }),
    fingerprint: Type.String({ description: "GnuPG's spaced form" }),
    expiresAt: Type.Union([Type.Integer(), Type.Null()], { description: "Unix seconds; null: never" }),
    wkdHash: Type.String({ description: "z-base-32 of SHA-1 of the local part: the WKD file name" }),
  },
  {
    description: "The key published through WKD for the address",
    examples: [
      {
        email: "bob@example.org",
        keyId: "6C3E1F0A9B2D4E57",
        fingerprint: "2B7D 51A0 C4E9 3F18 6D02  A7C5 9E41 B3F6 6C3E 1F0A 9B2D 4E57",
        expiresAt: null,
        wkdHash: "kei1q4tipxxu1yj79k9kfukdhfy631xe",
      },
    ],
  },
);

const armoredExample =
  "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nxjMEZ...\n=Ab12\n-----END PGP PUBLIC KEY BLOCK-----\n";

/** JSON or form: `{"key": "<armored>"}`. */
const KeyField = Type.Object(
  { key: Type.String({ description: "The armored key" }) },
  { examples: [{ key: armoredExample }] },
);
/** The armored key as the body. */
const ArmoredKey = Type.String({ description: "The armored key", examples: [armoredExample] });
/** The binary key as the body: any bytes, the importer reads them. */
const BinaryKey = Type.Unsafe<Buffer>({
  description: "The binary (non-armored) key",
  contentMediaType: "application/octet-stream",
});

const keyMissing = 'key: send the key as the body (armored text or binary), or JSON {"key": "<armored>"}';
export const keyNotSent = refusal("request.key_missing", "invalid", () => keyMissing);

/** Keys arrive as armored text, as the binary key (parsers in plugin.ts), or as JSON {"key": ...}. */
export async function openPgpKeyRoutes(
  scope: FastifyInstance,
  { openPgpKeys, admin }: { openPgpKeys: OpenPgpKeyService; admin: AdminService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  // Keys may be far larger than the 64 KiB of other bodies (many user IDs, photos): this route
  // takes bodies up to the importer's limit, and the importer checks the key itself.
  app.put(
    "/api/admin/openpgp-keys/:email",
    {
      bodyLimit: maxKeyUploadBodyBytes,
      schema: {
        ...adminRoute(
          tag,
          "Publish an address's OpenPGP key through WKD",
          "Only the user IDs of the address are kept; the data must hold exactly one key for it. The address must belong to an active user or alias of a managed domain.",
        ),
        params: EmailParams,
        body: {
          content: {
            "application/json": { schema: KeyField },
            "application/x-www-form-urlencoded": { schema: KeyField },
            "text/plain": { schema: ArmoredKey },
            "application/pgp-keys": { schema: BinaryKey },
            "application/octet-stream": { schema: BinaryKey },
          },
        },
        response: {
          200: KeyInfo,
          ...adminErrors(
            {
              422: [
                keyMissing,
                "key: no OpenPGP data",
                "No key found for bob@example.org",
                "More than one keys found for bob@example.org",
                "key: larger than 1 MiB (binary), or about 1.4 MiB armored",
                "email: no active user or alias has the address bob@example.org",
                "email: domain example.net is not managed here",
                "email: not a valid e-mail address",
                "key: must be a string",
              ],
            },
            { body: true, bodyLimit: "Request body too large (limit 2 MiB)." },
          ),
        },
      },
    },
    async (request) => {
      const raw: unknown = request.body;
      const data =
        raw instanceof Buffer
          ? new Uint8Array(raw)
          : typeof raw === "string"
            ? raw
            : typeof (raw as { key?: unknown } | undefined)?.key === "string"
              ? (raw as { key: string }).key
              : null;
      if (data === null) throw keyNotSent();
      return admin.openPgpKeys.import(actorOf(request), request.params.email, data);
    },
  );
  app.get(
    "/api/admin/openpgp-keys/:email",
    {
      schema: {
        ...adminRoute(tag, "The key published for an address"),
        params: EmailParams,
        response: { 200: KeyInfo, ...adminErrors({ 404: ["no OpenPGP key for this address"] }) },
      },
    },
    async (request) => openPgpKeys.get(request.params.email),
  );
  app.delete(
    "/api/admin/openpgp-keys/:email",
    {
      schema: {
        ...adminRoute(tag, "Stop publishing an address's key"),
        params: EmailParams,
        response: {
          204: NoContent,
          ...adminErrors({ 404: ["no OpenPGP key for this address"] }, { body: true }),
        },
      },
    },
    async (request, reply) => {
      await admin.openPgpKeys.delete(actorOf(request), request.params.email);
      return noContent(reply);
    },
  );
}
