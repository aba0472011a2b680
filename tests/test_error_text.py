"""An error that names a file whose name is not UTF-8 prints on a strict UTF-8 stream, as the user types it."""

import io
import os

import pytest

from npu_sim_bridge.errors import OpsInfoError, PassError, printable
from npu_sim_bridge.ops_info.loader import load_library


def test_an_undecodable_folder_name_is_written_with_its_byte(tmp_path):
    folder = os.fsdecode(os.fsencode(str(tmp_path)) + b"/ops_\xff")  # as a shell hands the name over
    with pytest.raises(OpsInfoError) as caught:
        load_library(folder)
    message = str(caught.value)
    assert f"{tmp_path}/ops_\\xff does not exist" in message
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    stream.write(message)  # raised UnicodeEncodeError while the message kept the escaped surrogate
    stream.flush()


def test_text_that_decodes_is_left_as_it_is_and_stray_surrogates_are_written_out():
    assert printable("Ascend 910 · ü") == "Ascend 910 · ü"
    assert printable("a\ud800b") == "a\\ud800b"
    assert str(PassError("precision", "file " + os.fsdecode(b"x\xfe"))) == "pass 'precision' failed: file x\\xfe"
