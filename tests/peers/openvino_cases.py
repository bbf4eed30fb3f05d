"""Random OpenVINO Gather / GatherND cases compared with the variants, run in a child process because
OpenVINO's CPU plugin can crash the process on some shapes (see test_variants).

``python openvino_cases.py OP VERSION SEED START COUNT`` prints ``case I`` before case I, then
``same I`` or ``differs I <details>``."""

import sys

import numpy as np


def random_shape(rng, rank, low=1, high=4):
    return tuple(int(d) for d in rng.integers(low, high + 1, rank))


def random_gather_case(rng, negative, batch=True):
    """Data, indices, axis, batch_dims for a tf/OpenVINO-style Gather."""
    r = int(rng.integers(1, 5))
    data_shape = random_shape(rng, r)
    axis = int(rng.integers(0, r))
    batch_dims = int(rng.integers(0, axis + 1)) if batch else 0
    indices_shape = data_shape[:batch_dims] + random_shape(rng, int(rng.integers(0, 3)))
    low = -data_shape[axis] if negative else 0
    indices = rng.integers(low, data_shape[axis], indices_shape)
    return rng.standard_normal(data_shape).astype(np.float32), indices, axis, batch_dims


def random_gather_nd_case(rng):
    r = int(rng.integers(1, 5))
    data_shape = random_shape(rng, r)
    batch_dims = int(rng.integers(0, r))
    k = int(rng.integers(1, r - batch_dims + 1))
    lead = data_shape[:batch_dims] + random_shape(rng, int(rng.integers(0, 3)))
    indices = np.stack([rng.integers(-data_shape[batch_dims + j], data_shape[batch_dims + j], lead)
                        for j in range(k)], axis=-1).reshape(*lead, k)
    return rng.standard_normal(data_shape).astype(np.float32), indices, batch_dims


def cases(op, version, seed):
    """The same endless sequence of cases for the same arguments: (data, indices, variant call, builder)."""
    import openvino.opset1 as opset1
    import openvino.opset5 as opset5
    import openvino.opset7 as opset7
    import openvino.opset8 as opset8

    from gathermultiaxis.ops import variants

    rng = np.random.default_rng(seed)
    number = 0
    while True:
        if op == "gather":
            data, indices, axis, batch_dims = random_gather_case(rng, negative=version == 8, batch=version != 1)
            if version == 8 and number % 4 == 0 and indices.size:
                indices.reshape(-1)[0] = data.shape[axis] + 3  # out of range: 0
            axis_node = opset1.constant(np.int64(axis))
            build = {1: lambda d, i, a=axis_node: opset1.gather(d, i, a),
                     7: lambda d, i, a=axis_node, b=batch_dims: opset7.gather(d, i, a, b),
                     8: lambda d, i, a=axis_node, b=batch_dims: opset8.gather(d, i, a, b)}[version]
            ours = lambda d=data, i=indices, a=axis, b=batch_dims: variants.openvino_gather(d, i, a, b, version)  # noqa: E731
            description = f"data {list(data.shape)} indices {list(indices.shape)} axis {axis} batch_dims {batch_dims}"
            if batch_dims and np.prod(data.shape[:batch_dims]) == 1:
                description += " [batch of 1]"
        else:
            data, indices, batch_dims = random_gather_nd_case(rng)  # in range: OpenVINO does not check
            module = opset5 if version == 5 else opset8
            build = lambda d, i, m=module, b=batch_dims: m.gather_nd(d, i, b)  # noqa: E731
            ours = lambda d=data, i=indices, b=batch_dims: variants.openvino_gather_nd(d, i, b, version)  # noqa: E731
            description = f"data {list(data.shape)} indices {list(indices.shape)} batch_dims {batch_dims}"
        yield data, indices, build, ours, description
        number += 1


def main(op, version, seed, start, count):
    import openvino as ov
    import openvino.opset8 as opset8

    from gathermultiaxis.harness import bit_identical

    core = ov.Core()
    for number, (data, indices, build, ours, description) in enumerate(cases(op, version, seed)):
        if number >= start + count:
            break
        if number < start:
            continue
        print(f"case {number} {description}", flush=True)
        data_node = opset8.parameter(list(data.shape), ov.Type.f32)
        indices_node = opset8.parameter(list(indices.shape), ov.Type.i64)
        model = ov.Model([build(data_node, indices_node)], [data_node, indices_node])
        expected = core.compile_model(model, "CPU")([data, indices])[0]
        actual = ours()
        same = bit_identical(actual, expected)
        print(f"same {number}" if same else f"differs {number} {description}: ours {actual.shape} vs "
              f"OpenVINO {expected.shape}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
