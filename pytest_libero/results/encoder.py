"""The ffmpeg process that encodes one episode's video, and the check that it did.

imageio's writer never reads ffmpeg's exit status and leaves its stderr on the worker's terminal,
so a failed encode (a broken or missing codec, a full disk, an ffmpeg killed mid-file) would
leave a file that does not decode beside a record that names it. Here the process is driven
directly: frames go to its stdin, its stderr to a temporary file, and `finish` succeeds only
when ffmpeg exits 0 having written a non-empty file; anything else is a `VideoEncodeError` that
names the exit status and ends with the tail of ffmpeg's stderr (results/files.py `VideoWriter`
removes the temporary; plugin/episode_files.py records the episode as env_error).

The command is the one imageio 2.x built for the same settings (raw rgb24 frames on stdin,
libx264 at CRF 15, yuv420p, sizes padded to 16), so the videos are the same as before.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Sequence

import numpy as np

from pytest_libero.errors import LiberoError

# libx264 at imageio's quality 7: CRF int((1 - 0.7) * 51) = 15.
CRF = 15
# Sizes are padded (scaled) up to a multiple of this: yuv420p and most players want it.
MACRO_BLOCK = 16
# How long `finish` waits for ffmpeg to write the frames still buffered and the MP4 index after its
# input closes (a fraction of a second measured; generous for a loaded machine), and how long a
# frame may wait for a full encoder queue: past either, ffmpeg is taken as hung and killed.
FINISH_TIMEOUT_S = 120.0
# How much of ffmpeg's stderr an error carries: its last lines are the ones that say why.
STDERR_TAIL_LINES = 20
STDERR_TAIL_CHARS = 2000


class VideoEncodeError(LiberoError):
    """ffmpeg failed to encode an episode's video: it exited non-zero or was killed, stopped
    reading its input, hung, or wrote no file. The message ends with its stderr tail."""

    def __init__(self, message: str, stderr_tail: str = "") -> None:
        super().__init__(message + (f"; ffmpeg's stderr ends: {stderr_tail}" if stderr_tail else
                                    "; ffmpeg wrote nothing to stderr"))
        self.stderr_tail = stderr_tail


def ffmpeg_command(exe: str, path: Path, width: int, height: int, fps: int,
                   input_params: Sequence[str], output_params: Sequence[str]) -> list[str]:
    """ffmpeg's arguments to encode raw `width` x `height` rgb24 frames from stdin into `path`."""
    command = [exe, "-y", "-f", "rawvideo", "-vcodec", "rawvideo", "-s", f"{width}x{height}", "-pix_fmt", "rgb24",
               "-r", str(fps), *input_params, "-i", "-", "-an", "-vcodec", "libx264", "-pix_fmt", "yuv420p",
               "-crf", str(CRF)]
    padded = (-(-width // MACRO_BLOCK) * MACRO_BLOCK, -(-height // MACRO_BLOCK) * MACRO_BLOCK)
    if padded != (width, height):
        command += ["-vf", f"scale={padded[0]}:{padded[1]}"]
    return [*command, "-v", "error", *output_params, str(path)]


class FfmpegPipe:
    """One running ffmpeg encoding frames of one shape into `path` (see the module docstring)."""

    def __init__(self, path: Path, shape: tuple[int, ...], fps: int, input_params: Sequence[str],
                 output_params: Sequence[str], name: str | None = None) -> None:
        """`name`: the video's own name for messages (`path` may be its temporary)."""
        import imageio_ffmpeg

        if len(shape) != 3 or shape[2] != 3:
            raise VideoEncodeError(f"a video frame of shape {shape}: height x width x 3 (RGB) was expected")
        self.path, self.shape, self.name = path, tuple(shape), name or path.name
        try:  # IMAGEIO_FFMPEG_EXE, else the binary imageio-ffmpeg ships, else the system's
            self.exe = imageio_ffmpeg.get_ffmpeg_exe()
        except RuntimeError as exc:
            raise VideoEncodeError(f"no ffmpeg to encode {self.name}: {exc}") from exc
        self._log: IO[bytes] = tempfile.TemporaryFile(prefix="pytest-libero-ffmpeg-")
        command = ffmpeg_command(self.exe, path, shape[1], shape[0], fps, input_params, output_params)
        try:
            self.process: subprocess.Popen[bytes] = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._log)
        except OSError as exc:
            self._log.close()
            raise VideoEncodeError(f"ffmpeg ({self.exe}) could not be started: {exc}; install ffmpeg or set "
                                   "IMAGEIO_FFMPEG_EXE to a working one") from exc

    def write(self, frame: Any) -> None:
        """Hand one frame (uint8, `shape`) to ffmpeg; VideoEncodeError if it no longer reads."""
        if tuple(frame.shape) != self.shape or frame.dtype != np.uint8:
            raise VideoEncodeError(f"a frame of shape {tuple(frame.shape)} ({frame.dtype}) in a video of {self.shape} "
                                   "(uint8): every camera must keep its size for the whole episode")
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(np.ascontiguousarray(frame).data)
        except OSError as exc:  # BrokenPipeError: ffmpeg exited
            raise self._failure(f"ffmpeg stopped reading its input ({type(exc).__name__})") from exc

    def finish(self, timeout_s: float = FINISH_TIMEOUT_S) -> None:
        """Close ffmpeg's input and wait for it to finish the file; VideoEncodeError unless it exits 0
        having written a non-empty file. ffmpeg's stderr of a good encode goes to this process's."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.close()
        except OSError as exc:  # the last buffered bytes could not be delivered: ffmpeg exited
            raise self._failure(f"ffmpeg stopped reading its input ({type(exc).__name__})") from exc
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise self._failure(f"ffmpeg did not finish the file within {timeout_s:.0f} s of its last frame and "
                                "was killed") from None
        if self.process.returncode != 0:
            raise self._failure("the encode failed")
        if not self.path.is_file() or self.path.stat().st_size == 0:
            raise self._failure("ffmpeg exited 0 but wrote no video")
        log = self._stderr()
        if log:  # what imageio's ffmpeg printed on the terminal, -v error: kept visible
            sys.stderr.write(log + ("" if log.endswith("\n") else "\n"))
        self._log.close()

    def kill(self) -> None:
        """Stop ffmpeg now (an abandoned video, or a hung encoder) and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass  # the pipe's last bytes are lost with the process
        self._log.close()

    def _failure(self, what: str) -> VideoEncodeError:
        # The process is reaped first, so its exit status and all of its stderr are known.
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.returncode != 0:
            what += f": {_exit_text(self.process.returncode)}"
        tail = _tail(self._stderr())
        return VideoEncodeError(f"{what} (encoder {self.exe}, writing {self.name})", tail)

    def _stderr(self) -> str:
        if self._log.closed:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace").strip()


def _exit_text(code: int) -> str:
    return f"ffmpeg was killed by signal {-code}" if code < 0 else f"ffmpeg exited with status {code}"


def _tail(text: str) -> str:
    lines = text.splitlines()[-STDERR_TAIL_LINES:]
    return " | ".join(line.strip() for line in lines if line.strip())[-STDERR_TAIL_CHARS:]
