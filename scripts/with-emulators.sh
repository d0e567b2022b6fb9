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
#   KINESIS_ENDPOINT       kinesalite            (the main integration suite)
#   DYNAMODB_ENDPOINT      dynalite
#   KINESIS_MOCK_ENDPOINT  kinesis-local         (resharding: ChildShards, UpdateShardCount)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
emu="$root/emulators"
state=$(mktemp -d "${TMPDIR:-/tmp}/wmk-emulators.XXXXXX")
pids=()

stop_all() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
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

kinesalite_port=$(free_port)
(cd "$emu" && exec node -e "require('kinesalite')({createStreamMs:0,deleteStreamMs:0,updateStreamMs:0,shardLimit:1000000}).listen($kinesalite_port,'127.0.0.1')") \
  >"$state/kinesalite.log" 2>&1 &
pids+=($!)
wait_port kinesalite "$kinesalite_port" "${pids[-1]}"

dynalite_port=$(free_port)
(cd "$emu" && exec node node_modules/dynalite/cli.js --host 127.0.0.1 --port "$dynalite_port" \
  --createTableMs 0 --deleteTableMs 0 --updateTableMs 0) >"$state/dynalite.log" 2>&1 &
pids+=($!)
wait_port dynalite "$dynalite_port" "${pids[-1]}"

# kinesis-local listens on 0.0.0.0 by design; the preload keeps every server it opens on loopback.
mock_port=$(free_port)
mock_tls_port=$(free_port)
(cd "$emu" && KINESIS_MOCK_PLAIN_PORT=$mock_port KINESIS_MOCK_TLS_PORT=$mock_tls_port \
  KINESIS_MOCK_CERT_PATH="$emu/node_modules/kinesis-local/server.json" LOG_LEVEL=WARN SHARD_LIMIT=1000000 \
  CREATE_STREAM_DURATION=0ms DELETE_STREAM_DURATION=0ms SPLIT_SHARD_DURATION=0ms MERGE_SHARDS_DURATION=0ms \
  UPDATE_SHARD_COUNT_DURATION=0ms REGISTER_STREAM_CONSUMER_DURATION=0ms DEREGISTER_STREAM_CONSUMER_DURATION=0ms \
  exec node -r "$emu/loopback.js" node_modules/kinesis-local/main.js) >"$state/kinesis-local.log" 2>&1 &
pids+=($!)
wait_port kinesis-local "$mock_port" "${pids[-1]}"

export KINESIS_ENDPOINT="http://127.0.0.1:$kinesalite_port"
export DYNAMODB_ENDPOINT="http://127.0.0.1:$dynalite_port"
export KINESIS_MOCK_ENDPOINT="http://127.0.0.1:$mock_port"
export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
echo "with-emulators: kinesalite $KINESIS_ENDPOINT, dynalite $DYNAMODB_ENDPOINT, kinesis-local $KINESIS_MOCK_ENDPOINT" >&2

"$@"
