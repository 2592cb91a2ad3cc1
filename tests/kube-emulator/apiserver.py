"""A Kubernetes API emulator for end-to-end runs of banlieue's real binaries: kmock's
in-memory emulator (PyPI `kmock`) serving banlieue's kinds, plus the parts of a real API
server that the operator's flow depends on (see README.md: what it adds and what it is not).

usage: apiserver.py PORT MANIFEST_DIR      (PORT 0: any free port)
Loads every document of MANIFEST_DIR/*.yaml through the HTTP API, then prints
`READY http://127.0.0.1:PORT` and serves until killed."""
import asyncio
import base64
import copy
import datetime
import glob
import itertools
import sys
import uuid

import aiohttp.web
import kmock
from kmock._internal import enums
import yaml

PORT, DIR = int(sys.argv[1]), sys.argv[2]
# plural path -> (kind, namespaced, subresources)
KINDS = {
    "v1/secrets": ("Secret", True, set()),
    "v1/configmaps": ("ConfigMap", True, set()),
    "v1/events": ("Event", True, set()),
    "events.k8s.io/v1/events": ("Event", True, set()),
    "coordination.k8s.io/v1/leases": ("Lease", True, set()),
    "banlieue.io/v1alpha1/providers": ("Provider", True, {"status"}),
    "banlieue.io/v1alpha1/vmclasses": ("VMClass", False, {"status"}),
    "banlieue.io/v1alpha1/vmimages": ("VMImage", False, {"status"}),
    "banlieue.io/v1alpha1/virtualmachines": ("VirtualMachine", True, {"status"}),
    "banlieue.io/v1alpha1/vspheremachines": ("VSphereMachine", True, {"status"}),
    "banlieue.io/v1alpha1/vmsnapshots": ("VMSnapshot", True, {"status"}),
    "banlieue.io/v1alpha1/ippools": ("IPPool", True, {"status"}),
    # Cluster API's IPAM contract (deploy/crds/ipam/), which the provider role's allocator watches.
    "ipam.cluster.x-k8s.io/v1beta1/ipaddressclaims": ("IPAddressClaim", True, {"status"}),
    "ipam.cluster.x-k8s.io/v1beta1/ipaddresses": ("IPAddress", True, set()),
    # What the controller makes for each Provider in operator-managed mode.
    "v1/serviceaccounts": ("ServiceAccount", True, set()),
    "rbac.authorization.k8s.io/v1/roles": ("Role", True, set()),
    "rbac.authorization.k8s.io/v1/rolebindings": ("RoleBinding", True, set()),
    "rbac.authorization.k8s.io/v1/clusterrolebindings": ("ClusterRoleBinding", False, set()),
    "apps/v1/deployments": ("Deployment", True, {"status"}),
}
PLURAL = {v[0]: k for k, v in KINDS.items() if not k.startswith("events.k8s.io")}
# Kinds whose generation counts spec changes (custom resources; core kinds keep 1).
GENERATION_COUNTED = {k for k, v in KINDS.items() if k.startswith("banlieue.io/")}
GC_INTERVAL = 0.2


def gvr_of(resource):
    group_version = f"{resource.group}/{resource.version}".lstrip("/")
    return f"{group_version}/{resource.plural}"


def has_status(resource):
    return "status" in KINDS.get(gvr_of(resource), ("", False, set()))[2]


def now():
    return datetime.datetime.now(tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target, patch):
    """RFC 7386: a JSON merge patch applied to a copy of target."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def as_merge_patch(current, new):
    """The merge patch that turns current into new (keys gone become None): kmock stores
    an update by merging, so a replacement is sent to it as this diff."""
    patch = {}
    for key in set(current) | set(new):
        if key not in new:
            patch[key] = None
        elif key not in current:
            patch[key] = copy.deepcopy(new[key])
        elif isinstance(current[key], dict) and isinstance(new[key], dict):
            sub = as_merge_patch(current[key], new[key])
            if sub:
                patch[key] = sub
        elif current[key] != new[key]:
            patch[key] = copy.deepcopy(new[key])
    return patch


def spec_of(obj):
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def json_patch(doc, ops):
    """RFC 6902 add/remove/replace/test ops; None when a test fails or a path is missing."""
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        try:
            for part in parts[:-1]:
                parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
            last = parts[-1] if parts else None
            kind = op["op"]
            if kind == "test":
                cur = parent[int(last)] if isinstance(parent, list) else parent.get(last)
                if cur != op.get("value"):
                    return None
            elif kind in ("add", "replace"):
                if isinstance(parent, list):
                    if last == "-":
                        parent.append(op["value"])
                    elif kind == "add":
                        parent.insert(int(last), op["value"])
                    else:
                        parent[int(last)] = op["value"]
                else:
                    parent[last] = op["value"]
            elif kind == "remove":
                if isinstance(parent, list):
                    parent.pop(int(last))
                else:
                    parent.pop(last)
        except (KeyError, IndexError, ValueError):
            return None
    return doc


class Emulator(kmock.KubernetesEmulator):
    """kmock's emulator plus what banlieue's flow needs of a real API server (README.md)."""

    _rv = itertools.count(2)

    def _next_rv(self):
        return str(next(self._rv))

    async def _handle(self, request):
        data = request.data
        key = None
        if request.resource is not None and request.name is not None:
            key = (request.resource, request.namespace, request.name)
        stored = self._objects[key] if key is not None and key in self._objects else None
        current = dict(stored.raw) if stored is not None and not stored.deleted else None

        content_type = next((v for k, v in request.headers.items() if k.lower() == "content-type"), "")
        if (request.action == enums.action.UPDATE and current is None and request.subresource is None
                and "apply-patch" in content_type and isinstance(data, dict)):
            # Server-side apply creates what does not exist yet.
            resource = request.resource
            group_version = f"{resource.group}/{resource.version}".lstrip("/")
            base = f"/api/{group_version}" if resource.group == "" else f"/apis/{group_version}"
            ns = f"/namespaces/{request.namespace}" if request.namespace else ""
            created = await self.post(f"{base}{ns}/{resource.plural}", json=data)
            body = await created.json()
            return aiohttp.web.json_response(body, status=200 if created.status < 300 else created.status)

        if request.resource is not None and request.action == enums.action.CREATE and isinstance(data, dict):
            data = copy.deepcopy(data)
            if data.get("kind") == "Secret" and "stringData" in data:
                # The API server folds stringData into base64 data on write.
                enc = {k: base64.b64encode(v.encode()).decode() for k, v in data.pop("stringData").items()}
                data.setdefault("data", {}).update(enc)
            meta = data.setdefault("metadata", {})
            meta["resourceVersion"] = self._next_rv()
            meta.setdefault("generation", 1)
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now())
            object.__setattr__(request, "data", data)

        elif request.action == enums.action.UPDATE and current is not None:
            new = self._updated(request, current, data)
            if new is None:
                return self._status_error(422, "Invalid", "json patch test failed")
            meta = new.setdefault("metadata", {})
            old_meta = current.get("metadata", {})
            # Identity and bookkeeping are the server's.
            for field in ("uid", "creationTimestamp", "deletionTimestamp"):
                if field in old_meta:
                    meta[field] = old_meta[field]
                else:
                    meta.pop(field, None)
            generation = old_meta.get("generation", 1)
            if gvr_of(request.resource) in GENERATION_COUNTED and spec_of(new) != spec_of(current):
                generation += 1
            meta["generation"] = generation
            meta["resourceVersion"] = self._next_rv()
            # kmock merges what it is given into the stored object: give it the difference.
            object.__setattr__(request, "data", as_merge_patch(current, new))

        elif request.action == enums.action.DELETE and current is not None:
            meta = current.get("metadata", {})
            if meta.get("finalizers") and not meta.get("deletionTimestamp"):
                # Marking an object for deletion is a change of its generation, as on a
                # real server (kube-rs controllers filter their triggers by generation).
                bump = {"metadata": {"resourceVersion": self._next_rv()}}
                if gvr_of(request.resource) in GENERATION_COUNTED:
                    bump["metadata"]["generation"] = meta.get("generation", 1) + 1
                stored.patch(bump)

        return await super()._handle(request)

    def _updated(self, request, current, data):
        """The whole object after this PATCH, or None when a JSON patch test fails."""
        if isinstance(data, list):
            return json_patch(copy.deepcopy(current), data)
        if not isinstance(data, dict):
            return None
        content_type = next((v for k, v in request.headers.items() if k.lower() == "content-type"), "")
        if request.subresource == "status":
            status = data.get("status")
            if "apply-patch" not in content_type:
                # A merge patch of the status merges; an apply below replaces.
                status = merge_patch(current.get("status", {}), status or {})
            new = copy.deepcopy(current)
            if status is None:
                new.pop("status", None)
            else:
                # One field manager per status (as banlieue's roles are): its apply
                # replaces the status, so fields it no longer sends are gone.
                new["status"] = copy.deepcopy(status)
            return new
        new = merge_patch(current, data)
        if has_status(request.resource):
            # With a status subresource, the main resource does not change the status.
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
            else:
                new.pop("status", None)
        return new

    def _status_error(self, code, reason, message):
        return aiohttp.web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                          "reason": reason, "code": code, "message": message}, status=code)

    async def _serve_list(self, request):
        # A real list names its kind and carries the store's resourceVersion.
        payload = await super()._serve_list(request)
        kind = KINDS.get(gvr_of(request.resource), ("",))[0]
        group_version = f"{request.resource.group}/{request.resource.version}".lstrip("/")
        return {"apiVersion": group_version, "kind": kind + "List",
                "metadata": {"resourceVersion": self._next_rv()}, "items": payload["items"]}

    async def collect_garbage(self):
        """Background deletion by owner reference: an object whose owners (by uid) are all
        gone is deleted, through the API so that its finalizers hold it as on a real server."""
        live = {}
        for (resource, namespace, name), obj in list(self._objects.items()):
            if not obj.deleted:
                live[(resource, namespace, name)] = obj.raw
        uids = {o.get("metadata", {}).get("uid") for o in live.values()}
        for (resource, namespace, name), raw in live.items():
            meta = raw.get("metadata", {})
            owners = meta.get("ownerReferences") or []
            if not owners or meta.get("deletionTimestamp"):
                continue
            if any(o.get("uid") in uids for o in owners):
                continue
            group_version = f"{resource.group}/{resource.version}".lstrip("/")
            base = f"/api/{group_version}" if resource.group == "" else f"/apis/{group_version}"
            ns = f"/namespaces/{namespace}" if namespace else ""
            response = await self.delete(f"{base}{ns}/{resource.plural}/{name}")
            response.release()


def path_of(doc):
    gvr = PLURAL[doc["kind"]]
    group_version, plural = gvr.rsplit("/", 1)
    base = f"/api/{group_version}" if group_version == "v1" else f"/apis/{group_version}"
    ns = doc.get("metadata", {}).get("namespace")
    namespaced = KINDS[gvr][1]
    return f"{base}/namespaces/{ns}/{plural}" if namespaced and ns else f"{base}/{plural}"


async def main():
    async with Emulator() as k, kmock.Server(k, port=PORT) as server:
        for gvr, (kind, namespaced, subs) in KINDS.items():
            k.resources[gvr] = kmock.ResourceInfo(kind=kind, namespaced=namespaced, subresources=subs,
                                                  verbs={"get", "list", "watch", "create", "update", "patch", "delete"})
        failed = 0
        for f in sorted(glob.glob(f"{DIR}/*.yaml")):
            with open(f) as stream:
                docs = list(yaml.safe_load_all(stream))
            for doc in docs:
                if not isinstance(doc, dict):
                    continue
                if doc.get("kind") not in PLURAL:
                    print(f"skipped {doc.get('kind')} in {f}: not a kind this emulator serves", flush=True)
                    continue
                r = await k.post(path_of(doc), json=doc)
                if r.status >= 300:
                    failed += 1
                    print("load failed", doc["kind"], r.status, await r.text(), flush=True)
        if failed:
            sys.exit(f"{failed} manifest(s) could not be loaded")
        print(f"READY http://127.0.0.1:{server.port}", flush=True)
        while True:
            await asyncio.sleep(GC_INTERVAL)
            await k.collect_garbage()

asyncio.run(main())
