# Sourced by bin/console and bin/mailbox-janitor (after they set $root): sets $node to the Node that
# runs the TypeScript sources. That is the Node pinned in package.json (installed by `npm ci`);
# otherwise a `node` on PATH that strips types by default, which Node does from 22.18 and 23.6.
node="$root/node_modules/.bin/node"
if [ ! -x "$node" ]; then
  node="$(command -v node || true)"
  if [ -z "$node" ] || ! "$node" -e '
    const [major, minor] = process.versions.node.split(".").map(Number);
    process.exit(major >= 24 || (major === 23 && minor >= 6) || (major === 22 && minor >= 18) ? 0 : 1);
  ' 2>/dev/null; then
    echo "error: Node >= 22.18 (on 23.x: >= 23.6) is required; run 'npm ci' in $root first" >&2
    exit 1
  fi
fi
