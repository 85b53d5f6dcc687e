import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { createDatabase } from "./databases.ts";

/**
 * A userli 6.x database for the importer's tests, built from the tables and columns of
 * ../shared/reference/userli-behaviour.md section 1 in their final state (after userli's
 * migrations): in MariaDB as userli's MySQL migrations leave it (utf8mb4_unicode_ci, JSON columns,
 * TINYINT flags, naive DATETIMEs), in SQLite as Doctrine's schema tool makes it for userli's tests,
 * and in PostgreSQL as Doctrine would make it (jsonb, BOOLEAN, TIMESTAMP(0)).
 */

export type UserliKind = "sqlite" | "mariadb" | "postgres";

type Column =
  | "id"
  | "bigid"
  | "int"
  | "int?"
  | "string"
  | "string?"
  | "token"
  | "text"
  | "text?"
  | "json"
  | "json?"
  | `bool=${0 | 1}`
  | "time"
  | "time?"
  | "ulid";

interface TableSpec {
  columns: Record<string, Column>;
  primaryKey?: string[];
  unique?: string[];
  foreignKeys?: { column: string; table: string; onDelete: "CASCADE" | "SET NULL" }[];
}

const timestamps = { creation_time: "time", updated_time: "time" } as const;

/** userli's final schema (reference section 1; `password_version` included, which the import ignores). */
export const userliTables: Record<string, TableSpec> = {
  domains: {
    columns: {
      id: "id",
      name: "string",
      invitation_enabled: "bool=0",
      invitation_limit: "int",
      invitation_waiting_period_days: "int",
      ...timestamps,
    },
    unique: ["name"],
  },
  vouchers: {
    columns: {
      id: "id",
      user_id: "int?",
      domain_id: "int",
      code: "string",
      redeemed_time: "time?",
      creation_time: "time",
    },
    unique: ["code"],
    foreignKeys: [{ column: "domain_id", table: "domains", onDelete: "CASCADE" }],
  },
  users: {
    columns: {
      id: "id",
      domain_id: "int",
      invitation_voucher_id: "int?",
      email: "string",
      password: "string",
      password_version: "int",
      roles: "json",
      password_change_required: "bool=0",
      quota: "int?",
      smtp_quota_limits: "json?",
      mail_crypt: "bool=0",
      mail_crypt_public_key: "text?",
      mail_crypt_secret_box: "text?",
      recovery_secret_box: "text?",
      recovery_start_time: "time?",
      totp_secret: "string?",
      totp_confirmed: "bool=0",
      totp_backup_codes: "json",
      last_login_time: "time?",
      ...timestamps,
      deleted: "bool=0",
    },
    unique: ["email", "invitation_voucher_id"],
    foreignKeys: [
      { column: "domain_id", table: "domains", onDelete: "CASCADE" },
      { column: "invitation_voucher_id", table: "vouchers", onDelete: "SET NULL" },
    ],
  },
  aliases: {
    columns: {
      id: "id",
      domain_id: "int?",
      user_id: "int?",
      source: "string",
      destination: "string?",
      random: "bool=0",
      note: "string?",
      smtp_quota_limits: "json?",
      deleted: "bool=0",
      ...timestamps,
    },
    foreignKeys: [
      { column: "domain_id", table: "domains", onDelete: "CASCADE" },
      { column: "user_id", table: "users", onDelete: "SET NULL" },
    ],
  },
  openpgp_keys: {
    columns: {
      id: "id",
      uploader_id: "int?",
      domain_id: "int",
      email: "string",
      key_id: "text",
      key_fingerprint: "text",
      key_expire_time: "time?",
      key_data: "text",
      wkd_hash: "string?",
    },
    unique: ["email"],
    foreignKeys: [
      { column: "uploader_id", table: "users", onDelete: "SET NULL" },
      { column: "domain_id", table: "domains", onDelete: "CASCADE" },
    ],
  },
  reserved_names: { columns: { id: "id", name: "string", ...timestamps }, unique: ["name"] },
  settings: { columns: { id: "id", name: "string", value: "text?", ...timestamps }, unique: ["name"] },
  api_tokens: {
    columns: {
      id: "id",
      name: "string",
      scopes: "json",
      token: "token",
      creation_time: "time",
      last_used_time: "time?",
    },
    unique: ["token"],
  },
  webhook_endpoints: {
    columns: {
      id: "id",
      url: "text",
      secret: "string",
      events: "json?",
      enabled: "bool=1",
      ...timestamps,
    },
  },
  webhook_endpoint_domain: {
    columns: { webhook_endpoint_id: "int", domain_id: "int" },
    primaryKey: ["webhook_endpoint_id", "domain_id"],
    foreignKeys: [
      { column: "webhook_endpoint_id", table: "webhook_endpoints", onDelete: "CASCADE" },
      { column: "domain_id", table: "domains", onDelete: "CASCADE" },
    ],
  },
  webhook_deliveries: {
    columns: {
      id: "ulid",
      endpoint_id: "int",
      type: "string",
      request_body: "json",
      request_headers: "json",
      response_code: "int?",
      response_body: "text?",
      success: "bool=0",
      error: "text?",
      attempts: "int",
      dispatched_time: "time",
      delivered_time: "time?",
    },
    foreignKeys: [{ column: "endpoint_id", table: "webhook_endpoints", onDelete: "CASCADE" }],
  },
  user_notifications: {
    columns: { id: "id", user_id: "int", type: "string", metadata: "json?", creation_time: "time" },
    foreignKeys: [{ column: "user_id", table: "users", onDelete: "CASCADE" }],
  },
  messenger_messages: {
    columns: {
      id: "bigid",
      body: "text",
      headers: "text",
      queue_name: "string",
      created_at: "time",
      available_at: "time",
      delivered_at: "time?",
    },
  },
};

function columnType(kind: UserliKind, column: Column): string {
  const nullable = column.endsWith("?");
  const base = column.replace("?", "");
  const types: Record<UserliKind, Record<string, string>> = {
    mariadb: {
      id: "INT AUTO_INCREMENT NOT NULL",
      bigid: "BIGINT AUTO_INCREMENT NOT NULL",
      int: "INT",
      string: "VARCHAR(255)",
      token: "VARCHAR(64)",
      text: "LONGTEXT",
      json: "JSON",
      time: "DATETIME",
      ulid: "BINARY(16) NOT NULL",
      bool: "TINYINT(1)",
    },
    sqlite: {
      id: "INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL",
      bigid: "INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL",
      int: "INTEGER",
      string: "VARCHAR(255)",
      token: "VARCHAR(64)",
      text: "CLOB",
      json: "CLOB",
      time: "DATETIME",
      ulid: "BLOB NOT NULL",
      bool: "BOOLEAN",
    },
    postgres: {
      id: "INT GENERATED BY DEFAULT AS IDENTITY NOT NULL",
      bigid: "BIGINT GENERATED BY DEFAULT AS IDENTITY NOT NULL",
      int: "INT",
      string: "VARCHAR(255)",
      token: "VARCHAR(64)",
      text: "TEXT",
      json: "JSONB",
      time: "TIMESTAMP(0) WITHOUT TIME ZONE",
      ulid: "UUID NOT NULL",
      bool: "BOOLEAN",
    },
  };
  if (base.startsWith("bool=")) {
    const value = base.endsWith("1");
    const literal = kind === "postgres" ? String(value) : value ? "1" : "0";
    return `${types[kind].bool} DEFAULT ${literal} NOT NULL`;
  }
  const type = types[kind][base] ?? "";
  if (base === "id" || base === "bigid" || base === "ulid") return type;
  return `${type} ${nullable ? "DEFAULT NULL" : "NOT NULL"}`;
}

/** The CREATE TABLE statements of userli's schema for one database. */
export function userliSchema(kind: UserliKind): string[] {
  const statements: string[] = [];
  const quote = (name: string) => (kind === "mariadb" ? `\`${name}\`` : `"${name}"`);
  const later: string[] = [];
  for (const [table, spec] of Object.entries(userliTables)) {
    const lines = Object.entries(spec.columns).map(
      ([name, column]) => `${quote(name)} ${columnType(kind, column)}`,
    );
    const hasId = spec.columns.id !== undefined;
    if (kind !== "sqlite" || !hasId || spec.columns.id === "ulid")
      lines.push(`PRIMARY KEY (${(spec.primaryKey ?? ["id"]).map(quote).join(", ")})`);
    for (const column of spec.unique ?? [])
      lines.push(`CONSTRAINT ${quote(`uniq_${table}_${column}`)} UNIQUE (${quote(column)})`);
    for (const fk of spec.foreignKeys ?? []) {
      const clause = `CONSTRAINT ${quote(`fk_${table}_${fk.column}`)} FOREIGN KEY (${quote(fk.column)}) REFERENCES ${quote(fk.table)} (id) ON DELETE ${fk.onDelete}`;
      // users <-> vouchers refer to each other: in SQLite inline (checked at write time), elsewhere added after.
      if (kind === "sqlite") lines.push(clause);
      else later.push(`ALTER TABLE ${quote(table)} ADD ${clause}`);
    }
    const options =
      kind === "mariadb" ? " DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci ENGINE = InnoDB" : "";
    statements.push(`CREATE TABLE ${quote(table)} (\n  ${lines.join(",\n  ")}\n)${options}`);
  }
  if (kind === "sqlite") {
    // Doctrine creates referenced tables in any order; SQLite checks references only on writes.
    return statements;
  }
  return [...statements, ...later];
}

export type UserliValue = string | number | boolean | null;
export type UserliRow = Record<string, UserliValue>;

export interface UserliDatabase {
  kind: UserliKind;
  url: string;
  insert(table: string, rows: UserliRow[]): Promise<void>;
  execute(sqlText: string, params?: UserliValue[]): Promise<void>;
  /** Closes the connection; the database stays. */
  close(): Promise<void>;
  /** Closes the connection and drops the database. */
  remove(): Promise<void>;
}

/** A datetime as userli stores it: naive, UTC. */
export const userliTime = (seconds: number): string =>
  new Date(seconds * 1000).toISOString().slice(0, 19).replace("T", " ");

/** The server URL for a userli database of this kind in this test run, or null when there is none. */
export function userliServer(kind: Exclude<UserliKind, "sqlite">): string | null {
  const target = process.env.TEST_DATABASE_URL ?? "";
  if (kind === "mariadb")
    return process.env.TEST_MARIADB_URL ?? (/^(mysql|mariadb):/.test(target) ? target : null);
  return process.env.TEST_POSTGRES_URL ?? (/^postgres/.test(target) ? target : null);
}

/** A new, empty userli database of this kind, with userli's final schema. */
export async function createUserliDatabase(kind: UserliKind): Promise<UserliDatabase> {
  if (kind === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "userli-"));
    const path = join(dir, "userli.sqlite");
    const db = new BetterSqlite3(path);
    db.pragma("foreign_keys = ON");
    for (const statement of userliSchema("sqlite")) db.exec(statement);
    const value = (v: UserliValue) => (typeof v === "boolean" ? Number(v) : v);
    return {
      kind,
      url: `sqlite:${path}`,
      async insert(table, rows) {
        for (const row of rows) {
          const columns = Object.keys(row);
          db.prepare(
            `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`,
          ).run(...columns.map((c) => value(row[c] ?? null)));
        }
      },
      async execute(sqlText, params = []) {
        db.prepare(sqlText).run(...params.map((p) => value(p)));
      },
      async close() {
        if (db.open) db.close();
      },
      async remove() {
        if (db.open) db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const server = userliServer(kind);
  if (!server) throw new Error(`no ${kind} server for a userli database`);
  const created = await createDatabase(server, "userli_test");
  if (kind === "mariadb") {
    const mysql = await import("mysql2/promise");
    const connection = await mysql.createConnection({ uri: created.url.replace(/^mariadb:/, "mysql:") });
    for (const statement of userliSchema("mariadb")) await connection.query(statement);
    const run = async (sqlText: string, params: UserliValue[]) => {
      await connection.query(
        sqlText,
        params.map((p) => (typeof p === "boolean" ? Number(p) : p)),
      );
    };
    return {
      kind,
      url: created.url,
      async insert(table, rows) {
        for (const row of rows) {
          const columns = Object.keys(row);
          await run(
            `INSERT INTO \`${table}\` (${columns.map((c) => `\`${c}\``).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`,
            columns.map((c) => row[c] ?? null),
          );
        }
      },
      execute: (sqlText, params = []) => run(sqlText, params),
      close: () => connection.end(),
      async remove() {
        await connection.end().catch(() => {});
        await created.drop();
      },
    };
  }
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: created.url });
  await client.connect();
  for (const statement of userliSchema("postgres")) await client.query(statement);
  const run = async (sqlText: string, params: UserliValue[]) => {
    let n = 0;
    await client.query(
      sqlText.replace(/\?/g, () => `$${++n}`),
      params,
    );
  };
  return {
    kind,
    url: created.url,
    async insert(table, rows) {
      for (const row of rows) {
        const columns = Object.keys(row);
        await run(
          `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`,
          columns.map((c) => row[c] ?? null),
        );
      }
    },
    execute: (sqlText, params = []) => run(sqlText, params),
    close: () => client.end(),
    async remove() {
      await client.end().catch(() => {});
      await created.drop();
    },
  };
}
