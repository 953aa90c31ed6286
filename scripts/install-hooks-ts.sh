#!/usr/bin/env bash
# Install the TypeScript hook runtime's one dependency (esbuild, pinned in the lock file) into
# orchestrator/hooks_ts/js/node_modules. Needs node >= 20 and npm; safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/../orchestrator/hooks_ts/js"
if ! command -v node >/dev/null; then
  echo "install-hooks-ts: node is not installed (TypeScript hooks need node 20 or later)" >&2
  exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "install-hooks-ts: node $(node --version) is too old (need 20 or later)" >&2
  exit 1
fi
want=$(node -p 'require("./package-lock.json").packages["node_modules/esbuild"].version')
if [ -x node_modules/.bin/esbuild ] && [ "$(node_modules/.bin/esbuild --version)" = "$want" ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
node_modules/.bin/esbuild --version >/dev/null
