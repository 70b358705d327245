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
# The compose healthcheck (`fjord health` inside the image, which has no
# shell) must turn healthy on its own.
healthy() { [ "$(docker inspect --format '{{.State.Health.Status}}' "$1" 2>/dev/null)" = healthy ]; }
cid=$($compose -p "$project" -f docker/docker-compose.yml ps -q fjord)
for i in $(seq 1 150); do healthy "$cid" && break; sleep 0.2; done
healthy "$cid" || { echo "docker test: the container never became healthy"; docker inspect --format '{{json .State.Health}}' "$cid"; exit 1; }
echo "docker test: healthcheck (fjord health) healthy"
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

# The three-node cluster: every node lists all three brokers and the same
# leaders, and a record produced through one node is read through another.
cluster=docker/docker-compose.cluster.yml
cproject="fjordcluster$$"
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export FJORD_PORT1=$(free) FJORD_PORT2=$(free) FJORD_PORT3=$(free)
cleanup_cluster() { $compose -p "$cproject" -f "$cluster" down -v >/dev/null 2>&1 || true; }
trap 'cleanup; cleanup_cluster' EXIT
$compose -p "$cproject" -f "$cluster" up -d >/dev/null 2>&1 || { echo "docker cluster test: compose up failed"; exit 1; }
brokers() { timeout 10 kcat -b 127.0.0.1:$1 -L -m 2 2>/dev/null | grep -c '^  broker ' || true; }
for i in $(seq 1 150); do
  if [ "$(brokers $FJORD_PORT1)" = 3 ] && [ "$(brokers $FJORD_PORT2)" = 3 ] && [ "$(brokers $FJORD_PORT3)" = 3 ]; then break; fi
  sleep 0.2
done
for p in $FJORD_PORT1 $FJORD_PORT2 $FJORD_PORT3; do
  [ "$(brokers $p)" = 3 ] || { echo "docker cluster test: node on port $p does not list 3 brokers"; $compose -p "$cproject" -f "$cluster" logs | tail -40; exit 1; }
done
printf 'x:1\ny:2\n' | timeout 30 kcat -b 127.0.0.1:$FJORD_PORT2 -P -t cluster-smoke -K:
got=$(timeout 30 kcat -b 127.0.0.1:$FJORD_PORT3 -C -t cluster-smoke -o beginning -e -q -f '%k:%s\n' | sort)
if [ "$got" != "$(printf 'x:1\ny:2')" ]; then
  echo "docker cluster test: consumed:"; echo "$got"
  $compose -p "$cproject" -f "$cluster" logs | tail -40
  exit 1
fi
leaders() { timeout 10 kcat -b 127.0.0.1:$1 -L -t cluster-smoke | grep 'partition ' | sed 's/, isrs.*//' ; }
l1=$(leaders $FJORD_PORT1); l2=$(leaders $FJORD_PORT2); l3=$(leaders $FJORD_PORT3)
if [ "$l1" != "$l2" ] || [ "$l1" != "$l3" ]; then
  echo "docker cluster test: nodes disagree on leaders:"; echo "$l1"; echo "--"; echo "$l2"; echo "--"; echo "$l3"; exit 1
fi
for svc in fjord1 fjord2 fjord3; do
  c=$($compose -p "$cproject" -f "$cluster" ps -q $svc)
  for i in $(seq 1 150); do healthy "$c" && break; sleep 0.2; done
  healthy "$c" || { echo "docker cluster test: $svc never became healthy"; docker inspect --format '{{json .State.Health}}' "$c"; exit 1; }
done
echo "docker cluster test: 3 nodes agree on brokers and leaders, all healthy (fjord health --brokers 3); produce through node 2, consume through node 3: ok"
