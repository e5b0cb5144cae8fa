"""`--device auto|cpu|cuda` resolves the same way in every command."""

from __future__ import annotations

import pytest
import torch

from foxhunt.devices import resolve_device
from foxhunt.errors import ConfigError


def test_auto_and_none_pick_cuda_only_when_present():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_a_one_line_config_error():
    with pytest.raises(ConfigError, match="no CUDA device is available") as err:
        resolve_device("cuda")
    assert "\n" not in str(err.value)


def test_an_unknown_device_name_is_a_config_error():
    with pytest.raises(ConfigError, match="'tpu' not understood"):
        resolve_device("tpu")
