import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { inTransaction } from "../db/transaction.ts";
import { refusal } from "../errors.ts";
import { checkAddress } from "./address-syntax.ts";
import { containsText, type Listing, type Page } from "./paging.ts";
import { nowSeconds } from "./users.ts";

export const reservedNameInvalid = refusal(
  "reserved_name.invalid",
  "invalid",
  () => "name: not a local part (letters, digits and . _ + = -)",
);
export const reservedNameExists = refusal<{ name: string }>(
  "reserved_name.exists",
  "conflict",
  ({ name }) => `name: ${name} is already reserved`,
);
export const reservedNameNotFound = refusal(
  "reserved_name.not_found",
  "not_found",
  () => "reserved name not found",
);

/**
 * Reserved names (reference section 1.7): local parts nobody may register or take as a custom
 * alias, in any domain (postmaster and abuse are seeded by the migration). Stored lower-case;
 * compared lower-case.
 */
export interface ReservedName {
  id: number;
  name: string;
  createdAt: number;
  updatedAt: number;
}

export interface ReservedNameImport {
  /** Names added. */
  imported: number;
  /** Names already reserved (or repeated in the text). */
  skipped: number;
  /** Lines that are no local part the service could create, as written (trimmed). */
  invalid: string[];
}

/** The stored form of a reserved name, or null when it is no local part a new address could have. */
export function normalizeReservedName(raw: unknown): string | null {
  if (typeof raw !== "string") return null;
  const name = raw.trim().toLowerCase();
  if (name === "" || name.includes("@")) return null;
  // The local-part rule of new addresses (address-syntax.ts), checked on a placeholder domain.
  const check = checkAddress(`${name}@example.org`, "new");
  return check.ok && check.address.localPart === name ? name : null;
}

/** Names of an import text: one per line, blank lines and `#` comment lines left out. */
export function reservedNameLines(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

export class ReservedNameService {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Whether this local part is reserved (any case). */
  async isReserved(localPart: string, db: Kysely<Database> = this.#db): Promise<boolean> {
    const name = localPart.trim().toLowerCase();
    if (name === "") return false;
    const row = await db
      .selectFrom("reserved_names")
      .select("id")
      .where("name", "=", name)
      .executeTakeFirst();
    return row !== undefined;
  }

  async list(page: Page): Promise<Listing<ReservedName>> {
    let query = this.#db.selectFrom("reserved_names");
    if (page.search !== "") query = query.where(containsText("name", page.search));
    const [rows, count] = await Promise.all([
      query.selectAll().orderBy("name").limit(page.limit).offset(page.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    return { items: rows.map(toReservedName), total: Number(count.n) };
  }

  async create(raw: string, trx?: Transaction<Database>): Promise<ReservedName> {
    const name = normalizeReservedName(raw);
    if (!name) throw reservedNameInvalid();
    return inTransaction(this.#db, trx, async (trx) => {
      if (await this.isReserved(name, trx)) throw reservedNameExists({ name });
      const now = nowSeconds();
      await trx.insertInto("reserved_names").values({ name, created_at: now, updated_at: now }).execute();
      const row = await trx
        .selectFrom("reserved_names")
        .selectAll()
        .where("name", "=", name)
        .executeTakeFirstOrThrow();
      return toReservedName(row);
    });
  }

  async delete(raw: string, db: Kysely<Database> = this.#db): Promise<void> {
    const name = typeof raw === "string" ? raw.trim().toLowerCase() : "";
    const result = await db.deleteFrom("reserved_names").where("name", "=", name).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) throw reservedNameNotFound();
  }

  /**
   * Adds the names of a text (the reference's contrib/reserved_names.txt format: one per line,
   * `#` comments); names already reserved are skipped, lines that are no local part are reported
   * and skipped. One transaction: all the valid names or none.
   */
  async import(text: string, trx?: Transaction<Database>): Promise<ReservedNameImport> {
    const wanted: string[] = [];
    const invalidLines: string[] = [];
    for (const line of reservedNameLines(text)) {
      const name = normalizeReservedName(line);
      if (name) wanted.push(name);
      else invalidLines.push(line);
    }
    return inTransaction(this.#db, trx, async (trx) => {
      const existing = new Set(
        (await trx.selectFrom("reserved_names").select("name").execute()).map((row) => row.name),
      );
      const fresh = [...new Set(wanted)].filter((name) => !existing.has(name));
      const now = nowSeconds();
      for (let i = 0; i < fresh.length; i += 200) {
        await trx
          .insertInto("reserved_names")
          .values(fresh.slice(i, i + 200).map((name) => ({ name, created_at: now, updated_at: now })))
          .execute();
      }
      return { imported: fresh.length, skipped: wanted.length - fresh.length, invalid: invalidLines };
    });
  }

  /** Every reserved name, sorted, one per line with a trailing newline (what `import` reads). */
  async export(): Promise<string> {
    const rows = await this.#db.selectFrom("reserved_names").select("name").execute();
    const names = rows.map((row) => row.name).sort();
    return names.length === 0 ? "" : `${names.join("\n")}\n`;
  }
}

const toReservedName = (row: { id: number; name: string; created_at: number; updated_at: number }) => ({
  id: Number(row.id),
  name: row.name,
  createdAt: Number(row.created_at),
  updatedAt: Number(row.updated_at),
});
