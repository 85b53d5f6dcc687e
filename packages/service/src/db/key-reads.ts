import type BetterSqlite3 from "better-sqlite3";
import { type Compilable, type CompiledQuery, type Expression, type Kysely, type SqlBool, sql } from "kysely";
import type { Database } from "./schema.ts";

/** Every row of a keyed read carries the key it was found for. */
export interface Keyed {
  lookup_key: string;
}

/** The condition a keyed read puts on its key column: `= ?`, `= any(?)` or `in (?, ?, ...)`. */
export type KeyCondition = (column: string) => Expression<SqlBool>;

/**
 * A read by one text key, written as the batch query it is: given the condition on its key column,
 * it selects the rows of every key the condition matches, each with its key as `lookup_key`. The
 * same definition serves one key or many; each dialect supplies the condition it runs best.
 */
export type KeyedRead<Row extends Keyed> = (db: Kysely<Database>, keys: KeyCondition) => Compilable<Row>;

/** A keyed read, its row type inferred from the query. */
export const keyedRead = <Row extends Keyed>(read: KeyedRead<Row>): KeyedRead<Row> => read;

/** The rows for one key: at once where the dialect answers at once (SQLite), else a promise. */
export type KeyReader<Row> = (key: string) => Row[] | Promise<Row[]>;

export interface KeyReaderOptions {
  /**
   * SQLite: the rows for the same key are read once per read batch (one event-loop turn, one
   * snapshot) and shared by the callers of that batch, who must not change them.
   */
  sameInTurn?: boolean;
}

/** Placeholder values bound while compiling, replaced by the keys on every call. */
const marker = (index: number) => `\u0000key-${index}\u0000`;

/** A keyed read compiled once for `count` keys, with the positions where the keys are bound. */
interface CompiledKeyedRead {
  query: CompiledQuery;
  /** For each SQL parameter: the index of the key it carries, or -1 for a constant of the read. */
  keySlots: number[];
}

function compileKeyedRead<Row extends Keyed>(
  db: Kysely<Database>,
  read: KeyedRead<Row>,
  condition: (column: string, markers: string[]) => Expression<SqlBool>,
  count: number,
): CompiledKeyedRead {
  const markers = Array.from({ length: count }, (_, i) => marker(i));
  const query = read(db, (column) => condition(column, markers)).compile();
  const keySlots = query.parameters.map((value) => markers.indexOf(value as string));
  if (!keySlots.some((slot) => slot >= 0)) throw new Error("keyed read: the key condition is not used");
  return { query, keySlots };
}

function bind(compiled: CompiledKeyedRead, keys: readonly unknown[]): unknown[] {
  return compiled.query.parameters.map((value, i) => {
    const slot = compiled.keySlots[i] as number;
    return slot === -1 ? value : keys[slot];
  });
}

const equalsKey = (column: string, [key]: string[]) => sql<SqlBool>`${sql.ref(column)} = ${key}`;
const anyOfKeys = (column: string, [keys]: string[]) => sql<SqlBool>`${sql.ref(column)} = any(${keys})`;
const inKeys = (column: string, keys: string[]) =>
  sql<SqlBool>`${sql.ref(column)} in (${sql.join(keys.map((key) => sql`${key}`))})`;

/**
 * SQLite's keyed reads run on a connection of their own, synchronously (better-sqlite3 runs in
 * process), so a lookup is answered within the I/O callback that read its request. The reads of
 * one event-loop turn share one read transaction (starting and ending one costs more than an
 * indexed lookup), opened by the first and committed when the turn's I/O callbacks are done. Every
 * read of a turn sees the database as of that turn's first read; a write committed meanwhile, by
 * this process or another, is seen from the next turn. Writers are never held up: in WAL mode a
 * reader keeps its snapshot without locking them out.
 */
export class SqliteKeyReads {
  readonly #db: Kysely<Database>;
  readonly #reader: BetterSqlite3.Database;
  readonly #begin: BetterSqlite3.Statement;
  readonly #commit: BetterSqlite3.Statement;
  #open = false;
  /** Counts read batches, so rows kept for one are never handed out in the next. */
  #batch = 0;
  readonly #endLater = () => this.#end();

  constructor(db: Kysely<Database>, reader: BetterSqlite3.Database) {
    this.#db = db;
    this.#reader = reader;
    this.#begin = reader.prepare("BEGIN");
    this.#commit = reader.prepare("COMMIT");
  }

  reader<Row extends Keyed>(read: KeyedRead<Row>, { sameInTurn = false }: KeyReaderOptions): KeyReader<Row> {
    let statement: BetterSqlite3.Statement | undefined;
    let compiled: CompiledKeyedRead | undefined;
    const kept = new Map<string, Row[]>();
    let keptInBatch = -1;
    return (key) => {
      if (statement === undefined) {
        compiled = compileKeyedRead(this.#db, read, equalsKey, 1);
        statement = this.#reader.prepare(compiled.query.sql);
      }
      this.#enter();
      if (!sameInTurn) return statement.all(bind(compiled!, [key])) as Row[];
      if (keptInBatch !== this.#batch) {
        kept.clear();
        keptInBatch = this.#batch;
      }
      let rows = kept.get(key);
      if (rows === undefined) {
        rows = statement.all(bind(compiled!, [key])) as Row[];
        kept.set(key, rows);
      }
      return rows;
    };
  }

  close(): void {
    this.#end();
    this.#reader.close();
  }

  #enter(): void {
    if (this.#open) return;
    this.#begin.run();
    this.#open = true;
    this.#batch++;
    setImmediate(this.#endLater);
  }

  #end(): void {
    if (!this.#open) return;
    this.#open = false;
    // A read-only transaction has nothing to lose; should COMMIT fail, ROLLBACK still ends it.
    try {
      this.#commit.run();
    } catch {
      if (this.#reader.inTransaction) this.#reader.exec("ROLLBACK");
    }
  }
}

/** Keyed reads through Kysely, one statement per call (an in-memory SQLite database, which has no second connection). */
export function kyselyKeyReader<Row extends Keyed>(
  db: Kysely<Database>,
  read: KeyedRead<Row>,
): KeyReader<Row> {
  let compiled: CompiledKeyedRead | undefined;
  return async (key) => {
    compiled ??= compileKeyedRead(db, read, equalsKey, 1);
    const query = { ...compiled.query, parameters: bind(compiled, [key]) };
    return (await db.executeQuery(query)).rows as Row[];
  };
}

/**
 * A database server's keyed reads: the keys asked for in one event-loop turn are read by one
 * statement (a round trip to the server costs far more than the indexed lookup, and under load many
 * requests of a turn ask the same kind of question, or the same one: their API token). Each key gets
 * exactly the rows found for it; every read starts after the call that asked for it, so a write
 * committed before the call is seen: nothing is cached.
 */
export function turnBatchedReader<Row extends Keyed>(
  run: (keys: string[]) => Promise<Row[]>,
  maxKeys: number,
): KeyReader<Row> {
  type Waiter = { resolve: (rows: Row[]) => void; reject: (error: unknown) => void };
  let pending: Map<string, Waiter[]> | null = null;

  const runChunk = async (keys: string[], waiters: Map<string, Waiter[]>) => {
    try {
      const byKey = new Map<string, Row[]>();
      for (const row of await run(keys)) {
        const list = byKey.get(row.lookup_key);
        if (list) list.push(row);
        else byKey.set(row.lookup_key, [row]);
      }
      for (const key of keys)
        for (const waiter of waiters.get(key) ?? []) waiter.resolve(byKey.get(key) ?? []);
    } catch (error) {
      for (const key of keys) for (const waiter of waiters.get(key) ?? []) waiter.reject(error);
    }
  };

  const flush = () => {
    const waiters = pending;
    pending = null;
    if (!waiters) return;
    const keys = [...waiters.keys()];
    for (let start = 0; start < keys.length; start += maxKeys)
      void runChunk(keys.slice(start, start + maxKeys), waiters);
  };

  return (key) => {
    // No address or token hash holds a NUL, and PostgreSQL refuses one in text: nothing to find.
    if (key.includes("\u0000")) return [];
    if (pending === null) {
      pending = new Map();
      // After this turn's I/O callbacks: every request read in this turn has asked by then.
      setImmediate(flush);
    }
    const batch = pending;
    return new Promise<Row[]>((resolve, reject) => {
      const list = batch.get(key);
      if (list) list.push({ resolve, reject });
      else batch.set(key, [{ resolve, reject }]);
    });
  };
}

/** PostgreSQL: `key = any($n)` with the turn's keys as one array: one prepared statement for any number of keys. */
export function postgresKeyedRead<Row extends Keyed>(
  db: Kysely<Database>,
  read: KeyedRead<Row>,
  run: (text: string, values: unknown[]) => Promise<Row[]>,
): (keys: string[]) => Promise<Row[]> {
  let compiled: CompiledKeyedRead | undefined;
  return (keys) => {
    compiled ??= compileKeyedRead(db, read, anyOfKeys, 1);
    return run(compiled.query.sql, bind(compiled, [keys]));
  };
}

/** MySQL/MariaDB: `key in (?, ...)`, compiled once per number of keys. */
export function mysqlKeyedRead<Row extends Keyed>(
  db: Kysely<Database>,
  read: KeyedRead<Row>,
  run: (text: string, values: unknown[]) => Promise<Row[]>,
): (keys: string[]) => Promise<Row[]> {
  const byCount = new Map<number, CompiledKeyedRead>();
  return (keys) => {
    let compiled = byCount.get(keys.length);
    if (compiled === undefined) {
      compiled = compileKeyedRead(db, read, inKeys, keys.length);
      byCount.set(keys.length, compiled);
    }
    return run(compiled.query.sql, bind(compiled, keys));
  };
}
