#!/usr/bin/env bash
# Creates a private CA and a server certificate for NATS client connections over TLS:
#   infra/nats/make-tls.sh <out-dir> <conf-dir> <host>...
# writes <out-dir>/ca.pem (what clients trust: NATS_TLS_CA), server.pem and server-key.pem (the server's, for
# every <host> as a DNS name or an IP address), and tls.conf, the server's `tls {}` block naming them under
# <conf-dir> (where the server will find them: /etc/nats/tls in docker-compose). The CA's private key is
# deleted once the server certificate is signed: nothing else can be issued under it. Needs openssl.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 <out-dir> <conf-dir> <host>..." >&2; exit 2; }
out="$1" conf_dir="$2"
shift 2
[ -e "$out/ca.pem" ] && { echo "$out/ca.pem exists; delete $out to create a new CA" >&2; exit 1; }
mkdir -p "$out"
sans=""
for host in "$@"; do
  if [[ "$host" =~ ^[0-9.]+$ || "$host" == *:* ]]; then sans+="IP:$host,"; else sans+="DNS:$host,"; fi
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 -subj "/CN=Toolgate NATS CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$work/ca-key.pem" -out "$out/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=toolgate-nats" \
  -keyout "$out/server-key.pem" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n' "${sans%,}" >"$work/ext"
openssl x509 -req -in "$work/server.csr" -CA "$out/ca.pem" -CAkey "$work/ca-key.pem" -CAcreateserial \
  -CAserial "$work/ca.srl" -days 825 -extfile "$work/ext" -out "$out/server.pem" 2>/dev/null
chmod 600 "$out/server-key.pem"
cat >"$out/tls.conf" <<CONF
# Written by infra/nats/make-tls.sh: client connections must use TLS, with the certificate of this CA.
tls {
  cert_file: "$conf_dir/server.pem"
  key_file: "$conf_dir/server-key.pem"
  timeout: 2
}
CONF
