#!/usr/bin/env bash
# cluster-test.sh — the single-spend promise on a real three-node cluster in
# Docker (deploy/compose.yaml), through a partition and a crash.
#
#  1. builds writ:dev (make images), writes throwaway credentials, brings up
#     n1..n3 + auditor + the demo worker (its bounded load must pass);
#  2. starts a load (writ-load in a container on the compose network):
#     GRANTS grants, each spent twice at once by two independent clients;
#  3. while it runs: disconnects the raft leader's container from the network
#     (docker network disconnect), waits for a new leader, kills that one
#     (docker kill: no quorum now), reconnects the first, waits for a leader,
#     restarts the killed node;
#  4. when the load is done and the nodes agree: `auditor verify
#     --expect-digest` must exit 0, and in `auditor tail --json` every grant
#     has at most one attempt receipt and every acknowledged spend (ACK) is
#     an attempt receipt with the acknowledged sequence;
#  5. tears everything down (trap, always).
#
# Skips (exit 0, "SKIP: ...") where no Docker engine is reachable. Bounded
# by CLUSTER_TEST_TIMEOUT seconds (default 300) overall, counted from when
# the image is built (the build itself is not bounded).
#
# Environment: CLUSTER_TEST_GRANTS (40), CLUSTER_TEST_SPREAD (30s),
# CLUSTER_TEST_TIMEOUT (300), CLUSTER_TEST_KEEP_LOGS (a dir to copy logs
# to), IMAGE (writ:dev), CLUSTER_TEST_NO_BUILD=1 (use the existing IMAGE).
set -euo pipefail
cd "$(dirname "$0")/.."

GRANTS=${CLUSTER_TEST_GRANTS:-40}
SPREAD=${CLUSTER_TEST_SPREAD:-30s}
LIMIT=${CLUSTER_TEST_TIMEOUT:-300}
[ "$LIMIT" -ge 60 ] 2>/dev/null || { echo "cluster-test: CLUSTER_TEST_TIMEOUT must be a number of seconds >= 60" >&2; exit 2; }
IMAGE=${IMAGE:-writ:dev}
MAKE=${MAKE:-make}

skip() { echo "SKIP: cluster-test: $*"; exit 0; }
command -v docker >/dev/null 2>&1 || skip "no docker command on PATH"
docker info >/dev/null 2>&1 || skip "no Docker engine reachable (\`docker info\` failed)"
if docker compose version >/dev/null 2>&1; then
  COMPOSE_CMD=(docker compose)
elif command -v docker-compose >/dev/null 2>&1 && docker-compose version >/dev/null 2>&1; then
  COMPOSE_CMD=(docker-compose)
else
  skip "a Docker engine is here but neither \`docker compose\` nor \`docker-compose\` is"
fi
command -v timeout >/dev/null 2>&1 || { echo "cluster-test: needs timeout(1) (coreutils)" >&2; exit 1; }

START=$SECONDS
log() { printf '[t+%3ds] %s\n' "$((SECONDS - START))" "$*"; }
die() { log "FAIL: $*"; exit 1; }

PROJECT=writ-ct-$$
WORK=$(mktemp -d "${TMPDIR:-/tmp}/writ-cluster-test.XXXXXX")
SECRETS=$WORK/secrets
LOGS=$WORK/logs
mkdir -p "$LOGS"
LOAD_PID=
WATCHDOG=
PASSED=

COMPOSE=("${COMPOSE_CMD[@]}" -f deploy/compose.yaml -p "$PROJECT")

cleanup() {
  local code=$?
  trap - EXIT INT TERM
  [ -n "$WATCHDOG" ] && kill "$WATCHDOG" 2>/dev/null || true
  [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null || true
  if [ -z "$PASSED" ] && [ -f "$SECRETS/auth.json" ]; then
    for s in n1 n2 n3 auditor worker; do
      timeout 20 "${COMPOSE[@]}" logs --no-color "$s" >"$LOGS/$s.log" 2>&1 || true
    done
    for s in n1 n2 n3; do
      echo "---- last lines of $s ----"; tail -n 25 "$LOGS/$s.log" | cut -c1-300
    done
    [ -s "$LOGS/load.err" ] && { echo "---- load stderr ----"; tail -n 20 "$LOGS/load.err"; }
  fi
  if [ -n "${CLUSTER_TEST_KEEP_LOGS:-}" ]; then
    mkdir -p "$CLUSTER_TEST_KEEP_LOGS" && cp -r "$LOGS"/. "$CLUSTER_TEST_KEEP_LOGS"/ || true
  fi
  log "tearing down $PROJECT"
  docker rm -f "${PROJECT}_load" >/dev/null 2>&1 || true
  if [ -f "$SECRETS/auth.json" ]; then
    timeout 120 "${COMPOSE[@]}" down -v --remove-orphans -t 5 >"$LOGS/down.log" 2>&1 ||
      echo "cluster-test: compose down failed; see docker ps -a --filter name=$PROJECT" >&2
  fi
  rm -rf "$WORK"
  log "done (exit $code)"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The image is built before the watchdog starts: on an empty build cache
# the compile alone can take longer than the whole run's limit, and the
# limit is about the cluster, not the compiler.
if [ "${CLUSTER_TEST_NO_BUILD:-}" != 1 ]; then
  t=$SECONDS
  log "building $IMAGE (make images; not counted in the ${LIMIT}s limit)"
  "$MAKE" --no-print-directory images IMAGE="$IMAGE" >"$LOGS/build.log" 2>&1 || { tail -n 30 "$LOGS/build.log"; die "make images failed"; }
  log "built $IMAGE in $((SECONDS - t))s"
fi

# The watchdog ends the run after LIMIT seconds; every docker call below is
# also bounded by timeout(1), so the TERM is handled promptly.
exec 3>&2
(
  trap 'kill "$sp" 2>/dev/null; exit 0' TERM
  sleep "$LIMIT" & sp=$!
  wait "$sp" && { echo "cluster-test: TIMEOUT after ${LIMIT}s: stopping" >&3; kill -TERM $$; }
) 2>/dev/null &
WATCHDOG=$!

# ---------------------------------------------------------------------
log "cluster-test: $GRANTS grants spent twice over $SPREAD; project $PROJECT; ${COMPOSE_CMD[*]}"

./deploy/gen-secrets.sh "$SECRETS" 4 >/dev/null
export WRIT_SECRETS_DIR=$SECRETS WRIT_IMAGE=$IMAGE WRIT_LOAD_GRANTS=10
if [ "$(id -u)" = 0 ]; then
  chown -R 65532:65532 "$SECRETS"
  export WRIT_SECRETS_GID=65532
else
  export WRIT_SECRETS_GID=$(id -g) # files are 0640 in a 0750 dir, group = ours
fi
free_port() {
  local p=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}
WRIT_PORT_N1=$(free_port 24221); WRIT_PORT_N2=$(free_port $((WRIT_PORT_N1 + 1))); WRIT_PORT_N3=$(free_port $((WRIT_PORT_N2 + 1)))
export WRIT_PORT_N1 WRIT_PORT_N2 WRIT_PORT_N3

t=$SECONDS
timeout 120 "${COMPOSE[@]}" up -d >"$LOGS/up.log" 2>&1 || { cat "$LOGS/up.log"; die "compose up failed"; }
declare -A CID
for n in n1 n2 n3; do CID[$n]=$("${COMPOSE[@]}" ps -q "$n"); done
WORKER=$("${COMPOSE[@]}" ps -q worker)
NET=$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "${CID[n1]}")

health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$1" 2>/dev/null || echo gone; }
wait_healthy() { # wait_healthy SECONDS NODE...
  local until=$((SECONDS + $1)); shift
  while :; do
    local all=1
    for n in "$@"; do [ "$(health "${CID[$n]}")" = healthy ] || all=; done
    [ -n "$all" ] && return 0
    [ $SECONDS -ge $until ] && return 1
    sleep 1
  done
}
wait_healthy 120 n1 n2 n3 || die "the nodes did not become healthy in 120s"
log "n1 n2 n3 healthy in $((SECONDS - t))s (network $NET, NATS on 127.0.0.1:$WRIT_PORT_N1-$WRIT_PORT_N3)"

# status_json NODE: the node's own status (WRIT_NODE_ID is set in its container).
status_json() { timeout 10 docker exec "${CID[$1]}" /issuer status --json --timeout 3s 2>/dev/null || true; }
jfield() { sed -n "s/^  \"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" | head -n1; }
leader_of() { status_json "$1" | jfield leader; }

code=$(timeout 120 docker wait "$WORKER" 2>/dev/null || echo timeout)
docker logs "$WORKER" >"$LOGS/demo.out" 2>"$LOGS/demo.err" || true
[ "$code" = 0 ] || { tail -n 20 "$LOGS/demo.out" "$LOGS/demo.err"; die "the demo worker exited $code"; }
log "demo worker: $(grep '^writ-load:' "$LOGS/demo.out" | cut -d' ' -f2-)"

# ---------------------------------------------------------------------
# The load runs in its own container on the compose network.
t_load=$SECONDS
timeout $((LIMIT - 30)) "${COMPOSE[@]}" run --rm --no-deps -T --name "${PROJECT}_load" \
  worker --grants "$GRANTS" --spread "$SPREAD" --workers 4 --deadline 120s --run ct \
  </dev/null >"$LOGS/load.out" 2>"$LOGS/load.err" &
LOAD_PID=$!
sleep 6

L1=
for n in n1 n2 n3; do L1=$(leader_of "$n"); [ -n "$L1" ] && break; done
[ -n "$L1" ] || die "no leader known before the partition"
log "leader is $L1: disconnecting its container from $NET"
t_part=$SECONDS
timeout 30 docker network disconnect "$NET" "${CID[$L1]}" || die "docker network disconnect failed"

others=()
for n in n1 n2 n3; do [ "$n" != "$L1" ] && others+=("$n"); done
L2=
until=$((SECONDS + 60))
while [ -z "$L2" ]; do
  for n in "${others[@]}"; do
    l=$(leader_of "$n")
    if [ -n "$l" ] && [ "$l" != "$L1" ]; then L2=$l; break; fi
  done
  [ -n "$L2" ] && break
  [ $SECONDS -ge $until ] && die "no new leader within 60s of partitioning $L1"
  sleep 0.5
done
log "new leader $L2 after $((SECONDS - t_part))s; killing it (docker kill): no quorum until $L1 is back"
sleep 2
t_kill=$SECONDS
timeout 30 docker kill "${CID[$L2]}" >/dev/null || die "docker kill failed"
sleep 5
log "reconnecting $L1 (${L2} still down)"
timeout 30 docker network connect --alias "$L1" "$NET" "${CID[$L1]}" || die "docker network connect failed"
t_reconn=$SECONDS
L3=
until=$((SECONDS + 60))
while :; do
  for n in n1 n2 n3; do
    [ "$n" = "$L2" ] && continue
    L3=$(leader_of "$n"); [ -n "$L3" ] && [ "$L3" != "$L2" ] && break
    L3=
  done
  [ -n "$L3" ] && break
  [ $SECONDS -ge $until ] && die "no leader within 60s of reconnecting $L1"
  sleep 0.5
done
log "leader $L3 after $((SECONDS - t_reconn))s (quorum was lost for $((SECONDS - t_kill))s); restarting $L2"
timeout 30 docker start "${CID[$L2]}" >/dev/null || die "docker start failed"
t=$SECONDS
wait_healthy 90 n1 n2 n3 || die "not every node healthy within 90s of restarting $L2"
log "all three nodes healthy again after $((SECONDS - t))s"

set +e
wait "$LOAD_PID"; load_code=$?
set -e
LOAD_PID=
[ "$load_code" = 124 ] && log "the load was stopped by its time bound ($((LIMIT - 30))s)"
log "load finished in $((SECONDS - t_load))s, exit $load_code: $(grep '^writ-load:' "$LOGS/load.out" | cut -d' ' -f2- || true)"
if [ "$load_code" != 0 ]; then
  grep -E '^(FAIL|UNKNOWN)' "$LOGS/load.out" | head -n 20 || true
fi

# ---------------------------------------------------------------------
# Quiesce: the nodes agree on the state and every receipt is published.
until=$((SECONDS + 60))
while :; do
  s1=$(status_json n1); s2=$(status_json n2); s3=$(status_json n3)
  d1=$(jfield state_digest <<<"$s1"); d2=$(jfield state_digest <<<"$s2"); d3=$(jfield state_digest <<<"$s3")
  q1=$(jfield seq <<<"$s1"); p1=$(jfield published <<<"$s1"); o1=$(jfield outbox <<<"$s1")
  if [ -n "$d1" ] && [ "$d1" = "$d2" ] && [ "$d2" = "$d3" ] && [ "$q1" = "$p1" ] && [ "${o1:-0}" = 0 ]; then break; fi
  [ $SECONDS -ge $until ] && die "the nodes did not converge in 60s (digests $d1 $d2 $d3, seq $q1 published $p1)"
  sleep 1
done
log "converged: seq $q1, state digest ${d1:0:16}…"

# auditor OUT ERR ARGS...: run the auditor in a one-off container, again
# while it exits 3 (unavailable: JetStream may still be placing the stream
# after the restart) for up to 60s. Exit 1 (a violation) is final.
auditor() {
  local out=$1 err=$2 until=$((SECONDS + 60)) code; shift 2
  while :; do
    set +e
    timeout 60 "${COMPOSE[@]}" run --rm --no-deps -T auditor "$@" </dev/null >"$out" 2>"$err"
    code=$?
    set -e
    if [ "$code" != 3 ] || [ $SECONDS -ge $until ]; then return "$code"; fi
    log "auditor $1: unavailable ($(grep '^auditor:' "$err" | tail -n1 | cut -c1-160)); retrying"
    sleep 2
  done
}
set +e
auditor "$LOGS/verify.out" "$LOGS/verify.err" verify --expect-digest "$d1"
verify_code=$?
auditor "$LOGS/receipts.jsonl" "$LOGS/tail.err" tail --json
tail_code=$?
set -e
sed 's/^/    /' "$LOGS/verify.out"
[ "$verify_code" = 0 ] || { cat "$LOGS/verify.err"; die "auditor verify exited $verify_code"; }
[ "$tail_code" = 0 ] || { cat "$LOGS/tail.err"; die "auditor tail exited $tail_code"; }

# Double-spend count: attempt receipts per grant, over the whole stream.
grep '"kind":"attempt"' "$LOGS/receipts.jsonl" |
  sed -E 's/.*[{,]"seq":([0-9]+).*[{,]"grant_id":"([^"]*)".*/\2 \1/' | sort >"$LOGS/attempts.txt" || true
attempts=$(wc -l <"$LOGS/attempts.txt")
doubles=$(cut -d' ' -f1 "$LOGS/attempts.txt" | uniq -d | wc -l)
# Every acknowledged spend (demo worker and load) is an attempt receipt with
# the sequence the client was given.
cat "$LOGS/demo.out" "$LOGS/load.out" | awk '$1 == "ACK" {print $2, $3}' | sort >"$LOGS/acks.txt"
acks=$(wc -l <"$LOGS/acks.txt")
missing=$(comm -23 "$LOGS/acks.txt" "$LOGS/attempts.txt" | wc -l)
events=$(wc -l <"$LOGS/receipts.jsonl")
log "receipts $events, attempt receipts $attempts, grants with >1 attempt: $doubles, acknowledged spends $acks, missing from the stream: $missing"
[ "$doubles" = 0 ] || { cut -d' ' -f1 "$LOGS/attempts.txt" | uniq -d | head; die "DOUBLE SPEND: $doubles grant(s) have more than one attempt receipt"; }
[ "$missing" = 0 ] || { comm -23 "$LOGS/acks.txt" "$LOGS/attempts.txt" | head; die "$missing acknowledged spend(s) have no attempt receipt"; }
[ "$acks" -ge "$((GRANTS + 10))" ] || die "only $acks acknowledged spends for $((GRANTS + 10)) grants"
[ "$load_code" = 0 ] || die "the load reported failures (exit $load_code)"

PASSED=1
log "PASS: cluster-test ($GRANTS+10 grants, 1 partition, 1 kill) in $((SECONDS - START))s"
