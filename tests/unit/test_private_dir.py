"""hybrid_operator.manager.privatedir: which directories are refused, where the default goes, what is swept.

The attacks through a real operator process are in tests/security/test_artifacts_private.py; these
pin down the rules with real files (modes, links, locks), no processes.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from pathlib import Path

import pytest

from hybrid_operator.manager import privatedir, startup
from hybrid_operator.manager.privatedir import UnsafeDirectory

pytestmark = pytest.mark.unit


def test_missing_directories_are_made_private(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "runner"
    privatedir.make_private_dir(target)
    for directory in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert stat.S_IMODE(directory.lstat().st_mode) == 0o700


@pytest.mark.parametrize(("mode", "accepted"), [(0o700, True), (0o750, True), (0o755, True), (0o770, False),
                                                (0o777, False), (0o702, False)])
def test_an_existing_directory_must_not_be_writable_by_others(tmp_path: Path, mode: int, accepted: bool) -> None:
    target = tmp_path / "runner"
    target.mkdir()
    target.chmod(mode)
    if accepted:
        privatedir.make_private_dir(target)
    else:
        with pytest.raises(UnsafeDirectory, match="is writable by other users"):
            privatedir.make_private_dir(target)


def test_a_link_is_refused_even_to_a_good_directory(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafeDirectory, match="is a symbolic link"):
        privatedir.make_private_dir(tmp_path / "link")


def test_a_directory_above_others_can_write_is_refused_unless_sticky(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(UnsafeDirectory, match="without the sticky bit"):
        privatedir.make_private_dir(open_dir / "runner")
    open_dir.chmod(0o1777)  # like /tmp: others cannot move what is ours in it
    privatedir.make_private_dir(open_dir / "runner")


def test_the_directories_a_link_leads_through_are_checked(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    (open_dir / "inner").mkdir(parents=True)
    open_dir.chmod(0o777)
    (tmp_path / "way").symlink_to(open_dir / "inner")
    with pytest.raises(UnsafeDirectory, match=str(open_dir)):
        privatedir.make_private_dir(tmp_path / "way" / "runner")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's (chown) needs root")
def test_another_users_directory_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 54321, 54321)
    with pytest.raises(UnsafeDirectory, match="belongs to uid 54321"):
        privatedir.make_private_dir(theirs)
    with pytest.raises(UnsafeDirectory, match="belongs to uid 54321, another user"):
        privatedir.make_private_dir(theirs / "runner")


def test_the_default_is_a_new_directory_per_process_under_the_cache(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir(mode=0o700)
    first, second = privatedir.claim(None, env), privatedir.claim(None, env)
    try:
        assert first.directory != second.directory
        for claimed in (first, second):
            assert claimed.temporary
            assert claimed.directory.parent == tmp_path / "home" / ".cache" / "hybrid-operator"
            assert claimed.directory.name.startswith(f"{privatedir.RUN_PREFIX}{os.getpid()}-")
            assert stat.S_IMODE(claimed.directory.stat().st_mode) == 0o700
    finally:
        first.release()
        second.release()
    assert not first.directory.exists() and not second.directory.exists()


def test_the_runtime_directory_comes_first_and_an_unusable_one_is_skipped(tmp_path: Path) -> None:
    runtime = tmp_path / "run-user"
    runtime.mkdir(mode=0o700)
    claimed = privatedir.claim(None, {"XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path / "home")})
    assert claimed.directory.parent == runtime
    claimed.release()
    runtime.chmod(0o777)  # not ours alone: the cache is used instead
    (tmp_path / "home").mkdir(mode=0o700)
    claimed = privatedir.claim(None, {"XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path / "home")})
    assert claimed.directory.parent == tmp_path / "home" / ".cache" / "hybrid-operator"
    claimed.release()


def test_a_given_directory_is_kept_at_the_end(tmp_path: Path) -> None:
    claimed = privatedir.claim(tmp_path / "runner", {})
    claimed.release()
    assert not claimed.temporary and (tmp_path / "runner").is_dir()


def run_dir(parent: Path, pid: int, *, locked: bool | None) -> tuple[Path, int | None]:
    """A per-process directory; ``locked`` True: its lock held (a live operator), None: no lock file."""
    directory = parent / f"{privatedir.RUN_PREFIX}{pid}-x{len(list(parent.iterdir()))}"
    directory.mkdir(mode=0o700)
    (directory / "kubeconfig").write_text("token")
    if locked is None:
        return directory, None
    fd = os.open(directory / privatedir.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    if locked:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return directory, fd
    os.close(fd)
    return directory, None


def test_the_sweep_removes_only_what_dead_operators_left(tmp_path: Path) -> None:
    dead, _ = run_dir(tmp_path, 999999, locked=False)
    live, fd = run_dir(tmp_path, 999998, locked=True)
    new, _ = run_dir(tmp_path, 999997, locked=None)  # being made right now
    old, _ = run_dir(tmp_path, 999996, locked=None)
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.txt").write_text("four years")
    (tmp_path / f"{privatedir.RUN_PREFIX}1-link").symlink_to(victim)
    try:
        removed = privatedir.sweep_dead(tmp_path)
    finally:
        assert fd is not None
        os.close(fd)
    assert sorted(removed) == sorted([dead, old])
    assert live.is_dir() and new.is_dir() and (victim / "thesis.txt").read_text() == "four years"


def test_a_lock_file_that_is_a_link_is_replaced_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("not a lock")
    (tmp_path / startup.LOCK_FILE).symlink_to(target)
    lock = startup.ArtifactsLock(tmp_path)
    try:
        assert lock.alone
        assert not (tmp_path / startup.LOCK_FILE).is_symlink()
        assert target.read_text() == "not a lock"
    finally:
        lock.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's (chown) needs root")
def test_another_users_lock_file_is_replaced_and_their_lock_ignored(tmp_path: Path) -> None:
    theirs = tmp_path / startup.LOCK_FILE
    theirs.touch()
    os.chown(theirs, 54321, 54321)
    holder = os.open(theirs, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        lock = startup.ArtifactsLock(tmp_path)
        assert lock.alone
        assert (tmp_path / startup.LOCK_FILE).stat().st_uid == os.geteuid()
        lock.share()
        lock.close()
    finally:
        os.close(holder)


@pytest.mark.skipif(os.geteuid() != 0, reason="a root-owned directory open to everyone needs root")
def test_a_pods_emptydir_is_the_last_resort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    emptydir = tmp_path / "tmp"
    emptydir.mkdir()
    emptydir.chmod(0o777)  # what kubelet makes: root's, open to everyone, no sticky bit
    monkeypatch.setattr("tempfile.tempdir", str(emptydir))
    home = tmp_path / "home"
    home.write_text("")  # no ~/.cache can be made (in a pod: a read-only root file system)
    claimed = privatedir.claim(None, {"HOME": str(home)})
    try:
        assert claimed.directory.parent == emptydir
        assert stat.S_IMODE(claimed.directory.stat().st_mode) == 0o700
        assert "has no sticky bit" in caplog.text
    finally:
        claimed.release()
    with pytest.raises(UnsafeDirectory, match="without the sticky bit"):
        privatedir.claim(emptydir / "runner", {})  # a directory given by name is held to the strict rule
