/**
 * The CSV file of pending deletions: a header line `email,timestamp`, then one `email,RFC 3339` line
 * per mailbox. Human-editable: it is re-read for every operation, so an operator who deletes a line
 * cancels that purge. Lines that do not parse are kept verbatim, never dropped.
 *
 * Writes go through one in-process queue (concurrent requests are batched into one write) and are
 * atomic: temporary file in the same directory, write, fsync, rename, fsync of the directory. A crash
 * at any moment leaves either the old or the new file.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { access, open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { parsePurgeAddress } from "./shell.ts";

export const HEADER = "email,timestamp";

export type PendingLine =
  | { kind: "entry"; email: string; key: string; timestamp: Date; raw: string; line: number }
  | { kind: "other"; raw: string; line: number; reason: string | null };

export interface PendingEntry {
  email: string;
  key: string;
  timestamp: Date;
}

export interface MalformedLine {
  line: number;
  raw: string;
  reason: string;
}

export interface PendingFile {
  lines: PendingLine[];
  /** False when the file had no header (or did not exist). */
  hasHeader: boolean;
}

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|([+-])(\d{2}):?(\d{2}))$/;

/** Parses an RFC 3339 / ISO-8601 date-time with a zone (Z or +hh:mm); null for anything else. */
export function parseTimestamp(text: string): Date | null {
  const match = RFC3339.exec(text.trim());
  if (!match) return null;
  const [month, day, hour, minute, second] = match.slice(2, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return null;
  if (match[7] !== undefined && (Number(match[8]) > 23 || Number(match[9]) > 59)) return null;
  const date = new Date(text.trim().replace(" ", "T"));
  return Number.isNaN(date.getTime()) ? null : date;
}

/** RFC 3339 in UTC with whole seconds: 2025-09-10T11:36:14Z. */
export function formatTimestamp(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

function unquote(field: string): string {
  const trimmed = field.trim();
  return trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"')
    ? trimmed.slice(1, -1)
    : trimmed;
}

function parseLine(raw: string, line: number): PendingLine {
  const text = raw.trim();
  if (text.startsWith("#")) return { kind: "other", raw, line, reason: null };
  const fields = text.split(",");
  if (fields.length !== 2)
    return { kind: "other", raw, line, reason: "expected two fields: email,timestamp" };
  const [emailField, timeField] = fields.map(unquote) as [string, string];
  if (emailField.toLowerCase() === "email" && timeField.toLowerCase() === "timestamp") {
    return { kind: "other", raw, line, reason: "repeated header line" };
  }
  const address = parsePurgeAddress(emailField);
  if (!address.ok) return { kind: "other", raw, line, reason: address.reason };
  const timestamp = parseTimestamp(timeField);
  if (!timestamp)
    return { kind: "other", raw, line, reason: `invalid timestamp ${JSON.stringify(timeField)}` };
  return { kind: "entry", email: address.address.email, key: address.address.key, timestamp, raw, line };
}

export function parsePendingFile(text: string): PendingFile {
  const rawLines = (text.startsWith("\uFEFF") ? text.slice(1) : text).split("\n");
  const lines: PendingLine[] = [];
  let hasHeader = false;
  rawLines.forEach((rawLine, index) => {
    const raw = rawLine.endsWith("\r") ? rawLine.slice(0, -1) : rawLine;
    if (raw.trim() === "") return;
    if (!hasHeader && lines.length === 0 && raw.trim().toLowerCase().replaceAll(" ", "") === HEADER) {
      hasHeader = true;
      return;
    }
    lines.push(parseLine(raw, index + 1));
  });
  return { lines, hasHeader };
}

export function serializePendingFile(lines: PendingLine[]): string {
  return [HEADER, ...lines.map((line) => line.raw)].map((line) => `${line}\n`).join("");
}

export function entriesOf(file: PendingFile): PendingEntry[] {
  return file.lines.flatMap((line) =>
    line.kind === "entry" ? [{ email: line.email, key: line.key, timestamp: line.timestamp }] : [],
  );
}

export function malformedOf(file: PendingFile): MalformedLine[] {
  return file.lines.flatMap((line) =>
    line.kind === "other" && line.reason !== null
      ? [{ line: line.line, raw: line.raw, reason: line.reason }]
      : [],
  );
}

export type AddResult = "added" | "exists" | "advanced";

interface Operation {
  apply: (lines: PendingLine[]) => { changed: boolean; result: unknown };
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

export class PendingStore {
  readonly path: string;
  readonly #queue: Operation[] = [];
  #draining: Promise<void> | null = null;
  #closed = false;

  constructor(path: string) {
    this.path = path;
  }

  /** Removes temporary files a crash left behind and creates the file (header only) if it is missing. */
  async init(): Promise<void> {
    const directory = dirname(this.path);
    await removeTemporaries(this.path);
    try {
      await stat(this.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      await this.#enqueue(() => ({ changed: true, result: undefined }));
    }
    await access(directory, constants.W_OK);
    await this.read();
  }

  /** Reads and parses the file as it is now (a missing file is empty). */
  async read(): Promise<PendingFile> {
    let text: string;
    try {
      text = await readFile(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { lines: [], hasHeader: false };
      throw error;
    }
    return parsePendingFile(text);
  }

  /**
   * Records a pending deletion unless the address already has a line ("exists"). With `advance`, an
   * existing line with a later timestamp is rewritten to the given one ("advanced"), so that it
   * becomes due no later than requested. Resolves once the file is durably on disk.
   */
  add(email: string, timestamp: Date, options: { advance?: boolean } = {}): Promise<AddResult> {
    const address = parsePurgeAddress(email);
    if (!address.ok)
      return Promise.reject(new Error(`refusing to store ${JSON.stringify(email)}: ${address.reason}`));
    const { key } = address.address;
    const formatted = `${email},${formatTimestamp(timestamp)}`;
    return this.#enqueue((lines) => {
      const index = lines.findIndex((line) => line.kind === "entry" && line.key === key);
      const existing = lines[index];
      if (existing?.kind === "entry") {
        if (!options.advance || existing.timestamp.getTime() <= timestamp.getTime()) {
          return { changed: false, result: "exists" };
        }
        lines[index] = { ...existing, raw: formatted, timestamp };
        return { changed: true, result: "advanced" };
      }
      lines.push({ kind: "entry", email, key, timestamp, raw: formatted, line: 0 });
      return { changed: true, result: "added" };
    }) as Promise<AddResult>;
  }

  /** Removes the lines of one address (other lines, including malformed ones, stay); returns how many. */
  remove(email: string): Promise<number> {
    const key = email.toLowerCase();
    return this.#enqueue((lines) => {
      let removed = 0;
      for (let i = lines.length - 1; i >= 0; i -= 1) {
        const line = lines[i] as PendingLine;
        if (line.kind === "entry" && line.key === key) {
          lines.splice(i, 1);
          removed += 1;
        }
      }
      return { changed: removed > 0, result: removed };
    }) as Promise<number>;
  }

  /** Resolves when every queued write is done. */
  async idle(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  /** Refuses new writes and waits for the queued ones. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.idle();
  }

  #enqueue(apply: Operation["apply"]): Promise<unknown> {
    if (this.#closed) return Promise.reject(new Error("pending deletions store is closed"));
    return new Promise((resolve, reject) => {
      this.#queue.push({ apply, resolve, reject });
      if (!this.#draining) this.#draining = this.#drain();
    });
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0);
        try {
          const file = await this.read();
          const outcomes = batch.map((operation) => {
            try {
              return { ok: true as const, ...operation.apply(file.lines) };
            } catch (error) {
              return { ok: false as const, error };
            }
          });
          if (!file.hasHeader || outcomes.some((outcome) => outcome.ok && outcome.changed)) {
            await this.#write(serializePendingFile(file.lines));
          }
          batch.forEach((operation, index) => {
            const outcome = outcomes[index];
            if (outcome?.ok) operation.resolve(outcome.result);
            else operation.reject(outcome?.error);
          });
        } catch (error) {
          for (const operation of batch) operation.reject(error);
        }
      }
    } finally {
      this.#draining = null;
    }
  }

  #write(text: string): Promise<void> {
    return writeAtomically(this.path, text);
  }
}

/** Removes the temporary files of writeAtomically a crash left behind beside `path`. */
export async function removeTemporaries(path: string): Promise<void> {
  const directory = dirname(path);
  const prefix = `.${basename(path)}.`;
  for (const name of await readdir(directory)) {
    if (name.startsWith(prefix) && name.endsWith(".tmp")) await rm(join(directory, name), { force: true });
  }
}

/**
 * Replaces a file atomically: temporary file in the same directory, write, fsync, rename, fsync of
 * the directory. A crash at any moment leaves the old or the new file. An existing file keeps its
 * mode; a new one is owner read/write only (what the janitor keeps names people).
 */
export async function writeAtomically(path: string, text: string): Promise<void> {
  const directory = dirname(path);
  const temporary = join(
    directory,
    `.${basename(path)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`,
  );
  let mode = 0o600;
  try {
    mode = (await stat(path)).mode & 0o777;
  } catch {
    // a new file
  }
  try {
    const file = await open(temporary, "wx", mode);
    try {
      await file.writeFile(text, "utf8");
      await file.chmod(mode);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
  const dir = await open(directory, "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
