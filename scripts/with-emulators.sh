#!/usr/bin/env bash
# Runs a command with the Kinesis and DynamoDB test servers up, on 127.0.0.1 only:
#
#   scripts/with-emulators.sh go test ./...
#
# Installs the pinned servers from emulators/package-lock.json (npm ci) when they are missing,
# starts kinesalite, dynalite and kinesis-local (kinesis-mock) on free loopback ports, waits
# until each answers, exports their endpoints to the command, and stops them by PID when the
# command ends, fails, or is interrupted. Needs Node.js and npm.
#
#   AWS_ENDPOINT_URL_KINESIS   kinesalite        (the main integration suite)
#   AWS_ENDPOINT_URL_DYNAMODB  dynalite
#       Both are the AWS SDKs' own settings: a client made with config.LoadDefaultConfig and
#       kinesis.NewFromConfig (or dynamodb.NewFromConfig) goes there with no code, so the
#       examples, kinesis-leases and the tests reach the servers as a user's program would.
#   AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
#       us-east-1 and dummy credentials: the servers check neither, but the SDK needs both.
#   KINESIS_MOCK_ENDPOINT      kinesis-local     (resharding: ChildShards, UpdateShardCount;
#       fan-out). A second Kinesis, which the SDK has no setting for: the tests that use it set
#       BaseEndpoint themselves.
#   RESTARTABLE_KINESIS_URL, RESTARTABLE_DYNAMODB_URL
#       a second kinesalite and dynalite that keep their data on disk, for Watermill's
#       reconnect test; `scripts/with-emulators.sh --restart` (the command in
#       EMULATORS_RESTART_COMMAND) stops and starts them on the same ports with the same data.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
emu="$root/emulators"

free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

wait_port() { # name port pid
  local i
  for i in $(seq 1 200); do
    if ! kill -0 "$3" 2>/dev/null; then
      echo "with-emulators: $1 exited before it answered; its log:" >&2
      cat "$state/$1.log" >&2 || true
      return 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
      return 0
    fi
    sleep 0.05
  done
  echo "with-emulators: $1 did not answer on 127.0.0.1:$2 within 10 s; its log:" >&2
  cat "$state/$1.log" >&2 || true
  return 1
}

# start_server NAME PORT [DATA_DIR]: starts kinesalite or dynalite (by NAME's prefix) on
# 127.0.0.1:PORT, in memory or keeping its data in DATA_DIR; records its PID and port.
start_server() {
  local name=$1 port=$2 dir=${3:-}
  case $name in
    kinesalite*)
      local opts="createStreamMs:0,deleteStreamMs:0,updateStreamMs:0,shardLimit:1000000"
      [ -n "$dir" ] && opts="$opts,path:'$dir'"
      (cd "$emu" && exec node -r "$emu/ignore-aborted.js" -e "require('kinesalite')({$opts}).listen($port,'127.0.0.1')") >>"$state/$name.log" 2>&1 &
      ;;
    dynalite*)
      local args=(--host 127.0.0.1 --port "$port" --createTableMs 0 --deleteTableMs 0 --updateTableMs 0)
      [ -n "$dir" ] && args+=(--path "$dir")
      (cd "$emu" && exec node -r "$emu/ignore-aborted.js" node_modules/dynalite/cli.js "${args[@]}") >>"$state/$name.log" 2>&1 &
      ;;
  esac
  local pid=$!
  echo "$pid" >"$state/$name.pid"
  printf '%s %s\n' "$port" "$dir" >"$state/$name.args"
  wait_port "$name" "$port" "$pid"
}

stop_server() { # NAME: stops it by its recorded PID and waits until it is gone
  local pid
  pid=$(cat "$state/$1.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || true
}

if [ "${1:-}" = "--restart" ]; then
  state=${WMK_EMULATORS_STATE:?"--restart runs inside scripts/with-emulators.sh (WMK_EMULATORS_STATE is not set)"}
  for name in kinesalite-disk dynalite-disk; do
    read -r port dir <"$state/$name.args"
    stop_server "$name"
    start_server "$name" "$port" "$dir"
  done
  echo "with-emulators: restarted kinesalite-disk and dynalite-disk" >&2
  exit 0
fi

state=$(mktemp -d "${TMPDIR:-/tmp}/wmk-emulators.XXXXXX")

stop_all() {
  local f
  for f in "$state"/*.pid; do
    [ -e "$f" ] && stop_server "$(basename "$f" .pid)"
  done
  rm -rf "$state"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "with-emulators: Node.js and npm are needed to run the Kinesis and DynamoDB test servers" >&2
  exit 1
fi

if [ ! -d "$emu/node_modules/kinesalite" ] || [ ! -d "$emu/node_modules/dynalite" ] || [ ! -d "$emu/node_modules/kinesis-local" ]; then
  echo "with-emulators: installing the pinned test servers (npm ci in emulators/)" >&2
  (cd "$emu" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi

kinesalite_port=$(free_port)
start_server kinesalite "$kinesalite_port"
dynalite_port=$(free_port)
start_server dynalite "$dynalite_port"
kinesalite_disk_port=$(free_port)
start_server kinesalite-disk "$kinesalite_disk_port" "$state/kinesalite-data"
dynalite_disk_port=$(free_port)
start_server dynalite-disk "$dynalite_disk_port" "$state/dynalite-data"

# kinesis-local listens on 0.0.0.0 by design; the preload keeps every server it opens on loopback.
mock_port=$(free_port)
mock_tls_port=$(free_port)
(cd "$emu" && KINESIS_MOCK_PLAIN_PORT=$mock_port KINESIS_MOCK_TLS_PORT=$mock_tls_port \
  KINESIS_MOCK_CERT_PATH="$emu/node_modules/kinesis-local/server.json" LOG_LEVEL=WARN SHARD_LIMIT=1000000 \
  CREATE_STREAM_DURATION=0ms DELETE_STREAM_DURATION=0ms SPLIT_SHARD_DURATION=0ms MERGE_SHARDS_DURATION=0ms \
  UPDATE_SHARD_COUNT_DURATION=0ms REGISTER_STREAM_CONSUMER_DURATION=0ms DEREGISTER_STREAM_CONSUMER_DURATION=0ms \
  exec node -r "$emu/loopback.js" node_modules/kinesis-local/main.js) >"$state/kinesis-local.log" 2>&1 &
echo "$!" >"$state/kinesis-local.pid"
wait_port kinesis-local "$mock_port" "$(cat "$state/kinesis-local.pid")"

export AWS_ENDPOINT_URL_KINESIS="http://127.0.0.1:$kinesalite_port"
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$dynalite_port"
export KINESIS_MOCK_ENDPOINT="http://127.0.0.1:$mock_port"
export RESTARTABLE_KINESIS_URL="http://127.0.0.1:$kinesalite_disk_port"
export RESTARTABLE_DYNAMODB_URL="http://127.0.0.1:$dynalite_disk_port"
export WMK_EMULATORS_STATE="$state"
export EMULATORS_RESTART_COMMAND="$root/scripts/with-emulators.sh --restart"
export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
echo "with-emulators: kinesalite $AWS_ENDPOINT_URL_KINESIS, dynalite $AWS_ENDPOINT_URL_DYNAMODB, kinesis-local $KINESIS_MOCK_ENDPOINT" >&2

"$@"
