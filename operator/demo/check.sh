#!/usr/bin/env bash
# `make demo` step: `banlieue check` against the demo's simulator.
#
# Renders a Secret and a Provider for the running simulator (GOVC_URL,
# GOVC_USERNAME, GOVC_PASSWORD; its CA from GOVC_TLS_CA_CERTS as an inline
# caBundle, or insecureSkipTLSVerify when GOVC_INSECURE=1) and a VMImage of the
# demo's template into $DEMO_TMP/banlieue, then checks them together with the
# guide's VMClass and VirtualMachine from deploy/examples.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${DEMO_TMP:?run from tests/demo.sh}/banlieue"
mkdir -p "$out"

if [ -n "${GOVC_TLS_CA_CERTS:-}" ]; then
    tls="    caBundle:
      inline: |
$(sed 's/^/        /' "$GOVC_TLS_CA_CERTS")"
else
    tls="    insecureSkipTLSVerify: true"
fi

cat >"$out/00-secret.yaml" <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: vsphere-creds
  namespace: banlieue-system
stringData:
  username: "${GOVC_USERNAME:?}"
  password: "${GOVC_PASSWORD:?}"
YAML

# The guide's Provider, pointed at the simulator's datastore and portgroup.
cat >"$out/01-provider.yaml" <<YAML
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata:
  name: prod-vsphere
  namespace: banlieue-system
  labels: { dc: dc1, env: prod }
spec:
  providerClassRef: { name: vsphere }
  connection:
    endpoint: "${GOVC_URL:?}"
    credentialsRef: { name: vsphere-creds }
$tls
  capabilities:
    storageClasses:
      - { name: gold, target: { datastore: LocalDS_0 } }
    networkClasses:
      - { name: prod, target: { portGroup: DC0_DVPG0 } }
    features: [hotAddCPU, hotAddMemory, efiSecureBoot]
  failureDomainNameOverrides:
    - { datacenter: DC0, cluster: DC0_C0, name: dc0-compute }
YAML

# The guide's image, on the demo simulator's template.
cat >"$out/03-vmimage.yaml" <<YAML
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata:
  name: ubuntu-22.04-cloudinit
spec:
  osFamily: linux
  osDistribution: ubuntu
  osVersion: "22.04"
  architecture: amd64
  guestAgent: cloud-init
  sources:
    - { providerClass: vsphere, kind: Template, ref: golden }
YAML

cd "$repo"
# BANLIEUE: a banlieue binary to use instead of building one.
if [ -n "${BANLIEUE:-}" ]; then banlieue=("$BANLIEUE"); else banlieue=(cargo run -q -p banlieue --); fi
"${banlieue[@]}" check -f "$out" deploy/examples/02-vmclass.yaml deploy/examples/04-virtualmachine.yaml "$@"
