"""``run_with_iobinding`` with pre-allocated outputs that a PyOp node writes, without ending the process.

A wrong pre-allocated shape fails inside the PyOp bridge as an uncaught C++ exception (``std::terminate``).
So CPU outputs at risk are written into ORT-allocated outputs, then checked against the caller's buffer and
copied: a wrong shape raises ORT's ``RuntimeError``, as for a builtin node."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Collection

import numpy as np
import onnxruntime as ort

from .internals import c_cpu_device, c_ort_value, iobinding_state, session_internals


def _cpu_tensor(value) -> bool:
    return (value.has_value() and value.is_tensor() and value.device_name().lower() == "cpu"
            and value.data_type() != "tensor(string)")  # ORT makes no string OrtValue from NumPy: never pre-allocated


class _Preallocated:
    """What a pre-allocated output was bound as (the OrtValues ORT's binding hands out alias its own
    slots, which the run overwrites)."""

    def __init__(self, index: int, name: str, value, user_value):
        self.index, self.name, self.user_value = index, name, user_value
        self.shape, self.data_type = list(value.shape()), value.data_type()
        self.element_type, self.data_ptr = value.element_type(), value.data_ptr()

    def rebind(self, bound, cpu) -> None:
        """Bind the caller's pre-allocated output again after the run."""
        if self.user_value is not None:
            bound.bind_ortvalue_output(self.name, c_ort_value(self.user_value))
        else:  # bound with bind_output(..., buffer_ptr): bind the same buffer again
            bound.bind_output(self.name, cpu, self.element_type, self.shape, self.data_ptr)


def _mismatch(output: _Preallocated, got) -> str | None:
    if list(got.shape()) != output.shape:
        return (f"the output OrtValue provided for output '{output.name}' has shape {{{','.join(map(str, output.shape))}}} "
                f"but the computed output shape for this run is {{{','.join(map(str, got.shape()))}}} (pre-allocated "
                "outputs must match the shape each run makes; or bind the output with bind_output(name) and let "
                "ORT allocate it)")
    if got.data_type() != output.data_type:
        return (f"unexpected output data type for output '{output.name}'. Actual: ({output.data_type}), "
                f"expected: ({got.data_type()})")
    return None


def _copy_into_preallocated(preallocated, values) -> None:
    """Check each value ORT allocated against the caller's buffer (ORT's own RuntimeError on a wrong shape
    or type, before anything is written), then copy it into that buffer."""
    for output in preallocated:
        problem = _mismatch(output, values[output.index])
        if problem is not None:
            raise RuntimeError(f"Error in execution: {problem}")
    for output in preallocated:
        array = np.ascontiguousarray(values[output.index].numpy())
        ctypes.memmove(output.data_ptr, array.ctypes.data, array.nbytes)


def run_with_preallocated_outputs_checked(iobinding: ort.IOBinding, run: Callable, at_risk: Collection[str] | None):
    """``run()`` (a run of ``iobinding``), with the caller's pre-allocated CPU outputs named in ``at_risk``
    (None: every one) written by ORT into its own outputs first, checked and copied over."""
    if at_risk is not None and not at_risk:
        return run()
    bound, user_values = iobinding_state(iobinding)  # rebinding through the C binding leaves the record alone
    names = list(user_values)  # bound output names, in the order ORT keeps them
    values = bound.get_outputs()  # before a run: what is bound (a pre-allocated OrtValue, or an empty one)
    if len(names) != len(values):  # bound some other way: nothing known to check
        return run()
    redirected = [_Preallocated(index, name, value, user_values[name])
                  for index, (name, value) in enumerate(zip(names, values))
                  if (at_risk is None or name in at_risk) and _cpu_tensor(value)]
    if not redirected:
        return run()
    cpu = c_cpu_device()
    for output in redirected:
        bound.bind_output(output.name, cpu)
    try:
        result = run()
        _copy_into_preallocated(redirected, bound.get_outputs())
        return result
    finally:
        for output in redirected:
            output.rebind(bound, cpu)


def run_with_preallocated_fetches_checked(fetch_names, fetches, run: Callable, at_risk: Collection[str] | None):
    """``run(fetches_to_use)`` for ``run_with_ortvaluevector``, checked as above for outputs in ``at_risk``
    (None: any). ORT's own vector cannot mix unallocated and allocated slots, so such a mix is refused."""
    if (at_risk is not None and not at_risk) or len(fetches) == 0 or len(fetches) != len(fetch_names):
        return run(fetches)
    held = [fetches[index] for index in range(len(fetches))]
    if not any((at_risk is None or name in at_risk) and _cpu_tensor(value) for name, value in zip(fetch_names, held)):
        return run(fetches)
    if not all(_cpu_tensor(value) for value in held):
        raise ValueError("run_with_ortvaluevector: pre-allocated fetches for outputs a GatherMultiaxis (PyOp) node "
                         "writes need every fetch pre-allocated on the CPU, or none (a wrong shape would end the "
                         "process inside onnxruntime-extensions' bridge, so they are checked, through a vector ORT "
                         "fills)")
    expected = [_Preallocated(index, name, value, None) for index, (name, value) in enumerate(zip(fetch_names, held))]
    own = session_internals().ort_value_vector()
    result = run(own)
    _copy_into_preallocated(expected, own)
    return result
