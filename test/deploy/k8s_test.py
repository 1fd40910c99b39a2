#!/usr/bin/python3
"""Checks of the lab deployment (deploy/k8s, deploy/Dockerfile), offline: this machine has no
cluster, no image registry and no container engine.

    k8s_test.py render     overlays render; the objects fit together (names, ports, probes, ...)
    k8s_test.py validate   rendered objects against the Kubernetes schemas, unknown fields too
    k8s_test.py dockerfile the Dockerfile's basics: pinned bases, non-root, no secrets baked in
    k8s_test.py run        the rendered StatefulSets' pods as local processes: they train

Options: --exe PATH (caf-gwtf), --build DIR (the CMake build tree: k8s-tools/ and scratch).
GWTF_KEEP_LOGS=1 keeps the run's directory (pods' logs, configs) after a success too.
Each check prints what it found and exits 1 with the reason on the first failure.
"""
import argparse
import http.client
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OVERLAYS = ["cpu-lab", "gpu-lab"]


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def render(overlay):
    path = os.path.join(SRC, "deploy", "k8s", "overlays", overlay)
    r = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"kubectl kustomize {path} failed: {r.stderr.strip()}")
    return r.stdout, [d for d in yaml.safe_load_all(r.stdout) if d]


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def one(objs, kind, name=None):
    found = [o for o in by_kind(objs, kind) if name is None or o["metadata"]["name"] == name]
    check(len(found) == 1, f"expected one {kind}{' ' + name if name else ''}, found {len(found)}")
    return found[0]


def container(sts):
    cs = sts["spec"]["template"]["spec"]["containers"]
    check(len(cs) == 1, f"{sts['metadata']['name']}: expected one container, got {len(cs)}")
    return cs[0]


def port_of(c, name):
    for p in c.get("ports", []):
        if p["name"] == name:
            return p["containerPort"]
    raise Failure(f"container {c['name']} has no port named {name}")


def pods_of(sts):
    return [f"{sts['metadata']['name']}-{i}" for i in range(sts["spec"]["replicas"])]


def role_of(sts):
    env = {e["name"]: e.get("value") for e in container(sts).get("env", [])}
    return env.get("GWTF_ROLE")


def cluster_yaml(objs):
    cm = one(objs, "ConfigMap")
    check("cluster.yaml" in cm["data"], "the ConfigMap has no cluster.yaml")
    return cm, cm["data"]["cluster.yaml"]


# --- render -------------------------------------------------------------------------------

def check_render(args):
    for overlay in OVERLAYS:
        _, objs = render(overlay)
        ns = one(objs, "Namespace")["metadata"]["name"]
        for o in objs:
            if o["kind"] != "Namespace":
                check(o["metadata"].get("namespace") == ns, f"{o['kind']}/{o['metadata']['name']} is not in {ns}")
        svc = one(objs, "Service")
        check(svc["spec"].get("clusterIP") == "None", "the peer Service must be headless (clusterIP: None)")
        check(svc["spec"].get("publishNotReadyAddresses") is True,
              "the peer Service must publish not-ready pods: hosts become ready only after meeting their peers")
        sets = by_kind(objs, "StatefulSet")
        check(sorted(role_of(s) for s in sets) == ["data_holder", "relay"],
              f"{overlay}: expected a data_holder and a relay StatefulSet")
        cm, text = cluster_yaml(objs)
        cfg = yaml.safe_load(text)
        holders = next(s for s in sets if role_of(s) == "data_holder")
        check(cfg["training"]["data_holders"] == pods_of(holders),
              f"training.data_holders {cfg['training']['data_holders']} != the holder pods {pods_of(holders)}")
        all_pods = {p for s in sets for p in pods_of(s)}
        peers_port = None
        for s in sets:
            name = s["metadata"]["name"]
            spec = s["spec"]
            tmpl = spec["template"]
            pod = tmpl["spec"]
            c = container(s)
            check(spec["serviceName"] == svc["metadata"]["name"], f"{name}: serviceName is not the headless Service")
            check(spec.get("podManagementPolicy") == "Parallel", f"{name}: pods must start in parallel")
            labels = tmpl["metadata"]["labels"]
            check(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()),
                  f"{name}: the selector does not match the pod labels")
            check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
                  f"{name}: the Service does not select its pods")
            peers_port = port_of(c, "peers")
            metrics = port_of(c, "metrics")
            check(cfg["node"]["metrics"].endswith(f":{metrics}"), f"{name}: node.metrics is not the metrics port")
            # The metrics port is plain HTTP: it binds the pod's address, not every interface.
            check(cfg["node"]["metrics"] == f"${{POD_IP}}:{metrics}", f"{name}: node.metrics must bind the pod IP (${{POD_IP}})")
            pod_ip = [e for e in c.get("env", []) if e["name"] == "POD_IP"]
            check(len(pod_ip) == 1 and pod_ip[0]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP",
                  f"{name}: POD_IP must come from status.podIP")
            check(cfg["node"]["listen"].endswith(f":{peers_port}"), f"{name}: node.listen is not the peers port")
            check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"{name}: readiness must ask /readyz")
            check(c["livenessProbe"]["httpGet"]["path"] == "/healthz", f"{name}: liveness must ask /healthz")
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                check(c[probe]["httpGet"]["port"] in ("metrics", metrics), f"{name}: {probe} is not on the metrics port")
            ann = tmpl["metadata"].get("annotations", {})
            check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(metrics),
                  f"{name}: the metrics port is not annotated for scraping")
            check("kill -TERM 1" in " ".join(c["lifecycle"]["preStop"]["exec"]["command"]),
                  f"{name}: preStop must start the graceful leave (SIGTERM)")
            check(pod.get("terminationGracePeriodSeconds", 30) >= 60, f"{name}: a drain needs a longer grace period")
            res = c.get("resources", {})
            check("cpu" in res.get("requests", {}) and "memory" in res.get("limits", {}),
                  f"{name}: resource requests and limits are required")
            check(pod["securityContext"].get("runAsNonRoot") is True, f"{name}: pods must run as non-root")
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            check(int(env.get("GWTF_RESTART_DELAY_S", "0")) * 1000 > cfg["faults"]["connection_timeout_ms"],
                  f"{name}: GWTF_RESTART_DELAY_S must exceed faults.connection_timeout_ms")
            # Founding relays wait to see every relay (placement.relays) before they place.
            if env.get("GWTF_ROLE") == "relay":
                check(env.get("GWTF_RELAYS") == str(spec["replicas"]) and cfg["placement"]["relays"] == "${GWTF_RELAYS:-0}",
                      f"{name}: placement.relays must be GWTF_RELAYS, the relays' replicas ({spec['replicas']})")
            vols = {v["name"]: v for v in pod["volumes"]}
            state_mount = [m for m in c["volumeMounts"] if m["mountPath"] == env.get("GWTF_STATE_DIR")]
            check(len(state_mount) == 1 and "emptyDir" in vols[state_mount[0]["name"]],
                  f"{name}: GWTF_STATE_DIR must be an emptyDir (it must survive a container restart only)")
            # The TLS files named in cluster.yaml come from the Secret's mount.
            mounts = {m["name"]: m for m in c["volumeMounts"]}
            tls_vol = next((v for v in vols.values() if "secret" in v), None)
            check(tls_vol is not None, f"{name}: no Secret volume for the TLS files")
            tls_dir = mounts[tls_vol["name"]]["mountPath"].rstrip("/")
            # ... one pair per pod, taken by the pod's own name (node.tls.directory).
            check(cfg["node"]["tls"].get("directory", "").rstrip("/") == tls_dir and
                  not any(k in cfg["node"]["tls"] for k in ("certificate", "key", "ca")),
                  f"{name}: node.tls must be directory: {tls_dir} (the Secret's mount, a pair per pod)")
            config_mount = mounts[next(v for v, d in vols.items() if "configMap" in d)]
            check(vols[config_mount["name"]]["configMap"]["name"] == cm["metadata"]["name"],
                  f"{name}: the config volume is not the generated ConfigMap")
            check(c["args"][c["args"].index("--config") + 1] == config_mount["mountPath"],
                  f"{name}: --config is not the mounted cluster.yaml")
            if overlay == "gpu-lab":
                for part in ("requests", "limits"):
                    check(res.get(part, {}).get("nvidia.com/gpu") == "1", f"{name}: gpu-lab must {part[:-1]} nvidia.com/gpu")
        # Every bootstrap address is a pod of this cluster on its peers port.
        svc_name = svc["metadata"]["name"]
        for b in cfg["node"]["bootstrap"]:
            m = re.fullmatch(r"([a-z0-9-]+)\.([a-z0-9-]+)\.\$\{POD_NAMESPACE\}\.svc\.cluster\.local:(\d+)", b)
            check(m is not None, f"bootstrap {b} is not <pod>.<service>.${{POD_NAMESPACE}}.svc.cluster.local:<port>")
            check(m.group(1) in all_pods, f"bootstrap {b}: no pod {m.group(1)} in the StatefulSets")
            check(m.group(2) == svc_name, f"bootstrap {b}: not the headless Service {svc_name}")
            check(int(m.group(3)) == peers_port, f"bootstrap {b}: not the peers port {peers_port}")
        check(cfg["node"]["advertise"] == f"${{POD_NAME}}.{svc_name}.${{POD_NAMESPACE}}.svc.cluster.local:{peers_port}",
              f"node.advertise {cfg['node']['advertise']} is not the pod's own DNS name")
        pdbs = by_kind(objs, "PodDisruptionBudget")
        check(len(pdbs) == len(sets), "one PodDisruptionBudget per StatefulSet")
        for s in sets:
            labels = s["spec"]["template"]["metadata"]["labels"]
            check(any(all(labels.get(k) == v for k, v in p["spec"]["selector"]["matchLabels"].items()) for p in pdbs),
                  f"no PodDisruptionBudget selects {s['metadata']['name']}")
        # The ConfigMap's cluster.yaml is valid for every pod, with the environment it gets.
        scratch = tempfile.mkdtemp(prefix="gwtf-k8s-render-")
        try:
            path = os.path.join(scratch, "cluster.yaml")
            with open(path, "w") as f:
                f.write(text.replace("/data/corpus.txt", os.path.join(SRC, "test/app/good_configs/corpus.txt")))
            for s in sets:
                for pod in pods_of(s):
                    env = dict(os.environ)
                    env.update(pod_env(s, pod, ns))
                    env["GWTF_DATA"] = os.path.join(SRC, "test/app/good_configs/corpus.txt") if "GWTF_DATA" in env else ""
                    r = subprocess.run([args.exe, "--config", path, "--check"], env=env, capture_output=True,
                                       text=True, timeout=60)
                    check(r.returncode == 0, f"{overlay}: cluster.yaml is invalid for pod {pod}:\n{r.stdout}{r.stderr}")
        finally:
            shutil.rmtree(scratch)
        print(f"render {overlay}: {len(objs)} objects fit together; cluster.yaml valid for {len(all_pods)} pods")


def pod_env(sts, pod, namespace):
    out = {}
    for e in container(sts).get("env", []):
        if "value" in e:
            out[e["name"]] = str(e["value"])
        else:
            field = e["valueFrom"]["fieldRef"]["fieldPath"]
            check(field in ("metadata.name", "metadata.namespace", "status.podIP"), f"unsupported fieldRef {field}")
            out[e["name"]] = {"metadata.name": pod, "metadata.namespace": namespace, "status.podIP": "127.0.0.1"}[field]
    # $(VAR) references in values, as the kubelet expands them.
    for k, v in out.items():
        out[k] = re.sub(r"\$\((\w+)\)", lambda m: out.get(m.group(1), m.group(0)), v)
    return out


# --- validate -----------------------------------------------------------------------------

def check_validate(args):
    tools = os.path.join(args.build, "k8s-tools", "node_modules")
    check(os.path.isdir(os.path.join(tools, "kubernetes-models")),
          f"{tools} has no kubernetes-models: run scripts/install-k8s-tools (scripts/test does)")
    env = dict(os.environ, NODE_PATH=tools)
    validator = os.path.join(SRC, "test", "deploy", "k8s", "validate.js")
    scratch = tempfile.mkdtemp(prefix="gwtf-k8s-validate-")
    try:
        files = []
        for overlay in OVERLAYS:
            text, _ = render(overlay)
            files.append(os.path.join(scratch, overlay + ".yaml"))
            with open(files[-1], "w") as f:
                f.write(text)
        r = subprocess.run(["node", validator] + files, env=env, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"the rendered manifests are not valid:\n{r.stdout}{r.stderr}")
        print(r.stdout.strip())
        # The validator itself catches what it must: a bad type, a missing required field, and
        # unknown fields at three depths (which the schema validators alone let through).
        bad = os.path.join(SRC, "test", "deploy", "k8s", "bad-manifests.yaml")
        r = subprocess.run(["node", validator, bad], env=env, capture_output=True, text=True, timeout=120)
        check(r.returncode == 1, f"validate.js accepted {bad}:\n{r.stdout}{r.stderr}")
        for want in ["StatefulSet/bad: schema: /spec/replicas must be integer",
                     "StatefulSet/bad: spec.serviceNam: unknown field",
                     "StatefulSet/bad: spec.template.spec.containers[0].imagePullPolicyy: unknown field",
                     "StatefulSet/bad: spec.template.spec.containers[0].securityContext.readOnlyRootFilesystm: unknown field",
                     "StatefulSet/bad: spec.template.metadata.label: unknown field",
                     "Service/missing-ports: schema:",
                     "PodDisruptionBudget/typo: spec.maxUnavailble: unknown field",
                     "no Kubernetes schema for apiVersion 'apps/v9' kind 'StatefulSet'"]:
            check(want in r.stdout, f"validate.js missed '{want}' in {bad}:\n{r.stdout}")
        print("validate: the validator reports every planted error of bad-manifests.yaml")
    finally:
        shutil.rmtree(scratch)


# --- dockerfile ---------------------------------------------------------------------------

def check_dockerfile(args):
    path = os.path.join(SRC, "deploy", "Dockerfile")
    lines = [l.strip() for l in open(path) if l.strip() and not l.strip().startswith("#")]
    # Join continued lines.
    joined, cur = [], ""
    for l in lines:
        cur += (" " if cur else "") + l.rstrip("\\").strip()
        if not l.endswith("\\"):
            joined.append(cur)
            cur = ""
    froms = [l for l in joined if l.upper().startswith("FROM ")]
    check(len(froms) >= 2, "expected a multi-stage build (a build and a runtime stage)")
    for f in froms:
        image = f.split()[1]
        pinned = "@sha256:" in image or re.search(r":[^:]*\d+\.\d+", image)
        check(pinned and ":latest" not in image, f"base image not pinned to a version: {f}")
        check(image.startswith("debian:12"), f"expected debian:12 bases, got {image}")
    final = joined[joined.index(froms[-1]):]
    users = [l.split()[1] for l in final if l.upper().startswith("USER ")]
    check(users and users[-1].split(":")[0] not in ("0", "root"), "the runtime stage must run as a non-root USER")
    runtime_installs = " ".join(l for l in final if l.upper().startswith("RUN "))
    check(not re.search(r"\b\S+-dev\b", runtime_installs), "the runtime stage installs -dev packages")
    check(any(l.upper().startswith("HEALTHCHECK ") and "healthcheck" in l for l in final), "no HEALTHCHECK")
    entry = [l for l in final if l.upper().startswith("ENTRYPOINT ")]
    check(entry and "/usr/local/bin/caf-gwtf-entrypoint" in entry[-1] and "tini" in entry[-1],
          "the entry point must be tini, then deploy/entrypoint")
    check(any(l.startswith("COPY deploy/entrypoint /usr/local/bin/caf-gwtf-entrypoint") for l in final),
          "deploy/entrypoint is not copied to /usr/local/bin/caf-gwtf-entrypoint")
    script = open(os.path.join(SRC, "deploy", "entrypoint")).read()
    check('exe=${GWTF_EXE:-/usr/local/bin/caf-gwtf}' in script and 'exec "$exe" "$@"' in script,
          "deploy/entrypoint must exec /usr/local/bin/caf-gwtf with the container's arguments")
    for l in joined:
        check(not re.search(r"(?i)^(ENV|ARG)\s+\S*(PASSWORD|PASSPHRASE|SECRET|TOKEN|PRIVATE)", l), f"a secret in: {l}")
        check(not re.search(r"(?i)^(COPY|ADD)\b.*\.(key|pem|p12)\b", l), f"key material copied in: {l}")
    ignore = open(os.path.join(SRC, "deploy", "Dockerfile.dockerignore")).read()
    for pattern in ("**/*.key", ".git", "build"):
        check(pattern in ignore.split("\n"), f"Dockerfile.dockerignore must exclude {pattern}")
    for tool in ("healthcheck", "entrypoint"):
        check(os.access(os.path.join(SRC, "deploy", tool), os.X_OK), f"deploy/{tool} is not executable")
    print(f"dockerfile: {len(froms)} pinned stages, non-root USER {users[-1]}, HEALTHCHECK, no secrets")


# --- run ----------------------------------------------------------------------------------

def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


_taken = set()


def free_port():
    """A port that is free now and outside the kernel's ephemeral range: the pods' own
    connections take ephemeral ports, and one of them once took a port picked here for a
    pod's metrics before the pod could bind it."""
    lo, hi = ephemeral_range()
    candidates = [p for p in range(20000, 32000) if not lo <= p <= hi and p not in _taken]
    rng = random.Random(os.getpid())
    rng.shuffle(candidates)
    for port in candidates:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _taken.add(port)
            return port
    raise Failure("no free TCP port on 127.0.0.1 outside the ephemeral range")


def http_status(port, path):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", path)
        return c.getresponse().status
    except OSError:
        return None


def check_run(args):
    """The cpu-lab overlay's pods as processes on 127.0.0.1: each gets the command line (through
    the image's entry point), the environment and the files its pod would (the volumes mapped
    to local directories, the headless DNS names to 127.0.0.1 ports). They form a cluster and
    train; deleting a relay pod (SIGTERM, what its preStop hook sends) is a graceful leave,
    exit 0. (A crashed and restarted holder pod is not in here: it recovers in most runs but
    not all yet, issue 14.)"""
    _, objs = render("cpu-lab")
    ns = one(objs, "Namespace")["metadata"]["name"]
    svc = one(objs, "Service")["metadata"]["name"]
    _, text = cluster_yaml(objs)
    sets = by_kind(objs, "StatefulSet")
    docker = open(os.path.join(SRC, "deploy", "Dockerfile")).read()
    check(re.search(r'ENTRYPOINT \[.*"/usr/local/bin/caf-gwtf-entrypoint"\]', docker), "ENTRYPOINT is not deploy/entrypoint")
    entrypoint = os.path.join(SRC, "deploy", "entrypoint")
    iterations = 4
    scratch = tempfile.mkdtemp(prefix="gwtf-k8s-run-")
    procs = {}
    try:
        pods = [(s, p) for s in sets for p in pods_of(s)]
        certs = os.path.join(scratch, "certs")
        r = subprocess.run([os.path.join(SRC, "scripts", "make-certs"), certs, "--hosts", ",".join(p for _, p in pods)],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"make-certs failed: {r.stderr}")
        # The Secret as docs/deploy.md makes it: ca.crt and every pod's pair, never ca.key.
        secret = os.path.join(scratch, "secret")
        os.makedirs(secret)
        for f in os.listdir(certs):
            if f == "ca.crt" or f.startswith("caf-gwtf-"):
                shutil.copy(os.path.join(certs, f), os.path.join(secret, f))
        ports = {p: (free_port(), free_port()) for _, p in pods}
        for s, pod in pods:
            root = os.path.join(scratch, pod)
            os.makedirs(root)
            spec = s["spec"]["template"]["spec"]
            c = container(s)
            vols = {v["name"]: v for v in spec["volumes"]}
            claims = {t["metadata"]["name"] for t in s["spec"].get("volumeClaimTemplates", [])}
            mapping = {}
            for m in c["volumeMounts"]:
                local = os.path.join(root, m["name"])
                v = vols.get(m["name"], {})
                if "configMap" in v:
                    os.makedirs(local, exist_ok=True)
                    conf = text
                    # Headless DNS names -> 127.0.0.1 ports; this pod's own listen and metrics.
                    for _, other in pods:
                        peer = f"{other}.{svc}.${{POD_NAMESPACE}}.svc.cluster.local:"
                        conf = re.sub(re.escape(peer) + r"\d+", f"127.0.0.1:{ports[other][0]}", conf)
                    own = f"${{POD_NAME}}.{svc}.${{POD_NAMESPACE}}.svc.cluster.local:"
                    conf = re.sub(re.escape(own) + r"\d+", f"127.0.0.1:{ports[pod][0]}", conf)
                    conf = re.sub(r'listen: "0\.0\.0\.0:\d+"', f'listen: "127.0.0.1:{ports[pod][0]}"', conf)
                    conf = re.sub(r'metrics: "\$\{POD_IP\}:\d+"', f'metrics: "127.0.0.1:{ports[pod][1]}"', conf)
                    conf = re.sub(r'inspect: "127\.0\.0\.1:\d+"', 'inspect: "127.0.0.1:0"', conf)
                    check("svc.cluster.local" not in conf, f"{pod}: an address names no pod of the cluster")
                    with open(os.path.join(local, "cluster.yaml"), "w") as f:
                        f.write(conf)
                    if "subPath" in m:
                        local = os.path.join(local, m["subPath"])
                elif "secret" in v:
                    local = secret
                elif m["name"] in claims:
                    os.makedirs(local)
                    if role_of(s) == "data_holder":  # what the admin copies in (docs/deploy.md)
                        shutil.copy(os.path.join(SRC, "test/app/good_configs/corpus.txt"), os.path.join(local, "corpus.txt"))
                else:
                    os.makedirs(local)
                mapping[m["mountPath"]] = local
            def local_path(value):
                for mount in sorted(mapping, key=len, reverse=True):
                    if value == mount or value.startswith(mount + "/"):
                        return mapping[mount] + value[len(mount):]
                return value
            with open(mapping["/etc/caf-gwtf/cluster.yaml"]) as f:
                conf = f.read()
            for mount in sorted(mapping, key=len, reverse=True):
                conf = re.sub(re.escape(mount) + r"(?=[/\"\s])", mapping[mount], conf)
            with open(mapping["/etc/caf-gwtf/cluster.yaml"], "w") as f:
                f.write(conf)
            env = dict(os.environ)
            env.update({k: local_path(v) for k, v in pod_env(s, pod, ns).items()})
            env["GWTF_METRICS_PORT"] = str(ports[pod][1])
            env["GWTF_EXE"] = args.exe  # the image's /usr/local/bin/caf-gwtf
            argv = [entrypoint] + [local_path(a) for a in c["args"]] + ["--set", f"training.iterations={iterations}"]
            log = open(os.path.join(scratch, pod + ".log"), "w")
            procs[pod] = (subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root), log)
        holders = [p for s, p in pods if role_of(s) == "data_holder"]
        relays = [p for s, p in pods if role_of(s) == "relay"]

        def log_of(pod):
            with open(os.path.join(scratch, pod + ".log")) as f:
                return f.read()

        def logs():
            return "\n".join(f"== {p}\n{log_of(p)[-2500:]}" for p in procs)

        def wait(cond, seconds, what):
            deadline = time.time() + seconds
            while time.time() < deadline:
                if cond():
                    return
                for p, (proc, _) in procs.items():
                    if proc.poll() not in (None, 0):
                        raise Failure(f"{p} exited with {proc.returncode} while waiting for {what}\n{logs()}")
                time.sleep(0.2)
            raise Failure(f"timed out after {seconds} s waiting for {what}\n{logs()}")

        # Ready: every pod's /readyz answers 200 (what the readiness probe asks), and the
        # image's HEALTHCHECK script passes against it.
        wait(lambda: all(http_status(ports[p][1], "/readyz") == 200 for p in procs), 150, "every pod ready")
        for p in procs:
            # Docker's HEALTHCHECK (--retries=3) calls a container unhealthy after 3 failures
            # in a row: one slow answer on 2 busy cores is not a failure.
            for attempt in range(3):
                hc = subprocess.run([os.path.join(SRC, "deploy", "healthcheck")], capture_output=True,
                                    env=dict(os.environ, GWTF_METRICS_PORT=str(ports[p][1])), timeout=10)
                if hc.returncode == 0:
                    break
            check(hc.returncode == 0, f"{p}: the HEALTHCHECK script failed 3 times in a row: {hc.stderr}\n{logs()}")
        wait(lambda: all("iteration 0 done at " + h in log_of(h) for h in holders), 120, "iteration 0")
        # `kubectl delete pod caf-gwtf-relay-5` (or a scale-down): its preStop sends SIGTERM.
        # The relays placed themselves: the one that leaves is the last whose stage keeps a
        # replica (a stage's only replica leaving is a lost stage, restored from checkpoints:
        # the node-mode restore tests; this cluster has none of the iteration it would stall in).
        def stage_of(r):
            m = re.search(r"placed at stage (\d+)", log_of(r))
            return int(m.group(1)) if m else None
        # A relay that saw too few peers waits placement.wait_ms (30 s) before it places itself.
        wait(lambda: all(stage_of(r) is not None for r in relays), 120, "every relay placed")
        placed = {r: stage_of(r) for r in relays}
        spare = [r for r in relays if sum(1 for s in placed.values() if s == placed[r]) >= 2]
        check(spare, f"no relay stage has two replicas: {placed}\n{logs()}")
        leaver = spare[-1]
        procs[leaver][0].send_signal(signal.SIGTERM)
        try:
            code = procs[leaver][0].wait(timeout=120)
        except subprocess.TimeoutExpired:
            raise Failure(f"{leaver} did not leave within 120 s of SIGTERM\n{logs()}")
        check(code == 0, f"{leaver}: a graceful leave exits 0, got {code}\n{log_of(leaver)}")
        last = f"iteration {iterations - 1} done at "
        wait(lambda: all(last + h in log_of(h) for h in holders), 360, f"iteration {iterations - 1}")
        for p, (proc, _) in procs.items():
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                raise Failure(f"{p} still runs after the last iteration\n{logs()}")
            check(code == 0, f"{p} exited with {code}\n{logs()}")
        # Checkpoints on each pod's volume (node.data_dir in the ConfigMap): after the last
        # iteration every pod that stayed wrote its stage's, and each keeps copies of others'.
        import glob
        last_file = f"iteration-{iterations:010d}.ckpt"
        copies = 0
        for p in procs:
            if p == leaver:
                continue
            own = glob.glob(os.path.join(scratch, p, "data", "checkpoints", p, "stage-*", last_file))
            check(len(own) == 1, f"{p}: no checkpoint of iteration {iterations} on its volume\n{logs()}")
            copies += len(glob.glob(os.path.join(scratch, p, "data", "checkpoints", p, "replicas", "*", "stage-*", "*.ckpt")))
        check(copies > 0, f"no pod keeps a copy of another stage's checkpoint\n{logs()}")
        print(f"run: {len(procs)} pods of cpu-lab trained {iterations} iterations over mutual TLS; "
              f"{leaver} left on SIGTERM with exit code 0; checkpoints on every pod's volume, {copies} copies")
    finally:
        for proc, log in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
        if sys.exc_info()[0] is None and not os.environ.get("GWTF_KEEP_LOGS"):
            shutil.rmtree(scratch)
        else:
            print(f"logs kept in {scratch}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("check", choices=["render", "validate", "dockerfile", "run"])
    p.add_argument("--exe", default=os.path.join(SRC, "build", "deploy", "caf-gwtf"))
    p.add_argument("--build", default=os.path.join(SRC, "build"))
    args = p.parse_args()
    args.exe = os.path.abspath(args.exe)
    args.build = os.path.abspath(args.build)
    try:
        {"render": check_render, "validate": check_validate, "dockerfile": check_dockerfile, "run": check_run}[args.check](args)
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
