#!/bin/sh
# Install Triton 2.51 from the nvidia-pytriton wheel as a ready server tree (both triton
# images run this, so the CPU-only image tested here and the Ascend image match):
#   /opt/venv                       the wheel (no dependencies: only the server is used) + numpy<2
#   /opt/tritonserver/bin           tritonserver (a link into the wheel)
#   /opt/tritonserver/lib           the wheel's libraries (nvidia_pytriton.libs): LD_LIBRARY_PATH
#   /opt/tritonserver/backends      --backend-directory: python/ (with the stub built for this
#                                   Python, copied: it finds its libraries from its real path)
#                                   and npu_ge/ (the Dockerfile copies libtriton_npu_ge.so there)
# It also makes the unprivileged user (uid 1000) and the directories it writes.
#
# Usage: install-triton.sh PYTHON    with PYTRITON_VERSION and NUMPY_VERSION in the environment.
set -eu
python=${1:?usage: install-triton.sh PYTHON}
: "${PYTRITON_VERSION:?}" "${NUMPY_VERSION:?}"
venv=/opt/venv
dest=/opt/tritonserver

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/pip" install --no-cache-dir --no-deps "nvidia-pytriton==$PYTRITON_VERSION"
# numpy must stay < 2 in the python backend's environment (numpy 2 gives zero-byte outputs).
"$venv/bin/pip" install --no-cache-dir "numpy==$NUMPY_VERSION"

site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
version=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
server="$site/pytriton/tritonserver"
stub="$server/python_backend_stubs/$version/triton_python_backend_stub"
if [ ! -x "$stub" ]; then
  echo "install-triton: nvidia-pytriton $PYTRITON_VERSION has no python backend stub for" \
    "Python $version (it has: $(cd "$server/python_backend_stubs" && echo *))" >&2
  exit 1
fi
mkdir -p "$dest/bin" "$dest/backends/python" "$dest/backends/npu_ge"
for file in "$server/backends/python"/*; do
  case "$(basename "$file")" in __pycache__) continue ;; esac
  cp -a "$file" "$dest/backends/python/"
done
cp "$stub" "$dest/backends/python/triton_python_backend_stub"
ln -sf "$server/bin/tritonserver" "$dest/bin/tritonserver"
ln -sfn "$site/nvidia_pytriton.libs" "$dest/lib"

getent passwd 1000 >/dev/null \
  || useradd --uid 1000 --user-group --create-home --shell /usr/sbin/nologin geadmin
mkdir -p /models /var/log/triton
# The python backend chmods its stub at every model load: it must belong to the server's user.
chown "1000:$(id -g 1000)" /var/log/triton "$dest/backends/python/triton_python_backend_stub"
echo "install-triton: Triton from nvidia-pytriton $PYTRITON_VERSION for Python $version in $dest"
