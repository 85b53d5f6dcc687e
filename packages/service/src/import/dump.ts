import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import type { Insertable, Kysely, SelectType } from "kysely";
import { sql } from "kysely";
import type { DatabaseHandle } from "../db/database.ts";
import { migrations } from "../db/migrations/index.ts";
import type { Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { serviceVersion } from "../version.ts";
import { type Column, insertRows } from "./tables.ts";

/**
 * `app:export` and `app:import`: everything this service holds, as JSON lines, to move an
 * installation between databases (SQLite, PostgreSQL, MariaDB). The first line is a header naming
 * the format and the schema version, then one line per row (`{"table": ..., "row": {...}}`, columns
 * in name order, flags as true/false, times as Unix seconds), table by table in an order that
 * satisfies every reference, and a last line with the row counts, without which a dump counts as
 * cut short. The dump holds what the database holds: password hashes, secret boxes, token hashes,
 * webhook secrets. Never a plain password, but it must be kept like the database itself.
 */

/** Why a dump is refused (nothing is imported): each names the line or table at fault. */
const dumpRefusal = <P extends object>(code: string, text: (params: P) => string) =>
  refusal<P>(`dump.${code}`, "invalid", text);
export const dumpLineNotJson = dumpRefusal<{ line: number }>(
  "line_not_json",
  ({ line }) => `line ${line}: not JSON`,
);
export const dumpNotOurs = dumpRefusal<{ format: string }>(
  "not_ours",
  ({ format }) => `not a dump of this service (the first line must be the ${format} header)`,
);
export const dumpVersionUnsupported = dumpRefusal<{ version: string }>(
  "version_unsupported",
  ({ version }) => `dump format version ${version} is not supported`,
);
export const dumpSchemaNewer = dumpRefusal<{ schema: string; ours: string }>(
  "schema_newer",
  ({ schema, ours }) =>
    `the dump's schema ${schema} is newer than this release's (${ours}): upgrade this installation first`,
);
export const dumpTargetNotEmpty = dumpRefusal<{ table: string; rows: number }>(
  "target_not_empty",
  ({ table, rows }) =>
    `the database is not empty (${table} has ${rows} rows): app:import fills a new database`,
);
export const dumpTableUnknown = dumpRefusal<{ line: number; table: string }>(
  "table_unknown",
  ({ line, table }) => `line ${line}: unknown table ${table}`,
);
export const dumpTablesOutOfOrder = dumpRefusal<{ line: number; table: string; before: string }>(
  "tables_out_of_order",
  ({ line, table, before }) => `line ${line}: ${table} after ${before}; the dump's tables are out of order`,
);
export const dumpRowNotObject = dumpRefusal<{ line: number }>(
  "row_not_object",
  ({ line }) => `line ${line}: a row must be an object`,
);
export const dumpColumnUnknown = dumpRefusal<{ line: number; table: string; column: string }>(
  "column_unknown",
  ({ line, table, column }) => `line ${line}: ${table} has no column ${column}`,
);
export const dumpCutShort = dumpRefusal<Record<never, never>>(
  "cut_short",
  () => "the dump is cut short (its last line is missing): nothing was imported",
);
export const dumpDamaged = dumpRefusal<{ table: string; expected: number; found: number }>(
  "damaged",
  ({ table, expected, found }) =>
    `the dump is damaged: ${table} should have ${expected} rows, it has ${found}; nothing was imported`,
);

export const dumpFormat = "mail-account-service-dump";
export const dumpVersion = 1;

type Row = Record<string, unknown>;

/** A flag column of a table (schema.ts's `Flag`: read back as boolean or number). */
type FlagColumn<T extends keyof Database> = {
  [C in Column<T>]: boolean extends SelectType<Database[T][C]> ? C : never;
}[Column<T>];

export interface DumpTable<T extends keyof Database = keyof Database> {
  name: T;
  /** The primary key: the order rows are written in. */
  key: readonly Column<T>[];
  /** The key is an auto-increment `id`: read in pages by id, and PostgreSQL's sequence set after an import. */
  serial?: boolean;
  /** Columns that are flags (0/1, true/false depending on the database). */
  flags: readonly FlagColumn<T>[];
  /** Only some rows belong in a dump (deliveries and mails still to be sent). */
  only?: { column: Column<T>; not: string };
  /** Columns of a claim on a row in progress: a dump carries the row unclaimed. */
  unclaim?: readonly Column<T>[];
  /** Filled by a migration: its rows are replaced by the dump's, not refused as data already there. */
  seeded?: boolean;
}

/** One of the tables, its columns checked against that table's own. */
type AnyDumpTable = { [T in keyof Database]: DumpTable<T> }[keyof Database];

/**
 * The tables a dump carries, in the order they are written and read back (references first). A
 * table of the database that is neither here nor in `excludedTables` fails import-dump.test.ts,
 * so a new table cannot be forgotten.
 */
export const dumpTables: readonly AnyDumpTable[] = [
  { name: "domains", key: ["id"], serial: true, flags: ["invitation_enabled", "app_passwords_required"] },
  {
    name: "users",
    key: ["id"],
    serial: true,
    flags: [
      "password_change_required",
      "mail_crypt",
      "totp_confirmed",
      "deleted",
      "passkey_sign_in",
      "password_app_form",
      "app_passwords_required",
    ],
  },
  { name: "passkeys", key: ["id"], serial: true, flags: [] },
  { name: "app_passwords", key: ["id"], serial: true, flags: [] },
  { name: "aliases", key: ["id"], serial: true, flags: ["random", "deleted"] },
  { name: "invite_codes", key: ["id"], serial: true, flags: [] },
  { name: "reserved_names", key: ["id"], serial: true, flags: [], seeded: true },
  { name: "api_tokens", key: ["id"], serial: true, flags: [] },
  { name: "openpgp_keys", key: ["id"], serial: true, flags: [] },
  { name: "settings", key: ["name"], flags: [] },
  { name: "webhook_endpoints", key: ["id"], serial: true, flags: ["enabled"] },
  { name: "webhook_endpoint_domains", key: ["endpoint_id", "domain_id"], flags: [] },
  {
    name: "webhook_deliveries",
    key: ["id"],
    flags: [],
    only: { column: "status", not: "success" },
    unclaim: ["claimed_until", "claim_token"],
  },
  {
    name: "mail_outbox",
    key: ["id"],
    flags: [],
    only: { column: "status", not: "success" },
    unclaim: ["claimed_until", "claim_token"],
  },
  { name: "audit_log", key: ["id"], serial: true, flags: [] },
  { name: "security_events", key: ["id"], serial: true, flags: [] },
];

/** Tables a dump leaves out, and why. */
export const excludedTables: Readonly<Record<string, string>> = {
  web_sessions: "sessions: people sign in again on the new database",
  sign_in_failures: "short-lived throttling state",
  trusted_clients: "the sign-in guard's clients that signed in before: relearnt at the next sign-ins",
  job_runs: "when the scheduled jobs last ran on this installation",
  passkey_challenges: "single-use WebAuthn challenges that expire within minutes",
  schema_migrations: "migration bookkeeping: the header names the schema version",
  schema_migrations_lock: "migration bookkeeping",
};

/** The schema version of this release: its last migration. */
export const schemaVersion = (): string => Object.keys(migrations).at(-1) ?? "";

interface Header {
  format: string;
  version: number;
  schema: string;
  service: string;
  exportedAt: string;
  tables: string[];
}

/** Byte order, the same on every database (PostgreSQL's collations would sort `a_b` and `ab` otherwise). */
const byKey =
  (key: readonly string[]) =>
  (a: Row, b: Row): number => {
    for (const column of key) {
      const x = a[column];
      const y = b[column];
      if (typeof x === "number" && typeof y === "number") {
        if (x !== y) return x - y;
      } else {
        const c = Buffer.compare(Buffer.from(String(x)), Buffer.from(String(y)));
        if (c !== 0) return c;
      }
    }
    return 0;
  };

/** A stored row as the dump writes it: columns in name order, flags as booleans. */
function dumpRow(table: AnyDumpTable, row: Row): Row {
  const flags: readonly string[] = table.flags;
  const unclaim: readonly string[] = table.unclaim ?? [];
  const out: Row = {};
  for (const column of Object.keys(row).sort()) {
    const value = row[column];
    // A flag that may be unset (null: "follow the domain") stays null.
    if (flags.includes(column))
      out[column] = value === null ? null : value === true || value === 1 || value === "1";
    else if (unclaim.includes(column)) out[column] = null;
    else if (typeof value === "bigint") out[column] = Number(value);
    else out[column] = value;
  }
  return out;
}

/**
 * Writes the dump, every table read in one transaction (one consistent state while the service
 * keeps running). `write` gets one line at a time, newline included.
 */
export async function exportDump(
  handle: DatabaseHandle,
  write: (line: string) => void | Promise<void>,
): Promise<Record<string, number>> {
  const db = handle.db;
  const counts: Record<string, number> = {};
  const header: Header = {
    format: dumpFormat,
    version: dumpVersion,
    schema: schemaVersion(),
    service: serviceVersion,
    exportedAt: new Date().toISOString(),
    tables: dumpTables.map((t) => t.name),
  };
  const run = async (trx: Kysely<Database>) => {
    await write(`${JSON.stringify(header)}\n`);
    for (const table of dumpTables) {
      counts[table.name] = 0;
      const only = table.only;
      const rowsOf = () => {
        const query = trx.selectFrom(table.name).selectAll();
        return only ? query.where(only.column, "!=", only.not) : query;
      };
      const emit = async (rows: Row[]) => {
        for (const row of rows)
          await write(`${JSON.stringify({ table: table.name, row: dumpRow(table, row) })}\n`);
        counts[table.name] = (counts[table.name] ?? 0) + rows.length;
      };
      if (table.serial) {
        // Keyset pages by id: large tables never sit in memory whole.
        let last = 0;
        for (;;) {
          const rows = await rowsOf().where("id", ">", last).orderBy("id").limit(1000).execute();
          await emit(rows);
          if (rows.length < 1000) break;
          last = Number(rows[rows.length - 1]?.id);
        }
      } else {
        const rows = await rowsOf().execute();
        await emit(rows.sort(byKey(table.key)));
      }
    }
    await write(`${JSON.stringify({ end: true, rows: counts })}\n`);
  };
  if (handle.dialect === "sqlite") await db.transaction().execute(run);
  else await db.transaction().setIsolationLevel("repeatable read").execute(run);
  return counts;
}

/**
 * A dump's row is a row of its table when each of its fields is one of the table's columns in this
 * database: the dump holds the database's own rows, and the database checks their values.
 */
const isRowOf = <T extends keyof Database>(
  _table: T,
  row: Row,
  columns: ReadonlySet<string>,
): row is Row & Insertable<Database[T]> => Object.keys(row).every((column) => columns.has(column));

/** What the columns of each table of this database are (a dump's columns must be among them). */
async function columnsOf(db: Kysely<Database>): Promise<Map<string, Set<string>>> {
  const tables = await db.introspection.getTables();
  return new Map(tables.map((t) => [t.name, new Set(t.columns.map((c) => c.name))]));
}

/**
 * Reads a dump into this database, all of it in one transaction: a dump that is cut short, of a
 * newer schema, or meant for a database that already holds data changes nothing.
 */
export async function importDump(handle: DatabaseHandle, input: Readable): Promise<Record<string, number>> {
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  const iterator = lines[Symbol.asyncIterator]();
  let lineNumber = 0;
  const next = async (): Promise<unknown> => {
    for (;;) {
      const { value, done } = await iterator.next();
      if (done) return undefined;
      lineNumber++;
      if (value.trim() === "") continue;
      try {
        return JSON.parse(value);
      } catch {
        throw dumpLineNotJson({ line: lineNumber });
      }
    }
  };
  const header = (await next()) as Partial<Header> | undefined;
  if (!header || header.format !== dumpFormat) throw dumpNotOurs({ format: dumpFormat });
  if (header.version !== dumpVersion) throw dumpVersionUnsupported({ version: String(header.version) });
  const known = Object.keys(migrations);
  if (typeof header.schema !== "string" || !known.includes(header.schema))
    throw dumpSchemaNewer({ schema: String(header.schema), ours: schemaVersion() });

  const db = handle.db;
  const columns = await columnsOf(handle.db);
  const order = new Map(dumpTables.map((t, i) => [t.name as string, i]));
  for (const table of dumpTables) {
    if (table.seeded) continue;
    const row = await db
      .selectFrom(table.name)
      .select((eb) => eb.fn.countAll().as("n"))
      .executeTakeFirstOrThrow();
    if (Number(row.n) > 0) throw dumpTargetNotEmpty({ table: table.name, rows: Number(row.n) });
  }

  const counts: Record<string, number> = {};
  await db.transaction().execute(async (trx) => {
    for (const table of dumpTables) if (table.seeded) await trx.deleteFrom(table.name).execute();
    let current: AnyDumpTable | null = null;
    let pending: Insertable<Database[keyof Database]>[] = [];
    const flush = async () => {
      if (!current || pending.length === 0) return;
      await insertRows(trx, current.name, pending);
      pending = [];
    };
    let trailer: { end?: unknown; rows?: Record<string, unknown> } | undefined;
    for (;;) {
      const item = (await next()) as { table?: unknown; row?: unknown; end?: unknown } | undefined;
      if (item === undefined) break;
      if (item.end === true) {
        trailer = item as typeof trailer;
        break;
      }
      const name = String(item.table);
      const table = dumpTables.find((t) => t.name === name);
      if (!table) throw dumpTableUnknown({ line: lineNumber, table: name.slice(0, 60) });
      if (table !== current) {
        if (current && (order.get(name) ?? 0) < (order.get(current.name) ?? 0))
          throw dumpTablesOutOfOrder({ line: lineNumber, table: name, before: current.name });
        await flush();
        current = table;
      }
      if (item.row === null || typeof item.row !== "object" || Array.isArray(item.row))
        throw dumpRowNotObject({ line: lineNumber });
      const row: Row = {};
      const flags: readonly string[] = table.flags;
      for (const [column, value] of Object.entries(item.row as Row))
        row[column] = flags.includes(column) ? (value === null ? null : value === true ? 1 : 0) : value;
      const known = columns.get(name) ?? new Set<string>();
      if (!isRowOf(table.name, row, known)) {
        const column = Object.keys(row).find((c) => !known.has(c)) ?? "";
        throw dumpColumnUnknown({ line: lineNumber, table: name, column: column.slice(0, 60) });
      }
      pending.push(row);
      counts[name] = (counts[name] ?? 0) + 1;
      if (pending.length >= 1000) await flush();
    }
    await flush();
    if (!trailer) throw dumpCutShort();
    for (const table of dumpTables) {
      const expected = Number(trailer.rows?.[table.name] ?? 0);
      if (expected !== (counts[table.name] ?? 0))
        throw dumpDamaged({ table: table.name, expected, found: counts[table.name] ?? 0 });
    }
    // PostgreSQL's serial columns do not move on with the ids given: set each sequence past them.
    if (handle.dialect === "postgres")
      for (const table of dumpTables) {
        if (!table.serial || !counts[table.name]) continue;
        const serial = await sql<{
          name: string | null;
        }>`select pg_get_serial_sequence(${table.name}, 'id') as name`.execute(trx);
        if (!serial.rows[0]?.name) continue;
        await sql`select setval(${serial.rows[0].name}::regclass, (select max(id) from ${sql.table(table.name)}))`.execute(
          trx,
        );
      }
  });
  return counts;
}
