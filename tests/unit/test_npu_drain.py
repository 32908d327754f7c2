"""What draining a faulted chip means for a model's config, and whether a move fits: the config
through the real protobuf and rewrite, the HBM figures from a planted npu_ge metrics page served
over real HTTP (geadmin.ops.npu.devices)."""

from __future__ import annotations

from pathlib import Path

import pytest

from geadmin.errors import RepositoryError
from geadmin.ops.npu.devices import drained_config, move_refusal
from geadmin.repository.modelconfig import parse_pbtxt
from tests.support.http_doubles import serve

MIB = 1 << 20


def config_with(repository: Path, params: str) -> Path:
    (repository / "m" / "1").mkdir(parents=True)
    path = repository / "m" / "config.pbtxt"
    path.write_text(f'name: "m"\nbackend: "npu_ge"\nmax_batch_size: 8\n# where it runs\n{params}')
    return path


def test_the_chip_leaves_device_ids_and_the_rest_of_the_file_stays(tmp_path: Path) -> None:
    path = config_with(tmp_path, 'parameters { key: "device_ids" value { string_value: "0, 3,5" } }\n')
    drained = drained_config(tmp_path, "m", 3)
    assert (drained.before, drained.after, drained.remaining) == ("0, 3,5", "0,5", (0, 5))
    assert parse_pbtxt(drained.text).parameters["device_ids"].string_value == "0,5"
    assert "# where it runs" in drained.text and drained.base_text == path.read_text()


def test_the_older_spelling_is_kept(tmp_path: Path) -> None:
    config_with(tmp_path, 'parameters { key: "DEVICE_ID" value { string_value: "1,2" } }\n')
    config = parse_pbtxt(drained_config(tmp_path, "m", 2).text)
    assert set(config.parameters) == {"DEVICE_ID"}
    assert config.parameters["DEVICE_ID"].string_value == "1"


@pytest.mark.parametrize(("params", "reason"), [
    ("", "names no device_ids"),
    ('parameters { key: "device_ids" value { string_value: "0,x" } }\n', "is not a list of device ids"),
    ('parameters { key: "device_ids" value { string_value: "0,1" } }\n', "does not name chip 3"),
    ('parameters { key: "device_ids" value { string_value: "3" } }\n', "only device"),
])
def test_a_config_that_cannot_be_drained_is_refused_with_the_reason(tmp_path: Path, params: str,
                                                                     reason: str) -> None:
    config_with(tmp_path, params)
    with pytest.raises(RepositoryError, match=reason):
        drained_config(tmp_path, "m", 3)


def page(used: dict[int, int], total_mib: int = 1000) -> bytes:
    lines = [f'npu_ge_hbm_used_bytes{{device="{d}"}} {u * MIB}' for d, u in used.items()]
    lines += [f'npu_ge_hbm_total_bytes{{device="{d}"}} {total_mib * MIB}' for d in used]
    return ("\n".join(lines) + "\n").encode()


def test_a_move_that_fits_is_checked_and_one_that_does_not_is_refused_with_the_figures() -> None:
    with serve(page({0: 600, 1: 300, 2: 700})) as url:
        fits = move_refusal(url, 0, (1, 2))
        assert not fits.refused and "600 MiB to move, 1000 MiB free on device(s) 1, 2" in fits.message
        too_big = move_refusal(url, 0, (2,))
        assert too_big.refused and "chip 0 holds 600 MiB and device(s) 2 have 300 MiB free" in too_big.message


def test_without_npu_ge_figures_the_move_says_it_did_not_check() -> None:
    assert "not checked" in move_refusal(None, 0, (1,)).message
    with serve(b"nv_inference_count 1\n") as url:
        assert not move_refusal(url, 0, (1,)).refused
    assert "not checked" in move_refusal("http://127.0.0.1:9/metrics", 0, (1,)).message
