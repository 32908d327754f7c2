"""The Dockerfile: hadolint, its stages, and the CMake options against backend_src/build.sh.

The CANN stages cannot be built on this machine (no CANN image can be pulled): these checks
and CI building backend_src with build.sh are what cover them. The CPU stages are built
for real by test_compose_up.py.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field

import pytest
import yaml

from tests.support.deploy import ROOT, venv_tool

DOCKERFILE = ROOT / "Dockerfile"
BUILD_SH = ROOT / "backend_src" / "build.sh"
CONSTRAINTS = ROOT / "deploy" / "constraints.txt"


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (KEYWORD, arguments)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str | None:
        found = self.all(keyword)
        return found[-1] if found else None


def logical_lines(text: str) -> list[str]:
    """Instructions with their continuation lines joined; comment lines dropped."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1].rstrip() + " "
            continue
        current += stripped
        if current.strip():
            lines.append(current.strip())
        current = ""
    return lines


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARGs (name -> default) and the stages in file order."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical_lines(text):
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", args.strip(), re.IGNORECASE)
            assert match, f"cannot read FROM {args!r}"
            stages.append(Stage(match.group(2) or f"stage{len(stages)}", match.group(1)))
        elif not stages:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            name, _, default = args.partition("=")
            global_args[name.strip()] = default.strip()
        else:
            stages[-1].instructions.append((keyword, args.strip()))
    return global_args, stages


GLOBAL_ARGS, STAGES = parse_dockerfile(DOCKERFILE.read_text())
BY_NAME = {stage.name: stage for stage in STAGES}
TRITON_TARGETS = ("triton", "triton-cpu")


def lineage(name: str) -> list[Stage]:
    """The stage and the stages it is built FROM, nearest first."""
    chain = [BY_NAME[name]]
    while chain[-1].base in BY_NAME:
        chain.append(BY_NAME[chain[-1].base])
    return chain


def env_of(name: str) -> dict[str, str]:
    """ENV values a stage has (its own and inherited), as written (unexpanded)."""
    values: dict[str, str] = {}
    for stage in reversed(lineage(name)):
        for args in stage.all("ENV"):
            for token in shlex.split(args):
                key, sep, value = token.partition("=")
                assert sep, f"ENV in legacy 'KEY value' form: {args!r}"
                values[key] = value
    return values


def cmake_options(command: str) -> dict[str, str]:
    """The -DNAME=VALUE options of one `cmake -S ... -B ...` configure command."""
    words = shlex.split(command)
    start = next(i for i, w in enumerate(words) if w == "cmake" and "-S" in words[i:i + 3])
    options: dict[str, str] = {}
    for word in words[start + 1:]:
        if word in ("&&", ";"):
            break
        if word.startswith("-D"):
            key, _, value = word[2:].partition("=")
            options[key] = value
    return options


def dockerfile_cmake_options(stage: str) -> dict[str, str]:
    runs = [run for run in BY_NAME[stage].all("RUN") if "cmake -S" in run]
    assert len(runs) == 1, f"stage {stage}: expected one RUN with `cmake -S`, got {len(runs)}"
    return cmake_options(runs[0])


def build_sh_cmake_options(*, toolkit: bool, ge_graph: str) -> dict[str, str]:
    """The -D options build.sh passes on its first configure, for `--lib-only`, the main
    variant (no sanitizer), with or without ASCEND_TOOLKIT_HOME and NPU_GE_WITH_GE_GRAPH."""
    text = BUILD_SH.read_text()
    lib_only = re.search(r'if \[\[ "\$LIB_ONLY" == 1 \]\]; then TEST_FLAGS=\(([^)]*)\)', text)
    assert lib_only, "build.sh: no TEST_FLAGS=(...) for --lib-only"
    configure = re.search(r'^\s*cmake -S .*?(?<!\\)\n', text, re.MULTILINE | re.DOTALL)
    assert configure, "build.sh: no `cmake -S` configure command"
    command = configure.group(0).replace("\\\n", " ")
    assert 'echo "$ASCEND_TOOLKIT_HOME/include"' in text, "build.sh: toolkit headers moved"
    include = "${ASCEND_TOOLKIT_HOME}/include" if toolkit else "<torch-npu headers>"
    substitutions = {
        '"$CANN_INCLUDE"': include,
        '"$sanitize"': "",
        '"${NPU_GE_WITH_GE_GRAPH:-OFF}"': ge_graph,
        '"${TEST_FLAGS[@]}"': lib_only.group(1),
        '"${GENERATOR[@]}"': "",
    }
    for variable, value in substitutions.items():
        command = command.replace(variable, shlex.quote(value) if variable != '"${TEST_FLAGS[@]}"' else value)
    options = cmake_options(command)
    leftover = {k: v for k, v in options.items() if "$" in v and v != include}
    assert not leftover, f"build.sh's cmake options use {leftover}: teach this test their values"
    return options


def test_hadolint_reports_nothing_above_info() -> None:
    done = subprocess.run([venv_tool("hadolint"), "--no-color", "--failure-threshold", "warning",
                           str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"hadolint:\n{done.stdout}{done.stderr}"
    assert not re.search(r"\b(warning|error)\b", done.stdout), done.stdout


def test_targets_exist_and_the_ascend_image_is_the_default() -> None:
    for name in ("python-base", "dashboard", "backend-build-cpu", "triton-cpu", "cann-env",
                 "backend-build", "triton"):
        assert name in BY_NAME, f"no stage {name}"
    assert STAGES[-1].name == "triton", "`docker build .` must give the Ascend image"
    assert len(BY_NAME) == len(STAGES), "two stages share a name"


def test_cpu_targets_come_before_any_cann_stage() -> None:
    """The classic builder builds every stage up to the target: `--target triton-cpu` and
    `--target dashboard` must not need the CANN image."""
    first_cann = min(i for i, s in enumerate(STAGES)
                     if any(stage.base == "${CANN_IMAGE}" for stage in lineage(s.name)))
    for target in ("dashboard", "triton-cpu"):
        position = STAGES.index(BY_NAME[target])
        assert position < first_cann, f"{target} comes after the first CANN stage"
        assert all(stage.base != "${CANN_IMAGE}" for stage in lineage(target))
    assert BY_NAME["python-base"].base == "${BASE_IMAGE}"


def test_base_images_are_build_args_with_real_public_defaults() -> None:
    assert GLOBAL_ARGS["CANN_IMAGE"] == "quay.io/ascend/cann:8.3.rc2-910b-ubuntu22.04-py3.11"
    assert re.fullmatch(r"debian:bookworm(-slim)?", GLOBAL_ARGS["BASE_IMAGE"])
    assert "quay.io/ascend/cann:8.3.rc2-310p-ubuntu22.04-py3.11" in DOCKERFILE.read_text(), \
        "the 310P tag is documented"
    for stage in STAGES:
        assert stage.base.startswith("${") or stage.base in BY_NAME, \
            f"stage {stage.name} is FROM a fixed image {stage.base}: make it a build arg"


@pytest.mark.parametrize("target", [*TRITON_TARGETS, "dashboard"])
def test_images_run_as_a_non_root_user(target: str) -> None:
    user = next((s.last("USER") for s in lineage(target) if s.last("USER")), None)
    assert user is not None, f"{target}: no USER"
    assert user.split(":")[0] not in ("root", "0"), f"{target} runs as {user}"


@pytest.mark.parametrize("target", TRITON_TARGETS)
def test_triton_images_expose_the_triton_ports_and_check_liveness_as_compose_does(target: str) -> None:
    """Liveness, not readiness: readiness is strict (one model that failed to load makes it
    false), so a readiness check would mark a serving Triton unhealthy — compose.yaml gives
    the reason; the image and compose must probe the same URL."""
    stage = BY_NAME[target]
    assert set(" ".join(stage.all("EXPOSE")).split()) == {"8000", "8001", "8002"}
    healthcheck = stage.last("HEALTHCHECK")
    assert healthcheck and "/v2/health/live" in healthcheck and "/v2/health/ready" not in healthcheck
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    probe = " ".join(compose["services"]["triton"]["healthcheck"]["test"])
    url = re.search(r"http://\S+?/v2/health/\w+", healthcheck)
    assert url and url[0] in probe, f"the image probes {url[0] if url else '?'}, compose: {probe}"
    assert "--backend-directory=/opt/tritonserver/backends" in (stage.last("CMD") or "")
    assert "triton-entrypoint.sh" in (stage.last("ENTRYPOINT") or "")
    copied = " ".join(stage.all("COPY"))
    assert "/opt/tritonserver/backends/npu_ge/" in copied and "libtriton_npu_ge.so" in copied


def test_dashboard_image_exposes_streamlit_and_checks_its_health() -> None:
    stage = BY_NAME["dashboard"]
    assert stage.all("EXPOSE") == ["8501"]
    assert "/_stcore/health" in (stage.last("HEALTHCHECK") or "")
    cmd = stage.last("CMD") or ""
    assert '"dashboard", "--host", "0.0.0.0", "--port", "8501"' in cmd
    assert any("pip wheel" in run for run in BY_NAME["geadmin-wheel"].all("RUN"))


def test_cann_environment_is_in_env_not_a_shell_profile() -> None:
    env = env_of("triton")
    assert env["ASCEND_TOOLKIT_HOME"] == "/usr/local/Ascend/ascend-toolkit/latest"
    assert env["ASCEND_OPP_PATH"] == "${ASCEND_TOOLKIT_HOME}/opp"
    assert env["ASCEND_AICPU_PATH"] == "${ASCEND_TOOLKIT_HOME}"
    library_path = env["LD_LIBRARY_PATH"].split(":")
    assert library_path[0] == "/opt/tritonserver/lib", "Triton's own libraries first"
    inherited = env_of("cann-env")["LD_LIBRARY_PATH"].split(":")
    for needed in ("${ASCEND_TOOLKIT_HOME}/lib64", "${ASCEND_DRIVER_HOME}/lib64",
                   "${ASCEND_DRIVER_HOME}/lib64/driver"):
        assert needed in inherited
    assert "${ASCEND_TOOLKIT_HOME}/bin" in env_of("cann-env")["PATH"]
    assert env["PATH"].endswith(":${PATH}") and env["LD_LIBRARY_PATH"].endswith(":${LD_LIBRARY_PATH}"), \
        "the triton stage must extend CANN's PATH and LD_LIBRARY_PATH, not replace them"
    code = "\n".join(logical_lines(DOCKERFILE.read_text()))
    assert ".bashrc" not in code and "set_env.sh" not in code and "source " not in code
    assert "ASCEND" not in " ".join(env_of("triton-cpu")), "no CANN settings without CANN"


def test_no_pipe_to_shell_and_no_disabled_tls_checks() -> None:
    code = "\n".join(logical_lines(DOCKERFILE.read_text()))
    forbidden = [r"(curl|wget)[^|&;]*\|\s*(ba|z)?sh", r"--insecure", r"--trusted-host",
                 r"verify\s*=\s*False", r"--no-check-certificate", r"PIP_TRUSTED_HOST",
                 r"GIT_SSL_NO_VERIFY", r"curl\s+(-\w*k|.*\s-k\b)", r"PIP_CERT", r"\.crt\b"]
    for pattern in forbidden:
        assert not re.search(pattern, code), f"the Dockerfile matches {pattern!r}"


def test_versions_are_pinned() -> None:
    assert GLOBAL_ARGS["PYTRITON_VERSION"] == "0.7.0"
    assert GLOBAL_ARGS["NUMPY_VERSION"].startswith("1."), "numpy must stay < 2 for the python backend"
    pins = dict(line.split("==") for line in CONSTRAINTS.read_text().splitlines()
                if line and not line.startswith("#"))
    assert pins["nvidia-pytriton"] == GLOBAL_ARGS["PYTRITON_VERSION"]
    assert pins["numpy"] == GLOBAL_ARGS["NUMPY_VERSION"]
    build_sh = BUILD_SH.read_text()
    assert f'TORCH_NPU_VERSION="{GLOBAL_ARGS["TORCH_NPU_VERSION"]}"' in build_sh
    for stage in STAGES:
        for run in stage.all("RUN"):
            for packages in re.findall(r"apt-get install ([^&;]*)", re.sub(r"\$\([^)]*\)", "V", run)):
                for word in packages.split():
                    assert word.startswith("-") or "=" in word, f"{stage.name}: apt {word} unpinned"


def test_constraints_cover_every_runtime_requirement() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {canonicalize_name(line.split("==")[0]) for line in CONSTRAINTS.read_text().splitlines()
              if line and not line.startswith("#")}
    for text in project["dependencies"]:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"python_version": "3.11"}):
            assert canonicalize_name(requirement.name) in pinned, \
                f"deploy/constraints.txt does not pin {requirement.name}"


def test_constraints_satisfy_every_runtime_requirement() -> None:
    """A pin the project's own requirements exclude breaks only the image build (late, in
    the Docker tests): e.g. starlette pinned above the `<1.8` that Streamlit 1.60 needs."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = dict(line.split("==", 1) for line in CONSTRAINTS.read_text().splitlines()
                if line and not line.startswith("#"))
    pins = {canonicalize_name(name): version for name, version in pins.items()}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text)
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is not None:
            assert requirement.specifier.contains(pinned, prereleases=True), \
                f"deploy/constraints.txt pins {requirement.name}=={pinned}, outside {requirement}"


def test_cann_build_stage_uses_the_cmake_options_of_build_sh() -> None:
    expected = build_sh_cmake_options(toolkit=True, ge_graph="ON")
    assert dockerfile_cmake_options("backend-build") == expected
    assert env_of("backend-build")["ASCEND_TOOLKIT_HOME"] == "/usr/local/Ascend/ascend-toolkit/latest"


def test_cpu_build_stage_uses_the_cmake_options_of_build_sh() -> None:
    expected = build_sh_cmake_options(toolkit=False, ge_graph="OFF")
    got = dockerfile_cmake_options("backend-build-cpu")
    assert got.pop("NPU_GE_CANN_INCLUDE_DIR") == "/opt/cann-headers/include"
    expected.pop("NPU_GE_CANN_INCLUDE_DIR")
    assert got == expected


def test_build_sh_parser_sees_every_option() -> None:
    """Guards the comparison above: it must see build.sh's real options, not an empty set."""
    options = build_sh_cmake_options(toolkit=True, ge_graph="ON")
    assert options["NPU_GE_WITH_GE_GRAPH"] == "ON"
    assert options["NPU_GE_BUILD_TESTS"] == "OFF" and options["NPU_GE_BUILD_TEST_DOUBLE"] == "OFF"
    assert {"CMAKE_BUILD_TYPE", "NPU_GE_CANN_INCLUDE_DIR", "NPU_GE_SANITIZE"} <= set(options)


def test_dockerignore_keeps_local_state_out_of_the_context() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    for entry in (".git", ".venv", "build", "**/__pycache__", ".pytest_cache", ".mypy_cache",
                  ".ruff_cache", "*.egg-info", ".env"):
        assert entry in ignored, f".dockerignore lacks {entry}"
    for needed in ("geadmin", "pages", "backend_src", "deploy", "pyproject.toml", "README.md"):
        assert needed not in ignored


def test_entrypoint_helpers_are_executable() -> None:
    for name in ("install-triton.sh", "triton-entrypoint.sh"):
        assert (ROOT / "deploy" / name).stat().st_mode & 0o111, f"deploy/{name} is not executable"


def test_parser_reads_continuations_and_stage_names() -> None:
    args, stages = parse_dockerfile("ARG X=1\nFROM ${X} AS a\n# c\nRUN echo a \\\n    b\nFROM a\nUSER 1\n")
    assert args == {"X": "1"}
    assert [(s.name, s.base) for s in stages] == [("a", "${X}"), ("stage1", "a")]
    assert stages[0].all("RUN") == ["echo a b"]
