import type { DirectReader } from "./database.ts";

export interface KeyBatchQueries {
  /** The read as compiled, for a turn with one key: rows as objects. */
  single(values: unknown[]): Promise<unknown[]>;
  /** The batched read (`batchedSql`): rows as arrays (column 0 is the key), with column names. */
  batch(text: string, values: unknown[]): Promise<{ rows: unknown[][]; fields: readonly { name: string }[] }>;
}

/** Keys per statement at most; a larger turn is split. */
const maxKeysPerStatement = 500;

/**
 * A PostgreSQL read by one text key, with the calls of one event-loop turn run as one statement:
 * the read itself is joined laterally to the turn's distinct keys (`unnest`), so each key gets
 * exactly the rows its own statement would have given, and every read still starts after the call
 * that asked for it (a write committed before the call is seen).
 *
 * Why: on a shared machine each round trip to the server (a socket write, a wake-up of the server
 * process, a read) costs far more than the indexed lookup, and under load many requests of one
 * turn ask the same question (their API token) or the same kind of question (a mailbox). One
 * statement for the turn replaces dozens.
 *
 * A turn with a single key runs the read as compiled. PostgreSQL plans a prepared statement anew
 * on each call while that looks cheaper than its generic plan, and for one key it does: planning
 * the lateral join costs several times the lookup, so one-at-a-time traffic keeps the plain
 * statement (and its generic plan), and the batched one runs when there is a batch to amortise it.
 *
 * `keyParameters`: the positions of the SQL parameters that carry the key (all the same value);
 * the other parameters are constants of the compiled query. A key that PostgreSQL would refuse
 * as text (a NUL character) is not batched: undefined sends it down the ordinary path alone, so
 * one bad key can never fail the others.
 */
export function keyBatchedReader(
  sql: string,
  keyParameters: number[],
  queries: KeyBatchQueries,
): DirectReader {
  const { text, constantParameters } = batchedSql(sql, new Set(keyParameters));
  const keyParameter = keyParameters[0] ?? 0;
  type Waiter = { resolve: (rows: unknown[]) => void; reject: (error: unknown) => void };
  let pending: Map<string, Waiter[]> | null = null;
  /** The parameters of the turn's first call: its constants, and all of it for a single key. */
  let firstParameters: readonly unknown[] = [];

  const settle = (waiters: Waiter[], rows: unknown[]) => {
    // Each caller gets rows of its own, as from its own statement.
    for (const [i, waiter] of waiters.entries())
      waiter.resolve(i === 0 ? rows : rows.map((row) => ({ ...(row as object) })));
  };

  const runSingle = async (parameters: readonly unknown[], waiters: Waiter[]) => {
    try {
      settle(waiters, await queries.single([...parameters]));
    } catch (error) {
      for (const waiter of waiters) waiter.reject(error);
    }
  };

  const runChunk = async (keys: string[], constants: unknown[], waiters: Map<string, Waiter[]>) => {
    try {
      const { rows, fields } = await queries.batch(text, [keys, ...constants]);
      const names = fields.slice(1).map((field) => field.name);
      const byKey = new Map<string, unknown[]>();
      for (const row of rows) {
        const object: Record<string, unknown> = {};
        for (let i = 0; i < names.length; i++) object[names[i] as string] = row[i + 1];
        const key = row[0] as string;
        const list = byKey.get(key);
        if (list) list.push(object);
        else byKey.set(key, [object]);
      }
      for (const key of keys) settle(waiters.get(key) ?? [], byKey.get(key) ?? []);
    } catch (error) {
      for (const key of keys) for (const waiter of waiters.get(key) ?? []) waiter.reject(error);
    }
  };

  const flush = () => {
    const waiters = pending;
    pending = null;
    if (!waiters) return;
    const keys = [...waiters.keys()];
    if (keys.length === 1) return void runSingle(firstParameters, waiters.get(keys[0] as string) ?? []);
    const constants = constantParameters.map((position) => firstParameters[position]);
    for (let start = 0; start < keys.length; start += maxKeysPerStatement)
      void runChunk(keys.slice(start, start + maxKeysPerStatement), constants, waiters);
  };

  return (parameters) => {
    const key = parameters[keyParameter];
    if (typeof key !== "string" || key.includes("\u0000")) return undefined;
    if (pending === null) {
      pending = new Map();
      firstParameters = parameters;
      // After this turn's I/O callbacks: every request read in this turn has asked by then.
      setImmediate(flush);
    }
    const batch = pending;
    return new Promise<unknown[]>((resolve, reject) => {
      const list = batch.get(key);
      if (list) list.push({ resolve, reject });
      else batch.set(key, [{ resolve, reject }]);
    });
  };
}

/**
 * The batched form of a compiled PostgreSQL read: `$1` becomes the array of keys, each key
 * parameter a reference to the current key, and the other parameters are renumbered from `$2`.
 * Placeholders inside quoted identifiers or string literals are left alone.
 */
export function batchedSql(
  sql: string,
  keyParameters: ReadonlySet<number>,
): { text: string; constantParameters: number[] } {
  const constantParameters: number[] = [];
  let inner = "";
  let i = 0;
  while (i < sql.length) {
    const char = sql[i] as string;
    if (char === "'" || char === '"') {
      // Quoted text runs to the matching quote; a doubled quote is an escaped one.
      let end = i + 1;
      for (;;) {
        end = sql.indexOf(char, end);
        if (end === -1) throw new Error("batchedSql: unterminated quote");
        if (sql[end + 1] === char) end += 2;
        else break;
      }
      inner += sql.slice(i, end + 1);
      i = end + 1;
      continue;
    }
    const placeholder = char === "$" ? /^\$(\d+)/.exec(sql.slice(i, i + 12)) : null;
    if (placeholder) {
      const position = Number(placeholder[1]) - 1;
      if (keyParameters.has(position)) inner += "mas_batch.key";
      else {
        let index = constantParameters.indexOf(position);
        if (index === -1) index = constantParameters.push(position) - 1;
        inner += `$${index + 2}`;
      }
      i += placeholder[0].length;
      continue;
    }
    inner += char;
    i++;
  }
  return {
    text: `select mas_batch.key, mas_lookup.* from unnest($1::text[]) as mas_batch(key) cross join lateral (${inner}) as mas_lookup`,
    constantParameters,
  };
}
