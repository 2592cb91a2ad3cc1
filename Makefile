# vsphere-rs: `make demo` shows it working, `make test` proves it.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

# The vim25 WSDL bundle the bindings are generated from (see wsdl/README.md).
# Default: ../shared/wsdl/vim25-7.0.3 beside the checkout, when present.
WSDL_DIR ?= $(firstword $(wildcard ../shared/wsdl/vim25-7.0.3))
# vsphere-codegen writes one tree: the bindings go to vsphere-vim25, the
# typed `Vim` methods (its methods/ folder) to vsphere-client.
GENERATED := vsphere-vim25/src/generated
METHODS := vsphere-client/src/methods
MANAGED_OBJECTS := wsdl/managed-objects.json
ADDITIONS := wsdl/additions.json
# The pyvmomi releases wsdl/managed-objects.json and wsdl/additions.json are
# extracted from (the last one; the others date enumeration values), as pip
# downloads them; wsdl/extract-pyvmomi pins each archive's sha256.
PYVMOMI_RELEASES := 7.0.3 8.0.0.1.2 8.0.1.0.2 8.0.2.0.1 8.0.3.0.1 9.0.0.0 9.1.0.0 9.1.1.0
PYVMOMI_ARCHIVES ?= $(HOME)/.cache/vsphere-rs/pyvmomi

.PHONY: help test deps vcsim generate check-generated check-managed-objects pyvmomi-archives demo fuzz bench bench-build

help:
	@echo "make demo               start the simulator and run the CLI against it"
	@echo "make test               install what is missing, check generated code, formatting and lints, run every test"
	@echo "make generate           regenerate $(GENERATED) (WSDL_DIR=$(or $(WSDL_DIR),<unset>))"
	@echo "make check-generated    fail if $(GENERATED) differs from what the generator makes"
	@echo "make pyvmomi-archives   download the pyvmomi releases wsdl/*.json are extracted from (then check-generated re-extracts them)"
	@echo "make fuzz               run each fuzz target FUZZ_SECONDS (default 60) s; fails on a crash"
	@echo "make bench              decode/encode throughput, walk vs govmomi and pyvmomi; one table (BENCH_BUILD=1: build times too)"
	@echo "make bench-build        a program's build from the user's seat on vsphere-client, vim_rs, govmomi and the floor (tens of minutes)"

# golang-go + Debian's govmomi (simulator launcher) and cargo-nextest.
deps:
	tests/ensure-deps

# Build the simulator launcher once (cached under ~/.cache/vsphere-rs).
vcsim: deps
	@tests/vcsim/build

# Doc tests with --workspace: the features nextest --workspace built the crates
# with (with -p, dependencies got other features: vsphere-client compiled twice).
# The published crates' rustdoc must build without warnings (broken links),
# and the crates must build and pass their tests from their .crate files
# (tests/package-check).
# vsphere-client's feature-gated type families (vsphere-vim25's, forwarded):
# the workspace builds without them (as a program does by default); `make
# test` also tests both crates with them.
TYPE_FAMILIES := all-events,all-faults,admin
comma := ,
# The same, named from the workspace (vsphere-client/all-events,...).
CLIENT_FAMILIES := $(subst $(comma),$(comma)vsphere-client/,vsphere-client/$(TYPE_FAMILIES))

test: deps
	@vcsim_bin="$$(tests/vcsim/build)"; echo "simulator launcher: $$vcsim_bin"; \
	if [ -n "$(WSDL_DIR)" ] && [ -d "$(WSDL_DIR)" ]; then \
	    $(MAKE) --no-print-directory check-generated; \
	else \
	    echo "note: no WSDL bundle (WSDL_DIR unset, ../shared/wsdl/vim25-7.0.3 absent): check-generated not run"; \
	fi; \
	cargo fmt --all -- --check >/dev/null || { cargo fmt --all -- --check | head -n 40; echo "make test: not formatted; run: cargo fmt --all"; exit 1; }; \
	cargo clippy --workspace --all-targets --quiet -- -D warnings || { echo "make test: clippy found warnings (the workspace lints in Cargo.toml)"; exit 1; }; \
	VCSIM_BIN="$$vcsim_bin" cargo nextest run --workspace --no-fail-fast; \
	cargo clippy -p vsphere-vim25 -p vsphere-client --all-targets --quiet --features $(CLIENT_FAMILIES) -- -D warnings || { echo "make test: clippy found warnings with the type families compiled in"; exit 1; }; \
	VCSIM_BIN="$$vcsim_bin" cargo nextest run -p vsphere-vim25 -p vsphere-client --features $(CLIENT_FAMILIES) --no-fail-fast; \
	VCSIM_BIN="$$vcsim_bin" cargo nextest run -p vsphere-tests --test generated_completeness --test admin_simulator --features $(CLIENT_FAMILIES); \
	cargo test --doc --workspace; \
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p vsphere-vim25 -p vsphere-client -p vsphere-testkit --features $(CLIENT_FAMILIES); \
	tests/package-check

# Verifies the bundle against its SHA256SUMS, then fills $(GENERATED) with a
# fresh generation (stale files disappear) and records the bundle's sums.
# Generation goes through a scratch directory inside the checkout, so that
# rustfmt finds the same configuration as for the real directory.
generate:
	@$(call require_bundle)
	@tmp="$$(mktemp -d "$(CURDIR)/.generated-XXXXXX")"; trap 'rm -rf "$$tmp"' EXIT; \
	cargo run -q -p vsphere-codegen -- --wsdl "$(WSDL_DIR)" --managed-objects $(MANAGED_OBJECTS) --additions $(ADDITIONS) --out "$$tmp/generated"; \
	[ -d "$$tmp/generated" ] || { echo "vsphere-codegen wrote nothing to its --out directory"; exit 1; }; \
	rm -rf $(GENERATED) $(METHODS); mkdir -p "$$(dirname $(GENERATED))" "$$(dirname $(METHODS))"; \
	mv "$$tmp/generated/methods" $(METHODS); cp -r "$$tmp/generated" $(GENERATED); \
	$(call bundle_sums) > wsdl/SHA256SUMS; \
	echo "generated $(GENERATED) and $(METHODS) from $(WSDL_DIR)"

check-generated: check-managed-objects
	@$(call require_bundle)
	@if ! diff <($(call bundle_sums) | sort -k2) <(sort -k2 wsdl/SHA256SUMS) >/dev/null; then \
	    echo "check-generated: $(WSDL_DIR) is not the bundle $(GENERATED) was generated from (wsdl/SHA256SUMS);"; \
	    echo "  use that bundle, or regenerate from this one with: make generate WSDL_DIR=$(WSDL_DIR)"; \
	    exit 1; \
	fi
	@tmp="$$(mktemp -d "$(CURDIR)/.generated-XXXXXX")"; trap 'rm -rf "$$tmp"' EXIT; \
	cargo run -q -p vsphere-codegen -- --wsdl "$(WSDL_DIR)" --managed-objects $(MANAGED_OBJECTS) --additions $(ADDITIONS) --out "$$tmp/generated"; \
	[ -d "$$tmp/generated" ] || { echo "vsphere-codegen wrote nothing to its --out directory"; exit 1; }; \
	if [ ! -d $(GENERATED) ] || [ ! -d $(METHODS) ]; then \
	    echo "check-generated: $(GENERATED) or $(METHODS) is missing; run: make generate"; exit 1; \
	fi; \
	mv "$$tmp/generated/methods" "$$tmp/methods"; \
	if ! { diff -r "$$tmp/generated" $(GENERATED) && diff -r "$$tmp/methods" $(METHODS); } > "$$tmp/diff"; then \
	    head -n 60 "$$tmp/diff"; \
	    echo "check-generated: $(GENERATED) or $(METHODS) is stale or was edited by hand ($$(grep -c '^[<>]' "$$tmp/diff" || true) differing lines)."; \
	    echo "  Never edit them by hand: change codegen/ (or wsdl/*.json) and run: make generate"; \
	    exit 1; \
	fi; \
	echo "check-generated: $(GENERATED) and $(METHODS) are up to date"

# wsdl/managed-objects.json and wsdl/additions.json are extracted from
# pyvmomi's release archives; check them when the archives are in
# $(PYVMOMI_ARCHIVES) (make pyvmomi-archives; not needed to build or test).
check-managed-objects:
	@$(call require_bundle)
	@if [ -f "$(PYVMOMI_ARCHIVES)/pyvmomi-9.1.1.0-py3-none-any.whl" ]; then \
	    wsdl/extract-pyvmomi --wsdl "$(WSDL_DIR)" --archives "$(PYVMOMI_ARCHIVES)" --check 2>/dev/null \
	        || { wsdl/extract-pyvmomi --wsdl "$(WSDL_DIR)" --archives "$(PYVMOMI_ARCHIVES)" --check; exit 1; }; \
	    echo "check-managed-objects: $(MANAGED_OBJECTS) and $(ADDITIONS) are up to date"; \
	else \
	    echo "note: no pyvmomi archives in $(PYVMOMI_ARCHIVES) (make pyvmomi-archives): $(MANAGED_OBJECTS) and $(ADDITIONS) not re-extracted"; \
	fi

# Downloads the pyvmomi release archives the tables are extracted from (pip;
# wsdl/extract-pyvmomi checks their sha256).
pyvmomi-archives:
	@mkdir -p "$(PYVMOMI_ARCHIVES)"
	@for v in $(PYVMOMI_RELEASES); do \
	    ls "$(PYVMOMI_ARCHIVES)"/pyvmomi-$$v[.-]* >/dev/null 2>&1 \
	        || python3 -m pip download -q --no-deps pyvmomi==$$v -d "$(PYVMOMI_ARCHIVES)"; \
	done
	@ls "$(PYVMOMI_ARCHIVES)"

demo: deps
	tests/demo.sh

# Each target in fuzz/ for FUZZ_SECONDS, one job (cargo-fuzz on stable via
# RUSTC_BOOTSTRAP, installed when missing); FUZZ_TARGETS narrows the list.
FUZZ_SECONDS ?= 60
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) CARGO_TARGET_DIR=$${CARGO_TARGET_DIR:-$(CURDIR)/fuzz/target} fuzz/run $(FUZZ_TARGETS)

# Issue #9's benchmarks (benches/run): criterion decode/encode benches, the
# whole-process walk against the govmomi and pyvmomi peers, and with
# BENCH_BUILD=1 the clean build times; prints one table.
bench: deps
	@benches/run

# A fresh project outside the workspace per SDK, default profiles: see benches/build-time/run.
bench-build: deps
	@benches/build-time/run

define require_bundle
if [ -z "$(WSDL_DIR)" ] || [ ! -f "$(WSDL_DIR)/vimService.wsdl" ]; then \
    echo "no WSDL bundle at '$(WSDL_DIR)': pass WSDL_DIR=/path/to/bundle (wsdl/fetch downloads one; see wsdl/README.md)"; \
    exit 1; \
fi; \
if [ -f "$(WSDL_DIR)/SHA256SUMS" ] && ! (cd "$(WSDL_DIR)" && sha256sum --quiet -c SHA256SUMS); then \
    echo "$(WSDL_DIR): files do not match its SHA256SUMS"; exit 1; \
fi
endef

# The bundle's checksums: its own SHA256SUMS when it has one, else computed.
define bundle_sums
if [ -f "$(WSDL_DIR)/SHA256SUMS" ]; then cat "$(WSDL_DIR)/SHA256SUMS"; \
else (cd "$(WSDL_DIR)" && sha256sum *.wsdl *.xsd); fi
endef
