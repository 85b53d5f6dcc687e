import { hash, randomBytes } from "node:crypto";
import type { Kysely, Selectable } from "kysely";
import { nowSeconds, parseStringList } from "../accounts/users.ts";
import type { ApiTokenTable, Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";

export const scopes = ["mailbox-server", "mta", "webmail", "identity", "retention", "admin"] as const;
export type Scope = (typeof scopes)[number];
export const isScope = (value: string): value is Scope => (scopes as readonly string[]).includes(value);

/**
 * userli's names of the integration scopes. They are accepted wherever a scope is, with or without
 * USERLI_COMPAT (which only adds userli's path prefixes): a token created with them, or carried over
 * from a userli database, grants what the neutral name grants, and is listed as it was stored.
 */
export const userliScopeNames = {
  dovecot: "mailbox-server",
  postfix: "mta",
  roundcube: "webmail",
  keycloak: "identity",
} as const satisfies Record<string, Scope>;
/** A scope as a token may store it: a neutral name or userli's name of the same scope. */
export type StoredScope = Scope | keyof typeof userliScopeNames;
const isUserliScopeName = (value: string): value is keyof typeof userliScopeNames =>
  Object.hasOwn(userliScopeNames, value);
export const isStoredScope = (value: string): value is StoredScope =>
  isScope(value) || isUserliScopeName(value);

/** The one rule of scopes: do a token's stored scopes grant the scope a route requires? */
export const tokenNotFound = refusal("api_token.not_found", "not_found", () => "API token not found");
export const scopesNotList = refusal(
  "api_token.scopes_not_list",
  "invalid",
  () => "scopes: must be a list of scopes",
);
export const scopeUnknown = refusal<{ scope: string; known: string }>(
  "api_token.scope_unknown",
  "invalid",
  ({ scope, known }) => `scopes: unknown scope "${scope}" (known: ${known})`,
);
export const scopesEmpty = refusal<{ known: string }>(
  "api_token.scopes_empty",
  "invalid",
  ({ known }) => `scopes: at least one of ${known}`,
);
export const tokenNameLength = refusal(
  "api_token.name_length",
  "invalid",
  () => "name: must be 1 to 64 characters",
);

export function grantsScope(stored: readonly StoredScope[], required: Scope): boolean {
  for (const scope of stored) {
    if (scope === required || (isUserliScopeName(scope) && userliScopeNames[scope] === required)) return true;
  }
  return false;
}

/** Shared by the requests of a read batch: never changed once made. */
export interface ApiToken {
  readonly id: number;
  readonly name: string;
  /** As stored: neutral names and userli's (see grantsScope). */
  readonly scopes: readonly StoredScope[];
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
}

export interface CreatedToken {
  token: ApiToken;
  /** Shown once; only its SHA-256 is stored. */
  plainToken: string;
}

const lastUsedWriteInterval = 300;

export const hashToken = (plain: string): string => hash("sha256", plain, "hex");

/** The scopes of a new token, in either spelling (userli's names are kept as given). */
export function checkScopes(value: unknown): StoredScope[] {
  const list = typeof value === "string" ? value.split(",") : value;
  if (!Array.isArray(list)) throw scopesNotList();
  const result: StoredScope[] = [];
  for (const raw of list) {
    const scope = typeof raw === "string" ? raw.trim() : "";
    if (scope === "") continue;
    if (!isStoredScope(scope))
      throw scopeUnknown({ scope: String(raw).slice(0, 50), known: scopes.join(", ") });
    if (!result.includes(scope)) result.push(scope);
  }
  if (result.length === 0) throw scopesEmpty({ known: scopes.join(", ") });
  return result;
}

/** A token's name: 1 to 64 characters, surrounding spaces dropped. */
export function checkTokenName(value: unknown): string {
  const name = typeof value === "string" ? value.trim() : "";
  if (name.length < 1 || name.length > 64) throw tokenNameLength();
  return name;
}

/** Plain tokens whose hash is kept (cleared when full): mail servers present a handful of tokens. */
const keptHashes = 256;

/** An API token's row, as stored. */
export type ApiTokenRow = Selectable<ApiTokenTable>;

/**
 * API tokens: created, listed and deleted by admins; checked on every API request. The check's
 * rules (hashing, the row's meaning, when a use is recorded) are here; the integration API's fast
 * path reads the row its own way and applies the same rules (`hashOf`, `tokenOf`, `recordUseIfDue`).
 */
export class TokenService {
  readonly #db: Kysely<Database>;
  /**
   * SHA-256 of the well-formed plain tokens seen lately. Only the hashing is saved: the row is
   * still read for every request, so a deleted token stops working at once. A flood of made-up
   * tokens only clears it.
   */
  readonly #hashes = new Map<string, string>();
  /** The ApiToken made from a row: a SQLite read batch hands the same row to all its requests. */
  readonly #tokenOfRow = new WeakMap<object, ApiToken>();

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  async create(rawName: unknown, rawScopes: unknown, db: Kysely<Database> = this.#db): Promise<CreatedToken> {
    const name = checkTokenName(rawName);
    const tokenScopes = checkScopes(rawScopes);
    const plainToken = randomBytes(32).toString("hex");
    const now = nowSeconds();
    const tokenHash = hashToken(plainToken);
    await db
      .insertInto("api_tokens")
      .values({
        name,
        scopes: JSON.stringify(tokenScopes),
        token_hash: tokenHash,
        created_at: now,
        last_used_at: null,
      })
      .execute();
    const row = await db
      .selectFrom("api_tokens")
      .selectAll()
      .where("token_hash", "=", tokenHash)
      .executeTakeFirstOrThrow();
    return { token: toToken(row), plainToken };
  }

  async list(db: Kysely<Database> = this.#db): Promise<ApiToken[]> {
    const rows = await db.selectFrom("api_tokens").selectAll().orderBy("id").execute();
    return rows.map(toToken);
  }

  async delete(id: number, db: Kysely<Database> = this.#db): Promise<void> {
    const result = await db.deleteFrom("api_tokens").where("id", "=", id).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) throw tokenNotFound();
  }

  /** The token a plain value stands for, or null; records its use at most every five minutes. */
  async authenticate(plain: string): Promise<ApiToken | null> {
    const tokenHash = this.hashOf(plain);
    if (tokenHash === null) return null;
    const row = await this.#db
      .selectFrom("api_tokens")
      .selectAll()
      .where("token_hash", "=", tokenHash)
      .executeTakeFirst();
    if (!row) return null;
    await this.recordUseIfDue(row);
    return this.tokenOf(row);
  }

  /** The stored hash a presented token is looked up by; null for a value that cannot be a token. */
  hashOf(plain: string): string | null {
    let tokenHash = this.#hashes.get(plain);
    if (tokenHash === undefined) {
      if (!/^[0-9a-f]{64}$/i.test(plain)) return null;
      tokenHash = hashToken(plain.toLowerCase());
      if (this.#hashes.size >= keptHashes) this.#hashes.clear();
      this.#hashes.set(plain, tokenHash);
    }
    return tokenHash;
  }

  /** The token of a row; one frozen ApiToken per row object. */
  tokenOf(row: ApiTokenRow): ApiToken {
    let token = this.#tokenOfRow.get(row);
    if (token === undefined) {
      token = toToken(row);
      this.#tokenOfRow.set(row, token);
    }
    return token;
  }

  /** A token's last use is recorded at most every five minutes; null when no write is due. */
  recordUseIfDue(row: ApiTokenRow, now = nowSeconds()): Promise<void> | null {
    if (row.last_used_at !== null && row.last_used_at > now - lastUsedWriteInterval) return null;
    return this.#recordUse(row.id, now);
  }

  async #recordUse(id: number, now: number): Promise<void> {
    await this.#db
      .updateTable("api_tokens")
      .set({ last_used_at: now })
      .where("id", "=", id)
      .where((eb) =>
        eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<=", now - lastUsedWriteInterval)]),
      )
      .execute();
  }
}

function toToken(row: {
  id: number;
  name: string;
  scopes: string;
  created_at: number;
  last_used_at: number | null;
}): ApiToken {
  return Object.freeze({
    id: row.id,
    name: row.name,
    scopes: Object.freeze(parseStringList(row.scopes).filter(isStoredScope)),
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
  });
}
