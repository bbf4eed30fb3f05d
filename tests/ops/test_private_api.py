"""ops.private_api: a group of private names looked up at once, one PrivateAPIError naming every missing one,
the installed versions and the tested ones."""

import types

import pytest

from gathermultiaxis.ops.private_api import TESTED_VERSIONS, Lookup, PrivateAPIError, installed_versions


def test_every_missing_name_is_named_in_one_error():
    owner = types.SimpleNamespace(present=types.SimpleNamespace(inner=1))
    lookup = Lookup("do the thing")
    assert lookup.attribute(owner, "present.inner", "Owner") == 1
    assert lookup.attribute(owner, "absent", "Owner") is None
    assert lookup.attribute(owner, "present.gone", "Owner") is None
    assert lookup.module("gathermultiaxis_no_such_module") is None
    with pytest.raises(PrivateAPIError) as raised:
        lookup.done()
    message = str(raised.value)
    assert message.startswith("gathermultiaxis cannot do the thing: the installed versions (")
    assert "lack Owner.absent, Owner.present.gone, gathermultiaxis_no_such_module." in message
    assert TESTED_VERSIONS in message and installed_versions() in message


def test_nothing_missing_raises_nothing():
    lookup = Lookup("do the thing")
    assert lookup.module("json") is not None
    lookup.done()


def test_the_error_is_an_import_error_and_the_versions_are_named():
    assert issubclass(PrivateAPIError, ImportError)  # a caller that guards the import of ORT catches it too
    assert installed_versions().startswith("onnxruntime ") and "onnxruntime-extensions " in installed_versions()
