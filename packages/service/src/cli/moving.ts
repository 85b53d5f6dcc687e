import { createReadStream } from "node:fs";
import cliProgress from "cli-progress";
import type { Command } from "commander";
import { withBulkWrites } from "../db/database.ts";
import { exportDump, importDump } from "../import/dump.ts";
import { formatReport, type ImportProgress } from "../import/report.ts";
import { UserliImporter } from "../import/userli.ts";
import { openUserliSource } from "../import/userli-source.ts";
import { out, UsageError, withServices } from "./context.ts";

/** How often a progress line is printed when standard error is not a terminal. */
const progressLineMs = 5000;

/** "about 1 min 20 s left" from the pace so far; nothing until a little is done (no pace yet). */
export function timeLeft(allDone: number, allTotal: number, elapsedMs: number): string | null {
  if (allDone <= 0 || allDone >= allTotal || elapsedMs < 1000) return null;
  const seconds = Math.ceil(((allTotal - allDone) * elapsedMs) / allDone / 1000);
  const minutes = Math.floor(seconds / 60);
  return `about ${minutes > 0 ? `${minutes} min ${seconds % 60} s` : `${seconds} s`} left`;
}

/**
 * Progress of a long import on standard error. On a terminal (cli-progress): a bar for the whole
 * import with the time left, and one per table. Else a line every few seconds and one when a table
 * is done, each followed by the whole import's line with the time left, so a log shows it is moving.
 * The time left is the pace so far applied to the rows still to read.
 */
export function progressDisplay(stream: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr) {
  const started = Date.now();
  if (stream.isTTY) {
    const bars = new cliProgress.MultiBar(
      {
        stream: stream as NodeJS.WriteStream,
        format: "{table} [{bar}] {value}/{total} rows | {left}",
        hideCursor: true,
        clearOnComplete: false,
        barsize: 30,
      },
      cliProgress.Presets.shades_classic,
    );
    let all: cliProgress.SingleBar | undefined;
    let drawn = 0;
    const byTable = new Map<string, cliProgress.SingleBar>();
    return {
      update(progress: ImportProgress) {
        const left = timeLeft(progress.allDone, progress.allTotal, Date.now() - started) ?? "";
        all ??= bars.create(progress.allTotal, 0, { table: "all tables".padEnd(18), left });
        all.setTotal(Math.max(progress.allTotal, progress.allDone));
        all.update(progress.allDone, { left });
        let bar = byTable.get(progress.table);
        if (!bar) {
          bar = bars.create(Math.max(progress.total, progress.done), 0, {
            table: progress.table.padEnd(18),
            left: "",
          });
          byTable.set(progress.table, bar);
        }
        bar.setTotal(Math.max(progress.total, progress.done));
        bar.update(progress.done);
        // The bars redraw on a timer, which an import on SQLite (synchronous statements between
        // awaits of settled promises) never lets run: drawn from here, at most five times a second.
        const now = Date.now();
        if (now - drawn >= 200) {
          drawn = now;
          bars.update();
        }
      },
      stop: () => bars.stop(),
    };
  }
  let lastLine = 0;
  return {
    update(progress: ImportProgress) {
      const now = Date.now();
      const finished = progress.done >= progress.total;
      if (!finished && now - lastLine < progressLineMs) return;
      lastLine = now;
      const percent = (done: number, total: number) => (total > 0 ? Math.floor((done / total) * 100) : 100);
      const left = timeLeft(progress.allDone, progress.allTotal, now - started);
      stream.write(
        `import: ${progress.table} ${progress.done}/${progress.total} rows (${percent(progress.done, progress.total)}%)\n` +
          `import: all tables ${progress.allDone}/${progress.allTotal} rows (${percent(progress.allDone, progress.allTotal)}%)${left ? `, ${left}` : ""}\n`,
      );
    },
    stop: () => {},
  };
}

/** Moving in and between databases: a userli database, and this service's own dump. */
export function movingCommands(program: Command): void {
  program
    .command("app:import:userli")
    .description(
      "import a userli 6.x database (opened read-only) into this service's database; run it again to take over what changed",
    )
    .option(
      "--from <url>",
      "userli's database: sqlite:<path>, mysql://user:password@host/db (or mariadb://), postgres://…; default $USERLI_DATABASE_URL, which keeps a password out of ps",
    )
    .option("--dry-run", "read and check everything, print what would be imported and refused, write nothing")
    .option("--strict", "stop at the first row that cannot be imported")
    .option("--batch-size <rows>", "rows per batch; each batch is one transaction", "500")
    .action(async (options: { from?: string; dryRun?: boolean; strict?: boolean; batchSize: string }) => {
      const from = options.from ?? process.env.USERLI_DATABASE_URL;
      if (!from) throw new UsageError("--from <url> (or USERLI_DATABASE_URL) is required");
      if (
        !/^\d{1,4}$/.test(options.batchSize) ||
        Number(options.batchSize) < 1 ||
        Number(options.batchSize) > 1000
      )
        throw new UsageError("--batch-size: a whole number from 1 to 1000");
      const source = await openUserliSource(from);
      try {
        const report = await withServices(async (s) => {
          const progress = progressDisplay();
          try {
            return await withBulkWrites(s.database, () =>
              new UserliImporter(source, s.database.db, (user) => s.users.backupCodeKey(user), {
                dryRun: options.dryRun ?? false,
                strict: options.strict ?? false,
                batchSize: Number(options.batchSize),
                onProgress: (p) => progress.update(p),
              }).run(),
            );
          } finally {
            progress.stop();
          }
        });
        for (const line of formatReport(report)) out(line);
        // 0: all taken; 2: done, some rows refused (listed); 1: --strict stopped, or an error.
        if (report.stoppedAt) process.exitCode = 1;
        else if (report.refused.length > 0) process.exitCode = 2;
      } finally {
        await source.close();
      }
    });

  program
    .command("app:export")
    .description(
      "write everything this service holds as JSON lines to standard output (sessions excluded): hashes and secret boxes, so keep it like the database",
    )
    .action(async () => {
      if (process.stdout.isTTY)
        throw new UsageError(
          "the dump holds password hashes and secret boxes: redirect it into a file (app:export > dump.jsonl)",
        );
      const counts = await withServices((s) =>
        exportDump(s.database, (line) =>
          process.stdout.write(line)
            ? undefined
            : new Promise((resolve) => process.stdout.once("drain", resolve)),
        ),
      );
      const total = Object.values(counts).reduce((a, b) => a + b, 0);
      process.stderr.write(`Exported ${total} rows.\n`);
    });

  program
    .command("app:import")
    .description(
      "read a dump of app:export (standard input or a file) into this service's database, which must be new",
    )
    .argument("[file]", "the dump; standard input when not given")
    .action(async (file: string | undefined) => {
      const input = file === undefined ? process.stdin : createReadStream(file);
      if (file === undefined && process.stdin.isTTY)
        throw new UsageError("give the dump on standard input: app:import < dump.jsonl");
      const counts = await withServices((s) => importDump(s.database, input));
      for (const [table, rows] of Object.entries(counts)) out(`${table}: ${rows} rows`);
      out(`Imported ${Object.values(counts).reduce((a, b) => a + b, 0)} rows.`);
    });
}
