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


def fake_ffmpeg(folder, body):
    """An executable standing in for ffmpeg (IMAGEIO_FFMPEG_EXE): a shell script with this body."""
    script = folder / "ffmpeg"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return script


# ffmpeg failing at once (it never reads its input), after reading every frame, or exiting 0
# having written nothing: each is an error naming what ffmpeg did, with its stderr's last lines.
FAILING_ENCODERS = {
    "exits at once": ("echo 'x264 [error]: no encoder here' >&2; exit 1",
                      r"ffmpeg stopped reading its input \(BrokenPipeError\): ffmpeg exited with status 1"),
    "fails at the end": ("cat > /dev/null; echo 'first line' >&2; echo 'x264 [error]: no encoder here' >&2; exit 3",
                         r"the encode failed: ffmpeg exited with status 3"),
    "writes nothing": ("cat > /dev/null; echo 'x264 [error]: no encoder here' >&2; exit 0",
                       r"ffmpeg exited 0 but wrote no video"),
}


@pytest.mark.parametrize("case", FAILING_ENCODERS)
def test_an_encoder_failure_is_raised_with_ffmpegs_stderr_and_leaves_no_file(tmp_path, monkeypatch, case):
    from pytest_libero.results.encoder import VideoEncodeError

    body, expected = FAILING_ENCODERS[case]
    monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(fake_ffmpeg(tmp_path, body)))
    writer = VideoWriter(tmp_path / "videos" / "cell.mp4", fps=4)
    for images in frames(3):
        try:
            writer.add(images)
        except VideoEncodeError:
            break  # a later add may already report it
    with pytest.raises(VideoEncodeError, match=expected) as raised:
        writer.commit()
    assert "(encoder " in str(raised.value) and ", writing cell.mp4); ffmpeg's stderr ends: " in str(raised.value)
    assert str(raised.value).endswith("x264 [error]: no encoder here"), raised.value
    assert list((tmp_path / "videos").iterdir()) == []


def test_no_ffmpeg_to_start_is_an_encoder_error(tmp_path, monkeypatch):
    from pytest_libero.results.encoder import VideoEncodeError

    monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(tmp_path / "no-such-ffmpeg"))
    writer = VideoWriter(tmp_path / "videos" / "cell.mp4", fps=4)
    writer.add(frames(1)[0])
    with pytest.raises(VideoEncodeError, match="could not be started: .*set IMAGEIO_FFMPEG_EXE"):
        writer.commit()
    assert list((tmp_path / "videos").iterdir()) == []


def test_abandon_removes_the_temporary(tmp_path):
    writer = VideoWriter(tmp_path / "cell.mp4", fps=4)
    for images in frames(2):
        writer.add(images)
    writer.abandon()
    assert list(tmp_path.iterdir()) == []


def test_a_frame_of_another_size_is_an_encoder_error(tmp_path):
    from pytest_libero.results.encoder import VideoEncodeError

    writer = VideoWriter(tmp_path / "videos" / "cell.mp4", fps=4)
    writer.add(frames(1)[0])
    writer.add({"agentview": np.zeros((128, 128, 3), np.uint8)})
    with pytest.raises(VideoEncodeError, match=r"a frame of shape \(128, 128, 3\) \(uint8\) in a video of "
                                               r"\(256, 512, 3\)"):
        writer.commit()
    assert list((tmp_path / "videos").iterdir()) == []


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


def test_the_encoder_writes_each_frame_as_it_comes(tmp_path):
    """`commit` must not be left to encode the episode: ffmpeg starts on the first frame (not
    after probing 5 MB of input) and x264 holds no lookahead, so frames handed in reach the file
    before the input is closed. With ffmpeg's or x264's defaults nothing past the MP4 header is
    written until `commit` closes the input, and this waits in vain."""
    import time

    from pytest_libero.results.files import is_temporary

    folder = tmp_path / "videos"
    writer = VideoWriter(folder / "cell.mp4", fps=4)
    for images in frames(3):
        writer.add(images)
    deadline, written = time.monotonic() + 30, 0
    try:
        while written < 10_000 and time.monotonic() < deadline:  # a noise frame is far larger
            time.sleep(0.05)
            written = sum(p.stat().st_size for p in folder.iterdir() if is_temporary(p))
        assert written >= 10_000, f"the encoder wrote {written} bytes of 3 frames before commit"
    finally:
        writer.commit()


def test_the_video_is_plain_h264_without_b_frames(tmp_path):
    """What browsers play (H.264, yuv420p, MP4), and only I and P frames: a B-frame needs a later
    frame first, so an encoder that makes them holds frames back until `commit`."""
    import subprocess

    import imageio_ffmpeg

    writer = VideoWriter(tmp_path / "cell.mp4", fps=4)
    texture = np.random.default_rng(3).integers(0, 255, (256, 400, 3), dtype=np.uint8)
    for index in range(12):  # a slow pan over a texture: x264's defaults make B-frames of most of it
        image = np.ascontiguousarray(texture[:, 2 * index: 2 * index + 256])
        writer.add({"agentview": image, "robot0_eye_in_hand": image[::-1].copy()})
    writer.commit()
    shown = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(tmp_path / "cell.mp4"),
                            "-vf", "showinfo", "-f", "null", "-"], capture_output=True, text=True, timeout=60).stderr
    stream = next(line for line in shown.splitlines() if "Stream #0:0" in line and "Video:" in line)
    assert "h264" in stream and "yuv420p" in stream
    types = [line.split("type:")[1][0] for line in shown.splitlines() if "showinfo" in line and "type:" in line]
    assert len(types) == 12 and set(types) <= {"I", "P"}, types


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
