import { hash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import {
  Kysely,
  type KyselyConfig,
  MysqlDialect,
  type MysqlPool,
  type MysqlPoolConnection,
  type MysqlQueryResult,
  type MysqlStream,
  type MysqlStreamOptions,
  PostgresDialect,
  SqliteDialect,
  sql,
} from "kysely";
import {
  type Keyed,
  type KeyedRead,
  type KeyReader,
  type KeyReaderOptions,
  kyselyKeyReader,
  mysqlKeyedRead,
  postgresKeyedRead,
  SqliteKeyReads,
  turnBatchedReader,
} from "./key-reads.ts";
import type { Database } from "./schema.ts";
import { withKeptStatements } from "./sqlite-statements.ts";

/** A query without an answer for this long fails (the database counts as unavailable). */
const queryTimeoutMs = 10000;

type Log = Pick<KyselyConfig, "log">;

export type DialectName = "sqlite" | "postgres" | "mysql";

export interface DatabaseHandle {
  db: Kysely<Database>;
  dialect: DialectName;
  /**
   * The way in for the per-message lookups' fast path (http/integration): a read by one key, run
   * the way this dialect runs it best (db/key-reads.ts). Nothing else uses it.
   */
  keyReader<Row extends Keyed>(read: KeyedRead<Row>, options?: KeyReaderOptions): KeyReader<Row>;
  close(): Promise<void>;
}

/**
 * Runs a long bulk load (an import) with SQLite's WAL checkpointed every 64 MiB instead of every
 * 1,000 pages: a batch of random addresses dirties pages all over the indexes, so with frequent
 * checkpoints the same pages are written again and again (a third of a 1,000,000-user import).
 * Other databases run `work` as it is.
 */
export async function withBulkWrites<T>(handle: DatabaseHandle, work: () => Promise<T>): Promise<T> {
  if (handle.dialect !== "sqlite") return work();
  await sql`PRAGMA wal_autocheckpoint = 16384`.execute(handle.db);
  try {
    return await work();
  } finally {
    await sql`PRAGMA wal_autocheckpoint = 1000`.execute(handle.db);
  }
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
  /** Kysely's log hook: every statement it runs, BEGIN and COMMIT included (the tests count them). */
  log?: KyselyConfig["log"];
}

/** The one place that knows which dialect a DATABASE_URL means. */
export async function openDatabase(url: string, options: DatabaseOptions = {}): Promise<DatabaseHandle> {
  const poolSize = options.poolSize ?? 10;
  const log = options.log === undefined ? {} : { log: options.log };
  if (url.startsWith("sqlite:")) return openSqlite(url.slice("sqlite:".length), log);
  if (/^postgres(ql)?:\/\//.test(url))
    return openPostgres(url, poolSize, options.preparedStatements ?? true, log);
  if (/^(mysql|mariadb):\/\//.test(url)) return openMysql(url, poolSize, log);
  throw new Error("unsupported DATABASE_URL scheme");
}

function openSqlite(path: string, log: Log): DatabaseHandle {
  const file = path.replace(/^\/\/(?=\/)/, "");
  const memory = file === ":memory:" || file === "";
  if (!memory) mkdirSync(dirname(resolve(file)), { recursive: true });
  const sqlite = configureSqlite(new BetterSqlite3(memory ? ":memory:" : file));
  // WAL lets readers proceed during a write; a busy timeout covers other processes (the console).
  sqlite.pragma("journal_mode = WAL");
  const db = new Kysely<Database>({
    dialect: new SqliteDialect({ database: withKeptStatements(sqlite) }),
    ...log,
  });
  if (memory) {
    // An in-memory database exists only on its one connection: keyed reads go through Kysely.
    return {
      db,
      dialect: "sqlite",
      keyReader: <Row extends Keyed>(read: KeyedRead<Row>) => kyselyKeyReader(db, read),
      close: () => db.destroy(),
    };
  }
  // The keyed reads have a connection of their own (see SqliteKeyReads), opened after the first
  // has switched the file to WAL.
  const reader = configureSqlite(new BetterSqlite3(file));
  reader.pragma("query_only = ON");
  const keyReads = new SqliteKeyReads(db, reader);
  return {
    db,
    dialect: "sqlite",
    keyReader: <Row extends Keyed>(read: KeyedRead<Row>, options: KeyReaderOptions = {}) =>
      keyReads.reader(read, options),
    close: async () => {
      keyReads.close();
      await db.destroy();
    },
  };
}

function configureSqlite(sqlite: BetterSqlite3.Database): BetterSqlite3.Database {
  sqlite.pragma("synchronous = NORMAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  // Lookups read random rows: serve them from memory-mapped pages and a larger page cache instead
  // of a read() system call per page (the default cache is 2 MiB).
  sqlite.pragma("mmap_size = 1073741824");
  sqlite.pragma("cache_size = -65536");
  return sqlite;
}

async function openPostgres(
  url: string,
  poolSize: number,
  preparedStatements: boolean,
  log: Log,
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
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), ...log });
  // Keyed reads run straight on the pool (as Kysely's own root queries do, so never inside a
  // transaction's connection), as named prepared statements: PostgreSQL parses and plans each once
  // per pooled connection instead of on every call. A pooler in transaction mode without
  // prepared-statement support needs them off (DATABASE_PREPARED_STATEMENTS=false).
  const run = async <Row>(text: string, values: unknown[]) => {
    const name = preparedStatements ? `mas_${hash("sha256", text, "hex").slice(0, 24)}` : undefined;
    return (await pool.query({ name, text, values })).rows as Row[];
  };
  return {
    db,
    dialect: "postgres",
    keyReader: <Row extends Keyed>(read: KeyedRead<Row>) =>
      turnBatchedReader(postgresKeyedRead(db, read, run<Row>), 500),
    close: () => db.destroy(),
  };
}

async function openMysql(url: string, poolSize: number, log: Log): Promise<DatabaseHandle> {
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
  pool.on("connection", (connection) => connection.on("error", () => {}));
  const timed = new TimedMysqlPool(pool, queryTimeoutMs);
  const db = new Kysely<Database>({ dialect: new MysqlDialect({ pool: timed }), ...log });
  const run = <Row>(text: string, values: unknown[]) => timed.query<Row>(text, values);
  return {
    db,
    dialect: "mysql",
    keyReader: <Row extends Keyed>(read: KeyedRead<Row>) =>
      turnBatchedReader(mysqlKeyedRead(db, read, run<Row>), 100),
    close: () => db.destroy(),
  };
}

type RawMysqlPool = import("mysql2").Pool;
type RawMysqlConnection = import("mysql2").PoolConnection;

/**
 * mysql2's pool as Kysely and the keyed reads see it, with a time limit on every query: mysql2
 * sets none by default, and a database that stops answering (a network partition, a frozen server)
 * would hold the query, and the request waiting for it, forever. A query past the limit fails as
 * unavailable and its connection is destroyed (it may still be busy), so the pool opens a new one.
 */
class TimedMysqlPool implements MysqlPool {
  readonly #pool: RawMysqlPool;
  readonly #timeoutMs: number;

  constructor(pool: RawMysqlPool, timeoutMs: number) {
    this.#pool = pool;
    this.#timeoutMs = timeoutMs;
  }

  getConnection(callback: (error: unknown, connection: MysqlPoolConnection) => void): void {
    this.#pool.getConnection((error, connection) => {
      if (error) callback(error, undefined as unknown as MysqlPoolConnection);
      else callback(null, new TimedMysqlConnection(connection, this.#timeoutMs));
    });
  }

  end(callback: (error: unknown) => void): void {
    this.#pool.end(callback);
  }

  /** One statement on a pooled connection, outside any transaction. */
  query<Row>(sqlText: string, values: unknown[]): Promise<Row[]> {
    return new Promise((resolve, reject) => {
      this.getConnection((error, connection) => {
        if (error) return reject(error);
        connection.query(sqlText, values, (queryError, result) => {
          connection.release();
          if (queryError) reject(queryError);
          else resolve(result as unknown as Row[]);
        });
      });
    });
  }
}

class TimedMysqlConnection implements MysqlPoolConnection {
  readonly #connection: RawMysqlConnection;
  readonly #timeoutMs: number;

  constructor(connection: RawMysqlConnection, timeoutMs: number) {
    this.#connection = connection;
    this.#timeoutMs = timeoutMs;
  }

  get config(): object {
    return this.#connection.config;
  }

  get threadId(): number {
    return this.#connection.threadId;
  }

  connect(callback?: (error: unknown) => void): void {
    this.#connection.connect(callback);
  }

  destroy(): void {
    this.#connection.destroy();
  }

  release(): void {
    this.#connection.release();
  }

  query(
    sqlText: string,
    parameters: unknown,
    callback?: (error: unknown, result: MysqlQueryResult) => void,
  ): { stream: (options: MysqlStreamOptions) => MysqlStream } {
    const options = { sql: sqlText, values: parameters as unknown[], timeout: this.#timeoutMs };
    if (callback === undefined) return this.#connection.query(options) as never;
    return this.#connection.query(options, (error: unknown, result: unknown) => {
      if ((error as { code?: unknown } | null)?.code === "PROTOCOL_SEQUENCE_TIMEOUT")
        this.#connection.destroy();
      callback(error, result as MysqlQueryResult);
    }) as never;
  }
}
