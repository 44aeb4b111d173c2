"""Data parallelism over torch.distributed: one process per GPU (or per CPU share), the same run
at any world size.

Launch: `torchrun --nproc_per_node N script ...` (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT set by torchrun), or `srun` with one task per rank (SLURM_PROCID,
SLURM_STEP_NUM_TASKS, SLURM_LOCALID; MASTER_ADDR/MASTER_PORT from the job script, else the
first node of the step and port 29500). gloo on the CPU, NCCL on CUDA with the device picked
from the local rank. A process started without those variables is world size 1 and never calls
anything collective, so every helper below is a no-op there.

What the trainers share through it: objects (rollouts, metrics, the output folder's check)
gathered or broadcast from rank 0, the LoRA gradients summed, a barrier, and the stop flag,
all-reduced so that every rank stops at the same step.
"""
from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

from relrl.runtime.cli import UsageError

_STATE = {"device": torch.device("cpu")}


def launch_help(script: str) -> str:
    """The --help epilog of a training script: how to run it on several GPUs and nodes."""
    return (f"several GPUs (one process each; gloo on the CPU, NCCL on CUDA):\n"
            f"  torchrun --nproc_per_node 8 {script} ...\n"
            f"several nodes (run on every node, or let slurm/grpo.sbatch do it):\n"
            f"  srun --ntasks-per-node=1 torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 \\\n"
            f"      --rdzv_backend c10d --rdzv_endpoint HEAD_NODE:29500 {script} ...\n"
            f"  or one srun task per rank: srun --ntasks-per-node=8 python {script} ...\n"
            f"The run is the same at any number of processes (the adapter up to float "
            f"rounding); rank 0 writes checkpoints, logs and statistics.")


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.strip().isdigit() else None


def launch_env() -> dict | None:
    """(rank, world, local_rank) from torchrun's or srun's variables; None for one process.
    srun's are read only inside a step of several tasks: a batch script sees SLURM_NTASKS of
    the whole job without being one of its ranks."""
    world = _env_int("WORLD_SIZE")
    if world is not None and _env_int("RANK") is not None:
        local = _env_int("LOCAL_RANK")
        return {"rank": _env_int("RANK"), "world": world,
                "local_rank": local if local is not None else _env_int("RANK")}
    tasks = _env_int("SLURM_STEP_NUM_TASKS")
    if tasks and tasks > 1 and _env_int("SLURM_PROCID") is not None:
        return {"rank": _env_int("SLURM_PROCID"), "world": tasks,
                "local_rank": _env_int("SLURM_LOCALID") or 0, "slurm": True}
    return None


def local_device_index() -> int:
    """This process's GPU: its local rank on its node (never its global rank), modulo the GPUs
    it sees (one, where the launcher hides the others); the first one for a single process."""
    env = launch_env()
    if env is None:
        return 0
    return env["local_rank"] % max(torch.cuda.device_count(), 1)


def _first_slurm_node() -> str:
    nodes = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST", "")
    if nodes and "[" not in nodes and "," not in nodes:
        return nodes
    if nodes:  # a compressed list: ask SLURM to expand it
        import subprocess

        out = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True,
                             text=True, check=False).stdout.split()
        if out:
            return out[0]
    return socket.gethostname()


def setup() -> int:
    """Join the process group when launched as several ranks; the world size (1 without)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    env = launch_env()
    if env is None or env["world"] == 1:
        return 1
    if env.get("slurm"):  # torchrun's variables, for init_method env://
        os.environ.setdefault("MASTER_ADDR", _first_slurm_node())
        os.environ.setdefault("MASTER_PORT", "29500")
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(env["rank"]), str(env["world"])
        os.environ["LOCAL_RANK"] = str(env["local_rank"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_device_index())
        _STATE["device"] = torch.device("cuda", torch.cuda.current_device())
        backend = "nccl"
    else:
        backend = "gloo"
    # A rank may wait for the others through a long rollout: allow hours, not the default.
    dist.init_process_group(backend, rank=env["rank"], world_size=env["world"],
                            timeout=timedelta(hours=2))
    return env["world"]


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if active() else 0


def world() -> int:
    return dist.get_world_size() if active() else 1


def is_main() -> bool:
    return rank() == 0


def barrier() -> None:
    if active():
        dist.barrier()


def all_gather_object(obj) -> list:
    """Every rank's `obj`, in rank order."""
    if not active():
        return [obj]
    out = [None] * world()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj, src: int = 0):
    """Rank src's `obj` on every rank."""
    if not active():
        return obj
    box = [obj if rank() == src else None]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def any_rank(flag: bool) -> bool:
    """True on every rank when any rank passes True (a stop request, say)."""
    if not active():
        return bool(flag)
    value = torch.tensor([1.0 if flag else 0.0], device=_STATE["device"])
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item() > 0)


def agreed_signal(local: str | None) -> str | None:
    """The stop signal every rank acts on: None unless some rank received one, else the first
    rank's that did. Called at the same point of the loop on every rank."""
    if not active():
        return local
    if not any_rank(local is not None):
        return None
    return next(name for name in all_gather_object(local) if name)


def all_reduce_grads(params) -> None:
    """Sum the gradients of the trainable parameters over the ranks, in one flat buffer (a
    rank that had nothing to train on adds zeros). Only LoRA weights require grad here."""
    if not active():
        return
    params = [p for p in params if p.requires_grad]
    if not params:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n


def share(items: list, of_rank: int | None = None) -> list:
    """This rank's share of a list: positions rank, rank + world, ... (a fixed split by
    position, so the same list is split the same way on every rank)."""
    r = rank() if of_rank is None else of_rank
    return items[r::world()]


def gather_shares(mine: list, total: int) -> list:
    """The inverse of share(): every rank's results put back in the original order."""
    parts = all_gather_object(mine)
    out = [None] * total
    for r, part in enumerate(parts):
        out[r::len(parts)] = part
    return out


def on_main(fn):
    """fn() run on rank 0 only (a check or a change of the shared output folder), its result
    given to every rank; a UsageError there is raised on every rank, so none waits forever."""
    if not active():
        return fn()
    outcome = None
    if is_main():
        try:
            outcome = ("ok", fn())
        except BaseException as exc:
            broadcast_object(("error" if isinstance(exc, UsageError) else "failed", str(exc)))
            raise
    kind, value = broadcast_object(outcome)
    if kind == "error":
        raise UsageError(value)
    if kind == "failed":
        raise RuntimeError(f"rank 0 failed: {value}")
    return value


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
