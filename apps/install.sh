#!/usr/bin/env bash
# Installs what the application scenarios run, at the versions pinned in
# this directory: the Python packages of requirements.txt into a
# virtualenv at target/apps/venv, and the Node packages of
# bullmq/package-lock.json into bullmq/node_modules (npm ci). Both are
# redone only when their pin file changed; pip's and npm's own caches make
# a redo quick. Sidekiq comes from Debian's ruby-sidekiq package, which
# .ci/run installs with apt-get; this script only checks for it.
# Anything missing is an error: no scenario is skipped for want of a tool.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "apps/install.sh: $*" >&2; exit 1; }

command -v python3 >/dev/null || fail "python3 not found"
command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm not found (Debian: apt-get install nodejs npm)"
command -v ruby >/dev/null && command -v sidekiq >/dev/null || fail "sidekiq not found (Debian: apt-get install ruby-sidekiq)"

venv=target/apps/venv
stamp="$(sha256sum apps/requirements.txt | cut -d' ' -f1) $(python3 --version)"
if [ "$(cat "$venv/.respite-stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r apps/requirements.txt
    echo "$stamp" > "$venv/.respite-stamp"
fi

modules=apps/bullmq/node_modules
stamp="$(sha256sum apps/bullmq/package-lock.json | cut -d' ' -f1) $(node --version)"
if [ "$(cat "$modules/.respite-stamp" 2>/dev/null)" != "$stamp" ]; then
    (cd apps/bullmq && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
    echo "$stamp" > "$modules/.respite-stamp"
fi

echo "apps: $("$venv/bin/python" --version); $("$venv/bin/pip" freeze | grep -iE '^(celery|redis|rq|limits)=' | tr '\n' ' ')"
echo "apps: node $(node --version); bullmq $(node -p "require('./apps/bullmq/node_modules/bullmq/package.json').version"); ioredis $(node -p "require('./apps/bullmq/node_modules/ioredis/package.json').version")"
echo "apps: $(ruby --version | cut -d' ' -f1-2); sidekiq $(ruby -e 'require "sidekiq"; print Sidekiq::VERSION'); redis-rb $(ruby -e 'require "redis"; print Redis::VERSION')"
echo "apps: $(redis-server --version | cut -d' ' -f1-3)"
