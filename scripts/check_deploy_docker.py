# check_deploy_docker.py: the Dockerfile checks of check_deploy.py (non-root, health check, ports, pins, runtime packages).
import os
import re
import shlex
import shutil
import subprocess

import yaml

from check_deploy_units import check_gateway_limits

TANDEMD_DOCKERFILES = ("deploy/docker/Dockerfile", "deploy/docker/Dockerfile.cuda")
# Folders the build stage needs from the context; a .dockerignore must not drop them.
NEEDED_IN_CONTEXT = ("CMakeLists.txt", "cmake", "config", "engine", "kernels", "proto", "server",
                     "cli", "models", "scripts", "deploy")


def parse_dockerfile(path):
    """[(INSTRUCTION, argument text)] with continuation lines joined and comments dropped."""
    out = []
    pending = ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.lstrip().startswith("#"):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line = pending + line
            pending = ""
            if not line.strip():
                continue
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage(instructions):
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last_from:]


def exec_form(text):
    """The words of a JSON exec form ["a", "b"] or of a shell form."""
    text = text.strip()
    if text.startswith("["):
        return [w for w in re.findall(r'"((?:[^"\\]|\\.)*)"', text)]
    return shlex.split(text)


def check_common(checker, rel, stage):
    users = [args for word, args in stage if word == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        checker.fail(rel, f"the final stage does not switch to a non-root USER ({users})")
    health = [args for word, args in stage if word == "HEALTHCHECK"]
    if not health or health[-1].upper().startswith("NONE"):
        checker.fail(rel, "the final stage has no HEALTHCHECK")
    exposed = {p.split("/")[0] for word, args in stage if word == "EXPOSE" for p in args.split()}
    if not exposed:
        checker.fail(rel, "the final stage EXPOSEs no port")
    return exposed, (health[-1] if health else "")


def check_tandemd_dockerfile(checker, rel, instructions):
    stage = final_stage(instructions)
    exposed, health = check_common(checker, rel, stage)
    for word, args in instructions:
        if word == "COPY" and "--from" not in args:
            for source in shlex.split(args)[:-1]:
                if not source.startswith("--") and not os.path.exists(checker.path(source)):
                    checker.fail(rel, f"COPY source {source} does not exist in the repository")
    cmd = exec_form(next((a for w, a in reversed(stage) if w == "CMD"), "[]"))
    if "--config" not in cmd or cmd.index("--config") + 1 >= len(cmd):
        checker.fail(rel, f"CMD {cmd} does not start tandemd with --config FILE")
        return
    config_path = cmd[cmd.index("--config") + 1]
    sources = [shlex.split(a) for w, a in stage if w == "COPY" and "--from" not in a]
    source = next((s[0] for s in sources if len(s) == 2 and s[1] == config_path), None)
    if source is None:
        checker.fail(rel, f"{config_path} (CMD --config) is not COPYed into the final stage")
        return
    env = {}
    for word, args in stage:
        if word == "ENV":
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                if key.startswith("TANDEM_"):
                    env[key] = value
    with open(checker.path(source), encoding="utf-8") as f:
        resolved = checker.resolve_config(f"{rel} ({source})", f.read(), env)
    if resolved is None:
        return
    port, metrics_port = resolved["server"]["port"], resolved["metrics"]["port"]
    if resolved["server"]["host"] in ("127.0.0.1", "::1", "localhost"):
        checker.fail(rel, "server.host is loopback: nothing outside the container can connect")
    for needed in (port, metrics_port):
        if needed and str(needed) not in exposed:
            checker.fail(rel, f"EXPOSE {sorted(exposed)} lacks port {needed} of {source}")
    if f":{port}" not in health:
        checker.fail(rel, f"HEALTHCHECK does not probe server.port {port}: {health}")
    build_runs = " ".join(a for w, a in instructions if w == "RUN")
    if "runtime-packages.sh" not in build_runs or "runtime-packages.txt" not in " ".join(
            a for w, a in stage):
        checker.fail(rel, "the runtime packages are not derived with runtime-packages.sh")


def check_runtime_packages(checker):
    """deploy/docker/runtime-packages.sh on the built tandemd: every library has an owner."""
    if shutil.which("dpkg-query") is None or shutil.which("ldd") is None:
        checker.note("runtime-packages.sh: skipped (no dpkg-query or ldd on this machine)")
        return
    script = checker.path("deploy/docker/runtime-packages.sh")
    run = subprocess.run(["bash", script, checker.tandemd], capture_output=True, text=True,
                         timeout=120)
    packages = run.stdout.split()
    if run.returncode != 0 or not packages:
        checker.fail("deploy/docker/runtime-packages.sh",
                     f"exit {run.returncode} on tandemd: {run.stderr.strip()}")
        return
    dev = [p for p in packages if p.endswith("-dev")]
    if dev:
        checker.fail("deploy/docker/runtime-packages.sh", f"names -dev packages: {dev}")
    if not any(p == "libc6" for p in packages):
        checker.fail("deploy/docker/runtime-packages.sh", f"libc6 is not among {packages}")
    for p in packages:
        query = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                               text=True, timeout=60)
        if query.stdout.strip() != "install ok installed":
            checker.fail("deploy/docker/runtime-packages.sh", f"{p} is not an installed package")
    checker.note(f"runtime packages of tandemd ({len(packages)}): {' '.join(packages)}")


def check_dockerignore(checker):
    for name in ("Dockerfile.dockerignore", "Dockerfile.cuda.dockerignore"):
        rel = f"deploy/docker/{name}"
        with open(checker.path(rel), encoding="utf-8") as f:
            patterns = {line.strip().rstrip("/") for line in f
                        if line.strip() and not line.startswith("#")}
        dropped = patterns & set(NEEDED_IN_CONTEXT)
        if dropped:
            checker.fail(rel, f"excludes {sorted(dropped)}, which the build stage needs")


def check_smg_dockerfile(checker):
    rel = "deploy/docker/Dockerfile.smg"
    instructions = parse_dockerfile(checker.path(rel))
    check_common(checker, rel, final_stage(instructions))
    check_gateway_limits(checker, rel, " ".join(a for w, a in instructions if w == "ENTRYPOINT"))
    args = dict(a.split("=", 1) for w, a in instructions if w == "ARG" and "=" in a)
    runs = " ".join(a for w, a in instructions if w == "RUN")
    pin = re.search(r'smg==([0-9][\w.]*|\$\{SMG_VERSION\})', runs)
    version = None
    if pin:
        version = args.get("SMG_VERSION") if pin.group(1) == "${SMG_VERSION}" else pin.group(1)
    if not version or not re.fullmatch(r"\d+\.\d+\.\d+", version):
        checker.fail(rel, "smg is not pinned to an exact version (pip install smg==X.Y.Z)")
        return
    with open(checker.path("deploy/compose.yaml"), encoding="utf-8") as f:
        compose = yaml.safe_load(f)
    image = (compose.get("services", {}).get("smg") or {}).get("image", "")
    if not image.endswith(f":{version}"):
        checker.fail("deploy/compose.yaml", f"smg image {image!r} is not tagged {version}")


def check_dockerfiles(checker):
    for rel in TANDEMD_DOCKERFILES:
        check_tandemd_dockerfile(checker, rel, parse_dockerfile(checker.path(rel)))
    check_smg_dockerfile(checker)
    check_dockerignore(checker)
    if not checker.manifests_only:
        check_runtime_packages(checker)
