/**
 * CSV as RFC 4180 writes it (what spreadsheets export): fields separated by commas, quoted with `"`
 * when they hold a comma, a quote or a line break, `""` for a quote inside. A UTF-8 byte order
 * mark is skipped; CRLF and LF both end a record.
 */

export interface CsvRecord {
  /** The line the record starts on (1-based), for reports. */
  line: number;
  fields: string[];
}

export class CsvError extends Error {
  readonly line: number;
  constructor(line: number, message: string) {
    super(`line ${line}: ${message}`);
    this.line = line;
  }
}

/** Every record of a CSV text; blank lines are skipped. Throws CsvError for an unclosed quote. */
export function parseCsv(text: string): CsvRecord[] {
  const input = text.startsWith("\uFEFF") ? text.slice(1) : text;
  const records: CsvRecord[] = [];
  let fields: string[] = [];
  let field = "";
  let line = 1;
  let start = 1;
  let quoted = false;
  let any = false;
  const endRecord = () => {
    fields.push(field);
    if (any || fields.length > 1 || field !== "") records.push({ line: start, fields });
    fields = [];
    field = "";
    any = false;
  };
  for (let i = 0; i < input.length; i++) {
    const ch = input[i]!;
    if (quoted) {
      if (ch === '"') {
        if (input[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else {
        if (ch === "\n") line++;
        field += ch;
      }
      continue;
    }
    if (ch === '"' && field === "") {
      quoted = true;
      any = true;
    } else if (ch === ",") {
      fields.push(field);
      field = "";
      any = true;
    } else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && input[i + 1] === "\n") i++;
      endRecord();
      line++;
      start = line;
    } else field += ch;
  }
  if (quoted) throw new CsvError(start, "a quoted field is not closed");
  endRecord();
  return records;
}

/** One CSV line (CRLF-less), each field quoted when it needs to be. */
export function csvLine(fields: readonly (string | number | boolean | null | undefined)[]): string {
  return fields
    .map((value) => {
      const text = value === null || value === undefined ? "" : String(value);
      return /[",\r\n]|^\s|\s$/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
    })
    .join(",");
}
