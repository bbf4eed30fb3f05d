"""The one reader of a tensor's values: inline or in an external file of the model's folder (checked as
ONNX Runtime checks it first), copied or memory-mapped, and the name of an element type."""

from __future__ import annotations

import math
import os
import stat

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..modelfile import ExternalData, ExternalDataError, check_external_data


def type_name(elem_type: int) -> str:
    """The name of an ONNX element type, as messages write it."""
    return TensorProto.DataType.Name(elem_type) if elem_type else "unknown"


def read_tensor(tensor: TensorProto, folder: str | os.PathLike | None, *, mmap: bool = False,
                raw_16bit: bool = False, lenient_strings: bool = False) -> np.ndarray:
    """The values of ``tensor`` as an array; external data only from ``folder`` (the model's), after ORT's
    checks (``check_external_data``), else ``ExternalDataError``."""
    if tensor.data_location == TensorProto.EXTERNAL:
        return _external(tensor, folder, mmap, raw_16bit, lenient_strings)
    if tensor.data_type == TensorProto.STRING and lenient_strings:
        return _strings(tensor)
    if tensor.data_type == TensorProto.BFLOAT16 and raw_16bit:
        if tensor.HasField("raw_data"):
            return np.frombuffer(tensor.raw_data, dtype=np.uint16).reshape(tuple(tensor.dims))
        return np.asarray(tensor.int32_data, dtype=np.uint32).astype(np.uint16).reshape(tuple(tensor.dims))
    if mmap and tensor.HasField("raw_data") and tensor.data_type not in (TensorProto.BOOL, TensorProto.STRING):
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
        array = np.frombuffer(tensor.raw_data, dtype=dtype).reshape(tuple(tensor.dims))  # one copy: the bytes
        return array.astype(array.dtype.newbyteorder("=")) if not array.dtype.isnative else array
    return numpy_helper.to_array(tensor)


def _strings(tensor: TensorProto) -> np.ndarray:
    decoded: list[str | bytes] = []
    for value in tensor.string_data:
        try:  # like ORT: undecodable bytes stay bytes, and fail as builtin does when returned
            decoded.append(value.decode("utf-8"))
        except UnicodeDecodeError:
            decoded.append(value)
    array = np.empty(len(decoded), dtype=object)
    array[:] = decoded
    return array.reshape(tuple(tensor.dims))


def _element_dtype(tensor: TensorProto, raw_16bit: bool) -> np.dtype | None:
    if tensor.data_type in (TensorProto.STRING, TensorProto.UNDEFINED):
        return None
    if raw_16bit and tensor.data_type == TensorProto.BFLOAT16:
        return np.dtype(np.uint16)
    return np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))


def _external(tensor: TensorProto, folder: str | os.PathLike | None, mmap: bool, raw_16bit: bool,
              lenient_strings: bool) -> np.ndarray:
    if folder is None:
        raise ExternalDataError(f"external data of {tensor.name!r}: the model's folder is not known, and its "
                                f"values are needed (give the pass the folder its locations are relative to)")
    where = check_external_data(tensor, folder)
    if mmap and tensor.data_type != TensorProto.STRING:
        mapped_type = (np.dtype(np.uint16) if raw_16bit and tensor.data_type == TensorProto.BFLOAT16
                       else np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)))
        return _mapped(tensor.name, where, mapped_type, tuple(tensor.dims))
    dtype = _element_dtype(tensor, raw_16bit)
    count = math.prod(tensor.dims)
    if dtype is not None and count * dtype.itemsize == where.size:  # (not packed 4- or 2-bit values)
        # one read into the array, little-endian as ONNX stores it
        stored = np.fromfile(where.path, dtype=dtype.newbyteorder("<"), count=count, offset=where.offset)
        return stored.astype(dtype, copy=False).reshape(tuple(tensor.dims))
    with open(where.path, "rb") as file:
        file.seek(where.offset)
        payload = file.read(where.size)
    inline = TensorProto()
    inline.CopyFrom(tensor)
    del inline.external_data[:]
    inline.data_location = TensorProto.DEFAULT
    inline.raw_data = payload
    return read_tensor(inline, None, raw_16bit=raw_16bit, lenient_strings=lenient_strings)


def _mapped(name: str, where: ExternalData, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The external bytes of tensor ``name`` as a read-only memory-mapped array. The file is opened without
    blocking and checked again once open: it may have been replaced (by a FIFO, say) since it was checked."""
    if where.size == 0:
        return np.zeros(shape, dtype)
    descriptor = os.open(where.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(descriptor, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode) or where.offset + where.size > status.st_size:
            raise ExternalDataError(f"external data file of {name!r} changed while the model was loaded")
        return np.memmap(file, dtype=dtype, mode="r", offset=where.offset, shape=shape)


__all__ = ["read_tensor", "type_name"]
