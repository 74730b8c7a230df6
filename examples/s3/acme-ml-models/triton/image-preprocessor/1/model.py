"""image-preprocessor: encoded image bytes -> normalised float32 [3, 224, 224] (Triton python backend).

The example fleet's real python-backend model, served as is by ``modelfleet serve`` (the local copy of
``s3://acme-ml-models/triton/image-preprocessor``). Decoding is numpy-only so the model runs in any Python
with numpy: binary PPM (P6, RGB) and PGM (P5, grey, repeated to three channels), 8-bit. The image is resized
to 224 x 224 by nearest-neighbour sampling and normalised with the ImageNet mean and standard deviation, the
layout resnet50-classifier's ``images`` input expects.

Every request of a batch gets its own response: an undecodable image fails only its own request
(INVALID_ARG). Cancelled requests are answered CANCELLED without work, because the python backend does not
drop them by itself (models.yaml says ``handles_cancellation: true``).
"""

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton (e.g. to read the decoder); execute() needs it
    pb_utils = None

SIZE = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)


def _header(data, count):
    """The first ``count`` whitespace-separated header fields of a netpbm file (comments skipped)."""
    fields, pos = [], 0
    while len(fields) < count:
        while pos < len(data) and data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos) + 1
            continue
        end = pos
        while end < len(data) and not data[end:end + 1].isspace():
            end += 1
        if end == pos:
            raise ValueError("truncated header")
        fields.append(data[pos:end])
        pos = end
    return fields, pos + 1  # exactly one whitespace byte separates the header from the pixels


def decode_netpbm(data):
    """P6/P5 bytes -> uint8 array [height, width, 3]."""
    magic = data[:2]
    if magic not in (b"P6", b"P5"):
        raise ValueError("not a binary PPM/PGM image (expected P6 or P5)")
    (_, width, height, maxval), start = _header(data, 4)
    width, height, maxval = int(width), int(height), int(maxval)
    if maxval != 255 or width <= 0 or height <= 0:
        raise ValueError(f"unsupported image {width}x{height} maxval {maxval} (8-bit only)")
    channels = 3 if magic == b"P6" else 1
    pixels = np.frombuffer(data, dtype=np.uint8, count=width * height * channels, offset=start)
    image = pixels.reshape(height, width, channels)
    return np.repeat(image, 3, axis=2) if channels == 1 else image


def preprocess(data):
    """Encoded bytes -> float32 [3, 224, 224]: nearest-neighbour resize, then ImageNet normalisation."""
    image = decode_netpbm(bytes(data))
    height, width, _ = image.shape
    rows = (np.arange(SIZE) * height) // SIZE
    cols = (np.arange(SIZE) * width) // SIZE
    resized = image[rows][:, cols].astype(np.float32) / 255.0
    return ((resized.transpose(2, 0, 1) - MEAN) / STD).astype(np.float32)


class TritonPythonModel:
    def execute(self, requests):
        return [self._answer(request) for request in requests]

    def _answer(self, request):
        if request.is_cancelled():
            return pb_utils.InferenceResponse(
                error=pb_utils.TritonError("request cancelled", pb_utils.TritonError.CANCELLED))
        encoded = pb_utils.get_input_tensor_by_name(request, "image_bytes").as_numpy()
        try:
            images = np.stack([preprocess(item) for item in encoded.reshape(-1)])
        except (ValueError, IndexError) as error:
            return pb_utils.InferenceResponse(
                error=pb_utils.TritonError(f"image_bytes: {error}", pb_utils.TritonError.INVALID_ARG))
        images = images.reshape(encoded.shape[:-1] + (3, SIZE, SIZE))
        return pb_utils.InferenceResponse([pb_utils.Tensor("images", images)])
