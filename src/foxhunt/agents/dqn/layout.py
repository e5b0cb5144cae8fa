"""Network-layout fingerprints: what a checkpoint must match to load into a network, and a
readable account of how two layouts differ when they do not."""

from __future__ import annotations

import hashlib

from torch import nn


def layout_description(model: nn.Module) -> list[str]:
    """One line per stored tensor ('name: shape dtype') and layout setting ('setting key: value').

    Settings come from the model's `layout_info()` when it has one (BranchingQNetwork does).
    Saved beside a checkpoint so `describe_layout_diff` can explain a mismatch without the old code.
    """
    lines = [
        f"{name}: {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
        for name, t in model.state_dict().items()
    ]
    info = model.layout_info() if hasattr(model, "layout_info") else {}
    lines += [f"setting {key}: {value!r}" for key, value in info.items()]
    return lines


def layout_fingerprint(model: nn.Module) -> str:
    """Hex SHA-256 of `layout_description`: equal iff tensor names, shapes, dtypes and layout
    settings all match."""
    return hashlib.sha256("\n".join(layout_description(model)).encode()).hexdigest()


def _entries(x: nn.Module | list[str]) -> dict[str, str]:
    lines = layout_description(x) if isinstance(x, nn.Module) else x
    return dict(line.split(": ", 1) for line in lines)


def describe_layout_diff(
    a: nn.Module | list[str],
    b: nn.Module | list[str],
    a_name: str = "checkpoint",
    b_name: str = "model",
) -> str:
    """One line naming the first stored tensor that differs (missing, shape or dtype), plus the
    layout settings that differ; '' when the layouts match. Accepts models or saved descriptions."""
    ea, eb = _entries(a), _entries(b)
    differing = [k for k in dict.fromkeys([*ea, *eb]) if ea.get(k) != eb.get(k)]
    first = next((k for k in differing if not k.startswith("setting ")), None)
    settings = [
        f"{k.removeprefix('setting ')} {ea.get(k, 'absent')} vs {eb.get(k, 'absent')}"
        for k in differing
        if k.startswith("setting ")
    ]
    parts = []
    if first is not None:
        parts.append(
            f"parameter '{first}' is {ea.get(first, 'absent')} in the {a_name} "
            f"but {eb.get(first, 'absent')} in the {b_name}"
        )
    if settings:
        parts.append(f"settings differ ({a_name} vs {b_name}): " + ", ".join(settings))
    return "; ".join(parts)
