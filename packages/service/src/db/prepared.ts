import type { Compilable, CompiledQuery, Kysely } from "kysely";
import type { Eventually } from "../eventually.ts";
import { type DirectReader, directReads } from "./database.ts";
import type { Database } from "./schema.ts";

const marker = (index: number) => `\u0000prepared-parameter-${index}\u0000`;

/**
 * A query built and compiled once, on first use; each call binds new values to the same SQL.
 * Kysely otherwise rebuilds its immutable query tree and compiles the same SQL text on every call,
 * which cost more than the indexed lookups themselves. The SQL comes from the handle's own query
 * compiler, so the query stays dialect-neutral. `build` receives placeholders (one per argument)
 * that must be used as plain values (`where(column, "=", value)`), never as lists or in raw SQL.
 *
 * `sameInBatch`: on SQLite, repeated calls with the same values within one read batch (one
 * event-loop turn, one snapshot; see db/database.ts) share one answer. The rows are then shared:
 * callers must not change them.
 *
 * `byKey`: the read takes one text key (arity 1). On PostgreSQL and MariaDB the calls of one
 * event-loop turn then run as one statement for all their keys (db/key-batches.ts).
 *
 * The rows come back synchronously when the dialect's direct reader has them at once (SQLite),
 * else as a promise (see eventually.ts).
 */
export function preparedQuery<Args extends unknown[], Row>(
  db: Kysely<Database>,
  arity: number,
  build: (...params: Args) => Compilable<Row>,
  { sameInBatch = false, byKey = false }: { sameInBatch?: boolean; byKey?: boolean } = {},
): (...args: Args) => Eventually<Row[]> {
  let compiled: { query: CompiledQuery<Row>; slots: number[]; direct: DirectReader | undefined } | undefined;
  const compile = () => {
    const markers = Array.from({ length: arity }, (_, i) => marker(i));
    const query = build(...(markers as Args)).compile();
    const slots = query.parameters.map((value) => markers.indexOf(value as string));
    for (let i = 0; i < arity; i++)
      if (!slots.includes(i)) throw new Error(`prepared query: parameter ${i} is not bound as a value`);
    if (byKey && arity !== 1) throw new Error("prepared query: byKey needs exactly one parameter");
    const keyParameters = byKey ? slots.flatMap((slot, i) => (slot === 0 ? [i] : [])) : null;
    return { query, slots, direct: directReads.get(db)?.(query.sql, { sameInBatch, keyParameters }) };
  };
  const throughKysely = async (query: CompiledQuery<Row>) => (await db.executeQuery<Row>(query)).rows;
  return (...args: Args): Eventually<Row[]> => {
    compiled ??= compile();
    const { query, slots, direct } = compiled;
    const parameters = query.parameters.map((value, i) => {
      const slot = slots[i] ?? -1;
      return slot === -1 ? value : args[slot];
    });
    const rows = direct?.(parameters) as Eventually<Row[]> | undefined;
    return rows ?? throughKysely({ ...query, parameters });
  };
}

/** A read by one text key (`byKey` above): batched per turn on PostgreSQL and MariaDB. */
export function preparedByKey<Row>(
  db: Kysely<Database>,
  build: (key: string) => Compilable<Row>,
  { sameInBatch = false }: { sameInBatch?: boolean } = {},
): (key: string) => Eventually<Row[]> {
  return preparedQuery(db, 1, build, { sameInBatch, byKey: true });
}
