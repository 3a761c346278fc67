"""The custom-code export's copy of minibert's source (minibert/interop/huggingface/source_copy.py):
it follows the imports wherever they lead, flattens the modules into one folder with every
import pointing inside it, and leaves the Triton kernel out with an import that fails in one
clear line. Run on a small package written here, whose layout mimics minibert's."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from minibert.interop.huggingface import source_copy
from minibert.interop.huggingface.source_copy import copied_sources

PACKAGE = {
    "__init__.py": "",
    "model.py": "from .config import Config\nfrom .parts.helper import double\n\n\ndef fast():\n"
                "    from .kernels.kernel import go  # lazily, as unpad.py imports the Triton kernel\n    return go()\n",
    "config.py": "Config = 21\n",
    "parts/__init__.py": "",
    "parts/helper.py": "from ..config import Config as Base\n\n\ndef double():\n    return 2 * Base\n",
    "kernels/__init__.py": "",
    "kernels/kernel.py": "import triton\n",
}


def package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def left_out(monkeypatch):
    monkeypatch.setattr(source_copy, "LEFT_OUT", {"kernels.kernel": "no kernel in an export"})


def test_the_copy_follows_every_import_and_runs_from_one_flat_folder(tmp_path, left_out, monkeypatch):
    files = copied_sources(("model",), package(tmp_path / "pkg", PACKAGE))
    assert sorted(files) == ["config.py", "helper.py", "model.py"]  # reached through the imports; the kernel left out
    package(tmp_path / "flat", {"__init__.py": "", **files})
    monkeypatch.syspath_prepend(str(tmp_path))
    model = importlib.import_module("flat.model")
    assert model.double() == 42 and model.Config == 21
    with pytest.raises(ImportError, match="^no kernel in an export$"):
        model.fast()
    assert not any(name == "pkg" or name.startswith("pkg.") for name in sys.modules)  # nothing read from the original


@pytest.mark.parametrize("change, message", [
    ({"model.py": "from .kernels.kernel import go\n"}, "imports pkg.kernels.kernel when it is imported"),
    ({"model.py": "from . import config\n"}, "transformers' loader does not follow"),
    ({"model.py": "from .config import Config\nfrom .parts.config import Other\n", "parts/config.py": "Other = 1\n"},
     "would both be config.py"),
])
def test_what_the_copy_cannot_hold_is_refused_in_one_line(tmp_path, left_out, change, message):
    with pytest.raises(ValueError, match=message) as refused:
        copied_sources(("model",), package(tmp_path / "pkg", {**PACKAGE, **change}))
    assert "\n" not in str(refused.value)
