"""Checks the Kubernetes manifests under deploy/: each kustomization renders (`kubectl
kustomize`), every object validates against the Kubernetes schemas (the kubernetes-validate PyPI
package, strict: unknown fields fail), the objects fit together (selectors, probes, ports, the
autoscaler's target), the pods are hardened, the policy each ConfigMap carries passes
`mcp-budget check`, and every variable that policy reads (`seal_key_env`, `api_key_env`, any
other `*_env` key, `${env:NAME}` without a default) is one the gateway's container gets from its
`env` or from a rendered Secret / ConfigMap it loads.

usage: check_manifests.py DEPLOY_DIR MCP_BUDGET_BINARY [KUBERNETES_VERSION ...]
Prints one line per check; exits 1 with the failures listed when any check fails.
"""

import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import kubernetes_validate
import yaml

failures = []


def fail(where, what):
    failures.append(f"{where}: {what}")


def render(directory):
    out = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True)
    if out.returncode != 0:
        fail(directory, f"kubectl kustomize failed: {out.stderr.strip()}")
        return []
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def by_kind(objects, kind):
    return [o for o in objects if o.get("kind") == kind]


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def check_objects(where, objects, versions):
    kinds = {o["kind"] for o in objects}
    for needed in ["Deployment", "Service", "ConfigMap", "Secret", "HorizontalPodAutoscaler",
                   "PodDisruptionBudget"]:
        if needed not in kinds:
            fail(where, f"no {needed}")
    for version in versions:
        for obj in objects:
            name = f"{obj['kind'].lower()}/{obj['metadata']['name']}"
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                path = "/".join(str(p) for p in e.path)
                fail(where, f"{name} against Kubernetes {version}: {e.message} (at {path})")
    for dep in by_kind(objects, "Deployment"):
        spec = dep["spec"]
        pod = spec["template"]
        labels = pod["metadata"].get("labels", {})
        if spec.get("replicas", 1) < 2:
            fail(where, "the Deployment asks for fewer than 2 replicas")
        if not matches(spec["selector"]["matchLabels"], labels):
            fail(where, "the Deployment's selector does not match its pods")
        pod_sec = pod["spec"].get("securityContext", {})
        if not pod_sec.get("runAsNonRoot"):
            fail(where, "pods may run as root (runAsNonRoot)")
        for c in pod["spec"]["containers"]:
            sec = c.get("securityContext", {})
            if sec.get("allowPrivilegeEscalation", True) or not sec.get("readOnlyRootFilesystem"):
                fail(where, f"container {c['name']} is not locked down")
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            for probe, path in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]:
                got = c.get(probe, {}).get("httpGet", {})
                if got.get("path") != path or got.get("port") not in ports:
                    fail(where, f"{probe} is not GET {path} on a named container port")
            mounts = {m["name"] for m in c.get("volumeMounts", [])}
            if "policy" not in mounts:
                fail(where, "the policy is not mounted")
        for svc in by_kind(objects, "Service"):
            if not matches(svc["spec"]["selector"], labels):
                fail(where, f"service/{svc['metadata']['name']} selects no pod")
            if svc["spec"].get("sessionAffinity", "None") != "None":
                fail(where, "a Service is sticky (sessions must not need it)")
        for pdb in by_kind(objects, "PodDisruptionBudget"):
            if not matches(pdb["spec"]["selector"]["matchLabels"], labels):
                fail(where, "the PodDisruptionBudget selects no pod")
        for hpa in by_kind(objects, "HorizontalPodAutoscaler"):
            target = hpa["spec"]["scaleTargetRef"]
            if (target["kind"], target["name"]) != ("Deployment", dep["metadata"]["name"]):
                fail(where, "the autoscaler does not scale the Deployment")
            if hpa["spec"].get("minReplicas", 1) < 2:
                fail(where, "the autoscaler may scale below 2 replicas")
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
        config = volumes.get("policy", {}).get("configMap", {}).get("name")
        if config not in {o["metadata"]["name"] for o in by_kind(objects, "ConfigMap")}:
            fail(where, f"the policy volume names ConfigMap {config!r}, which is not rendered")


def check_policies(where, objects, binary):
    for cm in by_kind(objects, "ConfigMap"):
        text = cm.get("data", {}).get("policy.toml")
        if text is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "policy.toml"
            path.write_text(text)
            out = subprocess.run([binary, "check", str(path)], capture_output=True, text=True)
            if out.returncode != 0:
                fail(where, f"mcp-budget check refuses the policy: {out.stdout}{out.stderr}")
            else:
                print(f"{where}: policy in configmap/{cm['metadata']['name']}: "
                      f"{out.stdout.strip()}")


def policy_variables(policy, at=""):
    """(variable, where in the policy) for each variable the gateway must find in its environment:
    the value of every `*_env` key, and every `${env:NAME}` without a `:-default`."""
    out = []
    items = policy.items() if isinstance(policy, dict) else enumerate(policy)
    for key, value in items:
        where = f"{at}.{key}" if isinstance(key, str) else f"{at}[{key}]"
        where = where.lstrip(".")
        if isinstance(value, (dict, list)):
            out += policy_variables(value, where)
        elif isinstance(value, str):
            if isinstance(key, str) and key.endswith("_env"):
                out.append((value, where))
            out += [(name, where) for name in re.findall(r"\$\{env:([^}:]+)\}", value)]
    return out


def provided_variables(container, objects):
    """The environment variables `container` gets: its `env` names, and the keys of the rendered
    Secrets and ConfigMaps its `envFrom` loads (with their prefix). A `secretKeyRef` counts only
    when that Secret is rendered and has that key."""
    def keys(kind, name):
        for o in by_kind(objects, kind):
            if o["metadata"]["name"] == name:
                return set(o.get("data") or {}) | set(o.get("stringData") or {})
        return set()

    names = set()
    for e in container.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref is None or ref["key"] in keys("Secret", ref["name"]):
            names.add(e["name"])
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        for kind, ref in [("Secret", "secretRef"), ("ConfigMap", "configMapRef")]:
            if ref in source:
                names |= {prefix + k for k in keys(kind, source[ref]["name"])}
    return names


def check_policy_variables(where, objects):
    for dep in by_kind(objects, "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        volume = {v["name"]: v for v in pod.get("volumes", [])}.get("policy", {})
        name = volume.get("configMap", {}).get("name")
        configs = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"] == name]
        text = configs[0].get("data", {}).get("policy.toml") if configs else None
        if text is None:
            continue
        try:
            policy = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue  # `mcp-budget check` reports it
        for c in pod["containers"]:
            if "policy" not in {m["name"] for m in c.get("volumeMounts", [])}:
                continue
            provided = provided_variables(c, objects)
            variables = policy_variables(policy)
            missing = [(v, at) for v, at in variables if v not in provided]
            for variable, at in missing:
                fail(where, f"the policy in configmap/{name} reads {variable} ({at}), which "
                            f"container {c['name']} does not get (no env entry, no key of a "
                            f"Secret it loads)")
            if not missing:
                print(f"{where}: container {c['name']} gets the {len(variables)} variables "
                      f"its policy reads: {', '.join(sorted({v for v, _ in variables}))}")


def main():
    deploy, binary = Path(sys.argv[1]), sys.argv[2]
    versions = sys.argv[3:] or ["1.30.0", kubernetes_validate.latest_version()]
    kustomizations = sorted(p.parent for p in deploy.rglob("kustomization.yaml"))
    if not kustomizations:
        fail(deploy, "no kustomization.yaml")
    for directory in kustomizations:
        where = directory.relative_to(deploy)
        objects = render(directory)
        if not objects:
            continue
        check_objects(where, objects, versions)
        check_policies(where, objects, binary)
        check_policy_variables(where, objects)
        print(f"{where}: {len(objects)} objects rendered and checked against "
              f"Kubernetes {', '.join(versions)}")
    for f in failures:
        print(f"FAIL {f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
