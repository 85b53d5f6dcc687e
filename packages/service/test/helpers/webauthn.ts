import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto";

/**
 * A software authenticator for the tests that run without a browser: ES256 keys from node:crypto,
 * attestation "none" in hand-written CBOR, and the client data a browser would sign. It answers the
 * options our endpoints hand out exactly as `navigator.credentials` would, with the JSON encoding
 * the page's script (static/passkeys.js) posts.
 */

type Cbor = number | string | Uint8Array | Map<Cbor, Cbor> | Record<string, unknown>;

function head(major: number, length: number): Buffer {
  if (length < 24) return Buffer.from([(major << 5) | length]);
  if (length < 256) return Buffer.from([(major << 5) | 24, length]);
  if (length < 65536) {
    const out = Buffer.alloc(3);
    out[0] = (major << 5) | 25;
    out.writeUInt16BE(length, 1);
    return out;
  }
  const out = Buffer.alloc(5);
  out[0] = (major << 5) | 26;
  out.writeUInt32BE(length, 1);
  return out;
}

/** The CBOR the authenticators speak: integers, byte and text strings, maps. */
export function cbor(value: Cbor): Buffer {
  if (typeof value === "number") return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === "string") {
    const bytes = Buffer.from(value, "utf8");
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), value]);
  const entries = value instanceof Map ? [...value] : Object.entries(value);
  return Buffer.concat([
    head(5, entries.length),
    ...entries.flatMap(([k, v]) => [cbor(k as Cbor), cbor(v as Cbor)]),
  ]);
}

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url");
const sha256 = (data: Uint8Array | string) => createHash("sha256").update(data).digest();

export interface SoftCredential {
  id: Buffer;
  privateKey: KeyObject;
  publicKey: KeyObject;
  rpId: string;
  signCount: number;
}

interface CreationOptions {
  challenge: string;
  rp: { id?: string };
}
interface RequestOptions {
  challenge: string;
  rpId?: string;
  allowCredentials?: { id: string }[];
}

export class SoftAuthenticator {
  readonly origin: string;
  /** Whether this authenticator keeps a signature counter (synced passkeys send 0 always). */
  readonly counts: boolean;

  constructor(origin: string, { counts = true }: { counts?: boolean } = {}) {
    this.origin = origin;
    this.counts = counts;
  }

  #authData(rpId: string, signCount: number, attested?: { id: Buffer; publicKey: KeyObject }): Buffer {
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(signCount);
    // User present and verified; attested credential data on registration.
    const flags = 0x01 | 0x04 | (attested ? 0x40 : 0);
    const parts: Buffer[] = [sha256(rpId), Buffer.from([flags]), counter];
    if (attested) {
      const jwk = attested.publicKey.export({ format: "jwk" });
      const cose = cbor(
        new Map<Cbor, Cbor>([
          [1, 2],
          [3, -7],
          [-1, 1],
          [-2, Buffer.from(jwk.x ?? "", "base64url")],
          [-3, Buffer.from(jwk.y ?? "", "base64url")],
        ]),
      );
      const length = Buffer.alloc(2);
      length.writeUInt16BE(attested.id.length);
      parts.push(Buffer.alloc(16), length, attested.id, cose);
    }
    return Buffer.concat(parts);
  }

  #clientData(type: string, challenge: string, origin = this.origin): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
  }

  /** `navigator.credentials.create`: a new credential and the registration answer for it. */
  create(options: CreationOptions, { origin }: { origin?: string } = {}) {
    const rpId = options.rp.id ?? new URL(this.origin).hostname;
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const credential: SoftCredential = { id: randomBytes(16), privateKey, publicKey, rpId, signCount: 0 };
    const authData = this.#authData(rpId, 0, credential);
    const attestationObject = cbor({ fmt: "none", attStmt: {}, authData });
    const response = {
      id: b64(credential.id),
      rawId: b64(credential.id),
      type: "public-key",
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64(this.#clientData("webauthn.create", options.challenge, origin)),
        attestationObject: b64(attestationObject),
        transports: ["internal"],
      },
    };
    return { credential, response };
  }

  /** `navigator.credentials.get` with `credential`: its counter moves on first (when it counts). */
  get(credential: SoftCredential, options: RequestOptions, { origin }: { origin?: string } = {}) {
    if (this.counts) credential.signCount += 1;
    const authData = this.#authData(options.rpId ?? credential.rpId, this.counts ? credential.signCount : 0);
    const clientData = this.#clientData("webauthn.get", options.challenge, origin);
    const signature = sign("sha256", Buffer.concat([authData, sha256(clientData)]), credential.privateKey);
    return {
      id: b64(credential.id),
      rawId: b64(credential.id),
      type: "public-key",
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64(clientData),
        authenticatorData: b64(authData),
        signature: b64(signature),
        userHandle: b64(Buffer.from("user")),
      },
    };
  }
}
