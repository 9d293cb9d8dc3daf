"""The tests of `llamachat.logs`."""

from __future__ import annotations

from pathlib import Path

from llamachat.logs import RotatingLog


def test_log_rotates_at_size_cap_and_keeps_a_few_old_logs(tmp_path: Path) -> None:
    """A log rolls over past its cap, keeps `backups` old files, and shows its tail."""

    logs = tmp_path / "logs"
    log_file = RotatingLog(logs / "llama-server.log", max_bytes=100, backups=2)
    for n in range(10):
        log_file.write(f"line {n:02d} ".encode() + b"x" * 30 + b"\n")
    log_file.close()

    files = sorted(p.name for p in logs.iterdir())
    assert files == ["llama-server.log", "llama-server.log.1", "llama-server.log.2"]
    assert all((logs / name).stat().st_size <= 100 for name in files)
    assert log_file.tail().splitlines()[-1].startswith("line 09")
    assert (logs / "llama-server.log.1").read_text().startswith("line 06")

    assert log_file.backup_paths()[0] == logs / "llama-server.log.1"
