#!/usr/bin/env bash
# `make demo` step: `banlieue check --apply` provisions a VirtualMachine on the
# demo's simulator, and a second run finds the same VM (no second clone).
#
# Reuses the Secret and Provider that operator/demo/check.sh rendered into
# $DEMO_TMP/banlieue, with a small VMClass, an image of the demo's template
# without a guest agent (Ready once powered on: nothing would report an IP
# address), and one VirtualMachine.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rendered="${DEMO_TMP:?run from tests/demo.sh}/banlieue"
out="$DEMO_TMP/banlieue-apply"
mkdir -p "$out"
if [ ! -f "$rendered/01-provider.yaml" ]; then
    "$repo/operator/demo/check.sh" >/dev/null 2>&1 || true
fi
cp "$rendered/00-secret.yaml" "$rendered/01-provider.yaml" "$out/"

cat >"$out/02-demo.yaml" <<'YAML'
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata:
  name: demo-small
spec:
  hardware:
    cpus: 2
    memoryMiB: 2048
    disks:
      - { name: root, sizeGiB: 10, storageClass: gold, provisioning: thin }
  network:
    interfaces:
      - name: eth0
        networkClass: prod
        ipam: { static: { address: 10.0.0.10/24, gateway: 10.0.0.1 } }
  firmware: efi
---
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata:
  name: golden-no-agent
spec:
  guestAgent: none
  sources:
    - { providerClass: vsphere, kind: Template, ref: golden }
---
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata:
  name: web-demo
  namespace: demo
spec:
  classRef: { name: demo-small }
  imageRef: { name: golden-no-agent }
  placement:
    providerSelector:
      matchLabels: { env: prod }
  desiredPowerState: PoweredOn
YAML

cd "$repo"
if [ -n "${BANLIEUE:-}" ]; then banlieue=("$BANLIEUE"); else banlieue=(cargo run -q -p banlieue --); fi
echo "\$ banlieue check --apply -f $out"
"${banlieue[@]}" check --apply --timeout 2m -f "$out" "$@"
echo
echo "\$ banlieue check --apply -f $out   # again: the VM is found by its instance UUID, not cloned twice"
"${banlieue[@]}" check --apply --timeout 2m -f "$out" "$@"
