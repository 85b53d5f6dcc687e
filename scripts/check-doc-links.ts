/**
 * `node scripts/check-doc-links.ts`: every relative link in the project's Markdown files (README.md,
 * docs/, bench/README.md, ...) points at a file or directory of the repository, and every #anchor at a
 * heading of its target, as GitHub forms heading ids. Prints each broken link and exits 1 when there is
 * one. External links (http, https, mailto) are not fetched.
 */
import { existsSync, globSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");

/** The Markdown files a reader of the repository sees (not those of dependencies). */
function markdownFiles(): string[] {
  return globSync("**/*.md", { cwd: root, exclude: (name) => name === "node_modules" || name === ".git" })
    .filter((file) => !file.split("/").includes("node_modules"))
    .sort();
}

/** The lines outside fenced code blocks, with inline code removed (links inside code are not links). */
function proseLines(text: string): { line: string; number: number }[] {
  const result: { line: string; number: number }[] = [];
  let fence: string | null = null;
  text.split("\n").forEach((line, index) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker !== undefined) {
      if (fence === null) fence = marker[0] ?? null;
      else if (marker[0] === fence) fence = null;
      return;
    }
    if (fence === null) result.push({ line: line.replace(/`[^`]*`/g, "``"), number: index + 1 });
  });
  return result;
}

/** GitHub's heading id: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, ... */
function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | null = null;
  for (const line of text.split("\n")) {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker !== undefined) {
      if (fence === null) fence = marker[0] ?? null;
      else if (marker[0] === fence) fence = null;
      continue;
    }
    if (fence !== null) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

const anchorCache = new Map<string, Set<string>>();
function anchorsOf(file: string): Set<string> {
  let anchors = anchorCache.get(file);
  if (anchors === undefined) {
    anchors = headingAnchors(readFileSync(file, "utf8"));
    anchorCache.set(file, anchors);
  }
  return anchors;
}

const problems: string[] = [];
let checked = 0;
for (const file of markdownFiles()) {
  const path = join(root, file);
  for (const { line, number } of proseLines(readFileSync(path, "utf8"))) {
    for (const match of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const link = match[1] ?? "";
      if (/^(https?:|mailto:)/.test(link)) continue;
      checked += 1;
      const [target = "", anchor] = link.split("#", 2);
      const targetPath = target === "" ? path : resolve(dirname(path), decodeURIComponent(target));
      const where = `${file}:${number}: ${link}`;
      if (!targetPath.startsWith(root) || !existsSync(targetPath)) {
        problems.push(`${where}: no such file ${relative(root, targetPath)}`);
        continue;
      }
      if (anchor === undefined) continue;
      if (statSync(targetPath).isDirectory() || !targetPath.endsWith(".md")) {
        problems.push(`${where}: an anchor into something that is not a Markdown file`);
      } else if (!anchorsOf(targetPath).has(anchor)) {
        problems.push(`${where}: no heading #${anchor} in ${relative(root, targetPath)}`);
      }
    }
  }
}

if (problems.length > 0) {
  console.error(problems.join("\n"));
  console.error(`${problems.length} broken of ${checked} relative links`);
  process.exit(1);
}
console.log(`${checked} relative links, all resolve`);
