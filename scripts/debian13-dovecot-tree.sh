#!/usr/bin/env bash
# Makes (once) a Debian 13 tree with Dovecot 2.4 for the mail-host tests' 2.4 checks
# (packages/service/test/mail-host/): `debootstrap` of trixie with Dovecot's IMAP, LMTP and Lua
# authentication, kept at $DEBIAN13_DOVECOT_TREE (default /var/cache/mail-account-service/debian13-dovecot)
# so that later runs on the same machine reuse it. The tests run Dovecot 2.4 from it with chroot;
# they share the host's loopback, so the service and the test reach each other on 127.0.0.1.
# Exit 0 when the tree is ready (made now or before), non-zero (with the reason on stderr) otherwise.
set -euo pipefail
tree="${DEBIAN13_DOVECOT_TREE:-/var/cache/mail-account-service/debian13-dovecot}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages=dovecot-core,dovecot-imapd,dovecot-lmtpd,dovecot-auth-lua,lua-cjson,ca-certificates

# The marker is written last: a tree without it is a run that did not finish, made again.
if [ -f "$tree/.complete" ]; then
  echo "Debian 13 Dovecot tree ready at $tree ($(cat "$tree/.complete"))"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is not installed" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "debootstrap needs root" >&2; exit 1; }
rm -rf "$tree"
mkdir -p "$(dirname "$tree")"
started=$(date +%s)
# No services start inside the tree while packages are installed (policy-rc.d is honoured by
# invoke-rc.d in the maintainer scripts).
debootstrap --variant=minbase --include="$packages" trixie "$tree" "$mirror" >"$tree.log" 2>&1 || {
  echo "debootstrap of trixie failed (log: $tree.log):" >&2
  tail -5 "$tree.log" >&2
  exit 1
}
version=$(chroot "$tree" /usr/sbin/dovecot --version)
echo "dovecot $version, made in $(($(date +%s) - started)) s on $(date -u +%F)" >"$tree/.complete"
echo "Debian 13 Dovecot tree ready at $tree ($(cat "$tree/.complete"))"
