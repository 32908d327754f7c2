"""A config change that decides which code Triton runs (backend, platform, runtime,
default_model_filename, model_operations, EXECUTION_ENV_PATH) needs the right to upload code:
an operator who may not upload a model.py must not make an uploaded data file run as one."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access.roles import Role
from geadmin.errors import AccessDeniedError, ConfigInvalidError
from geadmin.ops.models.apply import apply_config
from geadmin.ops.models.apply_result import ApplyOutcome
from geadmin.repository import store
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.auth import admin_auth, auth_as

MODEL = "digits_classifier"


@pytest.fixture(autouse=True)
def _home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))


def test_an_operator_cannot_point_the_model_at_other_code_and_nothing_is_written(
        triton_factory: Callable[..., TritonProcess]) -> None:
    server = triton_factory(models=[MODEL])
    before = store.read_config(server.repository, MODEL)
    text = before.data.decode()
    changes = {
        "default_model_filename": text + '\ndefault_model_filename: "labels.py"\n',
        "backend": text.replace('backend: "python"', 'backend: "mine"'),
        "parameters[EXECUTION_ENV_PATH]": text + '\nparameters { key: "EXECUTION_ENV_PATH" value '
                                                 '{ string_value: "$$TRITON_MODEL_DIRECTORY/e.tgz" } }\n',
    }
    with TritonClient(server.http_url) as client:
        for field_name, new in changes.items():
            with pytest.raises(AccessDeniedError, match=f"changes {re.escape(field_name)}.*admin role"):
                apply_config(client, server.repository, MODEL, new, auth=auth_as("olga", Role.OPERATOR))
            assert store.read_config(server.repository, MODEL).data == before.data
        refusals = [r for r in audit.query(model=MODEL) if r.result == "refused"]
        assert len(refusals) == len(changes) and {r.who for r in refusals} == {"olga"}
        # the serving fields stay the operator's to change
        batching = text.replace("max_batch_size: 32", "max_batch_size: 32\n# reviewed")
        assert apply_config(client, server.repository, MODEL, batching,
                            auth=auth_as("olga", Role.OPERATOR)).outcome is ApplyOutcome.APPLIED
        # an admin (and the CLI's OS user) may: past the guard, the validator has its say
        with pytest.raises(ConfigInvalidError, match=r"no labels\.py"):
            apply_config(client, server.repository, MODEL, changes["default_model_filename"],
                         auth=admin_auth())
