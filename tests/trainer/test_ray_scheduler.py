"""`scheduler: ray` on a real two-node Ray cluster that these tests start and stop themselves.

The cluster (`ray.cluster_utils.Cluster`, what Ray's own tests use) has a head node that
advertises ``{"rollout": 2}`` and a second node that advertises ``{"sandbox": 1}``, so
rollout workers must land on the head and sandbox workers on the other node. Both are
processes on this machine with one logical CPU each; the actors ask for none.

Fast tests use the hf engine on the tiny model (an actor starts in seconds); the full
training run with vLLM in a rollout worker is marked slow.
"""

import os
import shutil
import socket
import tempfile

import pytest
import torch

from trainer.config import parse_config
from domains.registry import get_domain
from core.errors import ConfigError
from sandboxes.pool import SandboxPool, Scheduler
from trainer.episodes import SandboxRuntime, rollout_episodes, sandbox_spec
from trainer.loop import engine_options
from trainer.ray_scheduler import RayRolloutEngine, RaySandboxPool, split
from trainer.rollout import open_engine

ray = pytest.importorskip("ray")

OBJECT_STORE_BYTES = 80 * 2**20


@pytest.fixture(scope="module")
def cluster():
    """A two-node local Ray cluster: head {"rollout": 2}, second node {"sandbox": 1}.
    Shut down at the end, and every process it started checked gone."""
    from ray.cluster_utils import Cluster

    temp = tempfile.mkdtemp(prefix="rlwb-ray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    # Cluster writes the head's address to <RAY_TMPDIR or /tmp>/ray/ray_current_cluster whatever
    # temp_dir says, and fails where that directory doesn't exist yet (a fresh machine)
    os.makedirs(os.path.join(temp, "ray"), exist_ok=True)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_TMPDIR", temp)
        c = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "resources": {"rollout": 2}, "object_store_memory": OBJECT_STORE_BYTES,
            "include_dashboard": False, "temp_dir": temp})
        c.add_node(num_cpus=1, resources={"sandbox": 1}, object_store_memory=OBJECT_STORE_BYTES)
        nodes = list(c.list_all_nodes())
        yield c
        pids = [p.process.pid for n in nodes for procs in n.all_processes.values() for p in procs]
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
    shutil.rmtree(temp, ignore_errors=True)
    alive = [pid for pid in pids if _alive(pid)]
    assert alive == [], f"Ray processes left running: {alive}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purposes
        return f.read().split(")")[-1].split()[0] != "Z"


def _node_with(resource: str) -> str:
    """The id of the (only) node advertising `resource`; needs a connected driver."""
    (node,) = [n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"]]
    return node


@pytest.fixture(scope="module")
def sandbox_backend(request):
    """docker where an engine and the image are usable, else the local (bubblewrap) backend."""
    try:
        request.getfixturevalue("docker_engine")
        return "docker"
    except pytest.skip.Exception:
        return "local"


def _prompts(tokenizer) -> list[list[int]]:
    texts = ["What is 12 + 7?", "Count the letters in banana.", "Spell the word backwards.", "Sort the list."]
    rendered = [tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                              tokenize=False) for t in texts]
    return [tokenizer(r, add_special_tokens=False)["input_ids"] for r in rendered]


def _session(engine, prompts, tokenizer) -> list:
    """The calls a run makes: sample, take new weights, sample again, score; every output."""
    out = [[(c.token_ids, c.logprobs, c.finish_reason) for g in engine.generate(prompts, 3, 12) for c in g]]
    gen = torch.Generator().manual_seed(1)
    weights = {k: v + 0.05 * torch.randn(v.shape, generator=gen)
               for k, v in _state_dict(tokenizer.name_or_path).items()}
    engine.update_weights(weights.items())
    out.append([(c.token_ids, c.logprobs) for g in engine.generate(prompts, 2, 12, temperature=0.7) for c in g])
    out.append(engine.score(prompts[0], out[0][0][0]))
    return out


def _state_dict(model_dir) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir).state_dict()


# ---- config and addresses (no cluster) ---------------------------------------------------


def test_config_fields_and_their_errors(tiny_model_dir):
    base = {"model": str(tiny_model_dir), "domains": ["basic_arithmetic"]}
    cfg = parse_config(base)
    assert (cfg.scheduler, cfg.ray_address, cfg.rollout_workers, cfg.sandbox_workers) == ("local", None, 1, 1)
    cfg = parse_config({**base, "scheduler": "ray", "ray_address": "10.0.0.5:6379", "rollout_workers": 2})
    assert (cfg.scheduler, cfg.ray_address, cfg.rollout_workers) == ("ray", "10.0.0.5:6379", 2)
    with pytest.raises(ConfigError, match="field 'rollout_workers': rollout_workers applies to scheduler: ray"):
        parse_config({**base, "rollout_workers": 2})
    with pytest.raises(ConfigError, match="field 'ray_address': .*applies to scheduler: ray"):
        parse_config({**base, "ray_address": "auto"})
    with pytest.raises(ConfigError, match="field 'ray_address': 'head node' is not a Ray address"):
        parse_config({**base, "scheduler": "ray", "ray_address": "head node"})
    with pytest.raises(ConfigError, match=r"sandbox_workers \(3\) must be at most sandbox_pool_size \(2\)"):
        parse_config({**base, "scheduler": "ray", "sandbox_workers": 3, "sandbox_pool_size": 2})
    with pytest.raises(ConfigError, match="field 'scheduler'"):
        parse_config({**base, "scheduler": "slurm"})
    cfg = parse_config({**base, "tensor_parallel_size": 2})  # GPUs are checked when the engine starts
    assert engine_options(cfg, tiny_model_dir)["tensor_parallel_size"] == 2
    with pytest.raises(ConfigError, match="field 'tensor_parallel_size': .*applies to rollout_engine: vllm"):
        parse_config({**base, "tensor_parallel_size": 2, "rollout_engine": "hf"})
    with pytest.raises(ConfigError, match="field 'tensor_parallel_size'"):
        parse_config({**base, "tensor_parallel_size": 0})


def test_a_rollout_worker_asks_for_its_tensor_parallel_gpus(monkeypatch):
    from trainer import ray_scheduler

    class Cluster:
        def __init__(self, have):
            self.have = have

        def cluster_resources(self):
            return self.have

    monkeypatch.setattr(ray_scheduler, "_ray", lambda: Cluster({"CPU": 16, "GPU": 4, "rollout": 2}))
    assert ray_scheduler._options("rollout", 2, gpus=2) == [{"num_cpus": 0, "num_gpus": 2, "resources": {"rollout": 1}}] * 2
    assert ray_scheduler._options("rollout", 1, gpus=0) == [{"num_cpus": 0, "resources": {"rollout": 1}}]
    monkeypatch.setattr(ray_scheduler, "_ray", lambda: Cluster({"CPU": 2, "rollout": 1}))  # CPU only: no GPU asked
    assert ray_scheduler._options("rollout", 1, gpus=1) == [{"num_cpus": 0, "resources": {"rollout": 1}}]


def test_unreachable_address_is_a_clear_error_not_a_local_fallback(tiny_model_dir):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match=rf"ray_address '127.0.0.1:{port}': no Ray head node answers.*ray start "
                                          rf"--head --port={port}"):
        RayRolloutEngine.open("hf", tiny_model_dir, address=f"127.0.0.1:{port}")
    assert not ray.is_initialized()  # nothing was started in its place


def test_split_is_contiguous_and_balanced():
    assert split(5, 2) == [(0, 3), (3, 5)]
    assert split(2, 3) == [(0, 1), (1, 2), (2, 2)]
    assert split(0, 1) == [(0, 0)]


# ---- rollout workers -----------------------------------------------------------------------


def test_private_rollout_workers_share_the_runs_kv_memory(tiny_model_dir):
    """Each worker gets its slice of a step's sequences; on a private Ray instance (every
    worker on this machine) also its share of the memory fraction, and a fraction too small
    for one window in each is refused naming the fraction that fits all of them."""
    from trainer.placement import worker_engine_options
    from trainer.rollout.base import kv_bytes_per_token, kv_memory_problem

    kw = {"kv_cache_tokens": 10_000, "max_model_len": 3_000, "gpu_memory_utilization": 0.3, "enforce_eager": True}
    private = worker_engine_options(kw, 4, None)
    # room for the largest slice of the prompts (up to twice the even share), one window at least
    share = 0.3 / 4 if not torch.cuda.is_available() else 0.3  # a GPU each: the whole fraction of it
    assert private == {**kw, "kv_cache_tokens": 5_000, "gpu_memory_utilization": pytest.approx(share)}
    assert worker_engine_options(kw, 8, None)["kv_cache_tokens"] == 3_000
    assert worker_engine_options(kw, 1, None)["kv_cache_tokens"] == 10_000
    assert worker_engine_options(kw, 4, "auto")["gpu_memory_utilization"] == 0.3  # a cluster's nodes: their own RAM
    assert kw["kv_cache_tokens"] == 10_000  # the run's options are left as they were
    ram = 1 << 30
    need = 1024 * kv_bytes_per_token(tiny_model_dir, "float32")
    fraction = 2 * need / ram  # room for two engines' windows, not four
    assert kv_memory_problem(fraction, 1000, tiny_model_dir, "float32", ram, engines=2) is None
    problem = kv_memory_problem(fraction, 1000, tiny_model_dir, "float32", ram, engines=4)
    assert "split over 4 rollout workers" in problem
    assert 4 * need / ram <= float(problem.rsplit("at least ", 1)[1]) < 4 * need / ram + 0.001


def test_one_rollout_worker_on_the_rollout_node_matches_a_local_engine(cluster, tiny_model_dir, tokenizer):
    prompts = _prompts(tokenizer)
    with open_engine("hf", tiny_model_dir, seed=3) as local:
        want = _session(local, prompts, tokenizer)
    with RayRolloutEngine.open("hf", tiny_model_dir, seed=3, address=cluster.address) as remote:
        (where,) = remote.placement()
        assert where["node_id"] == _node_with("rollout") != _node_with("sandbox")
        assert where["pid"] != os.getpid()
        got = _session(remote, prompts, tokenizer)
    assert got == want
    assert got[1] != want[0]  # the new weights (and temperature) changed what was sampled
    assert not ray.is_initialized()  # the last user disconnected


def test_two_rollout_workers_split_prompts_with_their_own_seeds(cluster, tiny_model_dir, tokenizer):
    prompts = _prompts(tokenizer)[:3]
    with RayRolloutEngine.open("hf", tiny_model_dir, seed=5, workers=2, address=cluster.address) as remote:
        assert len({w["pid"] for w in remote.placement()}) == 2
        got = remote.generate(prompts, 2, 10)
    want = []
    for rank, (lo, hi) in enumerate(split(len(prompts), 2)):  # worker r: a contiguous slice, seed + r
        with open_engine("hf", tiny_model_dir, seed=5 + rank) as local:
            want += local.generate(prompts[lo:hi], 2, 10)
    assert [[c.token_ids for c in g] for g in got] == [[c.token_ids for c in g] for g in want]


def test_more_rollout_workers_than_rollout_units_is_a_config_error(cluster, tiny_model_dir):
    with pytest.raises(ConfigError, match="3 rollout workers asked for.*only 2 'rollout' units"):
        RayRolloutEngine.open("hf", tiny_model_dir, workers=3, address=cluster.address)
    assert not ray.is_initialized()


# ---- sandbox workers -----------------------------------------------------------------------


def _run_cfg(tiny_model_dir, backend: str, **kw):
    return parse_config({"model": str(tiny_model_dir), "domains": ["humaneval"], "sandbox_backend": backend,
                         "sandbox_pool_size": 2, "command_timeout_s": 5, "max_turns": 6, **kw})


def _verify_and_play(runtime, tokenizer) -> tuple[list, list]:
    """humaneval verification jobs (reference solutions and wrong ones) and terminal
    episodes (a reference solution and an idle one) on `runtime`: rewards and outcomes."""
    he = get_domain("humaneval")
    tasks = [he.make_task(seed, 1) for seed in (0, 1, 2)]
    completions = [he.reference_completion(t) for t in tasks] + ["    return None\n"] * 3
    jobs = [he.verification_job(t, c) for t, c in zip(tasks * 2, completions)]
    verdicts = [(he.score_result(t, c, r)[0], r.outcome)
                for t, c, r in zip(tasks * 2, completions, runtime.scheduler.run(jobs))]
    from tests.trainer.test_episodes import ScriptedEngine

    task = get_domain("terminal_sort_numbers").make_task(4, 1)
    ref = [f"```bash\n{c}\n```" for c in task.entry["reference"]]
    engine = ScriptedEngine(tokenizer, [ref + ["DONE"], ["I am not sure.", "DONE"]])
    samples = rollout_episodes(engine, tokenizer, [task], 2, runtime, max_turns=6, max_new_tokens=200,
                               max_episode_tokens=2048, temperature=1.0, top_p=1.0, command_timeout_s=5.0)
    episodes = [(s.reward, s.fault, s.completion.token_ids, s.breakdown["check"][:4],
                 [(t["action"], t.get("exit_code")) for t in s.turns]) for s in samples]
    return verdicts, episodes


def test_sandbox_worker_on_the_sandbox_node_gives_local_rewards(cluster, tiny_model_dir, tokenizer,
                                                                sandbox_backend):
    cfg = _run_cfg(tiny_model_dir, sandbox_backend)
    pool = SandboxPool(sandbox_backend, sandbox_spec(cfg), size=2).start()
    local = SandboxRuntime(pool, Scheduler(pool))
    try:
        want = _verify_and_play(local, tokenizer)
    finally:
        local.close()
    pool = RaySandboxPool.open(sandbox_backend, sandbox_spec(cfg), size=2, address=cluster.address)
    remote = SandboxRuntime(pool, Scheduler(pool))
    try:
        state = pool.state()
        (worker,) = state["workers"]
        assert worker["node_id"] == _node_with("sandbox") != _node_with("rollout")
        assert worker["sandboxes"] == 2 and state["idle"] == 2 and state["backend"] == sandbox_backend
        got = _verify_and_play(remote, tokenizer)
        assert pool.state()["idle"] == 2  # every lease came back
        rows = remote.scheduler.drain_records()
    finally:
        remote.close()
    assert got == want
    assert [v for v, _ in got[0]] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]  # the verifier really ran
    assert got[1][0][0] == 1.0 and got[1][1][0] == 0.0
    assert len(rows) == 6 and {r["backend"] for r in rows} == {sandbox_backend}
    assert not ray.is_initialized()


def test_sandbox_errors_come_back_as_themselves(cluster, tiny_model_dir, sandbox_backend):
    cfg = _run_cfg(tiny_model_dir, sandbox_backend)
    pool = RaySandboxPool.open(sandbox_backend, sandbox_spec(cfg), size=1, address=cluster.address)
    try:
        with pool.lease() as sb:
            with pytest.raises(ConfigError, match="leaves the workspace"):
                sb.write_file("../etc/passwd", "x")
            sb.write_file("a.txt", "hello")
            assert sb.read_file("a.txt") == b"hello"
        with pool.lease() as sb:  # reset on release: the next lease sees a clean workspace
            assert [f.name for f in sb.list_dir()] == []
    finally:
        pool.close()


# ---- a whole run -----------------------------------------------------------------------------


def _timing(metric: str) -> bool:
    """Wall-clock and memory metrics (seconds, rates, latencies, queue depth, peak RSS): they
    differ run to run."""
    return metric.startswith(("time/", "perf/", "memory/", "sandbox/latency", "sandbox/queue_depth")) or metric.endswith(
        ("_seconds", "_per_s"))


@pytest.mark.slow
def test_training_run_on_ray_matches_local(cluster, tiny_model_dir, sandbox_backend, tmp_path, capsys):
    from backend.runs import run_foreground
    from backend.store import Store

    def run(**kw) -> tuple[list, list]:
        cfg = parse_config({
            "name": "tiny-ray", "model": str(tiny_model_dir), "steps": 2, "seed": 7,
            "domains": {"basic_arithmetic": 1.0, "humaneval": 1.0}, "prompts_per_step": 2, "group_size": 2,
            "micro_batch_size": 2, "max_new_tokens": 16, "learning_rate": 1e-3, "vllm_compile": False,
            "vllm_memory_fraction": 0.05, "sandbox_backend": sandbox_backend, "sandbox_pool_size": 2,
            "output_dir": str(tmp_path / "out"), **kw})
        with Store(tmp_path / "run.db") as store:
            run_id = run_foreground(cfg, store)
            rows = store.trajectories(run_id, limit=100)
            metrics = store.run_metrics(run_id)
        trajectories = [(r["step"], r["group_idx"], r["sample_idx"], r["domain"], r["completion"], r["reward"])
                        for r in rows]
        scores = {(m["step"], m["name"]): m["value"] for m in metrics if not _timing(m["name"])}
        return trajectories, scores

    local = run()
    assert "scheduler ray" not in capsys.readouterr().err
    on_ray = run(scheduler="ray", ray_address=cluster.address)
    err = capsys.readouterr().err  # where the run said its workers are
    ray.init(address=cluster.address)
    try:
        rollout_node, sandbox_node = _node_with("rollout"), _node_with("sandbox")
    finally:
        ray.shutdown()
    assert f"scheduler ray: rollout worker 0 on node {rollout_node[:12]}" in err
    assert f"scheduler ray: sandbox worker 0 on node {sandbox_node[:12]}" in err
    assert on_ray[0] == local[0]
    differ = {k: (v, on_ray[1].get(k)) for k, v in local[1].items() if on_ray[1].get(k) != v}
    assert differ == {} and on_ray[1].keys() == local[1].keys()
    assert len(local[0]) == 2 * 2 * 2 and "humaneval" in {r[3] for r in local[0]}  # sandbox-verified samples
