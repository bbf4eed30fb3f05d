"""``gathermultiaxis.InferenceSession``: an ``onnxruntime.InferenceSession`` for models with GatherMultiaxis.

Only the session's in-memory copy of the model changes (made by ``graphs.bind.prepare_model``); the file
stays standard. Each run API feeds a fresh run token and raises the error the op recorded under it."""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import ModelProto
from onnxruntime.capi.onnxruntime_pybind11_state import Fail

from . import bind as bind_step
from .bind import RUN_TOKEN, BindOptions, PreparedModel  # noqa: F401 - public here too
from ...graphs.ir.walk import any_node
from ...graphs.modelfile import ExternalDataError, external_tensors
from . import registration as ortop
from .bridge_strings import NUL_LIMIT, refuse_unsafe_string_feeds
from ..contract import DOMAIN
from .internals import c_ort_value, session_internals, session_state, set_inputs_meta
from .preallocated import run_with_preallocated_fetches_checked, run_with_preallocated_outputs_checked
from .run_errors import RUN_ERRORS

_log = logging.getLogger("gathermultiaxis.ops.session")  # the name -v has always shown

# ORT's session config entry naming the folder external data is relative to (for a model given as bytes;
# it overrides the model file's own folder too).
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"


def evaluate_constants(model: ModelProto, base_dir: str | None) -> list[np.ndarray]:
    """``model``'s outputs as ORT's CPU kernels compute them (what the unbound model would compute every run)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1  # elementwise and copies: the same bits on any number of threads
    if base_dir is not None and external_tensors(model):
        options.add_session_config_entry(EXTERNAL_DATA_FOLDER, base_dir)
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {})


def prepare_model(model: ModelProto, base_dir: str | None = None, bind: bool = True,
                  builtin_gathers: bool = False, options: BindOptions = BindOptions()) -> PreparedModel:
    """The bind step for the installed bridge: float16 outputs where it hands arrays back, tables by ORT."""
    # asked only when a node is kept for the kernel: the question registers the PyOps (a first session whose
    # gathers all run as builtins then registers nothing)
    return bind_step.prepare_model(model, base_dir, bind, float16_outputs=lambda: ortop.bridge_info()["handback_supported"],
                                   evaluate=evaluate_constants, builtin_gathers=builtin_gathers,
                                   options=options)


def load_model(path_or_bytes) -> tuple[ModelProto, str | None]:
    """The model without its external data, and the folder of its file (None for bytes or a ModelProto)."""
    if isinstance(path_or_bytes, ModelProto):
        model = ModelProto()
        model.CopyFrom(path_or_bytes)
        return model, None
    if isinstance(path_or_bytes, (bytes, bytearray)):
        return onnx.load_from_string(bytes(path_or_bytes)), None
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        return onnx.load(path, load_external_data=False), os.path.dirname(os.path.abspath(path))
    raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")


def _configured_folder(options: ort.SessionOptions | None) -> str:
    if options is None:
        return ""
    try:
        return options.get_session_config_entry(EXTERNAL_DATA_FOLDER)
    except RuntimeError:  # not set
        return ""


def external_data_folder(model_folder: str | None, options: ort.SessionOptions | None) -> str | None:
    """The options' EXTERNAL_DATA_FOLDER, else the model file's folder; None for bytes without the entry."""
    return _configured_folder(options) or model_folder


class ExternalDataFolder:
    """Points ``options`` at ``folder`` while ORT creates the session, so ORT memory-maps the external data
    itself with its own checks; the caller's entry comes back afterwards ("": the working folder)."""

    def __init__(self, options: ort.SessionOptions, folder: str | None, model: ModelProto, owned: bool):
        self.options, self.restore = options, None
        if folder is None or not external_tensors(model):
            return
        before = _configured_folder(options)
        if before != folder:
            options.add_session_config_entry(EXTERNAL_DATA_FOLDER, folder)
            self.restore = None if owned else before

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.restore is not None:
            self.options.add_session_config_entry(EXTERNAL_DATA_FOLDER, self.restore)


# The public SessionOptions properties, copied onto the session's own options.
_OPTION_PROPERTIES = ("enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
                      "execution_mode", "execution_order", "graph_optimization_level", "inter_op_num_threads",
                      "intra_op_num_threads", "log_severity_level", "log_verbosity_level", "logid",
                      "profile_file_prefix", "use_deterministic_compute", "use_per_session_threads")

# The session config entries ORT 1.32 reads (the keys its libraries hold, EP-specific ones aside). ORT has
# no way to list the entries of a SessionOptions, so the copy asks for each of these by name.
CONFIG_KEYS = (
    "mlas.disable_kleidiai", "mlas.kleidiai.conv_igemm_max_work", "mlas.nchwc_depthwise_sliding",
    "mlas.nchwc_pointwise_conv_max_input_channel_batch", "mlas.qnbit.force_fp32", "mlas.use_lut_gemm",
    "optimization.constant_folding_max_output_size_in_bytes", "optimization.disable_specified_optimizers",
    "optimization.enable_cast_chain_elimination", "optimization.enable_gelu_approximation",
    "optimization.minimal_build_optimizations", "session.allow_released_opsets_only",
    "session.collect_node_memory_stats_to_file", "session.disable_aot_function_inlining",
    "session.disable_cpu_ep_fallback", "session.disable_double_qdq_remover", "session.disable_prepacking",
    "session.disable_qdq_constant_folding", "session.disable_quant_qdq", "session.dynamic_block_base",
    "session.enable_dq_matmulnbits_fusion", "session.enable_quant_qdq_cleanup",
    "session.external_data_loader.chunk_bytes", "session.external_data_loader.min_size_bytes",
    "session.external_data_loader.pinned_memory_bytes", "session.external_data_loader.threads",
    "session.force_spinning_stop", "session.function_expansion_byte_limit", "session.function_expansion_node_limit",
    "session.gqa_value_layout", "session.graph_optimizations_loop_level", "session.inter_op.allow_spinning",
    "session.inter_op.spin_backoff_max", "session.inter_op.spin_duration_us", "session.intra_op.allow_spinning",
    "session.intra_op.spin_backoff_max", "session.intra_op.spin_duration_us", "session.intra_op_thread_affinities",
    "session.kernel_dispatch_policy", "session.layer_assignment_settings", "session.max_shape_override",
    "session.node_partition_config_file", "session.prepack.enable_parallel", "session.qdq_matmulnbits_accuracy_level",
    "session.qdq_matmulnbits_block_size", "session.qdqisint8allowed", "session.record_ep_graph_assignment_info",
    "session.set_denormal_as_zero", "session.strict_shape_type_inference", "session.strict_workspace_verification",
    "session.use_device_allocator_for_initializers", "session.use_env_allocators", "session.x64quantprecision",
)
# Entries that would make ORT write the session's internal model (hidden token, internal op types, no
# bound tables): refused, like the optimized_model_filepath property.
_REFUSED_KEYS = ("session.optimized_model_filepath", "session.save_model_format",
                 "session.optimized_model_external_initializers_file_name")


def own_options(options: ort.SessionOptions | None, library: bool = True) -> ort.SessionOptions:
    """``options`` itself when ``session_options()`` registered the library on it, else a copy (public
    properties and ``CONFIG_KEYS``) with the library registered (not ``library``: a model of ORT's own
    domains only, as one left without GatherMultiaxis, needs none). Why a copy: onnxruntime-extensions crashes on
    options registered before a PyOp was defined and refuses options registered twice. What ORT cannot read
    back (initializers, free dimension overrides, custom op libraries) is not copied: see the README."""
    if options is not None:
        _refuse_model_writing(options)
    if options is not None and ortop.registered_by_us(options):
        return options
    copy = ort.SessionOptions()
    if options is not None:
        for name in _OPTION_PROPERTIES:
            setattr(copy, name, getattr(options, name))
        for key in CONFIG_KEYS:
            value = ortop.config_entry(options, key)
            if value is not None:
                copy.add_session_config_entry(key, value)
    _own_copies.add(copy)
    return ortop.register_library(copy) if library else copy


# ORT's own operator domains: a model whose nodes are all in these needs no custom op library.
ORT_DOMAINS = frozenset(("", "ai.onnx", "ai.onnx.ml", "com.microsoft"))


def needs_library(model: ModelProto) -> bool:
    """Whether a node of ``model`` (any graph or function) is of a domain ORT does not hold itself."""
    return any_node(model, lambda node: node.domain not in ORT_DOMAINS)


def _refuse_model_writing(options: ort.SessionOptions) -> None:
    """optimized_model_filepath would save the session's internal model, which no one else can run."""
    if options.optimized_model_filepath or any(ortop.config_entry(options, key) for key in _REFUSED_KEYS[:1]):
        raise ValueError(
            "gathermultiaxis.InferenceSession cannot save its optimized model (SessionOptions.optimized_model_filepath): "
            "the model it runs is internal (bound tables, a hidden input, op types of its own). Optimize the "
            "rewritten model with `gathermultiaxis rewrite --ort-optimize` or with onnxruntime and "
            "gathermultiaxis.session_options() instead")


def share_bound_initializers(options: ort.SessionOptions, prepared: PreparedModel) -> list[ort.OrtValue]:
    """Hand ORT the bound arrays it reads too (no copy), on the session's own options only (never on options the
    caller keeps using); the OrtValues must live as long as the session."""
    shared: list[ort.OrtValue] = []
    if is_own_copy(options):
        for name, (array, elem_type) in prepared.shared.items():
            value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(array), elem_type)
            options.add_initializer(name, value)
            shared.append(value)
    return shared


def is_own_copy(options: ort.SessionOptions) -> bool:
    """Whether ``own_options`` made ``options`` (the session's own: no caller uses them)."""
    return options in _own_copies


def _bridge_written_outputs(model: ModelProto) -> frozenset[str]:
    """The graph outputs a PyOp node writes itself (checked when pre-allocated: see ``preallocated``)."""
    return frozenset(output for node in model.graph.node if node.domain == DOMAIN for output in node.output
                     if output) & {value.name for value in model.graph.output}


_own_copies: "weakref.WeakSet[ort.SessionOptions]" = weakref.WeakSet()
_SESSION = session_internals().session_class  # onnxruntime's run methods, called with the token added
_ARRAY_TYPE = frozenset((np.ndarray,))


def _result_or_run_error(token: int, call):
    """``call()``'s result, unless the op recorded an error for ``token``: then that error (chained to ORT's)."""
    try:
        result = call()
    except BaseException as exc:
        error = RUN_ERRORS.pop(token)
        if error is None:
            raise
        raise error from exc
    error = RUN_ERRORS.pop(token)
    if error is not None:
        raise error
    return result


class InferenceSession(ort.InferenceSession):
    """``onnxruntime.InferenceSession`` for models holding GatherMultiaxis nodes.

    Same arguments as ORT's (``path_or_bytes`` may also be a ``ModelProto``), and three of its own:

    * ``run_builtin_gathers`` (default True): nodes one standard ONNX gather computes exactly run as that
      gather on ORT's kernel (``graphs.lower.lower_single_gathers``): same bits, without the PyOp bridge's
      ~8-10 us per call; out-of-range indices then raise ORT's error. False: every node runs on the kernel.
    * ``bind_constants=False`` keeps every data operand of the kernel's nodes on the bridge.
    * ``bind_options`` (keyword): the bind step's node forms, a ``BindOptions`` (None: all of them)."""

    _gathermultiaxis_run_tokens = True  # errors travel by run token (no per-thread channel)
    _gathermultiaxis_token_name = None

    def __init__(self, path_or_bytes: str | bytes | os.PathLike | ModelProto,
                 sess_options: ort.SessionOptions | None = None,
                 providers: Sequence[str | tuple[str, dict[Any, Any]]] | None = None,
                 provider_options: Sequence[dict[Any, Any]] | None = None, bind_constants: bool = True,
                 run_builtin_gathers: bool = True, *, bind_options: BindOptions | None = None,
                 **kwargs: Any) -> None:
        if isinstance(path_or_bytes, (str, os.PathLike)) and os.fspath(path_or_bytes).endswith(".ort"):
            raise ValueError("ORT format models are not supported: pass the ONNX model")
        if sess_options is not None:
            _refuse_model_writing(sess_options)
        model, model_folder = load_model(path_or_bytes)
        folder = external_data_folder(model_folder, sess_options)
        try:
            prepared = prepare_model(model, folder, bind=bind_constants, builtin_gathers=run_builtin_gathers,
                                     options=BindOptions() if bind_options is None else bind_options)
        except ExternalDataError as error:  # ORT's exception type for the same refusal
            raise Fail(f"cannot load the model: {error}") from error
        self._gathermultiaxis_token_name = prepared.token if prepared.tokened else None
        self._gathermultiaxis_string_inputs = prepared.string_inputs
        self._gathermultiaxis_bridge_outputs = _bridge_written_outputs(prepared.model)
        self._gathermultiaxis_tables = prepared.tables  # the session's own: the op finds them while it holds them
        self._gathermultiaxis_crossings = prepared.crossings
        self._gathermultiaxis_builtin = prepared.builtin_gathers
        _log.debug("session: %d nodes run as builtin gathers, %d constant tables bound, %d bridge crossings a run",
                   prepared.builtin_gathers, len(prepared.tables), prepared.crossings)
        ortop.publish_bound_tables(prepared.tables)
        options = own_options(sess_options, library=needs_library(prepared.model))
        self._gathermultiaxis_shared = share_bound_initializers(options, prepared)
        # External data not bound stays external: ORT maps it from ``folder`` (the bytes stay small).
        pointed = ExternalDataFolder(options, folder, prepared.model, owned=is_own_copy(options))
        serialized = prepared.model.SerializeToString()
        del model, prepared
        with pointed:
            super().__init__(serialized, options, providers, provider_options, **kwargs)
        if "_gathermultiaxis_direct" not in vars(self):  # an ORT without the _bind_session hook (1.26)
            self._gathermultiaxis_bind(self._sess)

    def _bind_session(self, sess):
        super()._bind_session(sess)
        self._gathermultiaxis_bind(sess)

    def _gathermultiaxis_bind(self, sess):
        """ORT's bookkeeping without the hidden token input, and what ``run`` checks per call, read once."""
        token = self._gathermultiaxis_token_name
        _, inputs_meta, outputs_meta, providers = session_state(self)  # checked once: ORT's private state
        if token is not None:
            inputs_meta = [value for value in inputs_meta if value.name != token]
            set_inputs_meta(self, inputs_meta)
        self._gathermultiaxis_inputs = inputs_meta
        self._gathermultiaxis_required = frozenset(value.name for value in inputs_meta
                                                   if not value.type.startswith("optional"))
        self._gathermultiaxis_outputs = [value.name for value in outputs_meta]
        # run's direct path: CPU only (no EP fallback to retry) and no WebGPU graph capture to check
        graph_capture = getattr(sess, "is_webgpu_graph_capture_enabled", None)  # not before ORT 1.2x
        self._gathermultiaxis_direct = (token is not None and list(providers) == ["CPUExecutionProvider"]
                                        and not (graph_capture is not None and graph_capture()))

    def _validate_input(self, feed_input_names):
        """ORT's missing-input check, with the feed names the caller gave (the token left out)."""
        token = self._gathermultiaxis_token_name
        if token is None:
            return super()._validate_input(feed_input_names)
        for value in self._gathermultiaxis_inputs:  # the common case: nothing missing, nothing to report
            if value.name not in feed_input_names and not value.type.startswith("optional"):
                return super()._validate_input([name for name in feed_input_names if name != token])
        return None

    @property
    def bound_tables(self) -> int:
        """How many constant data operands this session handed to the kernel."""
        return len(self._gathermultiaxis_tables)

    @property
    def builtin_gathers(self) -> int:
        """How many GatherMultiaxis nodes this session runs as one standard ONNX gather."""
        return self._gathermultiaxis_builtin

    @property
    def bridge_crossings(self) -> int:
        """PyOp bridge crossings one run makes, counted in the graph (a Loop body node once, both If branches)."""
        return self._gathermultiaxis_crossings

    # ------------------------------------------------------------ run APIs
    def _check_strings(self, input_feed) -> None:
        for name in self._gathermultiaxis_string_inputs:
            value = input_feed.get(name)
            if value is None:
                continue
            values = np.asarray(value)
            refuse_unsafe_string_feeds({name: values}, (name,))
            if values.dtype.kind in "OUS" and any("\x00" in v if isinstance(v, str) else b"\x00" in v
                                                  for v in values.reshape(-1).tolist()
                                                  if isinstance(v, (str, bytes))):
                raise ValueError(f"input {name!r}: {NUL_LIMIT}")

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            run_options: ort.RunOptions | None = None) -> list[Any]:
        """Mirrors ORT's ``run``; string inputs are checked and the op's own error (``GatherIndexError``) is raised.

        Args:
            output_names: the outputs to compute, or None for all.
            input_feed: input name to ``np.ndarray`` or ``onnxruntime.OrtValue``.
            run_options: ``onnxruntime.RunOptions``, or None.

        Returns:
            The outputs, in the order of ``output_names``.

        Raises:
            ValueError: a string input holds a NUL character or a value the bridge cannot carry.
            GatherIndexError: an index out of range (other errors of the op likewise)."""
        name = self._gathermultiaxis_token_name
        if name is None:
            return _SESSION.run(self, output_names, input_feed, run_options)
        if self._gathermultiaxis_string_inputs:
            self._check_strings(input_feed)
        # ORT's Session.run checks, in that order: WebGPU graph capture, missing inputs, OrtValues of
        # another device, then retries on CPU after an EP failure. A CPU-only session needs only the
        # second and third, done here with what _bind_session read once (feeds of ndarrays alone: one
        # C-level pass over their types instead of an isinstance per value).
        if not (self._gathermultiaxis_direct and self._gathermultiaxis_required <= input_feed.keys() and (
                _ARRAY_TYPE.issuperset(map(type, input_feed.values()))
                or not any(isinstance(value, ort.OrtValue) for value in input_feed.values()))):
            token = RUN_ERRORS.new_token()
            feed = {**input_feed, name: np.array(token, dtype=np.int64)}
            return _result_or_run_error(token, lambda: _SESSION.run(self, output_names, feed, run_options))
        lent = RUN_ERRORS.lend_token()  # a synchronous run: its token goes back once its error is popped
        token = lent[0]
        feed = {**input_feed, name: lent[1]}
        try:
            result = self._sess.run(output_names or self._gathermultiaxis_outputs, feed, run_options)
        except BaseException as exc:
            error = RUN_ERRORS.pop(token)
            RUN_ERRORS.give_back(lent)
            if error is None:
                raise
            raise error from exc
        error = RUN_ERRORS.pop(token)
        RUN_ERRORS.give_back(lent)
        if error is not None:
            raise error
        return result

    def _tokened_call(self, call, add_token):
        """Run ``call()`` after ``add_token`` put a fresh token into its feed; raise the run's error."""
        token = RUN_ERRORS.new_token()
        add_token(token)
        return _result_or_run_error(token, call)

    def run_with_ort_values(self, output_names: Sequence[str] | None, input_dict_ort_values: Mapping[str, ort.OrtValue],
                            run_options: ort.RunOptions | None = None) -> list[ort.OrtValue]:
        """Mirrors ORT's ``run_with_ort_values``; the op's own error is raised.

        Args:
            output_names: the outputs to compute, or None for all.
            input_dict_ort_values: input name to ``onnxruntime.OrtValue``.
            run_options: ``onnxruntime.RunOptions``, or None.

        Returns:
            The outputs, ``onnxruntime.OrtValue``s."""
        name = self._gathermultiaxis_token_name
        if name is None:
            return _SESSION.run_with_ort_values(self, output_names, input_dict_ort_values, run_options)
        feed = dict(input_dict_ort_values)
        return self._tokened_call(
            lambda: _SESSION.run_with_ort_values(self, output_names, feed, run_options),
            lambda token: feed.__setitem__(name, ort.OrtValue.ortvalue_from_numpy(np.array(token, dtype=np.int64))))

    def run_with_iobinding(self, iobinding: ort.IOBinding, run_options: ort.RunOptions | None = None) -> None:
        """Mirrors ORT's ``run_with_iobinding``; the op's own error is raised, and pre-allocated CPU outputs a
        PyOp node writes are checked first (a wrong shape would end the process).

        Args:
            iobinding: this session's ``onnxruntime.IOBinding``, inputs and outputs bound.
            run_options: ``onnxruntime.RunOptions``, or None.

        Returns:
            None (the outputs are in ``iobinding``).

        Raises:
            RuntimeError: a pre-allocated output does not match what the run produced."""
        name = self._gathermultiaxis_token_name
        at_risk = self._gathermultiaxis_bridge_outputs
        if name is None:
            return run_with_preallocated_outputs_checked(
                iobinding, lambda: _SESSION.run_with_iobinding(self, iobinding, run_options), at_risk)
        value = []  # the token's array, alive until the run returns

        def add_token(token: int) -> None:
            value.append(np.array(token, dtype=np.int64))
            iobinding.bind_cpu_input(name, value[0])

        return self._tokened_call(
            lambda: run_with_preallocated_outputs_checked(
                iobinding, lambda: _SESSION.run_with_iobinding(self, iobinding, run_options), at_risk),
            add_token)

    def run_with_ortvaluevector(self, run_options: ort.RunOptions | None, feed_names: Sequence[str],
                                feeds: Sequence[Any], fetch_names: Sequence[str], fetches: Any,
                                fetch_devices: Sequence[Any]) -> None:
        # feeds: ORT's C-level OrtValues (OrtValue._ortvalue); fetches: the OrtValueVector the outputs go into
        """Mirrors ORT's low-level ``run_with_ortvaluevector``, checked as ``run_with_iobinding`` is.

        Args:
            run_options: ``onnxruntime.RunOptions``, or None.
            feed_names: the input names, in the order of ``feeds``.
            feeds: ORT's C-level OrtValues (``OrtValue._ortvalue``).
            fetch_names: the outputs to compute.
            fetches: the ``OrtValueVector`` the outputs go into.
            fetch_devices: the device of each fetch.

        Returns:
            None (the outputs are in ``fetches``).

        Raises:
            ValueError: names and feeds differ in length, or pre-allocated PyOp-written fetches are mixed
                with unallocated ones.
            RuntimeError: a pre-allocated fetch does not match what the run produced."""
        name = self._gathermultiaxis_token_name
        if name is None:
            return _SESSION.run_with_ortvaluevector(self, run_options, feed_names, feeds, fetch_names, fetches,
                                                    fetch_devices)
        names, values, token_value = list(feed_names), session_internals().ort_value_vector(), []
        if len(names) != len(feeds):
            raise ValueError(f"run_with_ortvaluevector: {len(names)} feed names for {len(feeds)} feeds")
        for value in feeds:
            values.push_back(value)

        def add_token(token):
            token_value.append(ort.OrtValue.ortvalue_from_numpy(np.array(token, dtype=np.int64)))
            names.append(name)
            values.push_back(c_ort_value(token_value[0]))

        return self._tokened_call(lambda: run_with_preallocated_fetches_checked(
            fetch_names, fetches, lambda into: _SESSION.run_with_ortvaluevector(
                self, run_options, names, values, fetch_names, into, fetch_devices),
            self._gathermultiaxis_bridge_outputs), add_token)

    def run_async(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
                  callback: Callable[[Any, Any, str], None], user_data: Any,
                  run_options: ort.RunOptions | None = None) -> None:
        """Mirrors ORT's ``run_async``; the op's own error reaches ``callback``'s error string (type and
        message, then ORT's message in parentheses).

        Args:
            output_names: the outputs to compute, or None for all.
            input_feed: input name to value.
            callback: ``callback(results, user_data, err)``, ``err`` empty on success.
            user_data: passed to ``callback`` as is.
            run_options: ``onnxruntime.RunOptions``, or None.

        Raises:
            ValueError: a string input holds a NUL character or a value the bridge cannot carry."""
        name = self._gathermultiaxis_token_name
        if self._gathermultiaxis_string_inputs:
            self._check_strings(input_feed)
        if name is None:
            return _SESSION.run_async(self, output_names, input_feed, callback, user_data, run_options)
        token = RUN_ERRORS.new_token()
        input_feed = {**input_feed, name: np.array(token, dtype=np.int64)}

        def finished(results, data, err, session=self):  # holds the session (and its tables) until the end
            error = RUN_ERRORS.pop(token)
            if error is not None:
                err = f"{type(error).__name__}: {error}" + (f" ({err})" if err else "")
            callback(results, data, err)

        return _SESSION.run_async(self, output_names, input_feed, finished, user_data, run_options)
