"""The writer: files written and files removed are told apart (``canonical`` removes a post-release's model)."""

from __future__ import annotations

from pathlib import Path

from dlbind_generator.emit import FileSet


def test_write_tells_written_from_removed(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out/same.txt").write_text("same\n")
    (tmp_path / "out/stale.json").write_text("{}\n")  # no longer generated
    files = FileSet(["out"])
    files.add("out/same.txt", "same\n")
    files.add("out/new.txt", "new\n")
    done = files.write(tmp_path)
    assert (done.written, done.removed) == (["out/new.txt"], ["out/stale.json"])
    assert not (tmp_path / "out/stale.json").exists()
    assert done.report(len(files.files)) == [
        "wrote out/new.txt",
        "removed out/stale.json",
        "1 of 2 files changed, 1 removed (no longer generated)",
    ]
    again = files.write(tmp_path)
    assert again.report(len(files.files), "generated files") == ["0 of 2 generated files changed"]
