import BetterSqlite3 from "better-sqlite3";

/**
 * A userli 6.x database, opened read-only, in one consistent snapshot: the importer reads every
 * table in the state of one moment, while userli may go on writing. Values come back normalised,
 * whatever the dialect: times as Unix seconds (userli stores naive DATETIMEs in UTC), flags as
 * booleans, JSON columns as text.
 */

export type SourceDialect = "sqlite" | "mysql" | "postgres";
export type SourceValue = string | number | boolean | null;
/** A row of the columns a statement named. */
export type SourceRow<C extends string = string> = Readonly<Record<C, SourceValue>>;

/** What one statement reads: rows of plain values (the driver's own types, normalised later). */
type Query = (sqlText: string, params: readonly SourceValue[]) => Promise<Record<string, unknown>[]>;

export interface UserliSource {
  readonly dialect: SourceDialect;
  /** The columns of a table, or null when the table does not exist. */
  columns(table: string): Promise<Set<string> | null>;
  count(table: string): Promise<number>;
  /**
   * Every row of a table in pages of `pageSize`, ordered by `orderBy` (unique together): keyset
   * paging, so each page is one cheap indexed statement, however large the table.
   */
  pages<C extends string>(
    table: string,
    columns: readonly C[],
    orderBy: readonly C[],
    pageSize: number,
  ): AsyncGenerator<SourceRow<C>[]>;
  close(): Promise<void>;
}

/** Opens `sqlite:<path>`, `mysql://…`/`mariadb://…` or `postgres://…` read-only. */
export async function openUserliSource(url: string): Promise<UserliSource> {
  if (url.startsWith("sqlite:")) return openSqlite(url.slice("sqlite:".length).replace(/^\/\/(?=\/)/, ""));
  if (/^(mysql|mariadb):\/\//.test(url)) return openMysql(url);
  if (/^postgres(ql)?:\/\//.test(url)) return openPostgres(url);
  throw new Error("--from: a sqlite:<path>, mysql://, mariadb:// or postgres:// URL");
}

/** A naive DATETIME text (`2026-01-31 12:00:00`, fractions ignored) as Unix seconds, read as UTC. */
export function sourceTime(value: SourceValue | undefined): number | null {
  if (value === null || value === undefined || value === "") return null;
  if (typeof value === "number") return Math.floor(value);
  const match = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})/.exec(String(value));
  if (!match) return Number.NaN;
  const [, y, mo, d, h, mi, s] = match.map(Number) as number[];
  return Math.floor(Date.UTC(y!, mo! - 1, d!, h!, mi!, s!) / 1000);
}

/** A flag as any dialect stores it (BOOLEAN, TINYINT(1), INTEGER 0/1, '0'/'1'). */
export const sourceFlag = (value: SourceValue | undefined): boolean =>
  value === true || value === 1 || value === "1" || value === "t" || value === "true";

/** The columns a statement selected, normalised: the boundary where userli's rows get their type. */
function normalise<C extends string>(row: Record<string, unknown>, columns: readonly C[]): SourceRow<C> {
  const out: Record<string, SourceValue> = {};
  for (const key of columns) {
    const value = row[key];
    if (value === null || value === undefined) out[key] = null;
    else if (typeof value === "string" || typeof value === "number" || typeof value === "boolean")
      out[key] = value;
    else if (typeof value === "bigint") out[key] = Number(value);
    else if (value instanceof Date) out[key] = Math.floor(value.getTime() / 1000);
    else if (Buffer.isBuffer(value)) out[key] = value.toString("utf8");
    // MySQL's JSON type comes back parsed: back to text, as the other dialects give it.
    else out[key] = JSON.stringify(value);
  }
  // The SELECT named exactly these columns: each is a key of `out`.
  return out as SourceRow<C>;
}

/** Keyset paging over any dialect, given how it quotes names and numbers its parameters. */
function sourceOf(
  dialect: SourceDialect,
  query: Query,
  quote: (name: string) => string,
  columnsOf: (table: string) => Promise<Set<string> | null>,
  close: () => Promise<void>,
): UserliSource {
  return {
    dialect,
    columns: columnsOf,
    async count(table) {
      const [row] = await query(`SELECT COUNT(*) AS n FROM ${quote(table)}`, []);
      return Number(row?.n ?? 0);
    },
    async *pages(table, columns, orderBy, pageSize) {
      const select = `SELECT ${columns.map(quote).join(", ")} FROM ${quote(table)}`;
      const order = ` ORDER BY ${orderBy.map(quote).join(", ")} LIMIT ${Math.max(1, Math.floor(pageSize))}`;
      let last: SourceRow<(typeof columns)[number]> | null = null;
      for (;;) {
        let where = "";
        const params: SourceValue[] = [];
        if (last !== null) {
          // (a > ?) OR (a = ? AND b > ?): the row-value comparison, spelled out for every dialect.
          const terms: string[] = [];
          for (let i = 0; i < orderBy.length; i++) {
            const parts = orderBy.slice(0, i).map((name) => `${quote(name)} = ?`);
            parts.push(`${quote(orderBy[i]!)} > ?`);
            terms.push(`(${parts.join(" AND ")})`);
            for (const name of orderBy.slice(0, i + 1)) params.push(last[name] ?? null);
          }
          where = ` WHERE ${terms.join(" OR ")}`;
        }
        const rows = (await query(select + where + order, params)).map((row) => normalise(row, columns));
        if (rows.length > 0) yield rows;
        if (rows.length < pageSize) return;
        last = rows[rows.length - 1]!;
      }
    },
    close,
  };
}

function openSqlite(path: string): UserliSource {
  let database: BetterSqlite3.Database;
  try {
    database = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  } catch (error) {
    throw new Error(`cannot open ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  database.pragma("busy_timeout = 5000");
  // One read transaction: every statement sees the file as it was at the first read.
  database.exec("BEGIN");
  const query: Query = async (sqlText, params) =>
    database.prepare(sqlText).all(...params.map((p) => (typeof p === "boolean" ? Number(p) : p))) as Record<
      string,
      unknown
    >[];
  const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;
  return sourceOf(
    "sqlite",
    query,
    quote,
    async (table) => {
      const rows = database.prepare(`PRAGMA table_info(${quote(table)})`).all() as { name: string }[];
      return rows.length === 0 ? null : new Set(rows.map((r) => r.name));
    },
    async () => {
      if (database.inTransaction) database.exec("ROLLBACK");
      database.close();
    },
  );
}

async function openMysql(url: string): Promise<UserliSource> {
  const mysql = await import("mysql2/promise");
  const connection = await mysql.createConnection({
    uri: url.replace(/^mariadb:/, "mysql:"),
    charset: "utf8mb4",
    // DATETIMEs as their text: they are UTC, whatever the time zone of this process.
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: false,
    connectTimeout: 10000,
  });
  connection.on("error", () => {});
  // A consistent snapshot that refuses every write: the importer never changes userli's data.
  await connection.query("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ");
  await connection.query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY");
  const query: Query = async (sqlText, params) => {
    const [rows] = await connection.query({ sql: sqlText, values: params as SourceValue[] });
    return rows as Record<string, unknown>[];
  };
  return sourceOf(
    "mysql",
    query,
    (name) => `\`${name.replaceAll("`", "``")}\``,
    async (table) => {
      const rows = await query(
        "SELECT column_name AS name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?",
        [table],
      );
      return rows.length === 0 ? null : new Set(rows.map((r) => String(r.name)));
    },
    async () => {
      await connection.query("ROLLBACK").catch(() => {});
      await connection.end();
    },
  );
}

async function openPostgres(url: string): Promise<UserliSource> {
  const pg = (await import("pg")).default;
  // Per client, not global: times and JSON as text, BIGINT as a number.
  const asText = new Set([114, 3802, 1082, 1114, 1184]);
  const client = new pg.Client({
    connectionString: url.replace(/^postgresql:/, "postgres:"),
    connectionTimeoutMillis: 10000,
    types: {
      getTypeParser: ((oid: number, format?: "text" | "binary") => {
        if (asText.has(oid)) return (value: string) => value;
        if (oid === 20) return (value: string) => Number(value);
        return pg.types.getTypeParser(oid, format);
      }) as typeof pg.types.getTypeParser,
    },
  });
  client.on("error", () => {});
  await client.connect();
  await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  const query: Query = async (sqlText, params) => {
    let n = 0;
    const text = sqlText.replace(/\?/g, () => `$${++n}`);
    return (await client.query(text, params as unknown[])).rows as Record<string, unknown>[];
  };
  return sourceOf(
    "postgres",
    query,
    (name) => `"${name.replaceAll('"', '""')}"`,
    async (table) => {
      const rows = await query(
        "SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?",
        [table],
      );
      return rows.length === 0 ? null : new Set(rows.map((r) => String(r.name)));
    },
    async () => {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    },
  );
}
