import { Option } from "commander";
import { loadConfig, readInstallationSecret } from "../config.ts";
import { CryptoPool } from "../credentials/crypto-pool.ts";
import { openDatabase } from "../db/database.ts";
import { migrateToLatest } from "../db/migrate.ts";
import { createServices, type Services } from "../services.ts";

/**
 * A console command's own refusal (a missing option, a bad flag): its words are printed as they are.
 * A service's refusal is printed with the catalogue's English (cli/main.ts).
 */
export class UsageError extends Error {
  readonly words: string;
  constructor(words: string) {
    super(words);
    this.words = words;
  }
}

/** Opens the configured database (schema brought up to date) for one console command. */
export async function withServices<T>(run: (services: Services) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const installationSecret = readInstallationSecret(config.installationSecret);
  const database = await openDatabase(config.databaseUrl, { poolSize: 2 });
  try {
    await migrateToLatest(database);
    // The service's own options that change a rule: the leaked-password check applies here too.
    return await run(
      createServices(database, new CryptoPool({ size: config.cryptoPoolSize, defaultLane: "mail" }), {
        installationSecret,
        pwnedPasswordsUrl: config.pwnedPasswordsUrl,
        // As the service logs it: the range API down lets the password through, said once per lookup.
        onPasswordLookupError: (error) =>
          process.stderr.write(`warning: leaked-password lookup failed: ${String(error)}\n`),
      }),
    );
  } finally {
    await database.close();
  }
}

export const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/**
 * An old spelling of an option, still accepted but no longer shown in the help: the commands name
 * a user `-u, --user`, an alias `-a, --alias` and a domain `-d, --domain` throughout.
 */
export const formerSpelling = (flags: string, instead: string): Option =>
  new Option(flags, `former spelling of ${instead}`).hideHelp();

/** The value of a required option that also has a former spelling. */
export function requiredValue(name: string, ...values: (string | undefined)[]): string {
  const value = values.find((v) => v !== undefined);
  if (value === undefined) throw new UsageError(`required option '${name}' not specified`);
  return value;
}

/** Reads secrets piped to standard input, one per line (keeps them out of `ps`). */
export async function readSecretsFromStdin(lines: number): Promise<string[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk as Buffer);
    if (Buffer.concat(chunks).toString("utf8").split("\n").length > lines) break;
  }
  return Buffer.concat(chunks).toString("utf8").split(/\r?\n/).slice(0, lines);
}

/**
 * Asks for a secret on the terminal without echoing it. Raw mode, so the terminal shows nothing
 * at all; backspace edits, Ctrl-C and Ctrl-D on an empty line abort.
 */
export function promptHidden(question: string): Promise<string> {
  const input = process.stdin;
  return new Promise((resolve, reject) => {
    // Raw mode before the prompt shows: what is typed after seeing it is never echoed.
    input.setRawMode(true);
    process.stderr.write(question);
    input.setEncoding("utf8");
    let value = "";
    const finish = (error?: Error) => {
      input.off("data", onData);
      input.setRawMode(false);
      input.pause();
      process.stderr.write("\n");
      if (error) reject(error);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      const chars = [...chunk];
      for (const [index, char] of chars.entries()) {
        if (char === "\r" || char === "\n") {
          // Typed ahead (the next answer): left for the next prompt.
          const rest = chars.slice(index + 1).join("");
          if (rest !== "") input.unshift(rest);
          return finish();
        }
        if (char === "\u0003") return finish(new UsageError("interrupted"));
        if (char === "\u0004" && value === "") return finish(new UsageError("no input"));
        if (char === "\u007f" || char === "\b") value = [...value].slice(0, -1).join("");
        else if (char >= " ") value += char;
      }
    };
    input.on("data", onData);
    input.resume();
  });
}

/** A new password typed twice must be typed the same: a typo would lock the user out. */
export function confirmedPassword(first: string, second: string): string {
  if (first !== second) throw new UsageError("the two passwords do not match; nothing was changed");
  return first;
}

/**
 * A new password: on a terminal asked twice without echo; piped, the first line of standard input
 * (as scripts have always given it).
 */
export async function readNewPassword(what = "Password"): Promise<string> {
  if (!process.stdin.isTTY) return (await readSecretsFromStdin(1))[0] ?? "";
  const first = await promptHidden(`${what}: `);
  const second = await promptHidden(`${what} (again): `);
  return confirmedPassword(first, second);
}

/** Every item of a paged service list (the services cap one page at 500). */
export async function listAll<T>(
  fetchPage: (page: {
    search: string;
    limit: number;
    offset: number;
  }) => Promise<{ items: T[]; total: number }>,
  search = "",
): Promise<T[]> {
  const items: T[] = [];
  for (;;) {
    const page = await fetchPage({ search: search.trim().slice(0, 254), limit: 500, offset: items.length });
    items.push(...page.items);
    if (page.items.length === 0 || items.length >= page.total) return items;
  }
}

/** Prints rows as aligned columns (or says there are none). */
export function printTable(headers: string[], rows: string[][], none: string): void {
  if (rows.length === 0) {
    out(none);
    return;
  }
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  out(line(headers));
  for (const row of rows) out(line(row));
}

/** Options every list command has: `--search <text>` and `--json`. */
export interface ListOptions {
  search?: string;
  json?: boolean;
}

export const printJson = (value: unknown): void => out(JSON.stringify(value, null, 2));

/** Unix seconds as a UTC date and time, for tables. */
export const dateTime = (seconds: number | null): string =>
  seconds === null ? "never" : new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ");
