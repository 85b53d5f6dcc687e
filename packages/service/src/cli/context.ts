import { loadConfig } from "../config.ts";
import { CryptoPool } from "../credentials/crypto-pool.ts";
import { openDatabase } from "../db/database.ts";
import { migrateToLatest } from "../db/migrate.ts";
import { createServices, type Services } from "../services.ts";

/** Opens the configured database (schema brought up to date) for one console command. */
export async function withServices<T>(run: (services: Services) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const database = await openDatabase(config.databaseUrl, { poolSize: 2 });
  try {
    await migrateToLatest(database);
    return await run(createServices(database, new CryptoPool(config.cryptoPoolSize)));
  } finally {
    await database.close();
  }
}

/** Reads a secret from standard input when it was not given as an option (keeps it out of `ps`). */
export async function readSecretFromStdin(what: string, lines = 1): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write(`${what}: `);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk as Buffer);
    if (Buffer.concat(chunks).toString("utf8").split("\n").length > lines) break;
  }
  return Buffer.concat(chunks).toString("utf8").split(/\r?\n/).slice(0, lines).join("\n");
}

export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];
