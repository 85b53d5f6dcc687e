/**
 * Whether a `Location` stays on this site: a path of ours, never `//host` or `/\host`, which
 * browsers (and clients that do not normalise paths) follow to another host. Checked as a browser
 * reads it (tabs and line breaks dropped, dot segments resolved), and once more with its escapes
 * decoded (`/%2F%2Fhost`).
 */
export function isSitePath(location: string): boolean {
  const read = location.replace(/[\t\n\r]/g, "");
  if (hasControlCharacter(read)) return false;
  let decoded = read;
  try {
    decoded = decodeURIComponent(read);
  } catch {
    // Not decodable: the raw form is what any client sees.
  }
  return [read, decoded].every((path) => sitePath.test(path) && sitePath.test(resolved(path)));
}

/** The path once `.` and `..` are resolved (`/a/..//host` is `//host` to a client that resolves them). */
const resolved = (path: string): string => {
  const url = new URL(path, "http://site.invalid");
  return url.host === "site.invalid" ? url.pathname : "//";
};

const sitePath = /^\/(?![/\\])/;

/** Where a redirect that would leave the site goes instead. */
export const siteRoot = "/";

const hasControlCharacter = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
};
