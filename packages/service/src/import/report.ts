/**
 * What an import did, table by table, and every row it did not take as it was: the report the
 * console prints at the end (and the tests read). A row is never dropped without a line here.
 */

/** A source row named by its table and id, and what happened to it. */
export interface RowNote {
  table: string;
  id: string;
  reason: string;
}

export interface TableSummary {
  /** The source table (userli's name). */
  table: string;
  /** Where its rows go in this service. */
  target: string;
  read: number;
  added: number;
  updated: number;
  unchanged: number;
  refused: number;
  /** Figures worth knowing (hash schemes, merged rows), one line each. */
  notes: string[];
}

export interface ImportReport {
  dryRun: boolean;
  tables: TableSummary[];
  /** Rows not imported. */
  refused: RowNote[];
  /** Rows imported with a change the import had to make. */
  adjusted: RowNote[];
  /**
   * Rows changed in this service after they were imported (newer than userli's): left as they are,
   * so a late run does not undo a password change or a reset made here.
   */
  kept: RowNote[];
  /** Source tables this service has no use for, with their row counts. */
  skippedTables: { table: string; rows: number; why: string }[];
  /** The refused row `--strict` stopped at; nothing after it was written. */
  stoppedAt: RowNote | null;
}

/** One step of a long import, for the progress display. */
export interface ImportProgress {
  table: string;
  done: number;
  total: number;
  /** Rows read of all tables so far, and of all tables in all: the whole import's progress. */
  allDone: number;
  allTotal: number;
}

export const newSummary = (table: string, target: string): TableSummary => ({
  table,
  target,
  read: 0,
  added: 0,
  updated: 0,
  unchanged: 0,
  refused: 0,
  notes: [],
});

/** The report as the console prints it: a table of figures, then every refused and adjusted row. */
export function formatReport(report: ImportReport): string[] {
  const verb = report.dryRun ? "would be " : "";
  const lines: string[] = [];
  const headers = [
    "TABLE",
    "INTO",
    "READ",
    report.dryRun ? "WOULD ADD" : "ADDED",
    report.dryRun ? "WOULD UPDATE" : "UPDATED",
    "UNCHANGED",
    "REFUSED",
  ];
  const rows = report.tables.map((t) => [
    t.table,
    t.target,
    String(t.read),
    String(t.added),
    String(t.updated),
    String(t.unchanged),
    String(t.refused),
  ]);
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  for (const cells of [headers, ...rows])
    lines.push(
      cells
        .map((c, i) => (i < 2 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
        .join("  ")
        .trimEnd(),
    );
  for (const t of report.tables) for (const note of t.notes) lines.push(`${t.table}: ${note}`);
  for (const s of report.skippedTables)
    lines.push(
      `${s.table}: ${s.rows} rows ${verb === "" ? "not imported" : "would not be imported"} (${s.why})`,
    );
  if (report.refused.length > 0) {
    lines.push("", `Refused rows (${report.refused.length}), not imported:`);
    for (const r of report.refused) lines.push(`  ${r.table} id ${r.id}: ${r.reason}`);
  }
  if (report.adjusted.length > 0) {
    lines.push("", `Rows ${verb}imported with a change (${report.adjusted.length}):`);
    for (const r of report.adjusted) lines.push(`  ${r.table} id ${r.id}: ${r.reason}`);
  }
  if (report.kept.length > 0) {
    lines.push("", `Rows changed here since they were imported, left as they are (${report.kept.length}):`);
    for (const r of report.kept) lines.push(`  ${r.table} id ${r.id}: ${r.reason}`);
  }
  if (report.stoppedAt)
    lines.push(
      "",
      `--strict: stopped at ${report.stoppedAt.table} id ${report.stoppedAt.id}; the batches before it are imported, nothing after it.`,
    );
  if (report.dryRun) lines.push("", "Dry run: nothing was written.");
  return lines;
}
