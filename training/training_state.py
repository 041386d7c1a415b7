"""What a trainer checkpoint holds, so a resumed run continues bit-for-bit on CPU.

``save_training_state(directory, model, optimizer)`` writes into an existing or new folder (the
per-step folder, its atomic rename and retention are ``training.checkpoints``'s job)::

    policy/             the policy: save_pretrained (config + safetensors, loadable by
                        from_pretrained / vLLM) for Hugging Face models, policy.pt for plain modules
    optimizer.pt        optimizer.state_dict() (AdamW moments and step counts)
    lr_scheduler.pt     the learning-rate scheduler's state_dict, when there is one
    trainer_state.pt    the RNG states (Python, numpy global, torch CPU and CUDA) and ``extra``
                        (the caller's dict: step, an engine's own torch.Generator / numpy Generator
                        state, ...)

Every file loads with ``torch.load(weights_only=True)``: no pickled code. ``load_training_state``
restores into the caller's existing objects in place (the optimizer keeps pointing at the same
parameters) and returns ``extra``. The frozen reference model of a KL penalty is not saved: it is
the initial policy, which the engine rebuilds from the campaign's model path.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT_VERSION = 1
POLICY_DIR = "policy"


def rng_state() -> dict[str, Any]:
    """The global RNG states: Python ``random``, numpy's legacy global RNG, torch CPU (and CUDA)."""
    kind, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` returned."""
    random.setstate(state["python"])
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_training_state(
    directory: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    lr_scheduler: Any | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the policy, optimiser, scheduler and RNG states (and ``extra``) into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / POLICY_DIR
    if hasattr(model, "save_pretrained"):
        model.save_pretrained(policy, safe_serialization=True)
    else:
        policy.mkdir(exist_ok=True)
        torch.save(model.state_dict(), policy / "policy.pt")
    if optimizer is not None:
        torch.save(optimizer.state_dict(), directory / "optimizer.pt")
    if lr_scheduler is not None:
        torch.save(lr_scheduler.state_dict(), directory / "lr_scheduler.pt")
    trainer_state = {"format_version": FORMAT_VERSION, "rng": rng_state(), "extra": dict(extra or {})}
    torch.save(trainer_state, directory / "trainer_state.pt")
    return directory


def load_training_state(
    directory: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    lr_scheduler: Any | None = None,
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load what ``save_training_state`` wrote into ``model`` / ``optimizer`` / ``lr_scheduler`` in
    place, restore the global RNGs (unless ``restore_rng`` is False); returns ``extra``."""
    directory = Path(directory)
    if not (directory / "trainer_state.pt").exists():
        raise FileNotFoundError(f"{directory} holds no training state (trainer_state.pt missing)")
    device = next(model.parameters()).device
    _load_policy(directory / POLICY_DIR, model, device)
    if optimizer is not None:
        path = directory / "optimizer.pt"
        if not path.exists():
            raise FileNotFoundError(f"{path} missing: the checkpoint was saved without an optimizer")
        # on CPU: load_state_dict moves moments to the parameters' device and keeps "step" where Adam wants it
        optimizer.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    if lr_scheduler is not None:
        lr_scheduler.load_state_dict(
            torch.load(directory / "lr_scheduler.pt", map_location="cpu", weights_only=True)
        )
    trainer_state = torch.load(directory / "trainer_state.pt", map_location="cpu", weights_only=True)
    if trainer_state.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{directory}: training state format {trainer_state.get('format_version')} is not {FORMAT_VERSION}"
        )
    if restore_rng:
        set_rng_state(trainer_state["rng"])
    return trainer_state["extra"]


def _load_policy(policy: Path, model: torch.nn.Module, device: torch.device) -> None:
    """Load the policy weights into ``model`` in place. ``save_pretrained`` drops tied copies (the
    output embedding of a model with tied word embeddings); a missing key is accepted only if its
    parameter shares storage with a loaded one."""
    if (policy / "policy.pt").exists():
        model.load_state_dict(torch.load(policy / "policy.pt", map_location=device, weights_only=True))
        return
    from safetensors.torch import load_file

    shards = sorted(policy.glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"{policy}: no policy.pt and no *.safetensors")
    state: dict[str, torch.Tensor] = {}
    for shard in shards:
        state.update(load_file(shard, device=str(device)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise ValueError(f"{policy}: weights {unexpected[:5]} do not belong to this model")
    own = model.state_dict()
    loaded_storage = {own[k].data_ptr() for k in state}
    untied = [k for k in missing if own[k].data_ptr() not in loaded_storage]
    if untied:
        raise ValueError(f"{policy}: weights {untied[:5]} missing from the checkpoint")
