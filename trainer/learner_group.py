"""A data-parallel learner: N DeepSpeed ranks started by torchrun, driven by the run.

``learner_processes: N`` (N > 1) puts the learner in N processes of its own, launched with
torch's standard launcher (``python -m torch.distributed.run``, i.e. ``torchrun``). The run's
process keeps the rollout engine, the store, the sandboxes and the weight sync; each
training step it sends the step's batch to learner rank 0 over an authenticated local
connection (`multiprocessing.connection`), rank 0 broadcasts it to the other ranks
(``torch.distributed.broadcast_object_list``), every rank trains on its share
(`trainer.types.LearnerBatch.shard`) and DeepSpeed all-reduces the gradients (gloo on the
CPU, NCCL on GPUs). The step's metrics come back from rank 0; for the weight sync rank 0
writes the weights to one safetensors file in shared memory (``/dev/shm`` where it exists)
that the run reads tensor by tensor. Checkpoints are written by all ranks into the same
directory (rank 0: the HF weights and the rename; every rank: its part of DeepSpeed's
optimizer state).

Why not the run's own process as rank 0: vLLM's in-process engine builds its own
torch.distributed world (size 1) and tears it down on close; one process can't hold both.

`LearnerGroup` has the in-process learner's interface (`step`, `named_weights`,
`save_checkpoint`, `close`, ``steps_done``, ``optimizer_restored``, ``optimizer_note``), so
the training loop is the same for both. Not covered: several nodes (the run listens for
rank 0 on 127.0.0.1; the worker itself would run under ``torchrun --nnodes M --rdzv-endpoint
HOST:PORT`` with the checkpoints on a shared file system). Under ZeRO-3 every rank takes
part in gathering the weights a layer at a time for the sync and for checkpoints
(`trainer.weights.zero3_weights`).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path

import torch

from core.errors import ConfigError, EngineError
from trainer.config import RunConfig
from trainer.types import LearnerBatch

AUTHKEY_ENV = "RLWB_LEARNER_AUTHKEY"  # hex; the workers read it, it never goes on a command line
START_TIMEOUT_S = 900.0  # model load and DeepSpeed's op builds on a cold cache


def _send(conn: Connection, obj) -> None:
    """Plain pickle: `Connection.send`'s pickler would pass tensors as file descriptors through
    `multiprocessing`'s resource sharer, which only a process's own children may use."""
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _recv(conn: Connection):
    return pickle.loads(conn.recv_bytes())


def _shm_dir() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


class LearnerGroup:
    """N data-parallel learner processes under torchrun, behind the in-process learner's interface.

    Args:
        model_path: local HF checkpoint: the initial policy and the KL reference.
        cfg: the run config; ``cfg.learner_processes`` ranks are started on this machine.
        init_from: a checkpoint of this run to resume from (weights, adapter, optimizer state).
        steps_done: optimizer steps already taken (a resumed run).
        log_path: where the workers' stdout and stderr go (default: a temporary file);
            its tail is quoted when they fail.

    Raises:
        ConfigError: ``cfg.learner_processes`` < 2.
        EngineError: the workers failed to start (the message quotes their log).
    """

    def __init__(self, model_path: str | Path, cfg: RunConfig, init_from: str | Path | None = None,
                 steps_done: int = 0, log_path: str | Path | None = None):
        if cfg.learner_processes < 2:
            raise ConfigError(f"learner_processes: {cfg.learner_processes}; a LearnerGroup needs 2 or more, "
                              "use DeepSpeedLearner for one")
        self.cfg, self.world = cfg, cfg.learner_processes
        authkey = secrets.token_bytes(32)
        self._listener = Listener(("127.0.0.1", 0), authkey=authkey)
        self._conn: Connection | None = None
        self._tmp = Path(tempfile.mkdtemp(prefix="rlwb-learners-"))
        self.log_path = Path(log_path) if log_path else self._tmp / "learners.log"
        (self._tmp / "config.json").write_text(json.dumps(cfg.model_dump(mode="json")), encoding="utf-8")
        host, port = self._listener.address
        threads = max(1, (os.cpu_count() or 1) // self.world)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={self.world}",
               "-m", "trainer.learner_group", "--driver", f"{host}:{port}", "--model", str(model_path),
               "--config", str(self._tmp / "config.json"), "--steps-done", str(int(steps_done))]
        if init_from is not None:
            cmd += ["--init-from", str(init_from)]
        env = {**os.environ, AUTHKEY_ENV: authkey.hex(), "OMP_NUM_THREADS": str(threads),
               "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                              os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):  # torchrun sets its own
            env.pop(key, None)
        self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True)
        try:
            hello = self._accept()
        except BaseException:
            self._stop()
            raise
        self.steps_done = int(hello["steps_done"])
        self.optimizer_note = hello["optimizer_note"]
        self.batching = hello["batching"]
        print(f"[learner] {self.world} data-parallel learner processes (torchrun, {hello['backend']}); "
              f"log: {self.log_path}", file=sys.stderr, flush=True)

    # -- the connection to rank 0 ---------------------------------------------------------
    def _log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def _accept(self) -> dict:
        """Wait for rank 0's hello while watching the launcher; its failure ends the wait."""
        box: dict = {}

        def accept():
            try:
                box["conn"] = self._listener.accept()
            except BaseException as e:  # closed listener: the launcher died
                box["error"] = e

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while t.is_alive():
            t.join(0.2)
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._listener.close()
                t.join(5)
                raise EngineError(f"the {self.world} learner processes did not start (exit code "
                                  f"{self._proc.poll()}); their log {self.log_path} ends:\n{self._log_tail()}")
        if "conn" not in box:
            raise EngineError(f"the learner processes could not connect: {box.get('error')}")
        self._conn = box["conn"]
        return self._reply()

    def _reply(self):
        try:
            kind, value = _recv(self._conn)
        except (EOFError, OSError) as e:
            code = self._proc.poll()
            raise EngineError(f"the learner processes stopped ({type(e).__name__}, exit code {code}); their log "
                              f"{self.log_path} ends:\n{self._log_tail()}") from None
        if kind == "error":
            raise EngineError(f"a learner process failed:\n{value}")
        return value

    def _call(self, method: str, *args):
        if self._conn is None:
            raise EngineError("the learner group is closed")
        _send(self._conn, (method, args))
        return self._reply()

    # -- the learner's interface ------------------------------------------------------------
    def step(self, batch: LearnerBatch) -> dict[str, float]:
        """`DeepSpeedLearner.step` over the ranks: each trains on its share of `batch`.

        Raises:
            EngineError: a rank failed (the message quotes its traceback or the log).
        """
        metrics = self._call("step", batch)
        self.steps_done += 1
        return metrics

    def named_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The policy's weights under HF names, read one by one from the file rank 0 wrote in
        shared memory (float32: 4 bytes a parameter while the sync runs)."""
        from safetensors import safe_open

        path = Path(self._call("weights", str(_shm_dir())))
        try:
            with safe_open(str(path), framework="pt") as f:
                aliases = json.loads((f.metadata() or {}).get("aliases", "{}"))
                for name in f.keys():
                    t = f.get_tensor(name)
                    yield name, t
                    for alias in (a for a, of in aliases.items() if of == name):
                        yield alias, t
        finally:
            path.unlink(missing_ok=True)

    def save_checkpoint(self, path: str | Path, tokenizer=None, extra: dict[str, dict] | None = None,
                        blobs: dict[str, bytes] | None = None, with_optimizer: bool = True) -> Path:
        """`DeepSpeedLearner.save_checkpoint` on every rank (rank 0 writes the weights, the
        tokenizer of the run's model and the rename; each rank its optimizer shard).
        `tokenizer` is saved by rank 0 from the model directory when given."""
        return Path(self._call("save", str(path), tokenizer is not None, extra or {}, blobs or {}, with_optimizer))

    @property
    def optimizer_restored(self) -> bool:
        """Whether rank 0's learner restored AdamW's state exactly (`DeepSpeedLearner.optimizer_restored`)."""
        return self.optimizer_note is None

    def close(self) -> None:
        """Stop the ranks (a clean exit, else SIGTERM, then SIGKILL) and remove the temporary files."""
        if self._conn is not None:
            try:
                _send(self._conn, ("close", ()))
                _recv(self._conn)
            except (EOFError, OSError):
                pass
            self._conn.close()
            self._conn = None
        self._stop()

    def _stop(self) -> None:
        import shutil
        import signal

        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
                try:
                    os.killpg(self._proc.pid, sig)
                    self._proc.wait(timeout=wait)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
        self._listener.close()
        self._log.close()
        if self.log_path.parent != self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def open_learner(model_path: str | Path, cfg: RunConfig, init_from: str | Path | None = None, steps_done: int = 0,
                 log_path: str | Path | None = None):
    """The run's learner: `trainer.learner.DeepSpeedLearner` in this process for
    ``learner_processes: 1``, else a `LearnerGroup` of that many ranks (`log_path`: their log)."""
    if cfg.learner_processes > 1:
        return LearnerGroup(model_path, cfg, init_from=init_from, steps_done=steps_done, log_path=log_path)
    from trainer.learner import DeepSpeedLearner  # deepspeed: only a one-process run loads it here

    return DeepSpeedLearner(model_path, cfg, init_from=init_from, steps_done=steps_done)


# -- the worker: one rank ---------------------------------------------------------------------
def _serve(args) -> None:
    import torch.distributed as dist

    from trainer.learner import DeepSpeedLearner  # deepspeed: the rank loads it, the run process does not

    # the run validated it; validating again here would look up its domains, and a user domain lives
    # in the run's store, not in this process's registry
    cfg = RunConfig.model_construct(**json.loads(Path(args.config).read_text(encoding="utf-8")))
    learner = DeepSpeedLearner(args.model, cfg, init_from=args.init_from, steps_done=args.steps_done)
    rank = learner.rank
    conn = None
    if rank == 0:
        host, port = args.driver.rsplit(":", 1)
        conn = Client((host, int(port)), authkey=bytes.fromhex(os.environ[AUTHKEY_ENV]))
        _send(conn, ("ok", {"steps_done": learner.steps_done, "optimizer_note": learner.optimizer_note,
                          "batching": learner.batching, "backend": dist.get_backend()}))
    tokenizer = None
    while True:
        box = [_recv(conn) if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        method, call = box[0]
        try:
            if method == "close":
                result = None
            elif method == "step":
                result = learner.step(call[0])
            elif method == "weights":
                result = None
                weights = learner.full_weights()  # under ZeRO-3 every rank takes part in the gathers
                if rank == 0:  # rank 0 writes them
                    from safetensors.torch import save_file

                    fd, name = tempfile.mkstemp(prefix="rlwb-weights-", suffix=".safetensors", dir=call[0])
                    os.close(fd)
                    tensors, aliases, seen = {}, {}, {}
                    for k, v in weights.items():  # tied weights (lm_head = embeddings) written once
                        key = (v.data_ptr(), tuple(v.shape), v.dtype)
                        if key in seen:
                            aliases[k] = seen[key]
                        else:
                            seen[key], tensors[k] = k, v.contiguous()
                    save_file(tensors, name, metadata={"aliases": json.dumps(aliases)})
                    result = name
            elif method == "save":
                path, with_tokenizer, extra, blobs, with_optimizer = call
                if with_tokenizer and tokenizer is None and rank == 0:
                    from transformers import AutoTokenizer

                    tokenizer = AutoTokenizer.from_pretrained(args.model)
                result = str(learner.save_checkpoint(path, tokenizer if with_tokenizer else None, extra=extra,
                                                     blobs=blobs, with_optimizer=with_optimizer))
            else:
                raise ValueError(f"unknown learner call {method!r}")
        except Exception:
            if rank == 0:  # the driver gets the traceback before the connection closes
                _send(conn, ("error", traceback.format_exc()))
            # then this rank ends and torchrun stops the group: the other ranks may be waiting inside a
            # collective (a gather, a barrier) that this one will never join, so the group can't go on
            raise
        if rank == 0:
            _send(conn, ("ok", result))
        if method == "close":
            learner.close()
            dist.barrier()
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One data-parallel learner rank (started by torchrun).")
    parser.add_argument("--driver", required=True, help="HOST:PORT the run listens on (rank 0 connects)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--config", required=True, help="the run config as JSON")
    parser.add_argument("--init-from", default=None)
    parser.add_argument("--steps-done", type=int, default=0)
    _serve(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
