#!/usr/bin/env bash
# The test command: installs what the tests need when it is missing, then
# runs `cargo test --workspace` (extra arguments are passed on to cargo).
#
#   bash scripts/test.sh                  # everything
#   bash scripts/test.sh -- --nocapture   # arguments go on to cargo test
#
# (The interop suite alone, once installed: cargo test -p sluice-vendor-tests.)
#
# Needs (Debian): lighttpd (smart HTTP) with lighttpd-mod-openssl (https),
# tinyproxy (a real forward proxy), postgresql (the PostgreSQL ledger's
# tests start their own server; as root, as the `postgres` user the package
# makes), pgbouncer (in front of it, in transaction pooling mode; as root,
# started as that same user), openssh-server (ssh://), jgit-cli
# (JGit), python3-dulwich (dulwich), and Debian's git package, whose git
# 2.39 lives under /usr/lib/git-core next to the git 2.47 on PATH. Each is
# installed with apt-get only when it is absent; nothing is skipped.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

missing=()
have() { command -v "$1" >/dev/null 2>&1; }

# lighttpd and sshd live in sbin, which a non-root PATH may lack.
if ! have lighttpd && [ ! -x /usr/sbin/lighttpd ]; then missing+=(lighttpd); fi
if [ ! -e /usr/lib/lighttpd/mod_openssl.so ]; then missing+=(lighttpd-mod-openssl); fi
if ! have tinyproxy && [ ! -x /usr/sbin/tinyproxy ]; then missing+=(tinyproxy); fi
if ! have sshd && [ ! -x /usr/sbin/sshd ]; then missing+=(openssh-server); fi
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then missing+=(postgresql); fi
if ! have pgbouncer && [ ! -x /usr/sbin/pgbouncer ]; then missing+=(pgbouncer); fi
if ! have ssh || ! have ssh-keygen; then missing+=(openssh-client); fi
if ! have jgit; then missing+=(jgit-cli); fi
# Debian's python3 (not a pyenv or venv one) is where python3-dulwich lives.
if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c 'import dulwich' >/dev/null 2>&1; then
  missing+=(python3-dulwich)
fi
# Debian's git 2.39: its daemon and git under /usr/lib/git-core.
if [ ! -x /usr/lib/git-core/git-daemon ] || [ ! -x /usr/lib/git-core/git ]; then
  missing+=(git)
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "scripts/test.sh: installing ${missing[*]}" >&2
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

# One build from a fresh clone gains nothing from incremental state (GBs).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# sluice-ledger's features: each store alone, and neither, still build
# (the tests below build the default, both). A few seconds each once the
# dependencies are checked, which the first of them pays.
for features in "--features sqlite" "--features postgres" ""; do
  # shellcheck disable=SC2086 # the feature flags are words on purpose
  cargo check --quiet -p sluice-ledger --no-default-features $features
done
# sluice-git's transports: git://, ssh:// and file:// only (no reqwest,
# tokio or rustls), and plain http:// without https.
for features in "" "--features http"; do
  # shellcheck disable=SC2086 # the feature flags are words on purpose
  cargo check --quiet -p sluice-git --no-default-features $features
done

# sluice-forge's features: without the GitHub App source (no JWT or RSA
# crates) and without https (no rustls), each alone, and neither.
for features in "" "--features app" "--features tls"; do
  # shellcheck disable=SC2086 # the feature flags are words on purpose
  cargo check --quiet -p sluice-forge --no-default-features $features
done

exec cargo test --workspace "$@"
