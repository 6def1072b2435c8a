"""The episode video is encoded in a thread: its result and its failures reach the caller."""

from __future__ import annotations

import os

import numpy as np
import pytest

from pytest_libero.results.files import VideoWriter


def frames(count):
    rng = np.random.default_rng(3)
    return [{"agentview": rng.integers(0, 255, (256, 256, 3), dtype=np.uint8),
             "robot0_eye_in_hand": rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)} for _ in range(count)]


def test_committed_video_holds_every_frame(tmp_path):
    import imageio.v2 as imageio

    writer = VideoWriter(tmp_path / "videos" / "cell.mp4", fps=4)
    for index, images in enumerate(frames(5)):
        writer.add(images, success=index == 3)
    assert writer.commit() == {"frames": 5, "fps": 4, "first_success_frame": 3}
    assert [p.name for p in (tmp_path / "videos").iterdir()] == ["cell.mp4"]  # no temporary left
    assert imageio.get_reader(tmp_path / "videos" / "cell.mp4").count_frames() == 5


def test_an_encoder_failure_is_raised_by_commit_and_leaves_no_file(tmp_path, monkeypatch):
    import imageio.v2 as imageio

    def broken(*args, **kwargs):
        raise OSError("no ffmpeg here")

    monkeypatch.setattr(imageio, "get_writer", broken)
    writer = VideoWriter(tmp_path / "videos" / "cell.mp4", fps=4)
    for images in frames(3):
        try:
            writer.add(images)
        except OSError:
            break  # a later add may already report it
    with pytest.raises(OSError, match="no ffmpeg here"):
        writer.commit()
    assert list((tmp_path / "videos").iterdir()) == []


def test_abandon_removes_the_temporary(tmp_path):
    writer = VideoWriter(tmp_path / "cell.mp4", fps=4)
    for images in frames(2):
        writer.add(images)
    writer.abandon()
    assert list(tmp_path.iterdir()) == []


def test_the_encoder_and_its_ffmpeg_run_at_a_lower_priority_than_the_episode(tmp_path):
    """Encoding takes the gaps the renders leave: the ffmpeg the encoder thread starts inherits
    ENCODER_NICE, while the thread that adds frames (the episode's) keeps its own priority."""
    import time

    from pytest_libero.results.files import ENCODER_NICE

    mine = os.getpriority(os.PRIO_PROCESS, 0)
    writer = VideoWriter(tmp_path / "videos" / "cell.mp4", fps=4)
    writer.add(frames(1)[0])
    deadline, encoders = time.monotonic() + 30, []
    while not encoders and time.monotonic() < deadline:
        writer.add(frames(1)[0])
        encoders = [pid for pid in _children() if b"ffmpeg" in _read(f"/proc/{pid}/cmdline")]
    try:
        assert encoders, "no ffmpeg child appeared"
        # /proc/PID/stat: field 19 is the nice value (fields counted after the command's closing parenthesis).
        nice = int(_read(f"/proc/{encoders[0]}/stat").rsplit(b")", 1)[1].split()[16])
        assert nice == max(ENCODER_NICE, mine)
        assert os.getpriority(os.PRIO_PROCESS, 0) == mine
    finally:
        writer.commit()


def _children():
    pid = os.getpid()
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        found += _read(f"/proc/{pid}/task/{task}/children").split()
    return [int(child) for child in found]


def _read(path):
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError:
        return b""
