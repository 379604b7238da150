"""Media wrappers and serializers: golden bytes from upstream 0.2.76, round trips, decoder errors."""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image as PILImage

from litdata_format._media import _wrappers as _media
from litdata_format._media._av_serializers import AudioSerializer, VideoSerializer
from litdata_format._media._image_codec import _ZIGZAG, decode_image, estimate_jpeg_quality, jpeg_has_exif
from litdata_format._media._media_serializers import (
    GraphSerializer,
    ImageSerializer,
    JPEGArraySerializer,
    JPEGSerializer,
    MeshSerializer,
    NiftiSerializer,
    PDFSerializer,
    PILSerializer,
    TIFFSerializer,
)
from litdata_format._media._wrappers import (
    Audio,
    File,
    Graph,
    Image,
    Jpeg,
    JpegArray,
    Mesh,
    Nifti,
    Pdf,
    Pil,
    Tensor,
    Text,
    Tiff,
    Video,
)
from litdata_format._samples._json_leaf import JsonLeaf, nested_dumps, nested_loads
from litdata_format._samples._registry import default_serializers, serializer_for_format
from litdata_format._samples._serializers import JsonSerializer


def _pyg() -> Any:
    """``torch_geometric.data``; its import warns (an error under pytest) and costs ~8 CPU-seconds."""
    with warnings.catch_warnings():  # torch_geometric warns about torch.jit on import
        warnings.simplefilter("ignore")
        import torch_geometric.data as pyg_data
    return pyg_data


@pytest.fixture(scope="module", autouse=True)
def _pyg_imported() -> None:
    """PyG imported (under the filter) before this file's tests build or read graphs: here, when the
    file runs, rather than at the top, which every pytest-xdist worker ran when collecting the suite."""
    _pyg()


FIXTURES = Path(__file__).parent / "fixtures" / "media"
INPUTS = FIXTURES / "inputs"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())


def _load_cases() -> Any:
    spec = importlib.util.spec_from_file_location("media_cases", FIXTURES / "media_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("media_cases", module)
    spec.loader.exec_module(module)
    return module


CASES_MODULE = _load_cases()
CASES = CASES_MODULE.CASES
open_image = CASES_MODULE.open_image
NS = SimpleNamespace(**{name: getattr(_media, name) for name in _media.__all__}, JsonLeaf=JsonLeaf, inputs=INPUTS)


def write_leaf(value: Any) -> tuple[bytes, str]:
    """What the writer does with one leaf: the first serializer that accepts it encodes it."""
    for name, serializer in default_serializers().items():
        if serializer.can_serialize(value):
            payload, data_format = serializer.serialize(value)
            return payload, data_format or name
    raise AssertionError(f"no serializer accepted {value!r}")


def pick(value: Any) -> str:
    """The name of the serializer the writer would choose for ``value``."""
    return next(name for name, s in default_serializers().items() if s.can_serialize(value))


def read_leaf(payload: bytes, data_format: str) -> Any:
    return serializer_for_format(data_format, default_serializers()).deserialize(payload)


def round_trip(value: Any) -> tuple[Any, str]:
    payload, data_format = write_leaf(value)
    return read_leaf(payload, data_format), data_format


def _installed_version(name: str) -> str | None:
    try:
        return str(importlib.import_module(name).__version__)
    except ImportError:
        return None


# --- golden files written by upstream ------------------------------------------------------


def test_registry_order_matches_upstream() -> None:
    assert list(default_serializers()) == [
        "str", "text", "bool", "int", "float", "video", "audio", "image", "nifti", "mesh", "pdf", "graph",
        "tifffile", "file", "pil", "jpeg", "jpeg_array", "bytes", "no_header_numpy", "numpy",
        "no_header_tensor", "tensor", "json", "pickle",
    ]  # fmt: skip


def test_fixtures_stay_small() -> None:
    total = sum(path.stat().st_size for path in FIXTURES.rglob("*") if path.is_file())
    assert total < 200_000
    assert set(MANIFEST["cases"]) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_upstream_bytes(name: str) -> None:
    case = CASES[name]
    payload, data_format = write_leaf(case.build(NS))
    assert data_format == (case.ours or MANIFEST["cases"][name]["data_format"])
    recorded = MANIFEST["versions"]
    if any(_installed_version(lib) != recorded[lib] for lib in case.libs):
        pytest.skip(f"{name}: the bytes depend on {case.libs}, whose installed version differs from the fixture's")
    assert payload == (FIXTURES / f"{name}.bin").read_bytes()


def golden(name: str) -> Any:
    data_format = MANIFEST["cases"][name]["data_format"]
    if data_format == "tiff":  # upstream names Tiff wrappers "tiff" but registers "tifffile"
        data_format = "tifffile"
    return read_leaf((FIXTURES / f"{name}.bin").read_bytes(), data_format)


def test_reads_upstream_images() -> None:
    pixels = CASES_MODULE.pixels().transpose(2, 0, 1)
    for name in ("image_str_path_png", "image_array_png", "image_pil_png", "image_bytes_no_ext"):
        decoded = golden(name)
        assert isinstance(decoded, torch.Tensor) and decoded.dtype == torch.uint8
        assert np.array_equal(decoded.numpy(), pixels), name
    for name in ("image_array_jpeg_q80", "jpeg_file_object", "jpeg_wrapper_array_q85", "image_array_webp"):
        decoded = golden(name)
        assert decoded.shape == (3, 6, 8)
        assert np.abs(decoded.numpy().astype(int) - pixels).mean() < 12, name
    images = golden("jpeg_array_wrapper")
    assert [tuple(image.shape) for image in images] == [(3, 6, 8)] * 3
    pil = golden("pil_png_object")
    assert pil.mode == "RGB" and pil.size == (8, 6)
    assert np.array_equal(np.asarray(pil), CASES_MODULE.pixels())
    assert golden("pil_wrapper_array").mode == "L"


def test_reads_upstream_graphs_json_and_tensors() -> None:
    pyg_data = _pyg()
    data = golden("graph_pyg_data")
    assert isinstance(data, pyg_data.Data)
    assert data.num_nodes == 3 and data.name == "g0"
    assert data.edge_index is not None
    assert torch.equal(data.edge_index, torch.tensor([[0, 1, 2, 0], [1, 2, 0, 2]]))
    hetero = golden("graph_pyg_hetero")
    assert isinstance(hetero, pyg_data.HeteroData)
    assert torch.equal(hetero["author", "writes", "paper"].edge_index, torch.tensor([[0, 0], [0, 1]]))
    assert list(golden("graph_wrapper_networkx").edges) == [(0, 1), (1, 2)]
    for name, value in CASES_MODULE._JSON_VALUES.items():
        assert golden(name) == json.loads(json.dumps(value)), name
    assert golden("tensor_wrapper_1d_numpy").tolist() == [0, 1, 2, 3, 4]
    assert golden("tensor_wrapper_2d").dtype == torch.float64
    assert golden("tensor_wrapper_bytes").dtype == torch.int16


def test_reads_upstream_scientific_formats() -> None:
    assert golden("tiff_wrapper_array").tolist() == np.arange(12).reshape(3, 4).tolist()
    volume = golden("nifti_array")
    assert np.array_equal(np.asarray(volume.dataobj), np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert np.allclose(volume.affine, np.diag([2.0, 2.0, 2.0, 1.0]))
    assert np.asarray(golden("nifti_wrapper_path_gz").dataobj).shape == (2, 2, 2)
    assert golden("mesh_path_ply").vertices.shape == (3, 3)
    assert len(golden("pdf_str_path").pages) == 1
    assert golden("text_text") == "héllo, wörld"
    assert golden("file_path") == b"a,b\n1,2\n"


# --- round trips ---------------------------------------------------------------------------


def test_text_and_file_round_trip(tmp_path: Path) -> None:
    assert round_trip(Text(text="ünïcode")) == ("ünïcode", "text")
    source = tmp_path / "notes.JSON"
    source.write_bytes(b'{"a": 1}')
    assert round_trip(File(path=str(source))) == (b'{"a": 1}', "file:json")
    assert round_trip(File(bytes=bytearray(b"xy"))) == (b"xy", "file")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Text needs"):
        write_leaf(Text())


def test_plain_values_are_left_to_the_core_serializers(tmp_path: Path) -> None:
    assert write_leaf("cat.png")[1] == "str"  # not an existing file: a caption
    assert write_leaf(b"%PDF-1.7 ...")[1] == "pdf"
    assert write_leaf(b"plain")[1] == "bytes"
    unknown = tmp_path / "data.xyz"
    unknown.write_bytes(b"?")
    assert write_leaf(str(unknown))[1] == "pickle"
    assert pick({"path": "a.flac"}) == "audio"  # a dict only needs the extension
    assert pick({"path": "a.nii"}) == "nifti"
    assert pick(Jpeg(path="photo.jpg")) == "image"  # as upstream: a path with an image extension wins
    assert pick(Pil(path="photo.png")) == "image"
    assert pick(Image(path="song.wav")) == "audio"


def test_image_round_trips_and_decode_modes(tmp_path: Path) -> None:
    pixels = CASES_MODULE.pixels()
    decoded, data_format = round_trip(Image(array=pixels))
    assert data_format == "image:png"
    assert np.array_equal(decoded.permute(1, 2, 0).numpy(), pixels)
    payload, _ = write_leaf(Image(array=pixels))
    assert isinstance(ImageSerializer(decode="pil").deserialize(payload), PILImage.Image)
    assert ImageSerializer(decode="numpy").deserialize(payload).shape == (3, 6, 8)
    assert ImageSerializer(decode="bytes").deserialize(payload) == payload
    with pytest.raises(ValueError, match="decode must be one of"):
        ImageSerializer(decode="cv2")
    assert write_leaf(Image(array=torch.from_numpy(pixels), format="jpg"))[1] == "image:jpg"
    rgba = np.dstack([pixels, np.full(pixels.shape[:2], 255, np.uint8)])
    assert round_trip(Image(array=rgba))[0].shape == (3, 6, 8)


@pytest.mark.parametrize(
    ("mode", "fmt"), [("RGB", "JPEG"), ("L", "JPEG"), ("RGB", "PNG"), ("P", "PNG"), ("RGBA", "PNG")]
)
def test_decoded_pixels_are_contiguous_rgb_planes_of_any_mode(mode: str, fmt: str) -> None:
    rng = np.random.default_rng(7)
    image = PILImage.fromarray(rng.integers(0, 255, (5, 9, 3), dtype=np.uint8)).convert(mode)
    stored = io.BytesIO()
    image.save(stored, fmt)
    expected = np.asarray(PILImage.open(stored).convert("RGB")).transpose(2, 0, 1)
    tensor, array = decode_image(stored.getvalue()), decode_image(stored.getvalue(), "numpy")
    assert tensor.dtype == torch.uint8 and tensor.is_contiguous() and tuple(tensor.shape) == (3, 5, 9)
    assert np.array_equal(tensor.numpy(), expected) and np.array_equal(array, expected)
    assert array.flags.c_contiguous and array.flags.writeable


def test_exif_orientation_is_applied_to_jpegs(tmp_path: Path) -> None:
    image = PILImage.fromarray(CASES_MODULE.pixels())
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    path = tmp_path / "rotated.jpg"
    image.save(path, exif=exif.tobytes())
    raw = path.read_bytes()
    assert jpeg_has_exif(raw) and not jpeg_has_exif((INPUTS / "q70.jpg").read_bytes())
    assert tuple(decode_image(raw).shape) == (3, 8, 6)
    decoded, data_format = round_trip(Jpeg(path=str(path)))
    assert data_format == "image:jpg" and tuple(decoded.shape) == (3, 8, 6)


def test_jpeg_quality_estimate_and_cap(tmp_path: Path) -> None:
    assert _ZIGZAG[:10] == (0, 1, 8, 16, 9, 2, 3, 10, 17, 24) and sorted(_ZIGZAG) == list(range(64))
    image = PILImage.fromarray(CASES_MODULE.pixels())
    for quality in (5, 30, 50, 75, 90, 95, 100):
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=quality)
        assert estimate_jpeg_quality(buffer.getvalue()) == quality
    assert estimate_jpeg_quality((INPUTS / "img.png").read_bytes()) is None
    q95 = (INPUTS / "q95.jpg").read_bytes()
    kept = JPEGSerializer().serialize(Jpeg(bytes=q95))[0]
    assert kept == q95  # default cap 95 keeps a q95 file
    capped = JPEGSerializer().serialize(Jpeg(bytes=q95, max_quality=60))[0]
    assert estimate_jpeg_quality(capped) == 60
    forced = JPEGSerializer().serialize(Jpeg(image=open_image(INPUTS / "img.png"), quality=40))[0]
    assert forced[:2] == b"\xff\xd8" and estimate_jpeg_quality(forced) == 40


def test_wrapper_constructors() -> None:
    assert Jpeg().max_quality == 95 and Jpeg(quality=80).max_quality is None
    assert JpegArray().max_quality == 95 and JpegArray(quality=10).max_quality is None
    with pytest.raises(ValueError, match="not both"):
        Image(quality=80, max_quality=90)
    with pytest.raises(ValueError, match="not both"):
        Jpeg(quality=80, max_quality=90)
    with pytest.raises(TypeError, match="must be bytes"):
        File(bytes="text")  # type: ignore[arg-type]
    assert Image(path=Path("a/b.png")).path == str(Path("a/b.png"))  # type: ignore[arg-type]
    assert Tensor(array=np.zeros((2, 3))).shape == (2, 3)
    with pytest.raises(AttributeError):
        _ = Tensor().shape
    with pytest.raises(TypeError, match="cannot be mixed"):
        Graph(x=torch.zeros(1), data=object()).to_mapping()


def test_image_array_downcasts_warn() -> None:
    with pytest.warns(UserWarning, match="Downcasting"):
        payload, data_format = write_leaf(Image(array=np.arange(48, dtype=np.int64).reshape(6, 8), format="tiff"))
    assert data_format == "image:tiff" and payload[:2] == b"II"
    with pytest.warns(UserWarning, match="to uint8"):
        write_leaf(Image(array=np.full((2, 2, 3), 300.0)))


def test_pil_and_jpeg_objects_round_trip() -> None:
    png = open_image(INPUTS / "img.png")
    decoded, data_format = round_trip(png)
    assert data_format == "pil" and decoded.tobytes() == png.tobytes()
    gray = PILImage.fromarray(CASES_MODULE.pixels()[..., 0])
    assert round_trip(gray)[0].mode == "L"
    decoded, data_format = round_trip(open_image(INPUTS / "q70.jpg"))
    assert data_format == "jpeg" and tuple(decoded.shape) == (3, 6, 8)
    in_memory = PILImage.open(io.BytesIO((INPUTS / "q70.jpg").read_bytes()))
    assert write_leaf(in_memory)[0][:2] == b"\xff\xd8"
    images, data_format = round_trip([open_image(INPUTS / "q70.jpg")] * 3)
    assert data_format == "jpeg_array" and len(images) == 3
    assert JPEGSerializer().serialize(png)[0][:2] == b"\xff\xd8"  # other PIL images become JPEG
    with pytest.raises(ValueError, match="no image"):
        JPEGArraySerializer().deserialize(b"\x00\x00\x00\x00")
    with pytest.raises(ValueError, match="at least one"):
        JPEGArraySerializer().serialize(JpegArray())
    listed = write_leaf(JpegArray([Jpeg(path=str(INPUTS / "q70.jpg"))]))[0]
    decoded_pils = JPEGArraySerializer(decode="pil").deserialize(listed)
    assert isinstance(decoded_pils[0], PILImage.Image)
    assert PILSerializer().serialize(Pil(bytes=(INPUTS / "img.png").read_bytes(), mode="L"))[0][12:13] == b"L"


def test_a_lazily_opened_jpeg_is_stored_as_its_file() -> None:
    path = INPUTS / "q70.jpg"
    image = PILImage.open(path)  # PIL keeps the file open until the pixels are loaded
    handle = image.fp
    assert handle is not None
    handle.seek(5)
    assert JPEGSerializer().serialize(image)[0] == path.read_bytes()
    assert handle.tell() == 5  # where PIL had it
    image.load()  # PIL closes its file: the bytes come from the path
    assert JPEGSerializer().serialize(image)[0] == path.read_bytes()


def test_audio_round_trip() -> None:
    stereo = CASES_MODULE.waveform(2)
    decoded, data_format = round_trip(Audio(array=stereo, sampling_rate=8000))
    assert data_format == "audio:wav" and decoded["sampling_rate"] == 8000
    assert decoded["array"].shape == (2, 64) and np.allclose(decoded["array"], stereo, atol=1e-4)
    mono, _ = round_trip({"array": torch.from_numpy(stereo[0]), "sampling_rate": 16000})
    assert mono["array"].shape == (64,)
    payload, _ = write_leaf(Audio(array=stereo, sampling_rate=8000))
    samples, rate = AudioSerializer(decode="samples").deserialize(payload)
    assert isinstance(samples, torch.Tensor) and tuple(samples.shape) == (2, 64) and rate == 8000
    resampled = AudioSerializer(sampling_rate=4000, num_channels=1).deserialize(payload)
    assert resampled["sampling_rate"] == 4000 and resampled["array"].shape == (32,)
    widened = AudioSerializer(num_channels=3, decode="decoder").deserialize(write_leaf(mono)[0])
    assert widened["array"].shape == (3, 64)
    assert AudioSerializer(decode="bytes").deserialize(payload) == payload
    with pytest.raises(KeyError, match="sampling_rate"):
        write_leaf(Audio(array=stereo))
    with pytest.raises(KeyError, match=r"\.pcm"):
        write_leaf(Audio(path=str(INPUTS / "raw.pcm")))


def test_audio_in_mp4_falls_back_to_pyav() -> None:
    import av

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="ipod") as container:
        stream = container.add_stream("aac", rate=8000)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(CASES_MODULE.waveform(1, 1024), format="fltp", layout="mono")
        frame.sample_rate = 8000
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    decoded, data_format = round_trip(Audio(bytes=buffer.getvalue(), path="voice.m4a"))
    assert data_format == "audio:m4a" and decoded["sampling_rate"] == 8000
    assert decoded["array"].ndim == 1 and decoded["array"].shape[0] >= 1024


def test_video_round_trip() -> None:
    frames = np.stack([CASES_MODULE.pixels(16, 16) for _ in range(4)])
    payload, data_format = write_leaf(Video(array=frames, fps=10))
    assert data_format == "video:mp4" and payload[4:8] == b"ftyp"
    decoded = read_leaf(payload, data_format)
    assert decoded.shape == (4, 3, 16, 16) and decoded.dtype == np.uint8
    assert np.abs(decoded.transpose(0, 2, 3, 1).astype(int) - frames).mean() < 20
    video, audio, info = VideoSerializer(decode="all").deserialize(payload)
    assert tuple(video.shape) == (4, 16, 16, 3) and tuple(audio.shape) == (1, 0)
    assert info["video_fps"] == 10.0
    assert VideoSerializer(dimension_order="NHWC").deserialize(payload).shape == (4, 16, 16, 3)
    channels_first = write_leaf(Video(array=torch.from_numpy(frames).permute(0, 3, 1, 2)))[0]
    assert read_leaf(channels_first, "video:mp4").shape == (4, 3, 16, 16)
    with pytest.raises(ValueError, match="even"):
        write_leaf(Video(array=np.zeros((1, 5, 5, 3), np.uint8)))
    with pytest.raises(ValueError, match="decode must be one of"):
        VideoSerializer(decode="torchvision")


def test_scientific_and_3d_round_trips(tmp_path: Path) -> None:
    import nibabel
    import trimesh

    volume, data_format = round_trip(Nifti(array=np.ones((2, 2, 2), np.float32)))
    assert data_format == "nifti:nii" and isinstance(volume, nibabel.Nifti1Image)
    image = nibabel.Nifti1Image(np.zeros((2, 2, 1), np.int16), np.eye(4))
    assert round_trip(image)[1] == "nifti:nii"
    saved = tmp_path / "v.nii.gz"
    nibabel.save(image, saved)
    assert round_trip(nibabel.load(saved))[1] == "nifti:nii.gz"
    assert NiftiSerializer(decode=False).deserialize(b"abc") == b"abc"

    box = trimesh.creation.box()
    mesh, data_format = round_trip(box)
    assert data_format == "mesh:glb" and len(mesh.geometry) == 1
    stl = box.export(file_type="stl")
    assert isinstance(stl, bytes)
    assert round_trip(Mesh(bytes=stl, file_type="stl"))[1] == "mesh:stl"
    with pytest.raises(ValueError, match="glb, .ply or .stl"):
        write_leaf(Mesh(path=str(INPUTS / "notes.csv")))

    reader, data_format = round_trip(Pdf(path=str(INPUTS / "doc.pdf")))
    assert data_format == "pdf" and len(reader.pages) == 1
    assert write_leaf(Pdf(pdf=reader))[0] == (INPUTS / "doc.pdf").read_bytes()
    assert write_leaf(reader)[1] == "pdf"
    assert PDFSerializer(decode=False).deserialize(b"%PDF") == b"%PDF"

    array, data_format = round_trip(Tiff(array=np.eye(3, dtype=np.float32)))
    assert data_format == "tifffile" and np.array_equal(array, np.eye(3))
    assert round_trip(str(INPUTS / "scan.tif"))[0].shape == (2, 3)


def test_graph_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    pyg_data = _pyg()
    tensors = CASES_MODULE._graph_tensors()
    data, data_format = round_trip(Graph(**tensors))
    assert data_format == "graph" and isinstance(data, pyg_data.Data)
    assert data.x is not None and torch.equal(data.x, tensors["x"])
    graph_payload = write_leaf(Graph(**tensors))[0]
    hetero_payload = write_leaf(CASES["graph_pyg_hetero"].build(NS))[0]
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
    fallback = read_leaf(graph_payload, "graph")
    assert isinstance(fallback, Graph) and torch.equal(fallback.edge_index, tensors["edge_index"])
    hetero = read_leaf(hetero_payload, "graph")
    assert isinstance(hetero, Graph) and set(hetero.data) >= {"paper", ("author", "writes", "paper")}
    monkeypatch.undo()
    assert isinstance(fallback.to_pyg(), pyg_data.Data)
    assert isinstance(hetero.to_pyg(), pyg_data.HeteroData)
    import networkx

    graph, data_format = round_trip(Graph(data=networkx.cycle_graph(4)))
    assert data_format == "graph:pickle" and graph.number_of_edges() == 4
    assert GraphSerializer().can_serialize(pyg_data.Data(x=torch.zeros(1, 1)))


def test_graph_reads_older_pack_versions() -> None:
    # Version 1: u8 counts, no kind byte; every field is a tensor, no _meta.
    tensor = torch.arange(3, dtype=torch.int64).reshape(1, 3)
    payload = write_leaf(tensor)[0]
    packed = b"LDGR\x01\x01\x01x" + len(payload).to_bytes(4, "big") + payload
    decoded = GraphSerializer().deserialize(packed)
    assert torch.equal(decoded.x, tensor)
    with pytest.raises(ValueError, match="version 9"):
        GraphSerializer().deserialize(b"LDGR\x09")


def test_tensor_wrappers_round_trip() -> None:
    values, data_format = round_trip(Tensor(array=np.arange(4, dtype=np.int64)))
    assert data_format == "no_header_tensor:18" and values.tolist() == [0, 1, 2, 3]
    matrix, data_format = round_trip(Tensor(array=np.ones((2, 2), np.float32)))
    assert data_format == "tensor" and matrix.dtype == torch.float32
    raw, data_format = round_trip(Tensor(bytes=b"\x01\x00\x02\x00", dtype=torch.int16))
    assert data_format == "no_header_tensor:14" and raw.tolist() == [1, 2]
    assert write_leaf(Tensor(bytes=b"\x00"))[1] == "pickle"  # no dtype: nothing can read the bytes


def test_json_leaf_round_trip_and_legacy_json() -> None:
    for value in CASES_MODULE._JSON_VALUES.values():
        decoded, data_format = round_trip(JsonLeaf(value))
        assert data_format == "json" and decoded == json.loads(json.dumps(value))
    assert nested_loads(b'{"legacy": [1, 2]}') == {"legacy": [1, 2]}
    assert nested_loads(b" [1]") == [1]
    assert JsonSerializer().deserialize(nested_dumps(None)) is None
    assert not JsonSerializer().can_serialize([1, 2])
    with pytest.raises(ValueError, match="truncated"):
        nested_loads(nested_dumps(["abc", "def"])[:-2])
    with pytest.raises(TypeError):
        nested_dumps({"a": {1, 2}})
    assert JsonLeaf([1]) == JsonLeaf([1]) and repr(JsonLeaf(1)) == "JsonLeaf(1)"


# --- optional decoders ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "extra", "serializer", "payload"),
    [
        ("soundfile", "audio", AudioSerializer(), (INPUTS / "tone.wav").read_bytes()),
        ("PIL.Image", "image", ImageSerializer(), (INPUTS / "img.png").read_bytes()),
        ("av", "video", VideoSerializer(), b"\x00"),
        ("trimesh", "mesh", MeshSerializer(), (INPUTS / "tri.ply").read_bytes()),
        ("pypdf", "pdf", PDFSerializer(), (INPUTS / "doc.pdf").read_bytes()),
        ("nibabel", "nifti", NiftiSerializer(), b"\x00"),
        ("tifffile", "tiff", TIFFSerializer(), (INPUTS / "scan.tif").read_bytes()),
    ],
)
def test_missing_decoder_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, extra: str, serializer: Any, payload: bytes
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=rf'pip install "litdata-format\[{extra}\]"'):
        serializer.deserialize(payload)


def test_missing_encoder_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(ImportError, match=r"litdata-format\[image\]"):
        write_leaf(Image(array=CASES_MODULE.pixels()))
    monkeypatch.setitem(sys.modules, "av", None)
    with pytest.raises(ImportError, match=r"litdata-format\[video\]"):
        write_leaf(Video(array=np.zeros((1, 2, 2, 3), np.uint8)))


def test_choosing_serializers_imports_no_decoder() -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from litdata_format._media._wrappers import Image, Audio, Text
        from litdata_format._samples._registry import default_serializers
        values = ["caption", 3, 1.5, True, b"raw", {{"a": 1}}, [1], None, {str(INPUTS / "img.png")!r},
                  Image(path="x.png"), Audio(path="x.wav"), Text(text="t")]
        for value in values:
            next(name for name, s in default_serializers().items() if s.can_serialize(value))
        heavy = ("torch", "PIL", "av", "soundfile", "trimesh", "pypdf", "nibabel", "tifffile",
                 "torch_geometric", "cryptography", "networkx")
        loaded = [name for name in heavy if name in sys.modules]
        assert not loaded, loaded
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_an_opened_jpeg_is_stored_as_its_file_and_stays_usable() -> None:
    path = INPUTS / "q70.jpg"
    with PILImage.open(path) as image:
        position = image.fp.tell()  # pyright: ignore[reportOptionalMemberAccess]
        assert write_leaf(image)[0] == path.read_bytes()
        assert image.fp.tell() == position  # pyright: ignore[reportOptionalMemberAccess]
        assert image.convert("RGB").size == (8, 6)  # PIL still decodes it after the file was read
