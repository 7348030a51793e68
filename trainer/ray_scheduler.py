"""`scheduler: ray`: rollout workers and sandbox workers as Ray actors across a cluster.

    engine = RayRolloutEngine.open(cfg, model_path, **engine_options(cfg, model_path))
    pool = RaySandboxPool.open(cfg, spec)          # sandboxes.pool.Scheduler(pool) runs jobs on it
    engine.placement(), pool.state()["workers"]     # which node each actor landed on

A *rollout worker* is a Ray actor that hosts a real `RolloutEngine` (`open_engine`: vLLM in
process there, or the hf fallback). `RayRolloutEngine` is the trainer's side of it: the same
`generate` / `update_weights` / `score` / `close` verbs, forwarded. With one worker the
engine is seeded with the run's seed and gets exactly the requests a local engine would, so
a run gives the same completions, rewards and metrics as ``scheduler: local``. With W > 1
workers the B prompts of a call are split into W contiguous slices in prompt order
(`split`; a single-turn rollout's prompts are its groups), worker r is seeded ``seed + r``,
and the slices are generated at the same time; results are deterministic for a fixed seed and W, but not the
local run's. New weights are put in the object store once per sync (`ray.put`) and every
worker loads them from there.

A *sandbox worker* is a Ray actor that owns a slice of the run's warm pool (a real
`sandboxes.pool.SandboxPool` of the configured backend on its node). `RaySandboxPool` has
the pool's interface (`acquire` / `release` / `replace` / `lease` / `state` / `size`) and
hands out `RemoteSandbox` proxies whose public `Sandbox` methods run in the worker that owns
the sandbox, so the unchanged `sandboxes.pool.Scheduler` (verification jobs) and multi-turn
episodes (`trainer.episodes`) spread over the nodes. Sandboxes are reset between uses, so
rewards are the same as with a local pool.

Placement: a node started with ``--resources='{"rollout": N}'`` hosts up to N rollout
workers and one with ``--resources='{"sandbox": N}'`` up to N sandbox workers; each worker
asks for one unit. On a cluster that advertises neither, workers are spread over the nodes
(``SPREAD``), and a rollout worker asks for one GPU where the cluster has GPUs. Actors ask
for no CPUs (num_cpus=0): a rollout worker uses every core of its node, as a local engine
does. The learner is not a Ray actor: it runs where `rlwb run` runs (one process here; the
DeepSpeed launcher across GPUs and nodes).

Every node needs the workbench installed at the same version (``pip install -e .``) and
the model at the same path (a shared filesystem, or ``rlwb models fetch`` on each node);
sandbox nodes need the sandbox backend (Docker and its image, or bubblewrap).

Not covered: restarting a worker that died (its calls fail: an `EngineError`, or a harness
fault for sandboxes), tensor parallelism inside one rollout worker (the engine does not
expose ``tensor_parallel_size`` yet), and weight broadcast over NCCL (weights go through
the object store, so they cross the network once per node and sync).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
import sys
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path

import torch

from trainer.config import RAY_ADDRESS_RE
from core.errors import (
    ConfigError,
    EngineError,
    SandboxError,
    WorkbenchError,
)
from trainer.models import context_window
from sandboxes.pool import SandboxPool
from trainer.rollout import open_engine
from trainer.rollout.base import GroupCallback, RolloutEngine, deliver
from trainer.types import Completion

ROLLOUT_RESOURCE = "rollout"
SANDBOX_RESOURCE = "sandbox"
START_TIMEOUT_S = 900.0  # an actor that is placed but not started by then is reported (model loads take minutes)
PROBE_TIMEOUT_S = 5.0
_SANDBOX_METHODS = ("exec", "run_fresh", "write_file", "read_file", "list_dir", "snapshot", "rollback", "reset",
                    "episode_time_left")

# ---- the connection --------------------------------------------------------------------

_conn_lock = threading.Lock()
_users = 0
_owned = False  # ray.init was called here (not by the caller), so the last user shuts it down


def _ray():
    """The ray module, or ConfigError naming the fix."""
    try:
        import ray  # optional (scheduler: ray only), and slow to import
    except ImportError as e:
        raise ConfigError(f"scheduler: ray needs the ray package ({e}); install it with `pip install ray` (the "
                          "same version on every node of the cluster) or set scheduler: local") from None
    return ray


def check_address(address: str | None) -> str | None:
    """`address` if it has a form Ray accepts: None, "auto", "HOST:PORT" or "ray://HOST:PORT".

    Raises:
        ConfigError: naming ray_address and the accepted forms.
    """
    if address is None or RAY_ADDRESS_RE.match(address):
        return address
    raise ConfigError(f"ray_address {address!r} is not a Ray address; use 'auto' (a cluster started on this machine "
                      "with `ray start`), 'HOST:PORT' of the head node (e.g. 10.0.0.5:6379), 'ray://HOST:10001' "
                      "(Ray Client), or leave it unset for a private Ray instance on this machine")


def _probe(address: str) -> None:
    """ConfigError unless something accepts TCP connections at a HOST:PORT address (Ray
    itself retries an unreachable head for a long time)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as e:
        raise ConfigError(f"ray_address {address!r}: no Ray head node answers at {host}:{port} ({e}); start one there "
                          f"with `ray start --head --port={port}`, or fix ray_address") from None


def connect(address: str | None) -> None:
    """Join the Ray cluster at `address` (None: start a private instance on this machine),
    or share the connection this process already has. Pair every call with `disconnect`.

    Raises:
        ConfigError: ray is not installed, or the address is malformed or unreachable.
    """
    global _users, _owned
    ray = _ray()
    check_address(address)
    with _conn_lock:
        if not ray.is_initialized():
            if address not in (None, "auto"):
                _probe(address)
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            except Exception as e:  # noqa: BLE001 - ConnectionError, RuntimeError, ...: one fix
                raise ConfigError(f"ray_address {address!r}: could not join the Ray cluster ({e}); start it with "
                                  "`ray start --head` (and `ray start --address=HEAD:PORT` on the other nodes), or "
                                  "fix ray_address") from None
            _owned = True
        _users += 1


def disconnect() -> None:
    """Drop one `connect`; the last one shuts Ray down in this process if `connect` started
    it (the cluster itself keeps running; a private instance stops)."""
    global _users, _owned
    ray = _ray()
    with _conn_lock:
        _users = max(_users - 1, 0)
        if _users == 0 and _owned:
            ray.shutdown()
            _owned = False


def _get(refs, what: str, error: type[WorkbenchError], timeout: float | None = None):
    """`ray.get`, with a worker's own exception re-raised as itself and a dead or unplaceable
    worker as `error` naming `what`."""
    ray = _ray()
    try:
        return ray.get(refs, timeout=timeout)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, Exception):
            raise e.cause from e
        raise error(f"{what} failed: {e}") from e
    except ray.exceptions.GetTimeoutError:
        raise error(f"{what} did not start within {timeout:g} s; see `ray status` for pending actors") from None
    except ray.exceptions.RayActorError as e:
        raise error(f"{what} is gone ({str(e).splitlines()[0]}); see the node's logs under /tmp/ray") from e


def _where() -> dict:
    """Where the calling actor runs: node id, IP, hostname, pid."""
    import ray  # optional (scheduler: ray only), and slow to import

    return {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(), "pid": os.getpid()}


def _options(resource: str, count: int, gpus: int) -> list[dict]:
    """Actor options for `count` workers of a role: one unit of `resource` each where the
    cluster advertises it, else SPREAD over the nodes; `gpus` GPUs each where the cluster
    has that many (a vLLM worker with tensor_parallel_size N asks for N), none for 0.

    Raises:
        ConfigError: the cluster advertises fewer units of `resource` than `count`.
    """
    ray = _ray()
    have = ray.cluster_resources()
    opts: dict = {"num_cpus": 0}
    if gpus and have.get("GPU", 0) >= gpus:
        opts["num_gpus"] = gpus
    if resource in have:
        if have[resource] < count:
            raise ConfigError(f"{count} {resource} workers asked for, but the cluster's nodes advertise only "
                              f"{have[resource]:g} '{resource}' units; lower {resource}_workers or start more "
                              f"nodes with `ray start --resources='{{\"{resource}\": 1}}'`")
        opts["resources"] = {resource: 1}
    else:
        opts["scheduling_strategy"] = "SPREAD"
    return [dict(opts) for _ in range(count)]


def _announce(role: str, rank: int, where: dict, detail: str) -> None:
    print(f"scheduler ray: {role} worker {rank} on node {where['node_id'][:12]} ({where['hostname']}, {where['ip']}, "
          f"pid {where['pid']}){detail}", file=sys.stderr, flush=True)


def split(n_items: int, n_workers: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) slices of `n_items` over `n_workers`, sizes differing by at
    most one, earlier workers taking the larger ones (some may be empty)."""
    base, extra = divmod(n_items, n_workers)
    out, start = [], 0
    for r in range(n_workers):
        stop = start + base + (r < extra)
        out.append((start, stop))
        start = stop
    return out


# ---- rollout workers -------------------------------------------------------------------


class RolloutWorker:
    """The actor side of a rollout worker: one real `RolloutEngine` in this process.

    Started empty; `start` opens the engine (so its errors come back as themselves)."""

    def __init__(self) -> None:
        self.engine: RolloutEngine | None = None

    def start(self, kind: str, model_path: str, seed: int, dtype: str, kw: dict) -> dict:
        """Open the engine with every core of the node (Ray sets OMP_NUM_THREADS=1 in
        actors; a local engine uses them all). Returns `_where()`.

        Raises:
            EngineError: the model is missing on this node or the engine failed to start.
        """
        if not Path(model_path).is_dir():
            raise EngineError(f"model {model_path} is not on node {socket.gethostname()}; put it at the same path "
                              "on every rollout node (a shared filesystem, or `rlwb models fetch` there)")
        cores = len(os.sched_getaffinity(0))
        os.environ["OMP_NUM_THREADS"] = str(cores)
        torch.set_num_threads(cores)
        self.engine = open_engine(kind, model_path, seed=seed, dtype=dtype, **kw)
        return _where()

    def generate(self, prompts, n, max_new_tokens, temperature, top_p, seeds=None) -> list[list[Completion]]:
        return self.engine.generate(prompts, n, max_new_tokens, temperature, top_p, seeds=seeds)

    def update_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        self.engine.update_weights(weights)

    def score(self, prompt, completion) -> list[float]:
        return self.engine.score(prompt, completion)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


class RayRolloutEngine(RolloutEngine):
    """A `RolloutEngine` whose work runs in W rollout workers (Ray actors) on the cluster.

    Use `RayRolloutEngine.open`. Args as `open_engine`'s, plus the actor handles and where
    they run.
    """

    def __init__(self, actors: list, places: list[dict], kind: str) -> None:
        self._actors, self._places, self.name = actors, places, f"ray:{kind}"

    @classmethod
    def open(cls, kind: str, model_path, seed: int = 0, dtype: str = "float32", workers: int = 1,
             address: str | None = None, **kw) -> RayRolloutEngine:
        """Join the cluster and start `workers` rollout workers, worker r seeded ``seed + r``.

        Args:
            kind: "vllm" or "hf", the engine each worker hosts.
            model_path: the model's directory, the same path on every rollout node.
            address: the Ray cluster (`connect`).
            **kw: `open_engine` options (e.g. ``gpu_memory_utilization``, ``max_model_len``).

        Raises:
            ConfigError: Ray missing, address unreachable, too few "rollout" units.
            EngineError: a worker failed to start (its message), or was never placed.
        """
        ray = _ray()
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"rollout_workers must be an int >= 1, got {workers!r}")
        connect(address)
        actors: list = []
        try:
            remote = ray.remote(RolloutWorker)
            actors = [remote.options(**o).remote() for o in _options(ROLLOUT_RESOURCE, workers, gpus=int(kw.get("tensor_parallel_size") or 1))]
            places = _get([a.start.remote(kind, str(model_path), seed + r, dtype, dict(kw))
                           for r, a in enumerate(actors)], "a rollout worker", EngineError, START_TIMEOUT_S)
        except BaseException:
            for a in actors:
                ray.kill(a)
            disconnect()
            raise
        for r, where in enumerate(places):
            _announce("rollout", r, where, f": {kind} engine, seed {seed + r}")
        engine = cls(actors, places, kind)
        if kw.get("max_model_len") is not None:  # vLLM workers; hf workers hold the model's positions
            engine.window = kw["max_model_len"]
        else:
            engine.window = context_window(model_path, default=0) or None
        return engine

    def placement(self) -> list[dict]:
        """Where each rollout worker runs: node_id, ip, hostname, pid (rank order)."""
        return [dict(p) for p in self._places]

    def generate(self, prompts: list[list[int]], n: int, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, on_group: GroupCallback | None = None,
                 seeds: list[int] | None = None) -> list[list[Completion]]:
        """`RolloutEngine.generate` over the workers: contiguous prompt slices (`split`),
        generated at the same time, returned in prompt order (`on_group` gets every group
        once all workers are done). After a `reseed` each prompt carries the seed one engine
        would give it, so vLLM workers sample what a single local engine samples.

        Raises:
            EngineError: a worker failed or is gone.
        """
        calls = [(a, lo, hi) for a, (lo, hi) in zip(self._actors, split(len(prompts), len(self._actors))) if hi > lo]
        if seeds is None:  # after `reseed`: the seeds one engine would give these prompts, a slice to each worker
            seeds = self.prompt_seeds(temperature, len(prompts))
        parts = _get([a.generate.remote([list(p) for p in prompts[lo:hi]], n, max_new_tokens, temperature, top_p,
                                        None if seeds is None else seeds[lo:hi])
                      for a, lo, hi in calls], "a rollout worker", EngineError)
        return deliver([group for part in parts for group in part], on_group)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Put the weights in the object store once (CPU tensors) and load them into every
        worker in place.

        Raises:
            EngineError: a worker rejected them or is gone.
        """
        ray = _ray()
        ref = ray.put([(k, v.detach().to("cpu")) for k, v in named_tensors])
        try:
            _get([a.update_weights.remote(ref) for a in self._actors], "a rollout worker", EngineError)
        finally:
            del ref

    def score(self, prompt: list[int], completion: list[int]) -> list[float]:
        """`RolloutEngine.score` on worker 0 (every worker holds the same weights)."""
        return _get(self._actors[0].score.remote(list(prompt), list(completion)), "rollout worker 0", EngineError)

    def close(self) -> None:
        """Close every worker's engine, end the actors, drop the Ray connection. Safe twice."""
        if not self._actors:
            return
        ray = _ray()
        actors, self._actors = self._actors, []
        with contextlib.suppress(Exception):  # a worker that is gone has nothing left to close
            _get([a.close.remote() for a in actors], "a rollout worker", EngineError)
        for a in actors:
            ray.kill(a)
        disconnect()


# ---- sandbox workers -------------------------------------------------------------------


class SandboxWorker:
    """The actor side of a sandbox worker: a `SandboxPool` slice on this node and the
    sandboxes it has leased out, by key. Threaded (calls run at the same time)."""

    def __init__(self) -> None:
        self.pool = None
        self._leased: dict[str, object] = {}
        self._lock = threading.Lock()

    def start(self, backend: str, spec, size: int) -> dict:
        """Start the warm sandboxes. Returns `_where()` plus the backend's isolation.

        Raises:
            SandboxUnavailable, SandboxError: the backend can't run on this node.
        """
        self.pool = SandboxPool(backend, spec, size=size).start()
        return {**_where(), "isolation": self.pool.isolation}

    def acquire(self, timeout_s: float | None, clean: bool) -> tuple[str, str]:
        """Lease a sandbox; returns (key, sandbox id)."""
        sb = self.pool.acquire(timeout_s, clean)
        key = uuid.uuid4().hex
        with self._lock:
            self._leased[key] = sb
        return key, sb.id or ""

    def _take(self, key: str):
        with self._lock:
            return self._leased.pop(key)

    def release(self, key: str, reset: bool) -> None:
        self.pool.release(self._take(key), reset)

    def replace(self, key: str) -> None:
        self.pool.replace(self._take(key))

    def call(self, key: str, method: str, args: tuple, kwargs: dict):
        """Run a public `Sandbox` method on a leased sandbox."""
        if method not in _SANDBOX_METHODS:
            raise ConfigError(f"{method!r} is not a remote sandbox method; use one of {_SANDBOX_METHODS}")
        with self._lock:
            sb = self._leased[key]
        return getattr(sb, method)(*args, **kwargs)

    def state(self) -> dict:
        return self.pool.state()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


class RemoteSandbox:
    """A sandbox leased from a sandbox worker: the public `Sandbox` API (exec, run_fresh,
    write_file, read_file, list_dir, snapshot, rollback, reset, episode_time_left), each
    call one round trip to the worker that owns it. Exceptions come back as themselves;
    a worker that is gone raises SandboxError (a harness fault)."""

    def __init__(self, pool: RaySandboxPool, rank: int, key: str, sandbox_id: str) -> None:
        self._pool, self.rank, self.key, self.id = pool, rank, key, sandbox_id
        self.backend, self.spec, self.isolation = pool.backend, pool.spec, pool.isolation

    def _call(self, method: str, *args, **kwargs):
        return self._pool._call(self.rank, self._pool._actors[self.rank].call.remote(self.key, method, args, kwargs))

    def exec(self, cmd, timeout_s=None, stdin=None, budget=True):
        return self._call("exec", cmd, timeout_s=timeout_s, stdin=stdin, budget=budget)

    def run_fresh(self, cmd, files=None, timeout_s=None, stdin=None):
        return self._call("run_fresh", cmd, files, timeout_s=timeout_s, stdin=stdin)

    def write_file(self, path, data, mode=0o644):
        return self._call("write_file", path, data, mode)

    def read_file(self, path):
        return self._call("read_file", path)

    def list_dir(self, path="."):
        return self._call("list_dir", path)

    def snapshot(self):
        return self._call("snapshot")

    def rollback(self, snapshot_id):
        return self._call("rollback", snapshot_id)

    def reset(self):
        return self._call("reset")

    def episode_time_left(self):
        return self._call("episode_time_left")


class RaySandboxPool:
    """A warm sandbox pool spread over sandbox workers, with `SandboxPool`'s interface.

    `size` sandboxes split over the workers (`split`); `acquire` takes a free slot, the
    slots of different workers interleaved so concurrent jobs spread over the nodes. Use
    `RaySandboxPool.open`.
    """

    def __init__(self, actors: list, places: list[dict], slices: list[int], backend: str, spec) -> None:
        self._actors, self._places, self._slices = actors, places, slices
        self.backend, self.spec, self.size = backend, spec, sum(slices)
        self.isolation = places[0]["isolation"]
        self._free: queue.Queue[int] = queue.Queue()
        for i in range(max(slices)):
            for rank, n in enumerate(slices):
                if i < n:
                    self._free.put(rank)
        self._closed = False

    @classmethod
    def open(cls, backend: str, spec, size: int, workers: int = 1, address: str | None = None) -> RaySandboxPool:
        """Join the cluster and start `workers` sandbox workers holding `size` sandboxes.

        Raises:
            ConfigError: Ray missing, address unreachable, too few "sandbox" units, workers > size.
            SandboxUnavailable, SandboxError: a worker's node can't run the backend.
        """
        ray = _ray()
        if not isinstance(workers, int) or not 1 <= workers <= size:
            raise ConfigError(f"sandbox_workers must be an int in [1, sandbox_pool_size={size}], got {workers!r}")
        connect(address)
        slices = [hi - lo for lo, hi in split(size, workers)]
        actors: list = []
        try:
            remote = ray.remote(SandboxWorker)
            actors = [remote.options(max_concurrency=2 * n + 4, **o).remote()
                      for n, o in zip(slices, _options(SANDBOX_RESOURCE, workers, gpus=0))]
            places = _get([a.start.remote(backend, spec, n) for a, n in zip(actors, slices)], "a sandbox worker",
                          SandboxError, START_TIMEOUT_S)
        except BaseException:
            for a in actors:
                with contextlib.suppress(Exception):
                    ray.get(a.close.remote(), timeout=60)
                ray.kill(a)
            disconnect()
            raise
        for r, (where, n) in enumerate(zip(places, slices)):
            _announce("sandbox", r, where, f": {n} {backend} sandboxes")
        return cls(actors, places, slices, backend, spec)

    def _call(self, rank: int, ref, timeout: float | None = None):
        where = self._places[rank]
        return _get(ref, f"sandbox worker {rank} on {where['hostname']} ({where['ip']})", SandboxError, timeout)

    def acquire(self, timeout_s: float | None = None, clean: bool = True) -> RemoteSandbox:
        """Take a free sandbox on some worker, waiting up to `timeout_s` (None: forever).

        Raises:
            SandboxError: the pool is closed, none became free in time, or the worker failed.
        """
        if self._closed:
            raise SandboxError("sandbox pool is closed")
        try:
            rank = self._free.get(timeout=timeout_s)
        except queue.Empty:
            raise SandboxError(f"no sandbox free within {timeout_s} s (pool size {self.size})") from None
        try:
            key, sid = self._call(rank, self._actors[rank].acquire.remote(timeout_s, clean))
        except BaseException:
            self._free.put(rank)
            raise
        return RemoteSandbox(self, rank, key, sid)

    def release(self, sb: RemoteSandbox, reset: bool = True) -> None:
        """Give a sandbox back to its worker (reset now, or on the next clean acquire)."""
        try:
            self._call(sb.rank, self._actors[sb.rank].release.remote(sb.key, reset))
        finally:
            self._free.put(sb.rank)

    def replace(self, sb: RemoteSandbox) -> None:
        """Have its worker close a broken sandbox and start a fresh one in its place.

        Raises:
            SandboxError: the replacement could not be started.
        """
        try:
            self._call(sb.rank, self._actors[sb.rank].replace.remote(sb.key))
        finally:
            self._free.put(sb.rank)

    # `acquire` ... `release` as `SandboxPool.lease`: the same code, over this pool's
    # acquire/release/replace (a SandboxError inside the block replaces the sandbox, a
    # timeout releases it, then the error propagates)
    lease = SandboxPool.lease

    def state(self) -> dict:
        """`SandboxPool.state()` over all workers (idle/busy from the free slots), plus
        ``workers``: each worker's node, IP, hostname, pid and sandbox count."""
        idle = self._free.qsize()
        out = {"backend": self.backend, "isolation": self.isolation, "size": self.size, "idle": idle,
               "busy": self.size - idle, "replaced": 0, "orphans_collected": 0,
               "workers": [{**p, "sandboxes": n} for p, n in zip(self._places, self._slices)]}
        if not self._closed:
            for rank, actor in enumerate(self._actors):
                st = self._call(rank, actor.state.remote())
                out["replaced"] += st["replaced"]
                out["orphans_collected"] += st["orphans_collected"]
        return out

    def close(self) -> None:
        """Close every worker's sandboxes, end the actors, drop the Ray connection. Safe twice."""
        if self._closed:
            return
        ray = _ray()
        self._closed = True
        for a in self._actors:
            with contextlib.suppress(Exception):
                ray.get(a.close.remote(), timeout=120)
            ray.kill(a)
        disconnect()
