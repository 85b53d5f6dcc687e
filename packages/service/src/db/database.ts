import { hash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import {
  CompiledQuery,
  Kysely,
  MysqlDialect,
  PostgresDialect,
  type SqliteDatabase,
  SqliteDialect,
  sql,
} from "kysely";
import { keyBatchedReader, mysqlKeyBatch, postgresKeyBatch } from "./key-batches.ts";
import type { Database } from "./schema.ts";

/** A query without an answer for this long fails (the database counts as unavailable). */
const queryTimeoutMs = 10000;

export type DialectName = "sqlite" | "postgres" | "mysql";

export interface DatabaseHandle {
  db: Kysely<Database>;
  dialect: DialectName;
  close(): Promise<void>;
}

/** Whether the database answers a trivial query within the time limit (health checks). */
export async function pingDatabase(handle: DatabaseHandle, timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const ping = sql`select 1`
    .execute(handle.db)
    .then(() => true)
    .catch(() => false);
  try {
    return await Promise.race([ping, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface DatabaseOptions {
  poolSize?: number;
  /** PostgreSQL: compiled reads as named prepared statements (default true). */
  preparedStatements?: boolean;
}

/** The one place that knows which dialect a DATABASE_URL means. */
export async function openDatabase(url: string, options: DatabaseOptions = {}): Promise<DatabaseHandle> {
  const poolSize = options.poolSize ?? 10;
  if (url.startsWith("sqlite:")) return openSqlite(url.slice("sqlite:".length));
  if (/^postgres(ql)?:\/\//.test(url)) return openPostgres(url, poolSize, options.preparedStatements ?? true);
  if (/^(mysql|mariadb):\/\//.test(url)) return openMysql(url, poolSize);
  throw new Error("unsupported DATABASE_URL scheme");
}

function openSqlite(path: string): DatabaseHandle {
  const file = path.replace(/^\/\/(?=\/)/, "");
  const memory = file === ":memory:" || file === "";
  if (!memory) mkdirSync(dirname(resolve(file)), { recursive: true });
  const sqlite = new BetterSqlite3(memory ? ":memory:" : file);
  // WAL lets readers proceed during a write; a busy timeout covers other processes (the console).
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = NORMAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  // Lookups read random rows: serve them from memory-mapped pages and a larger page cache instead
  // of a read() system call per page (the default cache is 2 MiB).
  sqlite.pragma("mmap_size = 1073741824");
  sqlite.pragma("cache_size = -65536");
  const connection = new SqliteConnection(sqlite);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: connection }) });
  directReads.set(db, (sqlText, shape) => connection.directReader(sqlText, shape.sameInBatch));
  return { db, dialect: "sqlite", close: () => db.destroy() };
}

/** Rows of a read; undefined when it must take Kysely's path this time. */
export type DirectReader = (parameters: readonly unknown[]) => unknown[] | Promise<unknown[]> | undefined;

/** What preparedQuery knows about a compiled read, for the dialect's direct way. */
export interface ReadShape {
  /** SQLite: the rows for the same parameters are kept for the read batch. */
  sameInBatch: boolean;
  /** A read by one text key: the positions of the SQL parameters that carry it. */
  keyParameters: number[] | null;
}

/**
 * A faster way for a compiled read (preparedQuery) than Kysely's generic one, where the dialect
 * has one; gives undefined for SQL that must take Kysely's path. SQLite runs in-process and
 * synchronously: a read goes straight to its own prepared statement, skipping Kysely's connection
 * queue and chain of promises, which cost more than the indexed lookup itself. PostgreSQL: a
 * named prepared statement. PostgreSQL and MySQL/MariaDB: the reads by one key of an event-loop
 * turn as one statement (db/key-batches.ts); other reads take Kysely's path on MySQL/MariaDB.
 */
export const directReads = new WeakMap<
  Kysely<Database>,
  (sql: string, shape: ReadShape) => DirectReader | undefined
>();

/** Prepared statements kept per SQL text; Kysely's SQLite driver would prepare on every query. */
const statementCacheSize = 256;

/**
 * The one SQLite connection, as Kysely and the direct reads see it.
 *
 * Statements: better-sqlite3 compiles a statement on each `prepare`, which cost more than running
 * the indexed lookups themselves. The most recently used statements are kept (an LRU keyed by SQL
 * text; SQLite re-prepares a cached statement by itself after a schema change). A statement still
 * iterating (a streamed query) is never handed out twice: a fresh one is prepared.
 *
 * Read batches: outside a transaction every statement is its own read transaction, and starting
 * and ending one (the WAL read lock: file locks and a stat) cost several times the indexed lookup
 * itself. So the direct reads of one event-loop turn share one read transaction, opened by the
 * first and ended when the turn's I/O callbacks are done (setImmediate). Every read in it sees the
 * database as it was at that turn's first read: a write committed meanwhile by another process is
 * seen from the next turn, as if it had come a moment later. Anything that goes through Kysely
 * (every write, every transaction) ends the batch first, so this process's own writes are seen at
 * once, and the batch never holds back a checkpoint for longer than a turn.
 */
class SqliteConnection implements SqliteDatabase {
  readonly #sqlite: BetterSqlite3.Database;
  readonly #statements = new Map<string, BetterSqlite3.Statement>();
  readonly #begin: BetterSqlite3.Statement;
  readonly #commit: BetterSqlite3.Statement;
  #readBatchOpen = false;
  /** Counts read batches, so rows kept for one are never handed out in the next. */
  #readBatch = 0;
  readonly #endReadBatchLater = () => this.#endReadBatch();

  constructor(sqlite: BetterSqlite3.Database) {
    this.#sqlite = sqlite;
    this.#begin = sqlite.prepare("BEGIN");
    this.#commit = sqlite.prepare("COMMIT");
  }

  /** Kysely's way in: whatever it runs starts outside any read batch. */
  prepare(sql: string): BetterSqlite3.Statement {
    this.#endReadBatch();
    return this.#statement(sql);
  }

  close(): void {
    this.#endReadBatch();
    this.#sqlite.close();
  }

  /**
   * A read with a statement of its own (kept for the connection's life, no cache lookup per call)
   * run inside the turn's read batch. `sameInBatch`: the rows for the same parameters are kept
   * until the batch ends; within one read transaction the answer cannot change, so asking again
   * is saved (for a query most requests repeat, such as the API token).
   */
  directReader(sql: string, sameInBatch = false): DirectReader | undefined {
    const statement = this.#sqlite.prepare(sql);
    if (!statement.reader) return undefined;
    const kept = new Map<string, unknown[]>();
    let keptInBatch = -1;
    return (parameters) => {
      if (!this.#readBatchOpen) {
        // A transaction of Kysely's holds the connection: wait for it (through Kysely's queue)
        // rather than see its uncommitted writes.
        if (this.#sqlite.inTransaction) return undefined;
        this.#begin.run();
        this.#readBatchOpen = true;
        this.#readBatch++;
        setImmediate(this.#endReadBatchLater);
      }
      if (!sameInBatch) return statement.all(parameters as unknown[]);
      if (keptInBatch !== this.#readBatch) {
        kept.clear();
        keptInBatch = this.#readBatch;
      }
      const key = JSON.stringify(parameters);
      let rows = kept.get(key);
      if (rows === undefined) {
        rows = statement.all(parameters as unknown[]);
        kept.set(key, rows);
      }
      return rows;
    };
  }

  #endReadBatch(): void {
    if (!this.#readBatchOpen) return;
    this.#readBatchOpen = false;
    if (!this.#sqlite.inTransaction) return;
    // A read-only transaction has nothing to lose; should COMMIT fail, ROLLBACK still ends it.
    try {
      this.#commit.run();
    } catch {
      this.#sqlite.exec("ROLLBACK");
    }
  }

  #statement(sql: string): BetterSqlite3.Statement {
    const statements = this.#statements;
    const cached = statements.get(sql);
    if (cached !== undefined) {
      if (cached.busy) return this.#sqlite.prepare(sql);
      // Map order is insertion order: re-inserting marks the statement as most recently used.
      statements.delete(sql);
      statements.set(sql, cached);
      return cached;
    }
    const statement = this.#sqlite.prepare(sql);
    statements.set(sql, statement);
    if (statements.size > statementCacheSize) statements.delete(statements.keys().next().value as string);
    return statement;
  }
}

async function openPostgres(
  url: string,
  poolSize: number,
  preparedStatements: boolean,
): Promise<DatabaseHandle> {
  const pg = (await import("pg")).default;
  // BIGINT (our Unix times) and COUNT(*) come back as strings by default; they fit a JS number.
  pg.types.setTypeParser(20, (value: string) => Number(value));
  const pool = new pg.Pool({
    connectionString: url.replace(/^postgresql:/, "postgres:"),
    max: poolSize,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30000,
    query_timeout: queryTimeoutMs,
  });
  // A client that loses its connection emits 'error'; without a listener that kills the process.
  // The pool listens only while a client is idle, so checked-out clients get their own listener
  // (the query under way still fails, and the pool drops the broken client when it is released).
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  // Hot reads run as named prepared statements: PostgreSQL parses and plans each once per pooled
  // connection instead of on every call (pg sends Bind/Execute only). Through the pool, as
  // Kysely's own root queries go, so they never join a transaction's connection. A pooler in
  // transaction mode without prepared-statement support needs them off. Reads by one key are
  // batched per event-loop turn either way.
  const named = (text: string) =>
    preparedStatements ? { name: `mas_${hash("sha256", text, "hex").slice(0, 24)}` } : {};
  directReads.set(db, (sqlText, shape) => {
    // The statement names are worked out once per read, not on every call.
    const name = named(sqlText);
    const plain = async (values: readonly unknown[]) =>
      (await pool.query({ ...name, text: sqlText, values: [...values] })).rows;
    if (shape.keyParameters !== null) {
      let batchName: ReturnType<typeof named> | undefined;
      const batchNamed = (text: string) => {
        batchName ??= named(text);
        return batchName;
      };
      return keyBatchedReader(shape.keyParameters[0] ?? 0, {
        single: plain,
        batch: postgresKeyBatch(sqlText, shape.keyParameters, (text, values) =>
          pool.query({ ...batchNamed(text), text, values, rowMode: "array" }),
        ),
        maxKeys: 500,
      });
    }
    return preparedStatements ? plain : undefined;
  });
  return { db, dialect: "postgres", close: () => db.destroy() };
}

async function openMysql(url: string, poolSize: number): Promise<DatabaseHandle> {
  const mysql = await import("mysql2");
  const pool = mysql.createPool({
    uri: url.replace(/^mariadb:/, "mysql:"),
    connectionLimit: poolSize,
    connectTimeout: 5000,
    charset: "utf8mb4",
    timezone: "Z",
    supportBigNumbers: true,
    bigNumberStrings: false,
  });
  pool.on("connection", (connection) => {
    connection.on("error", () => {});
    // mysql2 has no query timeout of its own: a database that stops answering (a network partition,
    // a frozen server) would hold the query, and the request waiting for it, forever. Fail it after
    // the time pg's query_timeout allows, and drop the connection from the pool.
    const query = connection.query.bind(connection) as (...args: unknown[]) => unknown;
    (connection as { query: unknown }).query = (...args: unknown[]) => {
      const callback = args.at(-1);
      if (typeof callback !== "function") return query(...args);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        connection.destroy();
        callback(Object.assign(new Error("Query read timeout"), { code: "ETIMEDOUT" }));
      }, queryTimeoutMs);
      return query(...args.slice(0, -1), (...result: unknown[]) => {
        clearTimeout(timer);
        if (!timedOut) callback(...result);
      });
    };
  });
  const db = new Kysely<Database>({ dialect: new MysqlDialect({ pool }) });
  // Reads by one key are batched per event-loop turn (db/key-batches.ts), through Kysely's own
  // path (its connection handling and the query timeout above).
  const run = async (text: string, values: readonly unknown[]) =>
    (await db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, [...values]))).rows;
  directReads.set(db, (sqlText, shape) => {
    if (shape.keyParameters === null) return undefined;
    const batch = mysqlKeyBatch(sqlText, shape.keyParameters, run);
    if (batch === null) return undefined;
    return keyBatchedReader(shape.keyParameters[0] ?? 0, {
      single: (values) => run(sqlText, values),
      batch,
      maxKeys: 100,
    });
  });
  return { db, dialect: "mysql", close: () => db.destroy() };
}
