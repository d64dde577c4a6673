#!/usr/bin/env bash
# Toolgate's development entry point. On a fresh machine of the dev kind (Node 20, npm, Go with its module
# proxy, PostgreSQL packages reachable; no Docker, no MongoDB) it installs and starts everything the project needs.
#
#   ./infra/dev.sh demo     install, build, start the four services and run the C04 case, printing its trace
#   ./infra/dev.sh test     install, build and run the whole test suite against real NATS and FerretDB
#   ./infra/dev.sh bench    install, build and run the end-to-end benchmark
#   ./infra/dev.sh chaos    install, build and run the chaos suite (faults under load; see README, Chaos)
#   ./infra/dev.sh up       only install and start the infrastructure (and Chromium for the UI tests); prints the environment to use
#   ./infra/dev.sh up --cluster   the same with a three-node NATS cluster on loopback (streams with 3 replicas)
#   ./infra/dev.sh down     stop the NATS servers and the FerretDB this script started
#
# NATS is the project's own nats-server (NATS_VERSION, built once from the Go module proxy into infra/.bin),
# configured from infra/nats/ (JetStream file storage; the cluster nodes with `sync_interval: always`) on 127.0.0.1:14222; a server
# already on 4222 (the machine's own) is left alone. `demo`, `bench` and `chaos` take `--cluster` too.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$ROOT/infra/.state"
BIN="$ROOT/infra/.bin"
PNPM_VERSION="12.4.2"
FERRETDB_VERSION="v1.24.2"
# Toolgate needs ≥ 2.12.3 (README, "NATS versions"); dev, CI and the tests run what production should.
NATS_VERSION="v2.15.2"
NATS_PORT="${TOOLGATE_NATS_PORT:-14222}"
# The cluster's nodes: client ports CLUSTER_PORT+0..2, routes +2000, monitoring +4000.
CLUSTER_PORT="${TOOLGATE_NATS_CLUSTER_PORT:-14231}"
# Where FerretDB keeps its data; by default the local server's database toolgate_ferretdb (see ferretdb_pg_url).
PG_URL="${TOOLGATE_FERRETDB_PG_URL:-}"
PG_SOCKET_DIR="/var/run/postgresql"
MONGO_PORT="${TOOLGATE_FERRETDB_PORT:-27117}"
MONGO_URL="mongodb://127.0.0.1:${MONGO_PORT}"
mkdir -p "$STATE" "$BIN"

log() { printf '\033[1;34m[dev]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[dev]\033[0m %s\n' "$*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
apt_install() {
  command -v apt-get >/dev/null || die "cannot install $*: no apt-get on this machine"
  log "installing $* from Debian packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null; }
}

ensure_node_deps() {
  command -v node >/dev/null || die "Node.js 20 is required"
  if ! command -v pnpm >/dev/null || [ "$(pnpm --version)" != "$PNPM_VERSION" ]; then
    # corepack's signature check fails on this kind of machine; npm's global install works.
    log "installing pnpm $PNPM_VERSION"
    npm install -g "pnpm@$PNPM_VERSION" >/dev/null 2>&1
  fi
  (cd "$ROOT" && pnpm install --frozen-lockfile --reporter=silent)
}

ensure_nats_binary() {
  if [ -x "$BIN/nats-server" ] && [ "$("$BIN/nats-server" --version)" = "nats-server: $NATS_VERSION" ]; then return; fi
  command -v go >/dev/null || die "Go is required to build nats-server"
  log "building nats-server $NATS_VERSION from the Go module proxy (once)"
  GOBIN="$BIN" go install "github.com/nats-io/nats-server/v2@$NATS_VERSION" || die "could not build nats-server $NATS_VERSION"
}

# Starts one nats-server from a configuration (a path) unless its client port already answers (a server
# this script started before); the environment names the node, its ports and its store.
start_nats_node() {
  local name="$1" conf="$2" port="$3" http="$4"
  shift 4
  if port_open 127.0.0.1 "$port"; then return; fi
  log "starting nats-server $NATS_VERSION ($name) with JetStream on 127.0.0.1:$port"
  mkdir -p "$STATE/$name"
  env TOOLGATE_NATS_NAME="$name" TOOLGATE_NATS_LISTEN="127.0.0.1:$port" TOOLGATE_NATS_HTTP="127.0.0.1:$http" \
    TOOLGATE_NATS_STORE_DIR="$STATE/$name" "$@" \
    nohup "$BIN/nats-server" -c "$conf" >"$STATE/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

# Waits until the server's JetStream is up (in a cluster: a meta leader is elected and its streams are current).
wait_nats_ready() {
  local name="$1" http="$2"
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$http/healthz" >/dev/null 2>&1 && return
    sleep 0.1
  done
  die "nats-server $name is not healthy after 30 s; see $STATE/$name.log"
}

# The dev server's identities (once): an nkey per service, subscriber and operator, each held by the server to
# its subject permissions under any prefix (every test stack has its own), and the server configuration that
# lists them. Connections without credentials — local tools and tests watching the bus — get every right on
# this development server only; the services started here (demo, tests, benchmarks) connect with their own
# identities, so a service that publishes a transition it does not own is refused in every test.
NATS_AUTH="$STATE/nats-auth"
# Kept identities get this release's permissions on every `up` (a new event type, a new right): the configuration
# is written again from the same seeds, and servers already running re-read it.
ensure_nats_identities() {
  (cd "$ROOT" && pnpm exec tsc -b packages/cli)
  local auth=(nats-auth --out "$NATS_AUTH" --include ../../nats/server.conf --prefix '*' --local-tools)
  if [ ! -f "$NATS_AUTH/nats-seeds.env" ]; then
    log "creating the dev server's NATS identities in $NATS_AUTH"
    rm -f "$NATS_AUTH/nats-auth.conf" "$NATS_AUTH/nats-auth-cluster.conf"
    node "$ROOT/packages/cli/dist/cli.js" "${auth[@]}"
    return
  fi
  local before
  before=$(cat "$NATS_AUTH/nats-auth.conf" 2>/dev/null || true)
  node "$ROOT/packages/cli/dist/cli.js" "${auth[@]}" --refresh 2>/dev/null
  [ "$before" = "$(cat "$NATS_AUTH/nats-auth.conf")" ] && return
  log "NATS permissions changed: configuration rewritten for the same identities"
  [ -f "$NATS_AUTH/nats-auth-cluster.conf" ] && write_cluster_conf
  local pidfile
  for pidfile in "$STATE"/nats*.pid; do
    [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null && kill -HUP "$(cat "$pidfile")" && log "reloaded $(basename "$pidfile" .pid)"
  done
  return 0
}

ensure_nats() {
  ensure_nats_binary
  ensure_nats_identities
  start_nats_node nats "$NATS_AUTH/nats-auth.conf" "$NATS_PORT" "$((NATS_PORT + 4000))"
  wait_nats_ready nats "$((NATS_PORT + 4000))"
  NATS_URL="nats://127.0.0.1:$NATS_PORT"
  # Not listed for the sync guard: the single dev server flushes on the default interval (infra/nats/jetstream-dev.conf).
  NATS_MONITOR_URL=""
  STREAM_REPLICAS=1
  NATS_SEEDS="$NATS_AUTH/nats-seeds.env"
  # A server on the port that another checkout started knows that checkout's identities, not these: connect
  # without them (it lets local tools in, or has no identities at all).
  if ! started_here nats; then
    log "nats-server on 127.0.0.1:$NATS_PORT was not started by this checkout; the services connect without identities"
    NATS_SEEDS=""
  fi
}

# Whether the server recorded in $STATE/<name>.pid runs, from this checkout's binary.
started_here() {
  local pidfile="$STATE/$1.pid"
  [ -f "$pidfile" ] && tr '\0' ' ' <"/proc/$(cat "$pidfile")/cmdline" 2>/dev/null | grep -q "^$BIN/"
}

# The cluster's nodes hold the same identities as the single server: the same authorization block, with the
# cluster node's configuration included instead of the server's.
write_cluster_conf() {
  sed 's#^include "../../nats/server.conf"$#include "../../nats/cluster-node.conf"#' "$NATS_AUTH/nats-auth.conf" >"$NATS_AUTH/nats-auth-cluster.conf"
  grep -q '^include "../../nats/cluster-node.conf"$' "$NATS_AUTH/nats-auth-cluster.conf" || die "unexpected $NATS_AUTH/nats-auth.conf: delete $NATS_AUTH to recreate it"
}

ensure_nats_cluster_identities() {
  ensure_nats_identities
  [ -f "$NATS_AUTH/nats-auth-cluster.conf" ] || write_cluster_conf
}

ensure_nats_cluster() {
  ensure_nats_binary
  ensure_nats_cluster_identities
  local routes=() urls=() monitors=() i
  for i in 0 1 2; do routes+=("TOOLGATE_NATS_ROUTE_$((i + 1))=nats-route://127.0.0.1:$((CLUSTER_PORT + 2000 + i))"); done
  for i in 0 1 2; do
    start_nats_node "nats-$((i + 1))" "$NATS_AUTH/nats-auth-cluster.conf" "$((CLUSTER_PORT + i))" "$((CLUSTER_PORT + 4000 + i))" \
      TOOLGATE_NATS_CLUSTER_LISTEN="127.0.0.1:$((CLUSTER_PORT + 2000 + i))" "${routes[@]}"
    urls+=("nats://127.0.0.1:$((CLUSTER_PORT + i))")
    monitors+=("http://127.0.0.1:$((CLUSTER_PORT + 4000 + i))")
  done
  for i in 0 1 2; do wait_nats_ready "nats-$((i + 1))" "$((CLUSTER_PORT + 4000 + i))"; done
  NATS_URL="$(IFS=,; echo "${urls[*]}")"
  NATS_MONITOR_URL="$(IFS=,; echo "${monitors[*]}")"
  STREAM_REPLICAS=3
  NATS_SEEDS="$NATS_AUTH/nats-seeds.env"
  if ! started_here nats-1; then
    log "the NATS cluster on 127.0.0.1:$CLUSTER_PORT was not started by this checkout; the services connect without identities"
    NATS_SEEDS=""
  fi
}

ensure_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then return; fi
  if ! command -v pg_ctlcluster >/dev/null; then apt_install postgresql; fi
  log "starting PostgreSQL (FerretDB's storage)"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start
  for _ in $(seq 1 100); do pg_isready -q -h 127.0.0.1 -p 5432 && return; sleep 0.1; done
  die "PostgreSQL did not start"
}

ensure_ferretdb_binary() {
  [ -x "$BIN/ferretdb" ] && return
  command -v go >/dev/null || die "Go is required to build FerretDB"
  log "building FerretDB $FERRETDB_VERSION from the Go module proxy (once)"
  local dir src
  dir="$(go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')"
  [ -n "$dir" ] || die "could not download FerretDB $FERRETDB_VERSION"
  src="$STATE/ferretdb-src"
  rm -rf "$src" && cp -r "$dir" "$src" && chmod -R u+w "$src"
  # `go install` of the module panics at start-up without build/version/version.txt; a copy with it builds cleanly.
  echo "$FERRETDB_VERSION" >"$src/build/version/version.txt"
  (cd "$src" && go build -o "$BIN/ferretdb" ./cmd/ferretdb)
  rm -rf "$src"
}

# FerretDB v1 runs an update or delete as a query whose cursor keeps one pooled PostgreSQL connection while
# the write takes a second one: with N connections, N/2 concurrent updates each hold one and wait for another,
# and the server hangs for good. The pool is therefore sized far above what the suite runs at once (a few
# dozen concurrent writes at peak), which needs PostgreSQL to accept that many connections.
PG_MAX_CONNECTIONS=600
FERRETDB_POOL=560
# FerretDB runs every lookup as a prepared statement with the field name as a parameter
# (`_jsonb -> $1 @> $2`). After five runs PostgreSQL may switch such a statement to a generic plan, which
# no expression index can serve: every update of a keyed host request scanned its whole collection. Custom
# plans see the field name and use the `_id` index (see infra/ferretdb/gin-indexes.sql). The test stacks'
# private FerretDB servers (packages/testkit/src/private-servers.ts) connect with the same setting.
# Values larger than ~2 KB (audit's blocks: one string of ~75 KB per dozen calls) are compressed with lz4
# instead of PostgreSQL's default pglz. pglz was most of PostgreSQL's CPU per block: FerretDB inserting 120
# blocks of 60 events, 1.8–2.3 against 1.0–1.2 ms of PostgreSQL's CPU per block; in `bench.js`, three alternating
# pairs, PostgreSQL 0.32–0.33 against 0.25–0.26 ms per call and 1.03–1.09 × the sustained throughput. Small
# documents (keys, results) are not compressed either way.
# FerretDB reaches PostgreSQL on its Unix socket (ferretdb_pg_url): over 127.0.0.1 the connection negotiated TLS, and
# with it FerretDB spent 1.43–1.66 against 1.24–1.28 ms of CPU per insert and find of one key, PostgreSQL 0.59–0.71
# against 0.48–0.50 ms (alternating restarts, 2,000 of each at 8 concurrent; plain TCP was in between). Under
# load, where inserts are batched, the stack barely sees it: four alternating pairs of `bench.js --runs 1`,
# FerretDB + PostgreSQL 0.60–0.66 against 0.63–0.80 ms per call.
FERRETDB_PG_OPTIONS="pool_max_conns=$FERRETDB_POOL&plan_cache_mode=force_custom_plan&default_toast_compression=lz4"
# One OS thread runs FerretDB's Go code (GOMAXPROCS=1). With two, on this two-core VM, goroutines were handed
# between threads on every request, and each hand-off is a wake-up on the other core: three alternating pairs of
# `bench.js --runs 1` gave FerretDB 3.3–3.75 against 4.95–5.2 ms of CPU per idle call (0.55–0.65 against
# 0.69–0.76 under load) and idle p50 14.9–16.4 against 18.4–19.0 ms. At full load it used a quarter of its one
# core (0.55–0.65 ms of CPU per call at 360–390 calls/s). The private servers of the tests
# (packages/testkit/src/private-servers.ts) run with the same setting.
FERRETDB_GOMAXPROCS="${TOOLGATE_FERRETDB_GOMAXPROCS:-1}"

ensure_postgres_connections() {
  local current
  current="$(psql -q -h 127.0.0.1 -U postgres -d postgres -tAc "SHOW max_connections")"
  [ "$current" -ge "$PG_MAX_CONNECTIONS" ] && return
  log "raising PostgreSQL max_connections from $current to $PG_MAX_CONNECTIONS (restarts PostgreSQL)"
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "ALTER SYSTEM SET max_connections = $PG_MAX_CONNECTIONS" >/dev/null
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main restart
  for _ in $(seq 1 100); do pg_isready -q -h 127.0.0.1 -p 5432 && return; sleep 0.1; done
  die "PostgreSQL did not come back after the restart"
}

# FerretDB reaches the local PostgreSQL through its Unix socket when it has one: no TCP, and no TLS, which
# Debian's server negotiates on 127.0.0.1 by default (see FERRETDB_PG_OPTIONS).
ferretdb_pg_url() {
  if [ -n "$PG_URL" ]; then
    echo "$PG_URL"
  elif [ -S "$PG_SOCKET_DIR/.s.PGSQL.5432" ]; then
    echo "postgres://postgres@/toolgate_ferretdb?host=$PG_SOCKET_DIR"
  else
    echo "postgres://postgres@127.0.0.1:5432/toolgate_ferretdb?sslmode=disable"
  fi
}

# The PostgreSQL database FerretDB keeps its data in, with the index trigger (idempotent, so a FerretDB that is
# already running gets the current index set for the collections created from now on).
ensure_ferretdb_database() {
  local db
  db="$(ferretdb_pg_url)"
  db="${db%%\?*}"
  db="${db##*/}"
  psql -q -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 ||
    psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db" >/dev/null
  psql -q -h 127.0.0.1 -U postgres -d "$db" -f "$ROOT/infra/ferretdb/gin-indexes.sql" >/dev/null 2>&1
}

ensure_ferretdb() {
  # The binary also serves the tests' private servers (the chaos suite, outage tests), whoever runs the shared one.
  ensure_ferretdb_binary
  if port_open 127.0.0.1 "$MONGO_PORT"; then
    if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then ensure_ferretdb_database; fi
    return
  fi
  ensure_postgres
  ensure_postgres_connections
  ensure_ferretdb_database
  log "starting FerretDB on 127.0.0.1:$MONGO_PORT"
  local url sep="?"
  url="$(ferretdb_pg_url)"
  case "$url" in *\?*) sep="&" ;; esac
  mkdir -p "$STATE/ferretdb"
  GOMAXPROCS="$FERRETDB_GOMAXPROCS" nohup "$BIN/ferretdb" --handler=postgresql --postgresql-url="$url$sep$FERRETDB_PG_OPTIONS" \
    --listen-addr="127.0.0.1:$MONGO_PORT" --telemetry=disable --state-dir="$STATE/ferretdb" \
    --debug-addr=- --log-level=warn >"$STATE/ferretdb.log" 2>&1 &
  echo $! >"$STATE/ferretdb.pid"
  for _ in $(seq 1 100); do port_open 127.0.0.1 "$MONGO_PORT" && return; sleep 0.1; done
  die "FerretDB did not start; see $STATE/ferretdb.log"
}

# The approval page's end-to-end test drives Debian's Chromium with playwright-core (Playwright's own browser
# download does not work on this kind of machine).
ensure_chromium() {
  [ -x /usr/bin/chromium ] && return
  apt_install chromium
  [ -x /usr/bin/chromium ] || die "chromium did not install"
}

CLUSTER=0
up() {
  ensure_node_deps
  command -v curl >/dev/null || apt_install curl
  if [ "$CLUSTER" = 1 ]; then ensure_nats_cluster; else ensure_nats; fi
  ensure_ferretdb
  export TOOLGATE_TEST_NATS_URL="$NATS_URL" TOOLGATE_TEST_MONGO_URL="$MONGO_URL" TOOLGATE_TEST_NATS_SEEDS="$NATS_SEEDS"
  export NATS_URL MONGO_URL STREAM_REPLICAS NATS_MONITOR_URL
}

build() { (cd "$ROOT" && pnpm run build); }

cmd="${1:-help}"
shift || true
# `--cluster` (anywhere after the command) selects the three-node NATS cluster; the rest goes to the command.
# chaos keeps it: its cluster scenarios start private clusters of their own.
rest=()
for arg in "$@"; do if [ "$arg" = --cluster ] && [ "$cmd" != chaos ]; then CLUSTER=1; else rest+=("$arg"); fi; done
set -- "${rest[@]+"${rest[@]}"}"
case "$cmd" in
  up)
    # The tests `pnpm verify` runs need what `test` installs: the servers, and the browser the UI tests drive.
    up && ensure_chromium
    echo "export TOOLGATE_TEST_NATS_URL=$NATS_URL TOOLGATE_TEST_MONGO_URL=$MONGO_URL TOOLGATE_TEST_NATS_SEEDS=$NATS_SEEDS NATS_URL=$NATS_URL MONGO_URL=$MONGO_URL STREAM_REPLICAS=$STREAM_REPLICAS NATS_MONITOR_URL=$NATS_MONITOR_URL"
    ;;
  test)
    # The suite's tests connect to one server; the cluster's faults are the chaos suite's (`chaos --cluster`).
    [ "$CLUSTER" = 0 ] || die "the test suite runs on one server; run ./infra/dev.sh chaos --cluster for the cluster"
    up && ensure_chromium && build
    cd "$ROOT" && exec pnpm exec vitest run "$@"
    ;;
  demo)
    up && build
    cd "$ROOT" && exec node packages/devtools/dist/demo.js "$@"
    ;;
  bench)
    up && build
    cd "$ROOT" && exec node packages/devtools/dist/bench.js "$@"
    ;;
  chaos)
    up && build
    cd "$ROOT" && exec node packages/devtools/dist/chaos.js "$@"
    ;;
  down)
    for pidfile in "$STATE"/nats.pid "$STATE"/nats-[123].pid "$STATE"/ferretdb.pid; do
      [ -f "$pidfile" ] || continue
      pid="$(cat "$pidfile")"
      # Only a process still running this checkout's binary: a recycled pid is someone else's.
      if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$BIN/"; then kill "$pid"; fi
      rm -f "$pidfile"
    done
    log "stopped"
    ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    ;;
esac
