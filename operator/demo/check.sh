#!/usr/bin/env bash
# `make demo` step: `banlieue check` against the demo's simulator.
#
# Renders a Secret and a Provider for the running simulator (from its GOVC_*
# variables, by operator/demo/govc-manifests.sh) and a VMImage of the demo's
# template into $DEMO_TMP/banlieue, then checks them together with the
# guide's VMClass and VirtualMachine from deploy/examples.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${DEMO_TMP:?run from tests/demo.sh}/banlieue"
mkdir -p "$out"

# The guide's Provider, pointed at the simulator's datastore and portgroup.
BANLIEUE_DATASTORE=LocalDS_0 BANLIEUE_PORTGROUP=DC0_DVPG0 \
    BANLIEUE_FAILURE_DOMAIN=DC0/DC0_C0=dc0-compute \
    "$repo/operator/demo/govc-manifests.sh" "$out"

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
