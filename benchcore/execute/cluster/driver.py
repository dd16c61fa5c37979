"""Sweeps across the nodes of a Ray cluster (`--ray ADDRESS`): shards, claims, retries, one report.

The driver (this module, in the suite's command line) plans the sweep as on one machine, then:

1. connects to the cluster (a bounded wait: an address that does not answer is one line) and
   ships its own benchcore and suite packages to the nodes (runtime_env py_modules), so every
   node times with the driver's benchmark code and needs only Python, Ray and the frameworks;
2. picks the eligible nodes and what a shard claims there, so that two measurements never share
   a machine's CPUs or a GPU: one GPU for GPU cases; for CPU cases a `bench_slot` custom resource
   where the cluster defines one, else all of a node's CPUs;
3. probes every eligible node (a tiny task: can it import the frameworks and the suite's
   executor, and what is its environment), refusing a node that lacks something, and nodes
   whose environments differ unless allowed;
4. cuts the slots still missing from the checkpoint into shards (round-robin over the cases
   sorted by key, as `--shard K/N`) and runs each as a Ray actor on a node (benchcore.execute.cluster.node:
   the ordinary sweep in a subprocess), polling it for results as they finish and appending
   each to the driver's JSON Lines checkpoint — so `--resume` after the driver dies submits
   only what is missing;
5. re-runs a shard whose actor or node was lost on another node with its finished cases kept;
   after `--max-retries` its other cases are recorded as failed with the reason;
6. combines every case's rounds and returns one environment (the nodes', with each node's under
   `cluster`) and the results, each naming its node: the suite's report is written as usual.

The library never prints: progress goes to the `on_event` callback the sweep passes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from benchcore.errors import UsageError
from benchcore.execute.checkpoint import Checkpoint, Slot
from benchcore.execute.cluster.node import NodeSetup, ProbeRequest, ShardTask
from benchcore.report.identity import environment_differences, flatten
from benchcore.report.model import CaseResult, Report

DEFAULT_MAX_RETRIES = 2
#: the bounded wait for an address to answer
CONNECT_TIMEOUT_S = 10.0
#: how long the probes may take together (each waits for its node's claim, like a shard)
PROBE_TIMEOUT_S = 600.0
#: how long the driver waits for any poll to answer before looking at the nodes again
WAIT_S = 5.0
#: the custom resource that marks benchmark slots on CPU nodes (`ray start --resources`)
SLOT_RESOURCE = "bench_slot"
INSTALL_HINT = "pip install '.[ray]' (Ray 2.60 with its client)"
#: how many differing keys a refusal names
SHOWN_DIFFERENCES = 3

EventSink = Callable[[str], None]


# --------------------------------------------------------------------------- flags and address


@dataclass(frozen=True)
class ClusterPlan:
    """--ray and its flags, as benchcore.cli.options.run_plan_from checked them."""

    address: str
    #: how many shards to cut; None: one per slot the eligible nodes offer
    shards: Optional[int] = None
    max_retries: int = DEFAULT_MAX_RETRIES
    allow_env_mismatch: bool = False


@dataclass(frozen=True)
class Address:
    text: str
    #: "local", "auto", "client" (ray://host:port) or "gcs" (host:port)
    kind: str
    host: Optional[str] = None
    port: Optional[int] = None


def parse_address(text: str) -> Address:
    if text in ("local", "auto"):
        return Address(text, text)
    kind, rest = ("client", text[len("ray://"):]) if text.startswith("ray://") else ("gcs", text)
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--ray {text!r} is not an address; use auto, local, ray://HOST:10001 or HOST:6379")
    return Address(text, kind, host.strip("[]"), int(port))


def import_ray():
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray, which is not installed; {INSTALL_HINT}") from None
    return ray


#: HTTP/2's client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS, the Ray client
#: server) answers with its own SETTINGS frame
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
HTTP2_SETTINGS = 4


def check_reachable(address: Address, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Something that speaks gRPC at the address within timeout_s, else one line: ray.init
    itself waits for ever on an address where nothing answers, or where another server does
    (the dashboard's port 8265 is an easy mistake)."""
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout_s) as connection:
            connection.settimeout(timeout_s)
            connection.sendall(HTTP2_PREFACE)
            head = _read(connection, 9)
    except OSError as exc:
        why = "no answer" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise UsageError(f"--ray {address.text}: no Ray cluster answers there within {timeout_s:g} s ({why}); "
                         "check the address, or start one (ray start --head)") from None
    if len(head) < 4 or head[3] != HTTP2_SETTINGS:
        raise UsageError(f"--ray {address.text}: something answers there, but not Ray (no gRPC); pass the head's "
                         "GCS port (HOST:6379) or its Ray client port (ray://HOST:10001), not e.g. the dashboard's")


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def resolved(address: Address) -> Address:
    """`auto` → the address of the cluster this machine belongs to (RAY_ADDRESS or the one
    `ray start` recorded), so that it gets the same bounded wait as a written address."""
    if address.kind != "auto":
        return address
    if os.environ.get("RAY_ADDRESS", "").startswith("ray://"):
        return parse_address(os.environ["RAY_ADDRESS"])
    from ray._private.services import canonicalize_bootstrap_address_or_die

    try:
        found = canonicalize_bootstrap_address_or_die("auto")
    except Exception:  # ConnectionError when nothing is recorded; any failure means the same
        raise UsageError("--ray auto: this machine belongs to no running Ray cluster (no RAY_ADDRESS, no "
                         "`ray start` here); pass the cluster's address, or --ray local to start one") from None
    host, _, port = found.rpartition(":")
    return Address(address.text, "gcs", host, int(port))


@contextmanager
def connected(ray, address: Address, packages: Sequence[str]) -> Iterator[None]:
    """ray.init for the sweep's duration, shipping `packages` (runtime_env py_modules)."""
    target = resolved(address)
    if target.kind in ("gcs", "client"):
        check_reachable(target)
    # only py_modules: a job's own runtime_env (`ray job submit --runtime-env-json`) is merged with
    # this one, and Ray refuses the merge when both name a field
    runtime_env = {"py_modules": [_package_folder(name) for name in packages]}
    options = dict(runtime_env=runtime_env, logging_level=logging.ERROR, log_to_driver=False)
    if target.kind == "local":
        options.update(address="local", include_dashboard=False)
    else:
        options.update(address=target.text if target.kind == "client" else f"{target.host}:{target.port}")
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        ray.init(**options)
    except Exception as exc:  # ConnectionError, RuntimeError, an auth error: each says why in its message
        raise UsageError(f"--ray {address.text}: could not connect ({_first_line(exc)}); check the address and "
                         "that this machine runs the cluster's Ray and Python versions") from None
    _restore(handlers)
    try:
        yield
    finally:
        ray.shutdown()


def _restore(handlers: dict) -> None:
    """Put back the signal handlers ray.init replaced with its own, which exits on SIGTERM: the
    command line turns SIGTERM into an interrupt that stops the shards and keeps the checkpoint."""
    for number, handler in handlers.items():
        try:
            signal.signal(number, handler)
        except (ValueError, TypeError):  # not the main thread, or a handler Python did not install
            pass


def _package_folder(name: str) -> str:
    import importlib

    return os.path.dirname(importlib.import_module(name).__file__)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def shipped_packages(executor: str) -> Tuple[str, ...]:
    """benchcore and the top-level package of the suite's executor."""
    return tuple(dict.fromkeys(("benchcore", executor.partition(":")[0].split(".")[0])))


# --------------------------------------------------------------------------- nodes and claims


@dataclass
class Node:
    """An eligible node: how many shards it runs at once, and what each one claims there."""

    node_id: str
    label: str
    capacity: int
    num_cpus: float
    num_gpus: float = 0
    resources: Dict[str, float] = field(default_factory=dict)
    alive: bool = True
    group: int = 0
    running: int = 0
    finished: int = 0

    def claim(self) -> dict:
        """Ray options that place a task or actor on this node with one shard's claim."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return dict(num_cpus=self.num_cpus, num_gpus=self.num_gpus, resources=self.resources or None,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False))


def eligible_nodes(nodes: List[dict], gpu: bool) -> Tuple[List[Node], str]:
    """The alive nodes a shard may run on, and the claim's name ("gpu", "bench_slot", "cpu").

    GPU cases: nodes with GPUs, one shard per GPU, each with its share of the node's CPUs.
    CPU cases: where any node defines a bench_slot resource, the nodes that do, one shard per
    slot (the operator decides what a slot is); else every node with CPUs, one shard at a time
    claiming all of them."""
    alive = [n for n in nodes if n.get("Alive")]
    labels = node_labels(alive)
    found: List[Node] = []
    if gpu:
        for n in alive:
            gpus, cpus = int(n["Resources"].get("GPU", 0)), n["Resources"].get("CPU", 0)
            if gpus >= 1:
                found.append(Node(n["NodeID"], labels[n["NodeID"]], gpus, float(cpus // gpus), 1))
        return found, "gpu"
    if any(n["Resources"].get(SLOT_RESOURCE, 0) >= 1 for n in alive):
        for n in alive:
            slots = int(n["Resources"].get(SLOT_RESOURCE, 0))
            if slots >= 1:
                found.append(Node(n["NodeID"], labels[n["NodeID"]], slots, 0, 0, {SLOT_RESOURCE: 1}))
        return found, SLOT_RESOURCE
    for n in alive:
        cpus = n["Resources"].get("CPU", 0)
        if cpus >= 1:
            found.append(Node(n["NodeID"], labels[n["NodeID"]], 1, float(cpus)))
    return found, "cpu"


def node_labels(nodes: List[dict]) -> Dict[str, str]:
    """node id → its address, with the id's first 8 digits where two nodes share an address
    (several nodes on one machine)."""
    addresses = [n["NodeManagerAddress"] for n in nodes]
    return {n["NodeID"]: n["NodeManagerAddress"] if addresses.count(n["NodeManagerAddress"]) == 1
            else f"{n['NodeManagerAddress']}/{n['NodeID'][:8]}" for n in nodes}


def probe_nodes(ray, nodes: List[Node], request: ProbeRequest) -> Dict[str, dict]:
    """label → environment of every node; one line naming the first node that lacks something."""
    from benchcore.execute.cluster.node import probe

    remote = ray.remote(probe)
    refs = {node.label: remote.options(**node.claim(), max_retries=0).remote(request.to_dict()) for node in nodes}
    _, late = ray.wait(list(refs.values()), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    if late:
        silent = ", ".join(label for label, ref in refs.items() if ref in late)
        raise UsageError(f"--ray: node(s) {silent} did not answer the probe within {PROBE_TIMEOUT_S:g} s (their "
                         "CPUs or GPUs held by other work?); free them, or leave them out of the cluster")
    environments = {}
    for label, ref in refs.items():
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayError as exc:
            raise UsageError(f"--ray: node {label} failed its probe ({_first_line(exc)}); rerun, or check the "
                             "node") from None
        if "missing" in answer:
            raise UsageError(f"--ray: node {label} cannot run {request.suite}: {answer['missing']} is missing; install "
                             f"{', '.join(request.frameworks) or 'the dependencies'} there (or ship it with a "
                             "runtime_env, see the README)")
        environments[label] = answer["environment"]
    return environments


@dataclass
class EnvironmentGroup:
    """Nodes whose environments do not differ in any timing-relevant key."""

    number: int
    environment: dict
    nodes: List[str]
    #: the keys in which the groups differ, with this group's values
    differs: Dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"group": self.number, "nodes": self.nodes, "differs": self.differs}


def environment_groups(suite: str, environments: Dict[str, dict]) -> List[EnvironmentGroup]:
    """The nodes grouped by environment (benchcore.report.identity.environment_differences)."""
    groups: List[EnvironmentGroup] = []
    for label, environment in environments.items():
        home = next((g for g in groups if not environment_differences(Report(suite, g.environment),
                                                                      Report(suite, environment))), None)
        if home is None:
            groups.append(EnvironmentGroup(len(groups) + 1, environment, [label]))
        else:
            home.nodes.append(label)
    keys = sorted({d["key"] for a in groups for b in groups if a is not b
                   for d in environment_differences(Report(suite, a.environment), Report(suite, b.environment))})
    for group in groups:
        flat = flatten(group.environment)
        group.differs = {key: flat.get(key) for key in keys}
    return groups


def mismatch_message(groups: List[EnvironmentGroup]) -> str:
    first, other = groups[0], groups[1]
    keys = list(first.differs)
    shown = "; ".join(f"{key}: {first.differs[key]!r} on {first.nodes[0]}, {other.differs[key]!r} on {other.nodes[0]}"
                      for key in keys[:SHOWN_DIFFERENCES])
    more = f" and {len(keys) - SHOWN_DIFFERENCES} more" if len(keys) > SHOWN_DIFFERENCES else ""
    return (f"--ray: the nodes' environments differ ({shown}{more}); make them alike, or pass --allow-env-mismatch "
            "(the report then records which cases ran where, and compare judges each environment apart)")


# --------------------------------------------------------------------------- shards


@dataclass
class Shard:
    """A part of the sweep and what became of it: the slots not yet finished, its attempts."""

    index: int
    count: int
    slots: List[Slot]
    attempts: int = 0
    lost_on: List[str] = field(default_factory=list)
    #: the environment group its first attempt ran in: a retry stays there when it can, so a
    #: case's rounds come from one environment
    group: Optional[int] = None

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


def cut_shards(missing: List[Slot], count: int) -> List[Shard]:
    """The missing slots in `count` shards (fewer when fewer cases miss slots): round-robin over
    the cases sorted by key (benchcore.execute.rounds.shard_specs), each case's slots in plan order."""
    from benchcore.execute.rounds import shard_specs

    specs = list({slot.spec.key: slot.spec for slot in missing}.values())
    count = min(count, len(specs))
    shards = []
    for index in range(1, count + 1):
        keys = {spec.key for spec in shard_specs(specs, (index, count))}
        shards.append(Shard(index, count, [slot for slot in missing if slot.spec.key in keys]))
    return shards


@dataclass
class Attempt:
    shard: Shard
    node: Node
    actor: object
    poll: object = None
    received: int = 0


class Dispatch:
    """Runs shards on nodes as capacity frees up; results appended to the checkpoint as they come."""

    def __init__(self, ray, nodes: List[Node], shards: List[Shard], template: ShardTask, store: Optional[Checkpoint],
                 max_retries: int, on_event: EventSink, on_result: Optional[Callable[[CaseResult], None]] = None):
        from benchcore.execute.cluster.node import ShardRunner

        self.ray, self.nodes, self.template, self.store = ray, nodes, template, store
        self.pending: List[Shard] = list(shards)
        self.running: List[Attempt] = []
        self.max_retries, self.on_event, self.on_result = max_retries, on_event, on_result
        self.runner = ray.remote(ShardRunner)
        self.results: Dict[tuple, CaseResult] = {}
        self.lost: List[dict] = []
        self.systems: List[dict] = []

    def run(self) -> Dict[tuple, CaseResult]:
        try:
            while self.pending or self.running:
                self._start_pending()
                self._wait()
        except BaseException:  # Ctrl-C or an error: stop every shard now (their subprocesses die with them)
            for attempt in list(self.running):
                self._kill(attempt)
            raise
        return self.results

    def _start_pending(self) -> None:
        for shard in list(self.pending):
            node = self._node_for(shard)
            if node is None:
                if not any(n.alive for n in self.nodes):
                    self.pending.remove(shard)
                    self._give_up(shard, "no eligible node is left")
                continue
            self.pending.remove(shard)
            task = dataclasses.replace(self.template, label=shard.label, slots=shard.slots)
            actor = self.runner.options(**node.claim(), max_restarts=0).remote(task.to_dict())
            shard.attempts += 1
            shard.group = node.group if shard.group is None else shard.group
            node.running += 1
            self.running.append(Attempt(shard, node, actor))
            again = f", attempt {shard.attempts}" if shard.attempts > 1 else ""
            self._event(f"shard {shard.label} ({len(shard.slots)} slots{again}) started on {node.label}")

    def _node_for(self, shard: Shard) -> Optional[Node]:
        """A node with a free slot for the shard: never one that lost it while another alive node
        could take it (it waits for that one instead); in the shard's environment group where it
        can; the least busy."""
        alive = [n for n in self.nodes if n.alive]
        fresh = [n for n in alive if n.label not in shard.lost_on] or alive
        free = [n for n in fresh if n.running < n.capacity]
        if not free:
            return None
        return min(free, key=lambda n: (shard.group is not None and n.group != shard.group, n.running))

    def _wait(self) -> None:
        for attempt in self.running:
            if attempt.poll is None:
                attempt.poll = attempt.actor.poll.remote()
        polls = {attempt.poll: attempt for attempt in self.running}
        ready, _ = self.ray.wait(list(polls), num_returns=1, timeout=WAIT_S)
        for ref in ready:
            attempt = polls[ref]
            attempt.poll = None
            try:
                answer = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:  # the actor, its worker or its node is gone
                self._lost(attempt, _first_line(exc))
                continue
            self._received(attempt, answer["records"])
            if answer["done"]:
                self._done(attempt, answer)

    def _received(self, attempt: Attempt, records: List[dict]) -> None:
        for record in records:
            found = Checkpoint.read_record(record)
            if found is None:
                continue
            slot, result = found
            result.node = attempt.node.label
            if self.store is not None:
                self.store.append(result, slot)
            self.results[slot.key] = result
            attempt.received += 1
            if self.on_result:
                self.on_result(result)

    def _done(self, attempt: Attempt, answer: dict) -> None:
        left = [slot for slot in attempt.shard.slots if slot.key not in self.results]
        if answer.get("returncode") != 0 or left:
            self._lost(attempt, answer.get("error") or f"its shard process ended with {len(left)} slots not run")
            return
        self._kill(attempt)
        attempt.node.finished += 1
        self.systems.append({"shard": attempt.shard.label, "node": attempt.node.label, **answer.get("system", {})})
        self._event(f"shard {attempt.shard.label} finished on {attempt.node.label}")

    def _lost(self, attempt: Attempt, reason: str) -> None:
        self._kill(attempt)
        shard, node = attempt.shard, attempt.node
        shard.slots = [slot for slot in shard.slots if slot.key not in self.results]
        shard.lost_on.append(node.label)
        self.lost.append({"shard": shard.label, "node": node.label, "attempt": shard.attempts, "reason": reason,
                          "slots_kept": attempt.received, "slots_left": len(shard.slots)})
        self._refresh_alive()
        if shard.attempts > self.max_retries:
            self._give_up(shard, f"lost on {node.label} ({reason})")
            return
        self.pending.append(shard)
        self._event(f"shard {shard.label} lost on {node.label} ({reason}); {attempt.received} finished slots kept, "
                    f"{len(shard.slots)} to run again")

    def _give_up(self, shard: Shard, why: str) -> None:
        """The shard's unfinished slots as failed results (not checkpointed: a --resume runs them)."""
        error = (f"not run: shard {shard.label} was given up after {shard.attempts} attempt(s) "
                 f"(--max-retries {self.max_retries}): {why}")
        for slot in shard.slots:
            self.results[slot.key] = CaseResult(slot.spec, "failed", error=error)
        self._event(f"shard {shard.label}: {len(shard.slots)} slots recorded as failed: {why}")

    def _kill(self, attempt: Attempt) -> None:
        if attempt in self.running:
            self.running.remove(attempt)
            attempt.node.running -= 1
        try:
            self.ray.kill(attempt.actor, no_restart=True)
        except Exception:  # already dead: nothing to stop
            pass

    def _refresh_alive(self) -> None:
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        for node in self.nodes:
            node.alive = node.node_id in alive

    def _event(self, text: str) -> None:
        status = ", ".join(f"{n.label} {n.running} running {n.finished} finished" + ("" if n.alive else " (dead)")
                           for n in self.nodes)
        self.on_event(f"{text} | {status}")


# --------------------------------------------------------------------------- the sweep


def sweep_on_cluster(job, plan, prog: str, argv: Sequence[str], extra: dict, on_event: EventSink,
            on_result: Optional[Callable[[CaseResult], None]] = None) -> Dict[str, Tuple[dict, List[CaseResult]]]:
    """benchcore.execute.sweep.measure on a Ray cluster: side "" → (environment, results in the specs' order).

    No machine reference is timed (benchcore.measure.reference): the cases ran on several machines, and
    one reference cannot stand for all of them; compare then divides no drift out."""
    from benchcore.execute.environment import THREAD_VARIABLES, git_commit
    from benchcore.execute.rounds import combine_results

    ray = import_ray()
    cluster = plan.cluster
    address = parse_address(cluster.address)
    packages = shipped_packages(job.suite.executor)
    setup = NodeSetup({name: os.environ.get(name) for name in THREAD_VARIABLES}, packages)
    with connected(ray, address, packages):
        # the nodes run the driver's code (shipped): its commit, not that of the node's copy
        counting = counting_of(job)
        request = ProbeRequest(job.suite.name, job.suite.executor, tuple(job.suite.frameworks), [prog, *argv],
                               {**extra, "git_commit": git_commit()}, setup, tuple(job.suite.collectors), counting)
        nodes, claim, groups = _probed_nodes(ray, job, cluster, request)
        slots = job.rounds.slots(job.specs, job.sides)
        store, done = _open_checkpoint(job, plan.resume)
        missing = [slot for slot in slots if slot.key not in done]
        shards = cut_shards(missing, cluster.shards or sum(node.capacity for node in nodes))
        on_event(f"{address.text}: {len(nodes)} eligible node(s) probed; {len(missing)} of {len(slots)} slots to run "
                 f"in {len(shards)} shard(s), each claiming {_CLAIMS[claim]}"
                 + (f"; {len(slots) - len(missing)} taken from the checkpoint" if done else ""))
        template = ShardTask("", job.suite.executor, job.options(), [], plan.timeout_s and plan.timeout_s * job.timeout_scale,
                             plan.memory_limit_bytes and int(plan.memory_limit_bytes * job.memory_scale), setup, counting)
        dispatch = Dispatch(ray, nodes, shards, template, store, cluster.max_retries, on_event, on_result)
        results = {**done, **dispatch.run()}
    record = _record(cluster, claim, nodes, groups, len(shards), dispatch, results, len(done))
    combined = combine_results([(slot, results[slot.key]) for slot in slots], job.specs, job.suite.combine_rounds)
    return {"": (dict(groups[0].environment, cluster=record), combined)}


def counting_of(job) -> Optional[str]:
    """The --cache-sim of an instruction sweep (its record's geometry, spelled as the flag), for
    the nodes to build their own valgrind launcher: the driver's names its own paths. None: timing."""
    record = job.worker_options.get("valgrind")
    if not record:
        return None
    caches = record.get("cache_sim")
    return ":".join(f"{name}={caches[name]}" for name in ("I1", "D1", "LL")) if caches else "off"


def _probed_nodes(ray, job, cluster: ClusterPlan, request: ProbeRequest) -> Tuple[List[Node], str, List[EnvironmentGroup]]:
    """The eligible nodes (each with its environment group), the claim, and the groups; one line
    and nothing run when there is no node, a node lacks something, or environments differ."""
    nodes, claim = eligible_nodes(ray.nodes(), any(job.suite.uses_gpu(spec) for spec in job.specs))
    if not nodes:
        raise UsageError(_no_node_message(claim))
    groups = environment_groups(job.suite.name, probe_nodes(ray, nodes, request))
    if len(groups) > 1 and not cluster.allow_env_mismatch:
        raise UsageError(mismatch_message(groups))
    for group in groups:
        for node in nodes:
            node.group = group.number if node.label in group.nodes else node.group
    return nodes, claim, groups


_CLAIMS = {"gpu": "one GPU", SLOT_RESOURCE: f"one {SLOT_RESOURCE}", "cpu": "all of a node's CPUs"}


def _open_checkpoint(job, resume: bool) -> Tuple[Optional[Checkpoint], Dict[tuple, CaseResult]]:
    """The driver's checkpoint, as run_slots keeps it on one machine (sweep.measure checked it)."""
    if job.checkpoint is None:
        return None, {}
    store = Checkpoint(job.checkpoint)
    if store.path.exists() and resume:
        return store, store.load()
    store.start(job.options())
    return store, {}


def _no_node_message(claim: str) -> str:
    if claim == "gpu":
        return "--ray: no node of the cluster has a GPU, and these cases run on one; add GPU nodes, or run on cpu"
    return "--ray: no node of the cluster offers CPUs to run on; add worker nodes (ray start --address …)"


def _record(cluster: ClusterPlan, claim: str, nodes: List[Node], groups: List[EnvironmentGroup], shards: int, dispatch: Dispatch,
            results: Dict[tuple, CaseResult], resumed: int) -> dict:
    """environment.cluster: where the sweep ran (docs/REPORT_FORMAT.md)."""
    environments = {label: group.environment for group in groups for label in group.nodes}
    counts: Dict[str, int] = {}
    for result in results.values():
        if result.node:
            counts[result.node] = counts.get(result.node, 0) + 1
    return {
        "address": cluster.address,
        "claim": claim,
        "shards": shards,
        "max_retries": cluster.max_retries,
        "env_mismatch_allowed": cluster.allow_env_mismatch,
        "resumed_slots": resumed,
        "environment_groups": [group.to_dict() for group in groups],
        "nodes": [{"node": node.label, "node_id": node.node_id, "group": node.group, "slots": counts.get(node.label, 0),
                   "shards_finished": node.finished, "environment": environments[node.label]} for node in nodes],
        "lost": dispatch.lost,
        "systems": dispatch.systems,
    }
