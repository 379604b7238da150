"""Serializers for sound and moving pictures: ``video:{ext}`` and ``audio:{ext}`` leaves.

Files are stored as they are, as upstream LitData 0.2.76 stores them. Frame arrays are encoded to
H.264 MP4 with PyAV and waveforms to 16-bit WAV (upstream's encoding when torchcodec is absent).
Upstream decodes with torchcodec; here PyAV decodes video and soundfile decodes audio, both
optional extras imported only when needed.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from litdata_format._guards import is_str_dict
from litdata_format._media._image_codec import as_numpy
from litdata_format._media._wrappers import (
    Audio,
    Video,
    check_decode,
    has_media_extension,
    is_instance_of_loaded,
    media_extension,
    media_path_and_bytes,
    read_media_bytes,
)
from litdata_format._optional import import_optional
from litdata_format._samples._serializers import Buffer, Serializer, torch_module

__all__ = ["AudioSerializer", "VideoSerializer"]


def _torchcodec_encoded(decoder: Any) -> tuple[bytes, str] | None:
    """The file a torchcodec decoder made by LitData or HF datasets was opened from."""
    encoded = getattr(decoder, "_hf_encoded", None) or getattr(decoder, "_litdata_encoded", None)
    if encoded and encoded.get("bytes") is not None:
        return bytes(encoded["bytes"]), media_extension(encoded.get("path"))
    if encoded and encoded.get("path") and os.path.isfile(encoded["path"]):
        return read_media_bytes(encoded["path"])
    return None


def _encode_frames(array: Any, fps: float) -> bytes:
    """Frames (N, H, W, C) or (N, C, H, W) as an H.264 MP4 (what torchvision's write_video makes)."""
    av = import_optional("av", "video", "encoding Video(array=...)")
    frames = as_numpy(array)
    if frames.ndim != 4:
        raise ValueError(f"Video(array=...) must be shaped (N, H, W, C) or (N, C, H, W); got {frames.shape}")
    if frames.shape[1] in (1, 3) and frames.shape[-1] not in (1, 3):
        frames = frames.transpose(0, 2, 3, 1)
    frames = np.ascontiguousarray(frames.astype(np.uint8, copy=False))
    if frames.shape[-1] == 1:
        frames = np.repeat(frames, 3, axis=-1)
    height, width = frames.shape[1:3]
    if height % 2 or width % 2:
        raise ValueError(f"H.264 needs even frame sizes; got {width}x{height}; crop or pad the frames")
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        from fractions import Fraction

        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for pixels in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
        container.mux(stream.encode(None))
    return buffer.getvalue()


def _decode_av(data: bytes, stream_index: int | None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """All frames (N, H, W, 3) uint8, the audio (C, S) float32 and torchvision-style info."""
    av = import_optional("av", "video", "decoding video")
    frames: list[np.ndarray] = []
    chunks: list[np.ndarray] = []
    info: dict[str, Any] = {}
    with av.open(io.BytesIO(data)) as container:
        wanted: list[Any] = []  # PyAV streams (the module is imported lazily, untyped)
        video = container.streams.video[stream_index or 0] if container.streams.video else None
        audio = container.streams.audio[0] if container.streams.audio else None
        if video is not None:
            wanted.append(video)
            info["video_fps"] = float(video.average_rate) if video.average_rate else None
        resampler = None
        if audio is not None:
            wanted.append(audio)
            info["audio_fps"] = audio.rate
            resampler = av.AudioResampler(format="fltp")
        for packet in container.demux(*wanted):
            for frame in packet.decode():
                if isinstance(frame, av.VideoFrame):
                    frames.append(frame.to_ndarray(format="rgb24"))
                elif resampler is not None:
                    chunks.extend(out.to_ndarray() for out in resampler.resample(frame))
        if resampler is not None:
            chunks.extend(out.to_ndarray() for out in resampler.resample(None))
    height, width = (video.height, video.width) if video is not None else (0, 0)
    pixels = np.stack(frames) if frames else np.zeros((0, height, width, 3), np.uint8)
    sound = np.concatenate(chunks, axis=1).astype(np.float32) if chunks else np.zeros((1, 0), np.float32)
    return pixels, sound, info


def _decode_with_av(raw: bytes) -> tuple[np.ndarray, int] | None:
    """The audio track via PyAV, or None when PyAV is missing or finds no audio."""
    try:
        _, sound, info = _decode_av(raw, None)
    except ImportError:
        return None
    return (sound, int(info["audio_fps"])) if info.get("audio_fps") else None


class VideoSerializer(Serializer):
    """A :class:`Video`, or an existing video file path, stored as the file (``video:{ext}``).

    Decoding uses PyAV (upstream uses torchcodec, which is not required here).

    Args:
        decode: ``"frames"`` (default; ``"decoder"`` is accepted as its upstream name): every frame
            as a uint8 numpy array laid out as ``dimension_order``; ``"all"``: upstream's
            ``(frames, audio, info)`` with frames a uint8 tensor (N, H, W, C) and audio a float32
            tensor (C, S); ``"bytes"``: the file.
        dimension_order: ``"NCHW"`` or ``"NHWC"`` for ``"frames"``.
        stream_index: which video stream to decode (the first by default).
        seek_mode, device, num_ffmpeg_threads: accepted for compatibility with upstream's
            torchcodec options; not used by the PyAV decoder.
    """

    EXTENSIONS = ("mp4", "ogv", "mjpeg", "avi", "mov", "h264", "mpg", "mpeg", "webm", "wmv", "mkv")

    def __init__(
        self,
        decode: str = "frames",
        seek_mode: str = "approximate",
        device: str = "cpu",
        num_ffmpeg_threads: int = 1,
        dimension_order: str = "NCHW",
        stream_index: int | None = None,
    ) -> None:
        decode = "frames" if decode == "decoder" else decode
        self.decode = check_decode("VideoSerializer", decode, ("frames", "all", "bytes"))
        if dimension_order not in ("NCHW", "NHWC"):
            raise ValueError(f"dimension_order must be 'NCHW' or 'NHWC', got {dimension_order!r}")
        self.seek_mode = seek_mode
        self.device = device
        self.num_ffmpeg_threads = num_ffmpeg_threads
        self.dimension_order = dimension_order
        self.stream_index = stream_index

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        if is_instance_of_loaded(data, "torchcodec.decoders", "VideoDecoder"):
            found = _torchcodec_encoded(data)
            if found is None:
                raise TypeError("this torchcodec VideoDecoder has no source file; pass Video(path=...) instead")
            return found[0], f"video:{found[1] or 'mp4'}"
        if isinstance(data, Video) and data.array is not None:
            return _encode_frames(data.array, data.fps), "video:mp4"
        payload, ext = read_media_bytes(data)
        return payload, f"video:{ext or 'mp4'}"

    def deserialize(self, data: Buffer) -> Any:
        raw = bytes(data)
        if self.decode == "bytes":
            return raw
        frames, audio, info = _decode_av(raw, self.stream_index)
        if self.decode == "all":
            torch = torch_module()
            return torch.from_numpy(frames), torch.from_numpy(audio), info
        return np.ascontiguousarray(frames.transpose(0, 3, 1, 2)) if self.dimension_order == "NCHW" else frames

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Video) or is_instance_of_loaded(data, "torchcodec.decoders", "VideoDecoder"):
            return True
        return has_media_extension(data, self.EXTENSIONS)


def _wav_bytes(array: Any, rate: int) -> bytes:
    """A waveform (S,) or (C, S) in [-1, 1] as 16-bit PCM WAV."""
    pcm = np.clip(np.asarray(as_numpy(array), dtype=np.float32), -1.0, 1.0)
    if pcm.ndim == 1:
        pcm = pcm[None, :]
    samples = (pcm.T.reshape(-1) * 32767.0).astype("<i2")
    buffer = io.BytesIO()
    import wave

    with wave.open(buffer, "wb") as handle:
        handle.setnchannels(int(pcm.shape[0]))
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(samples.tobytes())
    return buffer.getvalue()


def _resample(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """Linear-interpolation resampling of (C, S) float samples."""
    if rate == target or samples.shape[1] == 0:
        return samples
    count = round(int(samples.shape[1]) * target / rate)
    positions = np.arange(count) * (rate / target)
    source = np.arange(int(samples.shape[1]))
    channels: list[np.ndarray] = [np.interp(positions, source, channel) for channel in samples]
    return np.stack(channels).astype(np.float32)


class AudioSerializer(Serializer):
    """An :class:`Audio`, a ``{"array", "sampling_rate"}`` dict or an audio file path.

    Files are stored as they are (``audio:{ext}``); waveforms and raw ``.pcm`` (int16) are written
    as 16-bit WAV (``audio:wav``). Decoding uses soundfile (upstream uses torchcodec).

    Args:
        decode: ``"array"`` (default; ``"decoder"`` is accepted as its upstream name): a dict
            ``{"array": float32 numpy (S,) for mono else (C, S), "sampling_rate": int}`` like the
            ``audio["array"]`` / ``audio["sampling_rate"]`` upstream offers; ``"samples"``:
            ``(float32 tensor (C, S), rate)`` as upstream; ``"bytes"``: the file.
        sampling_rate: resample to this rate when decoding (linear), and the rate of ``.pcm`` input.
        num_channels: mix down to mono (1) or repeat a mono track to this many channels.
        stream_index: accepted for compatibility with upstream; soundfile reads the first stream.
    """

    EXTENSIONS = ("wav", "mp3", "flac", "ogg", "opus", "m4a", "aac", "wma", "pcm")

    def __init__(
        self,
        decode: str = "array",
        sampling_rate: int | None = None,
        num_channels: int | None = None,
        stream_index: int | None = None,
    ) -> None:
        decode = "array" if decode == "decoder" else decode
        self.decode = check_decode("AudioSerializer", decode, ("array", "samples", "bytes"))
        self.sampling_rate = sampling_rate
        self.num_channels = num_channels
        self.stream_index = stream_index

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        if is_instance_of_loaded(data, "torchcodec.decoders", "AudioDecoder"):
            found = _torchcodec_encoded(data)
            if found is not None:
                return found[0], "audio:wav"
            samples = data.get_all_samples()
            return _wav_bytes(samples.data, int(samples.sample_rate)), "audio:wav"
        array, rate = None, None
        if isinstance(data, Audio):
            array, rate = data.array, data.sampling_rate
        elif is_str_dict(data) and data.get("array") is not None:
            array, rate = data["array"], data.get("sampling_rate")
        if array is not None:
            if rate is None:
                raise KeyError("encoding an audio waveform needs its sampling_rate")
            return _wav_bytes(array, int(rate)), "audio:wav"
        path, payload = media_path_and_bytes(data)
        if path and str(path).lower().endswith(".pcm"):
            return self._pcm(path, payload, rate or self.sampling_rate), "audio:wav"
        payload, ext = read_media_bytes(data)
        return payload, f"audio:{ext or 'wav'}"

    @staticmethod
    def _pcm(path: str, payload: bytes | None, rate: int | None) -> bytes:
        if rate is None:
            raise KeyError("raw .pcm audio needs Audio(sampling_rate=...) or AudioSerializer(sampling_rate=...)")
        if payload is None:
            with open(path, "rb") as handle:
                payload = handle.read()
        waveform = np.frombuffer(payload, dtype="<i2").astype(np.float32) / 32767.0
        return _wav_bytes(waveform, int(rate))

    def _samples(self, raw: bytes) -> tuple[np.ndarray, int]:
        soundfile = import_optional("soundfile", "audio", "decoding audio")
        try:
            frames, rate = soundfile.read(io.BytesIO(raw), dtype="float32", always_2d=True)
            samples = np.ascontiguousarray(frames.T)
        except RuntimeError:
            # libsndfile reads WAV/FLAC/OGG/MP3 but not MP4 containers (m4a, aac): PyAV can, if present.
            found = _decode_with_av(raw)
            if found is None:
                raise
            samples, rate = found
        if self.sampling_rate is not None:
            samples, rate = _resample(samples, int(rate), self.sampling_rate), self.sampling_rate
        wanted = self.num_channels
        if wanted is not None and wanted != samples.shape[0]:
            if wanted == 1:
                samples = samples.mean(axis=0, keepdims=True, dtype=np.float32)
            elif samples.shape[0] == 1:
                samples = np.repeat(samples, wanted, axis=0)
            else:
                raise ValueError(f"cannot turn {samples.shape[0]} audio channels into {wanted}")
        return samples, int(rate)

    def deserialize(self, data: Buffer) -> Any:
        raw = bytes(data)
        if self.decode == "bytes":
            return raw
        samples, rate = self._samples(raw)
        if self.decode == "samples":
            return torch_module().from_numpy(samples), rate
        return {"array": samples[0] if samples.shape[0] == 1 else samples, "sampling_rate": rate}

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Audio) or is_instance_of_loaded(data, "torchcodec.decoders", "AudioDecoder"):
            return True
        if is_str_dict(data) and data.get("array") is not None and data.get("sampling_rate") is not None:
            return True
        return has_media_extension(data, self.EXTENSIONS)
