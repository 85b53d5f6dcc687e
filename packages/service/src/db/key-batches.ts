import type { DirectReader } from "./database.ts";

/** How one dialect runs a read by key: alone, as compiled, or for several keys in one statement. */
export interface KeyBatchQueries {
  /** The read as compiled, with the parameters of its one call. */
  single(parameters: readonly unknown[]): Promise<unknown[]>;
  /** The read for several keys; `parameters` are one call's (its constants are every call's). */
  batch(keys: string[], parameters: readonly unknown[]): Promise<Map<string, unknown[]>>;
  /** Keys per statement at most; a larger turn is split. */
  maxKeys: number;
}

/**
 * A read by one text key, with the calls of one event-loop turn run as one statement for all
 * their distinct keys. Each key gets exactly the rows its own statement would have given, and
 * every read still starts after the call that asked for it (a write committed before the call is
 * seen): nothing is cached.
 *
 * Why: each round trip to a database server (a socket write, a wake-up of the server process, a
 * read) costs far more than the indexed lookup, and under load many requests of one turn ask the
 * same question (their API token) or the same kind of question (a mailbox). One statement for the
 * turn replaces dozens.
 *
 * A turn with a single key runs the read as compiled: one-at-a-time traffic keeps the plain
 * statement (on PostgreSQL, planning the batched one for a single key costs several times the
 * lookup).
 *
 * A key a server could refuse as text (a NUL character) is not batched: undefined sends it down
 * the ordinary path alone, so one bad key can never fail the others.
 */
export function keyBatchedReader(keyParameter: number, queries: KeyBatchQueries): DirectReader {
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
      settle(waiters, await queries.single(parameters));
    } catch (error) {
      for (const waiter of waiters) waiter.reject(error);
    }
  };

  const runChunk = async (keys: string[], parameters: readonly unknown[], waiters: Map<string, Waiter[]>) => {
    try {
      const byKey = await queries.batch(keys, parameters);
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
    for (let start = 0; start < keys.length; start += queries.maxKeys)
      void runChunk(keys.slice(start, start + queries.maxKeys), firstParameters, waiters);
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

function addRow(byKey: Map<string, unknown[]>, key: string, row: unknown) {
  const list = byKey.get(key);
  if (list) list.push(row);
  else byKey.set(key, [row]);
}

/**
 * PostgreSQL: the read joined laterally to the keys (`batchedSql`), one prepared statement for
 * any number of keys. `run` gives rows as arrays, column 0 being the key.
 */
export function postgresKeyBatch(
  sql: string,
  keyParameters: number[],
  run: (
    text: string,
    values: unknown[],
  ) => Promise<{ rows: unknown[][]; fields: readonly { name: string }[] }>,
): KeyBatchQueries["batch"] {
  const { text, constantParameters } = batchedSql(sql, new Set(keyParameters));
  return async (keys, parameters) => {
    const { rows, fields } = await run(text, [keys, ...constantParameters.map((i) => parameters[i])]);
    const names = fields.slice(1).map((field) => field.name);
    const byKey = new Map<string, unknown[]>();
    for (const row of rows) {
      const object: Record<string, unknown> = {};
      for (let i = 0; i < names.length; i++) object[names[i] as string] = row[i + 1];
      addRow(byKey, row[0] as string, object);
    }
    return byKey;
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

/**
 * MySQL/MariaDB (no lateral joins): the compiled read once per key, each select of it tagged with
 * its key as a first column, all joined by `union all`. No derived tables and no parentheses:
 * MariaDB materialises those, which cost more than the round trips saved. So a read with a
 * top-level `order by` or `limit` (which would apply to the whole union) is not batched: null. The parameters are bound
 * by the driver as for any query; each copy gets the call's parameters with its own key.
 */
export function mysqlKeyBatch(
  sql: string,
  keyParameters: number[],
  run: (text: string, values: unknown[]) => Promise<Record<string, unknown>[]>,
): KeyBatchQueries["batch"] | null {
  const tagged = keyTaggedSql(sql);
  if (tagged === null) return null;
  const { text, values: template } = tagged;
  const keyPositions = new Set(keyParameters);
  return async (keys, parameters) => {
    const values: unknown[] = [];
    for (const key of keys)
      for (const slot of template)
        values.push(slot === "key" || keyPositions.has(slot) ? key : parameters[slot]);
    const rows = await run(Array(keys.length).fill(text).join(" union all "), values);
    const byKey = new Map<string, unknown[]>();
    for (const { mas_batch_key, ...row } of rows) addRow(byKey, String(mas_batch_key), row);
    return byKey;
  };
}

/**
 * A compiled MySQL read with `? as mas_batch_key` as the first column of each of its top-level
 * selects (a union has several; scalar subqueries, in parentheses, have none), and the order of
 * its `?` placeholders: "key" for a tag, else the position of the read's own parameter. Null for a
 * read with a top-level `order by` or `limit`.
 */
export function keyTaggedSql(sql: string): { text: string; values: ("key" | number)[] } | null {
  const values: ("key" | number)[] = [];
  let text = "";
  let depth = 0;
  let parameter = 0;
  let i = 0;
  while (i < sql.length) {
    const char = sql[i] as string;
    if (char === "'" || char === '"' || char === "`") {
      // Quoted text runs to the next unescaped quote (a doubled quote reads as two quoted runs).
      let end = i + 1;
      while (end < sql.length && sql[end] !== char) end += sql[end] === "\\" ? 2 : 1;
      if (end >= sql.length) throw new Error("keyTaggedSql: unterminated quote");
      text += sql.slice(i, end + 1);
      i = end + 1;
      continue;
    }
    if (depth === 0 && /^(order\s+by|limit)\s/i.test(sql.slice(i, i + 12)) && !/\w/.test(sql[i - 1] ?? ""))
      return null;
    if (char === "(") depth++;
    else if (char === ")") depth--;
    else if (char === "?") values.push(parameter++);
    else if (depth === 0 && /^select\s/i.test(sql.slice(i, i + 7)) && !/\w/.test(sql[i - 1] ?? "")) {
      const head = /^select\s+(distinct\s+)?/i.exec(sql.slice(i))?.[0] ?? "select ";
      text += `${head}? as mas_batch_key, `;
      values.push("key");
      i += head.length;
      continue;
    }
    text += char;
    i++;
  }
  if (!values.includes("key")) throw new Error("keyTaggedSql: no top-level select");
  return { text, values };
}
