#!/usr/bin/env python3
# check_deploy.py: checks deploy/ (systemd, Docker, compose, Kubernetes) against tandemd and against itself.
#
# Usage: scripts/check_deploy.py --tandemd BUILD/server/tandemd [--repo DIR] [--self-test]
#
# Every *.yaml under deploy/ must parse; the configurations the manifests hand to tandemd must be
# accepted by `tandemd --print-config`, and the values tandemd resolves (ports, drain grace) must
# agree with the probes, Services, published ports and stop timeouts around it; containers and
# units must run unprivileged. systemd-analyze verify/security run when systemd-analyze exists.
# --self-test breaks a copy of deploy/ in known ways and fails unless each break is reported.
# Needs python3 with PyYAML (Debian: python3-yaml). Exit 0 = no problem, 1 = problems (listed).
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

from check_deploy_units import check_systemd
from check_deploy_docker import check_dockerfiles, parse_dockerfile, final_stage


class Checker:
    """Collects problems; holds the repository root and the tandemd binary."""

    def __init__(self, repo, tandemd, quiet=False):
        self.repo = repo
        self.tandemd = tandemd
        self.quiet = quiet
        # The self-test leaves out what does not depend on the manifests (runtime packages).
        self.manifests_only = quiet
        self.problems = []

    def fail(self, where, message):
        self.problems.append(f"{where}: {message}")

    def note(self, message):
        if not self.quiet:
            print(message)

    def path(self, *parts):
        return os.path.join(self.repo, *parts)

    def resolve_config(self, where, yaml_text, env=None):
        """Runs tandemd --print-config on yaml_text with only `env` as TANDEM_* environment.

        Returns the resolved configuration as {section: {key: value}}, or None after fail()."""
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(yaml_text)
            name = f.name
        try:
            clean_env = {k: v for k, v in os.environ.items() if not k.startswith("TANDEM_")}
            clean_env.update(env or {})
            run = subprocess.run([self.tandemd, "--print-config", "--config", name],
                                 capture_output=True, text=True, env=clean_env, timeout=60)
        finally:
            os.unlink(name)
        if run.returncode != 0:
            self.fail(where, f"tandemd --print-config refuses it (exit {run.returncode}): "
                      f"{run.stderr.strip()}")
            return None
        try:
            resolved = yaml.safe_load(run.stdout)
        except yaml.YAMLError as error:
            self.fail(where, f"cannot read tandemd --print-config output: {error}")
            return None
        return resolved


def load_all_yaml(checker):
    """Parses every *.yaml under deploy/; returns {relative path: [documents]}."""
    out = {}
    deploy = checker.path("deploy")
    for root, _, files in os.walk(deploy):
        for name in sorted(files):
            if not name.endswith((".yaml", ".yml")):
                continue
            full = os.path.join(root, name)
            rel = os.path.relpath(full, checker.repo)
            try:
                with open(full, encoding="utf-8") as f:
                    out[rel] = [d for d in yaml.safe_load_all(f) if d is not None]
            except yaml.YAMLError as error:
                checker.fail(rel, f"YAML does not parse: {error}")
    checker.note(f"parsed {len(out)} YAML files under deploy/")
    return out


def is_loopback(host):
    return host in ("127.0.0.1", "::1", "localhost") or str(host).startswith("127.")


# ---- Kubernetes --------------------------------------------------------------------------------

def effective(pod_sc, container_sc, key):
    value = (container_sc or {}).get(key)
    return (pod_sc or {}).get(key) if value is None else value


def check_container_security(checker, where, pod_sc, container):
    sc = container.get("securityContext") or {}
    name = container.get("name", "?")
    if effective(pod_sc, sc, "runAsNonRoot") is not True:
        checker.fail(where, f"container {name}: runAsNonRoot is not true")
    user = effective(pod_sc, sc, "runAsUser")
    if not isinstance(user, int) or user == 0:
        checker.fail(where, f"container {name}: runAsUser must be a non-zero number, not {user!r}")
    if sc.get("readOnlyRootFilesystem") is not True:
        checker.fail(where, f"container {name}: readOnlyRootFilesystem is not true")
    if sc.get("allowPrivilegeEscalation") is not False:
        checker.fail(where, f"container {name}: allowPrivilegeEscalation is not false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        checker.fail(where, f"container {name}: capabilities.drop does not hold ALL")


def check_kubernetes(checker, docs):
    k8s = {rel: d for rel, d in docs.items() if rel.startswith("deploy/k8s/")}
    objects = [(rel, o) for rel, ds in k8s.items() for o in ds if isinstance(o, dict)]
    by_kind = {}
    for rel, o in objects:
        by_kind.setdefault(o.get("kind"), []).append((rel, o))

    kustomization = [o for rel, o in objects if o.get("kind") == "Kustomization"]
    if shutil.which("kubectl") and not checker.manifests_only:
        run = subprocess.run(["kubectl", "kustomize", checker.path("deploy/k8s")],
                             capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            checker.fail("deploy/k8s", f"kubectl kustomize fails: {run.stderr.strip()}")
        else:
            checker.note("kubectl kustomize deploy/k8s: builds")
    if kustomization:
        listed = set(kustomization[0].get("resources") or [])
        present = {os.path.basename(r) for r in k8s if not r.endswith("kustomization.yaml")}
        if listed != present:
            checker.fail("deploy/k8s/kustomization.yaml",
                         f"resources {sorted(listed)} differ from the files {sorted(present)}")

    deployments = by_kind.get("Deployment", [])
    if len(deployments) != 1:
        checker.fail("deploy/k8s", f"expected one Deployment, found {len(deployments)}")
        return
    where, deployment = deployments[0]
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    containers = spec.get("containers") or []
    inits = spec.get("initContainers") or []
    tandemd = next((c for c in containers if c.get("name") == "tandemd"), None)
    if tandemd is None:
        checker.fail(where, "no container named tandemd")
        return

    # The configuration file tandemd is started with, found through its ConfigMap volume.
    args = tandemd.get("args") or []
    if "--config" not in args or args.index("--config") + 1 >= len(args):
        checker.fail(where, "tandemd is not started with --config FILE")
        return
    config_file = args[args.index("--config") + 1]
    mount = next((m for m in tandemd.get("volumeMounts") or []
                  if m.get("mountPath") == os.path.dirname(config_file)), None)
    volume = mount and next((v for v in spec.get("volumes") or []
                             if v.get("name") == mount.get("name")), None)
    cm_name = volume and (volume.get("configMap") or {}).get("name")
    configmap = next((o for _, o in by_kind.get("ConfigMap", [])
                      if o["metadata"]["name"] == cm_name), None)
    key = os.path.basename(config_file)
    if configmap is None or key not in (configmap.get("data") or {}):
        checker.fail(where, f"{config_file} is not a key of a ConfigMap mounted at its directory")
        return
    env = {e["name"]: str(e["value"]) for e in tandemd.get("env") or []
           if "value" in e and e["name"].startswith("TANDEM_")}
    resolved = checker.resolve_config(f"ConfigMap {cm_name} {key}", configmap["data"][key], env)
    if resolved is None:
        return
    port = resolved["server"]["port"]
    metrics_port = resolved["metrics"]["port"]
    grace = resolved["server"]["shutdown_grace_seconds"]
    checker.note(f"k8s: tandemd resolves server.port={port} metrics.port={metrics_port} "
                 f"shutdown_grace_seconds={grace}")
    if is_loopback(resolved["server"]["host"]):
        checker.fail(where, "server.host is loopback: kubelet probes and the Service cannot reach it")

    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = tandemd.get(probe)
        if not p:
            checker.fail(where, f"tandemd has no {probe}")
        elif "grpc" not in p:
            checker.fail(where, f"tandemd {probe} is not a gRPC (grpc.health.v1) probe")
        elif p["grpc"].get("port") != port:
            checker.fail(where, f"tandemd {probe} probes port {p['grpc'].get('port')}, "
                         f"tandemd listens on {port}")

    grace_period = spec.get("terminationGracePeriodSeconds", 30)
    if not grace_period > grace:
        checker.fail(where, f"terminationGracePeriodSeconds {grace_period} is not above "
                     f"server.shutdown_grace_seconds {grace}")
    if spec.get("enableServiceLinks") is not False:
        checker.fail(where, "enableServiceLinks is not false (Service variables named TANDEM_* "
                     "reach tandemd's environment)")

    ports = {p.get("name"): p.get("containerPort") for c in containers + inits
             for p in c.get("ports") or []}
    if ports.get("grpc") != port:
        checker.fail(where, f"containerPort grpc is {ports.get('grpc')}, tandemd listens on {port}")
    if metrics_port and ports.get("metrics") != metrics_port:
        checker.fail(where, f"containerPort metrics is {ports.get('metrics')}, "
                     f"metrics.port is {metrics_port}")
    annotations = pod.get("metadata", {}).get("annotations") or {}
    if annotations.get("prometheus.io/scrape") != "true":
        checker.fail(where, "the pod has no prometheus.io/scrape: \"true\" annotation")
    if str(annotations.get("prometheus.io/port")) != str(metrics_port):
        checker.fail(where, f"prometheus.io/port {annotations.get('prometheus.io/port')} is not "
                     f"metrics.port {metrics_port}")

    pod_sc = spec.get("securityContext") or {}
    for c in containers + inits:
        check_container_security(checker, where, pod_sc, c)
    smg = next((c for c in containers + inits if c.get("name") == "smg"), None)
    if smg is not None:
        url = next((e.get("value") for e in smg.get("env") or [] if e["name"] == "TANDEMD_URL"), "")
        if not str(url).endswith(f":{port}"):
            checker.fail(where, f"smg TANDEMD_URL {url!r} does not name port {port}")
        tokenizer = next((e.get("value") for e in smg.get("env") or []
                          if e["name"] == "SMG_TOKENIZER"), None)
        if tokenizer not in [m.get("mountPath") for m in smg.get("volumeMounts") or []]:
            checker.fail(where, f"smg SMG_TOKENIZER {tokenizer!r} is not one of its mounts")

    labels = pod.get("metadata", {}).get("labels") or {}
    for rel, service in by_kind.get("Service", []):
        selector = service["spec"].get("selector") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            checker.fail(rel, f"selector {selector} does not match the pod labels {labels}")
        for p in service["spec"].get("ports") or []:
            target = p.get("targetPort", p.get("port"))
            if target not in ports and target not in ports.values():
                checker.fail(rel, f"targetPort {target!r} is no container port of the pod")


# ---- compose -----------------------------------------------------------------------------------

def parse_duration(text):
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", str(text))
    if not match or not any(match.groups()):
        return None
    return int(match.group(1) or 0) * 60 + int(match.group(2) or 0)


def check_compose(checker, docs):
    where = "deploy/compose.yaml"
    if where not in docs or not docs[where]:
        checker.fail(where, "missing")
        return
    services = docs[where][0].get("services") or {}
    # The replicas are the services named tandemd, tandemd-2, ...; each is checked on its own.
    replicas = {n: s for n, s in services.items() if re.fullmatch(r"tandemd(-\d+)?", n)}
    tandemd, smg = services.get("tandemd"), services.get("smg")
    if not tandemd or not smg:
        checker.fail(where, "services tandemd and smg are both needed")
        return
    with open(checker.path("deploy/docker/tandem.yaml"), encoding="utf-8") as f:
        image_config = f.read()
    ports = {}
    for name, replica in replicas.items():
        env = {k: str(v) for k, v in (replica.get("environment") or {}).items()}
        resolved = checker.resolve_config(
            f"{where} ({name}: deploy/docker/tandem.yaml + environment)", image_config, env)
        if resolved is None:
            return
        port = resolved["server"]["port"]
        grace = resolved["server"]["shutdown_grace_seconds"]
        ports[name] = port
        checker.note(f"compose: {name} resolves server.port={port} shutdown_grace_seconds={grace}")
        stop = parse_duration(replica.get("stop_grace_period", "10s"))
        if stop is None or not stop > grace:
            checker.fail(where, f"{name} stop_grace_period {replica.get('stop_grace_period')} is "
                         f"not above server.shutdown_grace_seconds {grace}")
        test = (replica.get("healthcheck") or {}).get("test") or []
        if not any(str(t).endswith(f":{port}") for t in test):
            checker.fail(where, f"{name} healthcheck {test} does not probe port {port}")
        condition = ((smg.get("depends_on") or {}).get(name) or {}).get("condition")
        if condition != "service_healthy":
            checker.fail(where, f"smg depends_on {name} with condition {condition!r}, "
                         "not service_healthy")

    for name, service in services.items():
        user = str(service.get("user", ""))
        if not user or user.split(":")[0] in ("0", "root"):
            checker.fail(where, f"service {name} does not run as a non-root user")
        if service.get("read_only") is not True:
            checker.fail(where, f"service {name} does not have read_only: true")
        if name != "smg" and service.get("ports"):
            checker.fail(where, f"service {name} publishes ports; only the gateway should")
    if not smg.get("ports"):
        checker.fail(where, "the gateway (smg) publishes no port")
    # The gateway's worker list (space-separated) names every replica, and nothing else.
    urls = sorted(str((smg.get("environment") or {}).get("TANDEMD_URL", "")).split())
    want = sorted(f"grpc://{name}:{port}" for name, port in ports.items())
    if urls != want:
        checker.fail(where, f"smg TANDEMD_URL {urls} is not the replicas {want}")

    def named_volumes(service):
        out = {}
        for v in service.get("volumes") or []:
            parts = str(v).split(":")
            if len(parts) >= 2 and not parts[0].startswith(("/", ".")):
                out[parts[0]] = parts[1]
        return out

    # Each replica writes its own statistics: no state volume is shared between two of them.
    state = [v for r in replicas.values() for v, at in named_volumes(r).items()
             if at == "/var/lib/tandem"]
    if len(state) != len(set(state)):
        checker.fail(where, f"replicas share a /var/lib/tandem volume: {state}")
    # The gateway prefers the tokenizer_path tandemd reports to its own --tokenizer-path, so
    # the shared tokenizer volume must sit at the same path in smg and every replica.
    tokenizer = str((smg.get("environment") or {}).get("SMG_TOKENIZER", ""))
    for name, replica in replicas.items():
        shared = set(named_volumes(replica)) & set(named_volumes(smg))
        if not any(named_volumes(smg)[v] == tokenizer == named_volumes(replica)[v]
                   for v in shared):
            checker.fail(where, f"no volume shared by {name} and smg is mounted at SMG_TOKENIZER "
                         f"{tokenizer!r} in both")


# ---- main --------------------------------------------------------------------------------------

def run_checks(repo, tandemd, quiet=False):
    checker = Checker(repo, tandemd, quiet)
    docs = load_all_yaml(checker)
    check_kubernetes(checker, docs)
    check_compose(checker, docs)
    check_dockerfiles(checker)
    check_systemd(checker)
    return checker.problems


# (file, old text, new text, a word the report must then contain)
MUTATIONS = [
    ("deploy/k8s/deployment.yaml", "terminationGracePeriodSeconds: 60",
     "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds"),
    ("deploy/k8s/deployment.yaml", "readinessProbe:\n            grpc:\n              port: 50051",
     "readinessProbe:\n            grpc:\n              port: 50052", "readinessProbe"),
    ("deploy/k8s/configmap.yaml", "      port: 50051", "      port: 70000", "print-config"),
    ("deploy/k8s/configmap.yaml", "shutdown_grace_seconds: 30", "shutdown_grace_seconds: 90",
     "terminationGracePeriodSeconds"),
    ("deploy/k8s/deployment.yaml", "enableServiceLinks: false", "enableServiceLinks: true",
     "enableServiceLinks"),
    ("deploy/k8s/deployment.yaml", "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot"),
    ("deploy/compose.yaml", "condition: service_healthy", "condition: service_started",
     "service_healthy"),
    ("deploy/compose.yaml", 'expose: ["50051", "9090"]', 'ports: ["50051:50051"]',
     "publishes ports"),
    ("deploy/compose.yaml", "stop_grace_period: 45s", "stop_grace_period: 20s",
     "stop_grace_period"),
    ("deploy/compose.yaml", "tokenizer:/opt/tandem/share/tandem/models/demo/hf:ro",
     "tokenizer:/tokenizer:ro", "SMG_TOKENIZER"),
    ("deploy/compose.yaml", "grpc://tandemd:50051 grpc://tandemd-2:50051",
     "grpc://tandemd:50051", "TANDEMD_URL"),
    ("deploy/compose.yaml", "tandem-state-2:/var/lib/tandem", "tandem-state:/var/lib/tandem",
     "share a /var/lib/tandem"),
    ("deploy/compose.yaml", "      tandemd-2:\n        condition: service_healthy\n", "",
     "depends_on tandemd-2"),
    ("deploy/docker/Dockerfile", "USER 10001:10001", "USER root", "USER"),
    ("deploy/docker/Dockerfile", "HEALTHCHECK --interval", "HEALTHCHECK NONE\n#", "HEALTHCHECK"),
    ("deploy/docker/tandem.yaml", "  port: 50051", "  port: 50052", "EXPOSE"),
    ("deploy/docker/Dockerfile.smg", 'pip install --no-cache-dir "smg==${SMG_VERSION}"',
     "pip install --no-cache-dir smg", "pinned"),
    ("deploy/systemd/tandemd.service", "TimeoutStopSec=45", "TimeoutStopSec=20",
     "TimeoutStopSec"),
    ("deploy/systemd/tandemd.service", "RestartPreventExitStatus=2 3\n", "",
     "RestartPreventExitStatus"),
    ("deploy/systemd/tandemd.service", "RestartPreventExitStatus=2 3\n",
     "RestartPreventExitStatus=2\n", "RestartPreventExitStatus"),
    ("deploy/systemd/tandemd.service", "ProtectSystem=strict", "ProtectSystem=full",
     "ProtectSystem"),
    ("deploy/systemd/tandemd.service", "CapabilityBoundingSet=\n",
     "CapabilityBoundingSet=CAP_NET_ADMIN\n", "CapabilityBoundingSet"),
    ("deploy/systemd/smg.service", "--max-payload-size 4194304 ", "", "--max-payload-size"),
    ("deploy/docker/Dockerfile.smg", "--max-concurrent-requests 320 ", "",
     "--max-concurrent-requests"),
]


def self_test(repo, tandemd):
    """Each mutation must make run_checks() report a problem that names the expected word."""
    failures = 0
    for path, old, new, word in MUTATIONS:
        with tempfile.TemporaryDirectory() as tmp:
            for part in ("deploy", "config", "scripts"):
                shutil.copytree(os.path.join(repo, part), os.path.join(tmp, part))
            target = os.path.join(tmp, path)
            with open(target, encoding="utf-8") as f:
                text = f.read()
            if old not in text:
                print(f"SELF-TEST BROKEN: {path} no longer contains {old!r}")
                failures += 1
                continue
            with open(target, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
            problems = run_checks(tmp, tandemd, quiet=True)
            hits = [p for p in problems if word in p]
            if hits:
                print(f"caught: {path}: {old.splitlines()[-1].strip()!r} -> "
                      f"{new.splitlines()[-1].strip() if new else '(removed)'!r}: {hits[0]}")
            else:
                print(f"MISSED: {path}: {old!r} -> {new!r}; problems were: {problems}")
                failures += 1
    print(f"self-test: {len(MUTATIONS) - failures} of {len(MUTATIONS)} mutations caught")
    return failures == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--tandemd", required=True, help="the built tandemd binary")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if not os.access(args.tandemd, os.X_OK):
        print(f"check_deploy: {args.tandemd} is not an executable (build the tandemd target)")
        return 1
    if args.self_test:
        return 0 if self_test(args.repo, args.tandemd) else 1
    problems = run_checks(args.repo, args.tandemd)
    for p in problems:
        print(f"PROBLEM {p}")
    print(f"check_deploy: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
