#!/usr/bin/env bash
# `make demo` step: the operator as it runs in a cluster. The real binaries,
# `banlieue controller` and `banlieue provider vsphere`, against the Kubernetes
# API emulator (tests/kube-emulator/) and the demo's simulator: a Provider gets
# Ready, a VirtualMachine is scheduled, cloned, powered on and Ready, then
# deleted (its VM destroyed, the finalizer released).
#
# Reuses the Secret and Provider that operator/demo/check.sh rendered into
# $DEMO_TMP/banlieue; a small VMClass, an image of the demo's template without
# a guest agent (Ready once on), one VirtualMachine.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rendered="${DEMO_TMP:?run from tests/demo.sh}/banlieue"
out="$DEMO_TMP/banlieue-cluster"
mkdir -p "$out/manifests"
if [ ! -f "$rendered/01-provider.yaml" ]; then
    "$repo/operator/demo/check.sh" >/dev/null 2>&1 || true
fi
cp "$rendered/00-secret.yaml" "$rendered/01-provider.yaml" "$out/manifests/"
cat >"$out/manifests/02-demo.yaml" <<'YAML'
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata:
  name: cluster-small
spec:
  hardware:
    cpus: 2
    memoryMiB: 2048
    disks:
      - { name: root, sizeGiB: 10, storageClass: gold, provisioning: thin }
  network:
    interfaces:
      - { name: eth0, networkClass: prod, ipam: {} }
---
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata:
  name: golden-cluster
spec:
  guestAgent: none
  sources:
    - { providerClass: vsphere, kind: Template, ref: golden }
---
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata:
  name: web-cluster
  namespace: demo
spec:
  classRef: { name: cluster-small }
  imageRef: { name: golden-cluster }
  placement:
    providerSelector:
      matchLabels: { env: prod }
  desiredPowerState: PoweredOn
YAML

cd "$repo"
if ! python3 -c 'import kmock, yaml' 2>/dev/null; then
    tests/ensure-deps
fi
if [ -n "${BANLIEUE:-}" ]; then
    banlieue="$BANLIEUE"
else
    cargo build -q -p banlieue --bin banlieue
    banlieue="${CARGO_TARGET_DIR:-$repo/target}/debug/banlieue"
fi

pids=()
stop() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT

python3 -u tests/kube-emulator/apiserver.py 0 "$out/manifests" >"$out/emulator.log" 2>&1 &
pids+=($!)
api=""
for _ in $(seq 1 300); do
    api="$(sed -n 's/^READY //p' "$out/emulator.log")"
    [ -n "$api" ] && break
    sleep 0.1
done
[ -n "$api" ] || { echo "the emulator did not start:"; cat "$out/emulator.log"; exit 1; }
cat >"$out/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: emulator, cluster: {server: "$api"}}]
users: [{name: demo, user: {token: demo}}]
contexts: [{name: demo, context: {cluster: emulator, user: demo}}]
current-context: demo
YAML
echo "Kubernetes API emulator: $api (manifests of $out/manifests loaded)"

export KUBECONFIG="$out/kubeconfig" RUST_LOG="${RUST_LOG:-info}"
echo "\$ banlieue controller &"
"$banlieue" controller --health-addr 127.0.0.1:0 >"$out/controller.log" 2>&1 &
pids+=($!)
echo "\$ banlieue provider vsphere --namespace banlieue-system &"
"$banlieue" provider vsphere --namespace banlieue-system --health-addr 127.0.0.1:0 >"$out/provider.log" 2>&1 &
pids+=($!)

# get PATH: prints the object's Ready condition (and more) like `kubectl get`;
# exits 0 when Ready is True.
get() {
    python3 - "$api$1" <<'PY'
import json, sys, urllib.request, urllib.error
try:
    obj = json.load(urllib.request.urlopen(sys.argv[1]))
except urllib.error.HTTPError as e:
    print("  (gone)" if e.code == 404 else f"  HTTP {e.code}"); sys.exit(2 if e.code == 404 else 1)
st = obj.get("status", {})
ready = next((c for c in st.get("conditions", []) if c["type"] == "Ready"), None)
extra = []
if "failureDomains" in st: extra.append("failureDomains=" + ",".join(d["name"] for d in st["failureDomains"]))
if "perProvider" in st: extra.append("perProvider=" + ",".join(f'{e["provider"]}:{e["ready"]}' for e in st["perProvider"]))
if st.get("powerState"): extra.append("power=" + st["powerState"])
if obj.get("metadata", {}).get("finalizers"): extra.append("finalizers=" + ",".join(obj["metadata"]["finalizers"]))
line = f'  {obj["kind"]} {obj["metadata"]["name"]}: '
line += f'Ready={ready["status"]} ({ready["reason"]}: {ready["message"]})' if ready else "no Ready condition yet"
print(line + ("; " + "; ".join(extra) if extra else ""))
sys.exit(0 if (ready and ready["status"] == "True") or "perProvider" in st and all(e["ready"] for e in st["perProvider"]) else 1)
PY
}

# until WHAT PATH [gone]: polls PATH (60 s at most) until Ready (or gone), then shows it.
until_ready() {
    local what="$1" path="$2" want="${3:-0}" rc
    for _ in $(seq 1 120); do
        rc=0; get "$path" >/dev/null || rc=$?
        [ "$rc" -eq "$want" ] && { get "$path" || true; return 0; }
        sleep 0.5
    done
    echo "demo: $what did not happen in 60 s; logs:"; tail -n 30 "$out/provider.log" "$out/controller.log"
    return 1
}

b=/apis/banlieue.io/v1alpha1
echo; echo "# the provider logs in, walks the inventory: the Provider gets Ready with its failure domains"
until_ready "Provider Ready" "$b/namespaces/banlieue-system/providers/prod-vsphere"
echo "# the image's template is found on the Provider"
until_ready "VMImage ready" "$b/vmimages/golden-cluster"
echo "# the controller schedules the VirtualMachine; the provider clones, powers on, mirrors the status"
until_ready "VirtualMachine Ready" "$b/namespaces/demo/virtualmachines/web-cluster"
get "$b/namespaces/demo/vspheremachines/web-cluster" || true
echo; echo "\$ curl -X DELETE $api$b/namespaces/demo/virtualmachines/web-cluster"
python3 -c "import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], method='DELETE'))" \
    "$api$b/namespaces/demo/virtualmachines/web-cluster"
echo "# its VSphereMachine goes (owner reference); the provider destroys the VM and releases the finalizer"
until_ready "VSphereMachine deleted" "$b/namespaces/demo/vspheremachines/web-cluster" 2
echo; echo "provider log (last lines):"
grep -E "Provider ready|VSphereMachine reconciled|caches synced" "$out/provider.log" | tail -n 6 | sed -E "s/reconciling object\{[^}]*\}: //" | cut -c1-200
