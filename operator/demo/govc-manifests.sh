#!/usr/bin/env bash
# Writes a Secret and a Provider for the vCenter that govc's environment names,
# for `banlieue check` (or `kubectl apply`):
#
#   operator/demo/govc-manifests.sh OUT_DIR
#
# Reads (docs/local-development.md has the table):
#   GOVC_URL            vCenter: host, https://host, https://host/sdk or
#                       https://user:password@host/sdk (the endpoint gets
#                       https:// and /sdk when missing, never the credentials)
#   GOVC_USERNAME       the Secret's username (else the user in GOVC_URL)
#   GOVC_PASSWORD       the Secret's password (else the password in GOVC_URL)
#   GOVC_TLS_CA_CERTS   a PEM file: the Provider's caBundle, inline
#   GOVC_INSECURE=1     insecureSkipTLSVerify instead (no CA)
#   BANLIEUE_DATASTORE  the `gold` storage class's datastore (required)
#   BANLIEUE_PORTGROUP  the `prod` network class's port group (required)
#   BANLIEUE_NAMESPACE  the install namespace (default banlieue-system)
#   BANLIEUE_FAILURE_DOMAIN  optional "DATACENTER/CLUSTER=NAME": a failure
#                       domain name override
# Writes OUT_DIR/00-secret.yaml and OUT_DIR/01-provider.yaml (mode 600: the
# Secret holds the password).
set -euo pipefail

out="${1:?usage: $0 OUT_DIR}"
url="${GOVC_URL:?GOVC_URL is not set}"
namespace="${BANLIEUE_NAMESPACE:-banlieue-system}"

# Credentials in the URL (user:password@), taken out of the endpoint.
rest="${url#*://}"
url_user="" url_password=""
if [[ "$rest" == *@* ]]; then
    # The last @: a password may hold one.
    userinfo="${rest%@*}"
    rest="${rest##*@}"
    url_user="${userinfo%%:*}"
    [[ "$userinfo" == *:* ]] && url_password="${userinfo#*:}"
fi
host="${rest%%/*}"
path="/${rest#"$host"}"
path="${path#/}"
[ -n "$path" ] && [ "$path" != "/" ] || path="/sdk"
[[ "$path" == /* ]] || path="/$path"
endpoint="https://$host$path"
username="${GOVC_USERNAME:-$url_user}"
password="${GOVC_PASSWORD:-$url_password}"
[ -n "$username" ] || { echo "$0: no user name (GOVC_USERNAME, or user@ in GOVC_URL)" >&2; exit 2; }
[ -n "$password" ] || { echo "$0: no password (GOVC_PASSWORD, or user:password@ in GOVC_URL)" >&2; exit 2; }

if [ -n "${GOVC_TLS_CA_CERTS:-}" ]; then
    tls="    caBundle:
      inline: |
$(sed 's/^/        /' "$GOVC_TLS_CA_CERTS")"
elif [ "${GOVC_INSECURE:-}" = 1 ] || [ "${GOVC_INSECURE:-}" = true ]; then
    tls="    insecureSkipTLSVerify: true"
else
    tls=""
fi

# YAML double-quoted scalars: backslashes and quotes escaped.
quote() { local s="${1//\\/\\\\}"; printf '"%s"' "${s//\"/\\\"}"; }

datastore="${BANLIEUE_DATASTORE:?BANLIEUE_DATASTORE is not set}"
portgroup="${BANLIEUE_PORTGROUP:?BANLIEUE_PORTGROUP is not set}"
overrides=""
if [ -n "${BANLIEUE_FAILURE_DOMAIN:-}" ]; then
    place="${BANLIEUE_FAILURE_DOMAIN%%=*}"
    overrides="  failureDomainNameOverrides:
    - { datacenter: $(quote "${place%%/*}"), cluster: $(quote "${place#*/}"), name: $(quote "${BANLIEUE_FAILURE_DOMAIN#*=}") }"
fi


mkdir -p "$out"
(
    umask 077
    cat >"$out/00-secret.yaml" <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: vsphere-creds
  namespace: $namespace
stringData:
  username: $(quote "$username")
  password: $(quote "$password")
YAML
)

cat >"$out/01-provider.yaml" <<YAML
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata:
  name: prod-vsphere
  namespace: $namespace
  labels: { dc: dc1, env: prod }
spec:
  providerClassRef: { name: vsphere }
  connection:
    endpoint: $(quote "$endpoint")
    credentialsRef: { name: vsphere-creds }
$tls
  capabilities:
    storageClasses:
      - { name: gold, target: { datastore: $(quote "$datastore") } }
    networkClasses:
      - { name: prod, target: { portGroup: $(quote "$portgroup") } }
    features: [hotAddCPU, hotAddMemory, efiSecureBoot]
$overrides
YAML
