# geadmin images: Triton 2.51 with the npu_ge backend, and the dashboard.
#
# Targets (docker build --target NAME .):
#   triton       (default, last stage) Triton + npu_ge built against the CANN toolkit, with
#                the GE graph engine, for Ascend hosts. Multi-arch:
#                docker buildx build --platform linux/amd64,linux/arm64 --target triton .
#   triton-cpu   the same server tree FROM a plain Debian: no CANN, npu_ge built against the
#                CANN headers of the torch-npu wheel, so npu_ge models fail to load with the
#                backend's own "cannot load libascendcl" reason. For laptops and the tests.
#   dashboard    Debian's Python 3.11 with the geadmin wheel (the Streamlit control panel).
#
# Base images are build arguments so a machine that cannot reach a registry builds FROM a
# local image (the tests: a debootstrap'd Debian, see scripts/docker-engine.sh). Nothing in
# here trusts any certificate but the base image's own.
#
# Stage order matters: the classic builder (no BuildKit) builds every stage up to the
# target, so the stages that need no CANN image come first and `--target triton-cpu` or
# `--target dashboard` never pulls one.

# Ascend 910B (Atlas A2) with Ubuntu 22.04 and Python 3.11. For Atlas 300I Duo / 310P:
#   --build-arg CANN_IMAGE=quay.io/ascend/cann:8.3.rc2-310p-ubuntu22.04-py3.11
ARG CANN_IMAGE=quay.io/ascend/cann:8.3.rc2-910b-ubuntu22.04-py3.11
# Debian bookworm: python3 is 3.11, glibc 2.36 (the Triton wheel needs >= 2.35).
ARG BASE_IMAGE=debian:bookworm-slim
ARG PYTRITON_VERSION=0.7.0
ARG NUMPY_VERSION=1.26.4
# Same torch-npu release as backend_src/build.sh (its TORCH_NPU_VERSION): the CANN headers.
ARG TORCH_NPU_VERSION=2.14.0
ARG CMAKE_VERSION=3.31.10
ARG NINJA_VERSION=1.13.0
ARG SETUPTOOLS_VERSION=80.9.0

# ---------------------------------------------------------------- no CANN below this line
FROM ${BASE_IMAGE} AS python-base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3=3.11.2-1+b1 python3-venv=3.11.2-1+b1 \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && useradd --uid 1000 --user-group --create-home --shell /usr/sbin/nologin geadmin
ENV PATH=/opt/venv/bin:${PATH}

# The geadmin wheel, built from the source tree (only what the wheel needs is copied).
FROM python-base AS geadmin-wheel
ARG SETUPTOOLS_VERSION
RUN pip install --no-cache-dir "setuptools==${SETUPTOOLS_VERSION}"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY geadmin ./geadmin
COPY pages ./pages
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /dist .

FROM python-base AS dashboard
# Metadata before the big layers, USER last: the classic builder commits a container for
# every step, and the vfs storage driver copies the whole filesystem for each one.
# GEADMIN_REQUIRE_SIGN_IN: a container's port is published to other hosts whatever address
# the dashboard binds inside it, so the image never runs without sign-in.
ENV GEADMIN_HOME=/var/lib/geadmin \
    GEADMIN_REPOSITORY=/models \
    GEADMIN_TRITON_URL=http://triton:8000 \
    GEADMIN_REQUIRE_SIGN_IN=1
WORKDIR /var/lib/geadmin
EXPOSE 8501
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]
# `geadmin dashboard`: settles sign-in for the bind address first (GEADMIN_AUTH=local in
# compose: the first admin is created, its password in a 0600 file whose path this log names), then
# becomes Streamlit with the flags `geadmin up` gives it (geadmin/stack/dashboard.py).
CMD ["geadmin", "dashboard", "--host", "0.0.0.0", "--port", "8501"]
# Dependencies first, from the pinned closure (deploy/constraints.txt): this layer is
# rebuilt only when the pins change, not on every change of geadmin itself.
COPY deploy/constraints.txt /opt/geadmin/constraints.txt
RUN pip install --no-cache-dir -r /opt/geadmin/constraints.txt
COPY --from=geadmin-wheel /dist/ /tmp/dist/
RUN pip install --no-cache-dir -c /opt/geadmin/constraints.txt /tmp/dist/geadmin-*.whl \
    && pip check \
    && rm -rf /tmp/dist \
    && mkdir -p /var/log/triton /models \
    && ln -s "$(python -c 'import geadmin_dashboard.pages as p; print(p.__path__[0])')" /opt/geadmin/pages \
    && chown geadmin:geadmin /var/lib/geadmin
USER 1000:1000

# npu_ge without CANN: the ACL/GE headers of the torch-npu wheel (downloaded, not installed).
FROM python-base AS backend-build-cpu
ARG TORCH_NPU_VERSION
ARG CMAKE_VERSION
ARG NINJA_VERSION
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++=4:12.2.0-3 rapidjson-dev=1.1.0+dfsg2-7.1 \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir "cmake==${CMAKE_VERSION}" "ninja==${NINJA_VERSION}" \
    && pip download --no-cache-dir --no-deps --dest /tmp/wheel "torch-npu==${TORCH_NPU_VERSION}" \
    && python -m zipfile -e /tmp/wheel/torch_npu-*.whl /tmp/torch-npu \
    && mkdir -p /opt/cann-headers/include \
    && cp -r /tmp/torch-npu/torch_npu/include/acl /tmp/torch-npu/torch_npu/include/ge \
        /tmp/torch-npu/torch_npu/include/graph /opt/cann-headers/include/ \
    && rm -rf /tmp/wheel /tmp/torch-npu
COPY backend_src /src/backend_src
# The CMake options of backend_src/build.sh --lib-only (CI); tests/deploy compares them.
RUN cmake -S /src/backend_src -B /build -G Ninja \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DNPU_GE_CANN_INCLUDE_DIR=/opt/cann-headers/include \
        -DNPU_GE_SANITIZE= \
        -DNPU_GE_WITH_GE_GRAPH=OFF \
        -DNPU_GE_BUILD_TESTS=OFF \
        -DNPU_GE_BUILD_TEST_DOUBLE=OFF \
    && cmake --build /build -j "$(nproc)"

FROM python-base AS triton-cpu
ARG PYTRITON_VERSION
ARG NUMPY_VERSION
# Metadata first, USER last (see the dashboard stage).
ENV PATH=/opt/tritonserver/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/tritonserver/lib
EXPOSE 8000 8001 8002
# Liveness, not readiness: readiness is strict (false while any one model failed to load), so
# /v2/health/ready would mark the server unhealthy for one bad model (compose.yaml says the same).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v2/health/live', timeout=4)"]
ENTRYPOINT ["/usr/local/lib/geadmin/triton-entrypoint.sh"]
CMD ["--model-repository=/models", "--backend-directory=/opt/tritonserver/backends", "--model-control-mode=explicit", "--metrics-config=summary_latencies=true", "--exit-on-error=false"]
COPY deploy/install-triton.sh deploy/triton-entrypoint.sh deploy/triton-load-models.py /usr/local/lib/geadmin/
# The python backend stub links libpython3.11.so.1.0: the same build as the interpreter.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libpython3.11="$(dpkg-query -W -f='${Version}' python3.11)" \
    && rm -rf /var/lib/apt/lists/* \
    && PYTRITON_VERSION="${PYTRITON_VERSION}" NUMPY_VERSION="${NUMPY_VERSION}" \
        /usr/local/lib/geadmin/install-triton.sh python3
COPY --from=backend-build-cpu /build/npu_ge/libtriton_npu_ge.so /opt/tritonserver/backends/npu_ge/
USER 1000:1000

# ---------------------------------------------------------------- CANN below this line
# CANN's environment as plain ENV (what ascend-toolkit/set_env.sh exports), so it holds for
# every process of the container, `docker exec` included, not only for login shells.
FROM ${CANN_IMAGE} AS cann-env
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest \
    ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest \
    ASCEND_DRIVER_HOME=/usr/local/Ascend/driver
ENV ASCEND_OPP_PATH=${ASCEND_TOOLKIT_HOME}/opp \
    ASCEND_AICPU_PATH=${ASCEND_TOOLKIT_HOME} \
    TOOLCHAIN_HOME=${ASCEND_TOOLKIT_HOME}/toolkit \
    PATH=${ASCEND_TOOLKIT_HOME}/bin:${ASCEND_TOOLKIT_HOME}/compiler/ccec_compiler/bin:${PATH} \
    PYTHONPATH=${ASCEND_TOOLKIT_HOME}/python/site-packages:${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe \
    LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/lib64:${ASCEND_TOOLKIT_HOME}/lib64/plugin/opskernel:${ASCEND_TOOLKIT_HOME}/lib64/plugin/nnengine:${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/x86_64:${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/aarch64:${ASCEND_DRIVER_HOME}/lib64:${ASCEND_DRIVER_HOME}/lib64/common:${ASCEND_DRIVER_HOME}/lib64/driver

# npu_ge against the CANN toolkit, GE graph engine on (links libge_runner, libgraph,
# libfmk_onnx_parser from ${ASCEND_TOOLKIT_HOME}/lib64).
FROM cann-env AS backend-build
ARG CMAKE_VERSION
ARG NINJA_VERSION
# The CANN images ship a compiler; install Ubuntu 22.04's only where one is missing.
# RapidJSON (header-only) reads the model configuration: Ubuntu 22.04's package.
RUN apt-get update \
    && apt-get install -y --no-install-recommends rapidjson-dev=1.1.0+dfsg2-7 \
    && if ! command -v g++ >/dev/null; then \
        apt-get install -y --no-install-recommends g++=4:11.2.0-1ubuntu1; \
    fi \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/build-tools \
    && /opt/build-tools/bin/pip install --no-cache-dir "cmake==${CMAKE_VERSION}" "ninja==${NINJA_VERSION}"
ENV PATH=/opt/build-tools/bin:${PATH}
COPY backend_src /src/backend_src
# The CMake options of backend_src/build.sh --lib-only with ASCEND_TOOLKIT_HOME set and
# NPU_GE_WITH_GE_GRAPH=ON; tests/deploy compares them.
RUN test -f "${ASCEND_TOOLKIT_HOME}/include/acl/acl.h" \
    && cmake -S /src/backend_src -B /build -G Ninja \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DNPU_GE_CANN_INCLUDE_DIR="${ASCEND_TOOLKIT_HOME}/include" \
        -DNPU_GE_SANITIZE= \
        -DNPU_GE_WITH_GE_GRAPH=ON \
        -DNPU_GE_BUILD_TESTS=OFF \
        -DNPU_GE_BUILD_TEST_DOUBLE=OFF \
    && cmake --build /build -j "$(nproc)"

FROM cann-env AS triton
ARG PYTRITON_VERSION
ARG NUMPY_VERSION
ENV PATH=/opt/tritonserver/bin:/opt/venv/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/tritonserver/lib:${LD_LIBRARY_PATH}
EXPOSE 8000 8001 8002
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v2/health/live', timeout=4)"]
ENTRYPOINT ["/usr/local/lib/geadmin/triton-entrypoint.sh"]
CMD ["--model-repository=/models", "--backend-directory=/opt/tritonserver/backends", "--model-control-mode=explicit", "--metrics-config=summary_latencies=true", "--exit-on-error=false"]
COPY deploy/install-triton.sh deploy/triton-entrypoint.sh deploy/triton-load-models.py /usr/local/lib/geadmin/
# install-triton.sh runs the CANN image's python3 (/opt/venv does not exist yet).
RUN PYTRITON_VERSION="${PYTRITON_VERSION}" NUMPY_VERSION="${NUMPY_VERSION}" \
    /usr/local/lib/geadmin/install-triton.sh python3
COPY --from=backend-build /build/npu_ge/libtriton_npu_ge.so /opt/tritonserver/backends/npu_ge/
# uid 1000: the user install-triton.sh made (or the CANN image's own, e.g. HwHiAiUser).
USER 1000
