"""``save`` and ``load`` with a path that names no file (issue 35): an empty path wrote a hidden
``./.safetensors`` and succeeded; it is a ``ValueError`` now, as is saving to an existing directory.
Nothing the user had is lost: a file already there survives a failed save unchanged."""

from __future__ import annotations

import os

import pytest

import proxima
from proxima import _proxima


@pytest.fixture
def model():
    return proxima.PPO("MlpPolicy", "CartPole-v1", n_steps=8, batch_size=8, seed=1)


@pytest.mark.parametrize("path", ["", "   "])
def test_saving_or_loading_an_empty_path_is_a_value_error_and_writes_nothing(model, path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="the path is empty"):
        model.save(path)
    with pytest.raises(ValueError, match="the path is empty"):
        proxima.PPO.load(path)
    with pytest.raises(ValueError, match="the path is empty"):
        model.set_parameters(path)
    assert os.listdir(tmp_path) == []


def test_the_extension_refuses_an_empty_path_too(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="the path is empty"):
        model._model.save("")
    with pytest.raises(ValueError, match="the path is empty"):
        _proxima.Model.load("")
    with pytest.raises(ValueError, match="is a directory"):
        model._model.save(str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_saving_to_a_directory_is_a_value_error_and_the_files_there_stay(model, tmp_path):
    kept = tmp_path / "ppo.safetensors"
    model.save(kept)
    before = kept.read_bytes()
    for path in (tmp_path, str(tmp_path) + os.sep, str(tmp_path / "sub") + "/"):
        with pytest.raises(ValueError, match="directory"):
            model.save(path)
    (tmp_path / "d.safetensors").mkdir()
    with pytest.raises(ValueError, match="directory"):
        model.save(tmp_path / "d")  # the suffix is added, and that is a directory
    assert kept.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["d.safetensors", "ppo.safetensors"]
    assert proxima.PPO.load(kept).num_timesteps == 0


def test_a_path_of_another_type_is_a_type_error(model):
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        model.save(3)
