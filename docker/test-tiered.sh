#!/usr/bin/env bash
# Builds the fjord and SeaweedFS images, starts docker-compose.tiered.yml
# (three Fjord nodes with tiered storage on, SeaweedFS beside them) on free
# ports, and checks that every node turns healthy, finds its bucket, and
# serves a record produced through another node; then that a node given a
# bucket that does not exist refuses to start. Not part of `make test`
# (it needs bin/weed): `make docker-tiered-test`. Cleans up after itself.
set -euo pipefail
cd "$(dirname "$0")/.."
compose=$(command -v docker-compose >/dev/null && echo docker-compose || echo "docker compose")
project="fjordtiered$$"
file=docker/docker-compose.tiered.yml
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export FJORD_PORT1=$(free) FJORD_PORT2=$(free) FJORD_PORT3=$(free) WEED_S3_PORT=$(free)
export FJORD_IMAGE=fjord:tiered-test WEED_IMAGE=fjord-weed:tiered-test
cleanup() { $compose -p "$project" -f "$file" down -v >/dev/null 2>&1 || true; }
trap cleanup EXIT
CGO_ENABLED=0 go build -trimpath -o bin/fjord ./cmd/fjord
make --no-print-directory weed >/dev/null
docker build -q -f docker/Dockerfile -t "$FJORD_IMAGE" . >/dev/null
docker build -q -f docker/Dockerfile.weed -t "$WEED_IMAGE" . >/dev/null
$compose -p "$project" -f "$file" up -d >/dev/null 2>&1 || { echo "tiered docker test: compose up failed"; exit 1; }
healthy() { [ "$(docker inspect --format '{{.State.Health.Status}}' "$1" 2>/dev/null)" = healthy ]; }
for s in fjord1 fjord2 fjord3; do
  cid=$($compose -p "$project" -f "$file" ps -q $s)
  for i in $(seq 1 300); do healthy "$cid" && break; sleep 0.2; done
  healthy "$cid" || { echo "tiered docker test: $s never became healthy"; $compose -p "$project" -f "$file" logs | tail -40; exit 1; }
done
echo "tiered docker test: three nodes healthy"
# A node that started before SeaweedFS served logged a warning and went
# on; restarted once SeaweedFS serves, it must find the bucket.
# grep reads all of the logs: -q would stop the pipe early, and pipefail fail it.
reachable() { $compose -p "$project" -f "$file" logs --no-color fjord1 2>/dev/null | grep '"tiered storage: bucket reachable"' >/dev/null; }
for attempt in 1 2 3 4 5; do
  $compose -p "$project" -f "$file" restart fjord1 >/dev/null 2>&1
  for i in $(seq 1 50); do reachable && break; sleep 0.2; done
  reachable && break
  sleep $attempt
done
reachable || { echo "tiered docker test: fjord1 did not find its bucket"; $compose -p "$project" -f "$file" logs | grep -i 'tiered\|seaweedfs_1' | tail -20; exit 1; }
echo "tiered docker test: bucket reachable from fjord1"
for i in $(seq 1 150); do timeout 10 kcat -b 127.0.0.1:$FJORD_PORT1 -L -m 2 >/dev/null 2>&1 && break; sleep 0.2; done
printf 'x:1\ny:2\n' | timeout 30 kcat -b 127.0.0.1:$FJORD_PORT2 -P -t tiered-smoke -K:
got=$(timeout 30 kcat -b 127.0.0.1:$FJORD_PORT3 -C -t tiered-smoke -o beginning -e -q -f '%k:%s\n' | sort)
[ "$got" = "$(printf 'x:1\ny:2')" ] || { echo "tiered docker test: consumed: $got"; exit 1; }
echo "tiered docker test: produce through fjord2, consume through fjord3: ok"
# A bucket that does not exist stops start-up, naming the key.
set +e
out=$(timeout 60 docker run --rm --network "${project}_default" \
  -e KAFKA_REMOTE_LOG_STORAGE_SYSTEM_ENABLE=true \
  -e KAFKA_REMOTE_LOG_STORAGE_MANAGER_CLASS_NAME=io.aiven.kafka.tieredstorage.RemoteStorageManager \
  -e KAFKA_RSM_CONFIG_STORAGE_BACKEND_CLASS=io.aiven.kafka.tieredstorage.storage.s3.S3Storage \
  -e KAFKA_RSM_CONFIG_STORAGE_S3_ENDPOINT_URL=http://seaweedfs:8333 \
  -e KAFKA_RSM_CONFIG_STORAGE_S3_BUCKET_NAME=no-such-bucket \
  -e KAFKA_RSM_CONFIG_STORAGE_S3_PATH_STYLE_ACCESS_ENABLED=true \
  -e AWS_ACCESS_KEY_ID=fjord -e AWS_SECRET_ACCESS_KEY=fjord-example-secret "$FJORD_IMAGE" 2>&1)
code=$?
set -e
if [ $code != 1 ] || ! grep -q 'bucket \\"no-such-bucket\\" does not exist' <<<"$out"; then
  echo "tiered docker test: a missing bucket: exit $code, output:"; echo "$out" | tail -5; exit 1
fi
echo "tiered docker test: a missing bucket stops start-up: ok"
