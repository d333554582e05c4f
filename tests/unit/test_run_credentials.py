"""A run's kubeconfig: private while its run lasts, gone when it ends, whatever the ending."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hybrid_operator.ansible import credentials


async def test_the_kubeconfig_is_private_and_removed_when_the_run_ends(tmp_path: Path) -> None:
    async with credentials.run_kubeconfig(tmp_path, "token: t\n") as path:
        assert path.read_text() == "token: t\n"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert path.parent.parent == credentials.root(tmp_path)
    assert not path.parent.exists()


async def test_a_run_that_fails_leaves_no_kubeconfig_behind(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        async with credentials.run_kubeconfig(tmp_path, "token: t\n") as path:
            raise RuntimeError("the run crashed")
    assert not path.parent.exists()
    assert list(credentials.root(tmp_path).iterdir()) == []
