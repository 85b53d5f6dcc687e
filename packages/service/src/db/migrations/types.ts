import { type ColumnDataType, type CreateTableBuilder, type Kysely, sql } from "kysely";
import type { DialectName } from "../database.ts";

/** Column types where the dialects differ; everything else is written once. */
export interface ColumnTypes {
  id: ColumnDataType;
  flag: ColumnDataType;
  time: ColumnDataType;
  /** Short indexed strings (addresses, names): MariaDB cannot index TEXT. */
  address: ColumnDataType;
}

export function columnTypes(dialect: DialectName): ColumnTypes {
  switch (dialect) {
    case "postgres":
      return { id: "serial", flag: "boolean", time: "bigint", address: "varchar(255)" };
    case "mysql":
      return { id: "integer", flag: "boolean", time: "bigint", address: "varchar(255)" };
    case "sqlite":
      return { id: "integer", flag: "integer", time: "integer", address: "varchar(255)" };
  }
}

export interface MigrationContext {
  dialect: DialectName;
  types: ColumnTypes;
}

export interface VersionedMigration {
  up(db: Kysely<unknown>, context: MigrationContext): Promise<void>;
}

/** Adds the auto-increment primary key in each dialect's spelling. */
export function withId<T extends string>(
  table: CreateTableBuilder<T, never>,
  context: MigrationContext,
): CreateTableBuilder<T, "id"> {
  return table.addColumn("id", context.types.id, (column) =>
    context.dialect === "postgres" ? column.primaryKey() : column.primaryKey().autoIncrement(),
  );
}

/** MariaDB tables get utf8mb4 with a binary collation: addresses are lower-cased before they are stored. */
export function tableOptions<T extends string, C extends string>(
  table: CreateTableBuilder<T, C>,
  context: MigrationContext,
): CreateTableBuilder<T, C> {
  return context.dialect === "mysql"
    ? table.modifyEnd(sql.raw("ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"))
    : table;
}
