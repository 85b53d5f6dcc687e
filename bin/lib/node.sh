# Sourced by the scripts in bin/ (after they set $root): sets $node to the Node that runs the
# TypeScript sources. That is the Node pinned in package.json (installed by `npm ci`, also with
# --omit=dev); otherwise a `node` on PATH that strips types by default, which Node does from 22.18
# and 23.6. Any other Node is refused with one line, before it could fail on the first `.ts` file
# with a stack trace.
node="$root/node_modules/.bin/node"
if [ ! -x "$node" ]; then
  node="$(command -v node || true)"
  if [ -z "$node" ] || ! "$node" -e '
    const [major, minor] = process.versions.node.split(".").map(Number);
    process.exit(major >= 24 || (major === 23 && minor >= 6) || (major === 22 && minor >= 18) ? 0 : 1);
  ' 2>/dev/null; then
    found="$( [ -n "$node" ] && "$node" -p 'process.versions.node' 2>/dev/null || echo none)"
    echo "error: mail-account-service needs Node.js >= 22.18 (on 23.x: >= 23.6), found ${found}; run 'npm ci' (or 'npm ci --omit=dev') in $root to install the pinned Node" >&2
    exit 1
  fi
fi
