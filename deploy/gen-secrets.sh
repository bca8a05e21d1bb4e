#!/usr/bin/env bash
# gen-secrets.sh DIR [WORKERS]
#
# Writes throwaway credentials for deploy/compose.yaml into DIR (created
# 0750; files 0640):
#   auth.json, <name>.pw  NATS users: an operator "ops", an auditor "audit" and
#                         workers w1..wWORKERS (default 4); each password (32
#                         random hex digits) only in its file, never in flags
#                         or environment variables
#   ca.crt                a throwaway CA (its key is discarded after signing)
#   tls.crt, tls.key      one certificate for every node (EC P-256, 30 days,
#                         serverAuth+clientAuth): raft and NATS routes use
#                         mutual TLS with it, clients verify it against ca.crt.
#                         SANs: n1 n2 n3 localhost 127.0.0.1, plus
#                         $WRIT_TLS_SANS (e.g. "DNS:*.writ.prod.svc,DNS:writ-client.prod.svc")
# compose mounts DIR read-only at /run/writ. Needs openssl for the TLS files.
#
# The containers run as uid 65532. Make the files readable to it either by
#   sudo chown -R 65532:65532 DIR
# or by keeping DIR's group (your primary group, `id -g`) and exporting
#   WRIT_SECRETS_GID=$(id -g)            (compose adds it to the containers)
set -euo pipefail
dir=${1:?usage: gen-secrets.sh DIR [WORKERS]}
workers=${2:-4}
command -v openssl >/dev/null 2>&1 || { echo "gen-secrets.sh: needs openssl (for the TLS files)" >&2; exit 1; }
umask 027
mkdir -p "$dir"
chmod 0750 "$dir"

secret() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }

users=("ops operator" "audit auditor")
for i in $(seq 1 "$workers"); do users+=("w$i worker"); done
{
  printf '{"users":[\n'
  sep=""
  for u in "${users[@]}"; do
    set -- $u
    secret >"$dir/$1.pw"
    printf '%s  {"name":"%s","role":"%s","password_file":"%s.pw"}' "$sep" "$1" "$2" "$1"
    sep=$',\n'
  done
  printf '\n]}\n'
} >"$dir/auth.json"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sans="DNS:n1,DNS:n2,DNS:n3,DNS:localhost,IP:127.0.0.1${WRIT_TLS_SANS:+,$WRIT_TLS_SANS}"
ossl() { openssl "$@" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -keyout "$tmp/ca.key" -out "$dir/ca.crt" -subj "/CN=writ throwaway CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$dir/tls.key" -out "$tmp/node.csr" -subj "/CN=writ issuer"
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$sans" >"$tmp/ext"
ossl x509 -req -in "$tmp/node.csr" -CA "$dir/ca.crt" -CAkey "$tmp/ca.key" -set_serial "0x$(secret)" \
  -days 30 -extfile "$tmp/ext" -out "$dir/tls.crt"

chmod 0640 "$dir"/*
echo "wrote $dir: auth.json, ${#users[@]} password files (ops, audit, w1..w$workers), ca.crt, tls.crt, tls.key ($sans)"
