"""minibert.operations.files: a failed write leaves the old file (or folder) and no debris."""

import pytest

from minibert.operations.files import publish_dir, publish_file, remove_leftovers, write_atomic


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path):
    path = tmp_path / "model.json"
    write_atomic(path, "old")

    def crash(tmp):
        tmp.write_text("half of the n")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        publish_file(crash, path)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.json"]
    write_atomic(path, b"new")
    assert path.read_text() == "new"


def test_writers_that_append_a_suffix_still_publish(tmp_path):
    import numpy as np

    publish_file(lambda tmp: np.save(tmp, np.arange(3)), tmp_path / "ids.npy")  # np.save adds .npy when missing
    assert np.load(tmp_path / "ids.npy").tolist() == [0, 1, 2]


def test_folders_are_replaced_or_kept_whole(tmp_path):
    final = tmp_path / "step-1"
    publish_dir(lambda d: (d / "a").write_text("1"), final)
    publish_dir(lambda d: (d / "a").write_text("2"), final)  # a cache entry published twice: the first stays
    assert (final / "a").read_text() == "1"
    publish_dir(lambda d: (d / "b").write_text("3"), final, replace=True)  # a checkpoint saved again
    assert [p.name for p in final.iterdir()] == ["b"]
    with pytest.raises(RuntimeError):
        publish_dir(lambda d: (_ for _ in ()).throw(RuntimeError("disk full")), tmp_path / "step-2")
    assert not (tmp_path / "step-2").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-1"]


def test_leftovers_of_an_interrupted_write_are_removed(tmp_path):
    (tmp_path / ".tmp-abc-step-3").mkdir()
    (tmp_path / ".tmp-def-latest").write_text("x")
    (tmp_path / "latest").write_text("step-1")
    remove_leftovers(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["latest"]
