#!/usr/bin/env bash
# `make demo`: start the vCenter simulator and run the project's programs
# against it, printing what each command prints.
#
# Adding a step: append a `step` line to the steps section at the bottom, with
# the program it needs (a path relative to the repository; the step is skipped,
# saying so, while that file does not exist) and the command to run. Commands see
# GOVC_URL, GOVC_USERNAME, GOVC_PASSWORD and GOVC_TLS_CA_CERTS of the running
# simulator, and VCSIM_BIN (the launcher) and DEMO_TMP (scratch directory).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

DEMO_TMP="$(mktemp -d)"
export DEMO_TMP
sim_pid=""
cleanup() {
    if [ -n "$sim_pid" ] && kill -0 "$sim_pid" 2>/dev/null; then
        kill "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
    rm -rf "$DEMO_TMP"
}
trap cleanup EXIT

bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }

# The simulator: a vCenter with 2 datacenters, a template "golden" in each,
# serving a certificate the client verifies against the launcher's CA.
VCSIM_BIN="$(tests/vcsim/build)"
export VCSIM_BIN

# Every program the demo runs, from one cargo command over the workspace: the
# CLI and the quick start (examples of vsphere-client) and banlieue. Built by
# separate commands (`cargo run -p vsphere-client --example ...`, then
# `cargo build -p banlieue`), their dependencies got different features and
# vsphere-client was compiled twice; over the workspace, the features are the
# ones `make test` builds with, so after it nothing is compiled again. Debug
# builds: release builds of the bindings take minutes (`make bench` uses them).
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
bold "building the CLI, the quick start and banlieue (cargo build --workspace, debug)"
cargo build -q --workspace --example vsphere --example quickstart --bin banlieue
export BANLIEUE="${BANLIEUE:-$target_dir/debug/banlieue}"

# A CA and server certificate for 127.0.0.1, so the demo verifies TLS like a
# real deployment instead of turning verification off.
ca_dir="$DEMO_TMP/ca"
mkdir -p "$ca_dir"
if command -v openssl >/dev/null 2>&1; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
        -subj "/CN=vsphere-rs demo CA" -keyout "$ca_dir/ca-key.pem" -out "$ca_dir/ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$ca_dir/server-key.pem" -out "$ca_dir/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$ca_dir/ext"
    openssl x509 -req -in "$ca_dir/server.csr" -CA "$ca_dir/ca.pem" -CAkey "$ca_dir/ca-key.pem" \
        -CAcreateserial -days 1 -extfile "$ca_dir/ext" -out "$ca_dir/server.pem" 2>/dev/null
    tls_flags=(-tls-cert "$ca_dir/server.pem" -tls-key "$ca_dir/server-key.pem")
    export GOVC_TLS_CA_CERTS="$ca_dir/ca.pem"
else
    echo "note: openssl not found; the simulator uses its built-in certificate and the demo skips verification (GOVC_INSECURE=1)"
    tls_flags=()
    export GOVC_INSECURE=1
fi

"$VCSIM_BIN" -listen 127.0.0.1:0 -dc 2 -template golden "${tls_flags[@]}" \
    >"$DEMO_TMP/vcsim.out" 2>"$DEMO_TMP/vcsim.log" &
sim_pid=$!
url=""
for _ in $(seq 1 600); do
    url="$(sed -n 's/^VCSIM_URL=//p' "$DEMO_TMP/vcsim.out")"
    [ -n "$url" ] && break
    kill -0 "$sim_pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$url" ]; then
    echo "demo: the simulator did not start; its log:" >&2
    cat "$DEMO_TMP/vcsim.log" >&2
    exit 1
fi
export GOVC_URL="${url/\/\/*@/\/\/}" # without credentials; they go separately
export GOVC_USERNAME=user GOVC_PASSWORD=pass
bold "simulator: $GOVC_URL (user/pass), 2 datacenters, template 'golden' in each"

ran=0
skipped=0
# step TITLE NEEDED_FILE COMMAND...
step() {
    local title="$1" needed="$2"
    shift 2
    echo
    if [ ! -e "$needed" ]; then
        bold "== $title: skipped ($needed does not exist yet)"
        skipped=$((skipped + 1))
        return 0
    fi
    bold "== $title"
    bold "\$ $*"
    "$@"
    ran=$((ran + 1))
}

# ---- steps -----------------------------------------------------------------
vsphere=("$target_dir/debug/examples/vsphere")

step "about: product and API version (like govc about)" \
    vsphere-client/examples/vsphere/main.rs "${vsphere[@]}" about

# The crate's quick start (its README and front page) as a program: connect,
# list VMs, clone the template, power on, watch, a typed fault, clean up.
step "quick start: connect, list VMs, clone 'golden', power on, watch, DuplicateName, destroy" \
    vsphere-client/examples/quickstart.rs "$target_dir/debug/examples/quickstart" DC0 golden DC0_C0

# Tags over the vSphere Automation (REST) API, like govc tags.*: a category
# for VMs, a tag in it, attached to a VM found by its inventory path.
tags_demo() {
    local args
    for args in \
        "tags.category.create -t VirtualMachine -d failure-domains zone" \
        "tags.create -c zone zone-a" \
        "tags.category.ls" \
        "tags.ls -c zone" \
        "tags.attach zone-a /DC0/vm/DC0_H0_VM0" \
        "tags.attached.ls /DC0/vm/DC0_H0_VM0" \
        "tags.attached.ls zone-a"; do
        echo "\$ vsphere $args"
        # shellcheck disable=SC2086 # the words of $args are the arguments
        "${vsphere[@]}" $args
    done
}
step "tags: create a category and a tag, attach it to a VM (like govc tags.*)" \
    vsphere-client/examples/vsphere/tags.rs tags_demo

step "banlieue check: a Provider on the simulator (failure domains), the guide's VMImage, VMClass and VirtualMachine" \
    operator/demo/check.sh operator/demo/check.sh

step "banlieue check --apply: a VirtualMachine cloned, shaped, powered on and Ready; run again, the same VM" \
    operator/demo/apply.sh operator/demo/apply.sh

step "banlieue in cluster mode: the controller and provider binaries against a Kubernetes API emulator; a VirtualMachine Ready, then deleted" \
    operator/demo/cluster.sh operator/demo/cluster.sh

# The inventory by path and the VM lifecycle, like govc: ls, find, vm.info,
# clone the template with a fixed instance UUID and power it on, power off,
# mark a VM as template, destroy; then the benchmark's property walk.
vm_demo() {
    local - args
    set -f # the globs are for the inventory, not for the shell
    for args in \
        "ls" \
        "ls /DC1/host/*" \
        "find /DC0 -type h" \
        "find / -type m -name *_VM1" \
        "vm.info /DC0/vm/DC0_H0_VM0" \
        "vm.clone -dc DC0 -vm golden -on -net DC0_DVPG0 -uuid 5a0d3c18-8e4f-4c1b-9d2a-3f7e6b5c4d3e web-1" \
        "vm.info -dc DC0 -json web-1" \
        "vm.power -dc DC0 -off web-1" \
        "vm.markastemplate -dc DC0 web-1" \
        "find /DC0/vm -type m -name web-*" \
        "vm.destroy -dc DC0 web-1" \
        "walk -n 3"; do
        echo "\$ vsphere $args"
        # shellcheck disable=SC2086 # the words of $args are the arguments
        "${vsphere[@]}" $args
    done
}
step "inventory and VM lifecycle: ls, find, vm.info, vm.clone, vm.power, vm.markastemplate, vm.destroy, walk" \
    vsphere-client/examples/vsphere/vm.rs vm_demo

# ---- end of steps ----------------------------------------------------------

echo
bold "demo: $ran step(s) ran, $skipped skipped"
