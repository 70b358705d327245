#!/usr/bin/env bash
# Builds the image, starts docker-compose.yml on a free port, and checks with
# kcat that a client on the host can produce and consume. Cleans up after
# itself.
set -euo pipefail
cd "$(dirname "$0")/.."
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
compose=$(command -v docker-compose >/dev/null && echo docker-compose || echo "docker compose")
project="fjordtest$$"
export FJORD_PORT=$port
cleanup() { $compose -p "$project" -f docker/docker-compose.yml down -v >/dev/null 2>&1 || true; }
trap cleanup EXIT
CGO_ENABLED=0 go build -trimpath -o bin/fjord ./cmd/fjord
docker build -q -f docker/Dockerfile -t fjord:dev . >/dev/null
$compose -p "$project" -f docker/docker-compose.yml up -d >/dev/null
for i in $(seq 1 100); do
  if kcat -b 127.0.0.1:$port -L -m 2 >/dev/null 2>&1; then break; fi
  sleep 0.2
done
printf 'a:1\nb:2\nc:3\n' | timeout 30 kcat -b 127.0.0.1:$port -P -t docker-smoke -K:
got=$(timeout 30 kcat -b 127.0.0.1:$port -C -t docker-smoke -o beginning -e -q -f '%k:%s\n' | sort)
want=$(printf 'a:1\nb:2\nc:3')
if [ "$got" != "$want" ]; then
  echo "docker test: consumed:"; echo "$got"
  $compose -p "$project" -f docker/docker-compose.yml logs | tail -30
  exit 1
fi
parts=$(timeout 30 kcat -b 127.0.0.1:$port -L -t docker-smoke | grep -c 'partition ')
[ "$parts" = 3 ] || { echo "docker test: want 3 partitions from KAFKA_NUM_PARTITIONS, got $parts"; exit 1; }
echo "docker test: produce/consume through the compose file on port $port: ok"
