# check_deploy_units.py: the systemd unit checks of check_deploy.py (hardening, restart policy, stop timeout, systemd-analyze).
import os
import re
import shlex
import shutil
import subprocess
import tempfile

# key -> required value ("" = must be set and empty), for both units.
HARDENING = {
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "NoNewPrivileges": "yes",
    "CapabilityBoundingSet": "",
}


def parse_unit(path):
    """{section: {key: [values in order]}}; continuation lines joined."""
    sections, section, pending = {}, None, ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not pending and (not line.strip() or line.lstrip().startswith(("#", ";"))):
                continue
            if line.endswith("\\"):
                pending += line[:-1].strip() + " "
                continue
            line, pending = (pending + line.strip()).strip(), ""
            if line.startswith("[") and line.endswith("]"):
                section = sections.setdefault(line[1:-1], {})
                continue
            key, _, value = line.partition("=")
            section.setdefault(key.strip(), []).append(value.strip())
    return sections


def seconds(text):
    """systemd time span ("45", "45s", "1min 30s") in seconds; None if unreadable."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
    total, found = 0, False
    for number, unit in re.findall(r"(\d+)\s*([a-z]*)", text):
        if unit not in units:
            return None
        total += int(number) * units[unit]
        found = True
    return total if found else None


def unit_environment(service):
    env = {}
    for line in service.get("Environment", []):
        for item in shlex.split(line):
            key, _, value = item.partition("=")
            env[key] = value
    return env


def check_hardening(checker, rel, service):
    for key, wanted in HARDENING.items():
        values = service.get(key)
        if values is None or values[-1] != wanted:
            checker.fail(rel, f"{key}={wanted} is missing (found {values})")
    if not service.get("RestrictAddressFamilies"):
        checker.fail(rel, "RestrictAddressFamilies is not set")
    if "@system-service" not in " ".join(service.get("SystemCallFilter", [])):
        checker.fail(rel, "SystemCallFilter does not start from @system-service")
    user = (service.get("User") or [""])[-1]
    if (service.get("DynamicUser") or ["no"])[-1] != "yes" and user in ("", "root", "0"):
        checker.fail(rel, "neither DynamicUser=yes nor a non-root User=")
    if not service.get("LimitNOFILE"):
        checker.fail(rel, "LimitNOFILE is not set")
    if (service.get("Restart") or [""])[-1] != "on-failure":
        checker.fail(rel, f"Restart is {service.get('Restart')}, not on-failure")


def check_tandemd_unit(checker, rel, unit):
    service = unit.get("Service", {})
    check_hardening(checker, rel, service)
    exec_start = shlex.split((service.get("ExecStart") or [""])[-1])
    if "--config" not in exec_start:
        checker.fail(rel, "ExecStart does not pass --config FILE")
        return None
    # The unit's /etc/tandem/tandem.yaml is config/tandem.yaml installed (docs/deployment.md).
    env = {k: v for k, v in unit_environment(service).items() if k.startswith("TANDEM_")}
    with open(checker.path("config/tandem.yaml"), encoding="utf-8") as f:
        resolved = checker.resolve_config(f"{rel} (config/tandem.yaml + Environment=)", f.read(),
                                          env)
    if resolved is None:
        return None
    grace = resolved["server"]["shutdown_grace_seconds"]
    stop = seconds((service.get("TimeoutStopSec") or ["90"])[-1])
    if stop is None or not stop > grace:
        checker.fail(rel, f"TimeoutStopSec {service.get('TimeoutStopSec')} is not above "
                     f"server.shutdown_grace_seconds {grace}")
    prevented = " ".join(service.get("RestartPreventExitStatus", [])).split()
    for code, meaning in (("2", "bad configuration"), ("3", "a model that cannot be served")):
        if code not in prevented:
            checker.fail(rel, f"RestartPreventExitStatus does not hold {code} ({meaning})")
    if (service.get("KillSignal") or ["SIGTERM"])[-1] != "SIGTERM":
        checker.fail(rel, "KillSignal is not SIGTERM")
    if not service.get("EnvironmentFile"):
        checker.fail(rel, "no EnvironmentFile=")
    state = (service.get("StateDirectory") or [""])[-1]
    output = resolved["placement"]["stats_output_path"]
    if not state or not str(output).startswith(f"/var/lib/{state}/"):
        checker.fail(rel, f"placement.stats_output_path {output!r} is not in the "
                     f"StateDirectory /var/lib/{state}")
    return resolved


# The gateway's own limits every shipped smg command line sets (issue 18: its defaults accept a
# 512 MiB body and keep a request for 30 minutes).
GATEWAY_LIMIT_FLAGS = ("--max-payload-size", "--request-timeout-secs", "--max-concurrent-requests")


def check_gateway_limits(checker, rel, command_line):
    for flag in GATEWAY_LIMIT_FLAGS:
        if flag not in command_line:
            checker.fail(rel, f"the smg command line does not set {flag}")


def check_smg_unit(checker, rel, unit, tandemd_port):
    service = unit.get("Service", {})
    check_hardening(checker, rel, service)
    url = unit_environment(service).get("TANDEMD_URL", "")
    if tandemd_port is not None and url != f"grpc://127.0.0.1:{tandemd_port}":
        checker.fail(rel, f"TANDEMD_URL {url!r} is not grpc://127.0.0.1:{tandemd_port}")
    if "--worker-urls" not in " ".join(service.get("ExecStart", [])):
        checker.fail(rel, "ExecStart does not pass --worker-urls")
    check_gateway_limits(checker, rel, " ".join(service.get("ExecStart", [])))


def run_systemd_analyze(checker, units):
    """systemd-analyze verify (and security, reported) on copies whose ExecStart binary exists."""
    if shutil.which("systemd-analyze") is None:
        checker.note("systemd-analyze: skipped (not installed)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        for rel, binary, replacement in units:
            with open(checker.path(rel), encoding="utf-8") as f:
                text = f.read()
            copy = os.path.join(tmp, os.path.basename(rel))
            with open(copy, "w", encoding="utf-8") as f:
                f.write(text.replace(binary, replacement))
            run = subprocess.run(["systemd-analyze", "verify", copy], capture_output=True,
                                 text=True, timeout=60)
            output = (run.stdout + run.stderr).strip()
            if run.returncode != 0 or output:
                checker.fail(rel, f"systemd-analyze verify: exit {run.returncode}: {output}")
            security = subprocess.run(["systemd-analyze", "security", "--offline=true", copy],
                                      capture_output=True, text=True, timeout=60)
            overall = [line for line in security.stdout.splitlines() if "exposure level" in line]
            checker.note(f"systemd-analyze verify {rel}: clean; security: "
                         f"{overall[-1].strip() if overall else security.stderr.strip()}")


def check_systemd(checker):
    tandemd_rel = "deploy/systemd/tandemd.service"
    smg_rel = "deploy/systemd/smg.service"
    resolved = check_tandemd_unit(checker, tandemd_rel, parse_unit(checker.path(tandemd_rel)))
    port = resolved["server"]["port"] if resolved else None
    check_smg_unit(checker, smg_rel, parse_unit(checker.path(smg_rel)), port)
    run_systemd_analyze(checker, [
        (tandemd_rel, "/usr/local/bin/tandemd", os.path.abspath(checker.tandemd)),
        (smg_rel, "/opt/smg/bin/smg", shutil.which("true") or "/bin/true"),
    ])
