#!/usr/bin/env bash
# Make a Docker engine answer on this machine and provide the local base images the
# compose tests build FROM (no registry can be pulled from here; see FACTS.md, "Docker").
#
# Idempotent: every step is skipped when its result already exists, so a second run
# takes about a second. Steps:
#   1. Debian packages docker.io, docker-compose, debootstrap (apt-get when missing);
#   2. dockerd with the vfs storage driver and a data root outside the clone (layers stay
#      cached between runs and between fresh clones), when `docker info` does not answer;
#   3. local/debian:bookworm - a debootstrap minbase root imported as an image;
#   4. local/debian-test:bookworm - FROM 3. plus this host's CA bundle and PIP_CERT, because
#      PyPI's TLS is re-signed on this network. For tests only: the product Dockerfile takes
#      its base image as a build arg and never trusts anything but its own bundle;
#   5. the build cache no build used for GEADMIN_DOCKER_CACHE_HOURS (default 3) is pruned, and
#      dangling images with it: vfs keeps each layer as a full copy of the tree, and every
#      clone's sources make new layers, so the cache of earlier runs filled this disk (60 GB).
#
# Environment: GEADMIN_DOCKER_DATA_ROOT, GEADMIN_DOCKERD_LOG, GEADMIN_DEBIAN_MIRROR,
# GEADMIN_BASE_IMAGE, GEADMIN_TEST_BASE_IMAGE, GEADMIN_DOCKER_WAIT (seconds).
set -euo pipefail

data_root=${GEADMIN_DOCKER_DATA_ROOT:-/var/lib/geadmin-docker}
dockerd_log=${GEADMIN_DOCKERD_LOG:-/var/log/geadmin-dockerd.log}
base_image=${GEADMIN_BASE_IMAGE:-local/debian:bookworm}
test_base_image=${GEADMIN_TEST_BASE_IMAGE:-local/debian-test:bookworm}
wait_seconds=${GEADMIN_DOCKER_WAIT:-60}
cache_hours=${GEADMIN_DOCKER_CACHE_HOURS:-3}
host_ca_bundle=/etc/ssl/certs/ca-certificates.crt
packages=(docker.io docker-compose debootstrap)

step() { echo "docker-engine: $*"; }
die() {
  echo "docker-engine: FAILED: $*" >&2
  exit 1
}

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "not root and no sudo: cannot install packages or start dockerd"
  sudo="sudo"
fi

# 1. packages -----------------------------------------------------------------------------
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  step "packages present: ${packages[*]}"
else
  step "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null || die "apt-get install ${missing[*]} failed"
fi
command -v docker >/dev/null || die "no docker client on PATH after installing docker.io"
command -v docker-compose >/dev/null || die "no docker-compose on PATH after installing docker-compose"

# 2. engine -------------------------------------------------------------------------------
if docker info >/dev/null 2>&1; then
  step "engine answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
else
  command -v dockerd >/dev/null || die "no dockerd on PATH (package docker.io)"
  step "starting dockerd (vfs, data root $data_root, log $dockerd_log)"
  $sudo mkdir -p "$data_root" "$(dirname "$dockerd_log")"
  # setsid: the engine must outlive this script and the test session that ran it.
  $sudo setsid dockerd --storage-driver=vfs --data-root="$data_root" \
    >>"$dockerd_log" 2>&1 </dev/null &
  deadline=$((SECONDS + wait_seconds))
  until docker info >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "--- last lines of $dockerd_log:" >&2
      tail -n 20 "$dockerd_log" >&2 || true
      die "dockerd did not answer within ${wait_seconds}s"
    fi
    sleep 1
  done
  step "engine answers after $((wait_seconds - deadline + SECONDS))s"
fi

# 3. base image ---------------------------------------------------------------------------
debian_mirror() {
  if [ -n "${GEADMIN_DEBIAN_MIRROR:-}" ]; then
    echo "$GEADMIN_DEBIAN_MIRROR"
    return
  fi
  # First deb822 stanza whose Suites has plain "bookworm" (not the security archive).
  local file mirror
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -e "$file" ] || continue
    mirror=$(awk '
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") ok = 1 }
      /^$/ { if (ok && uri != "") { print uri; exit } uri = ""; ok = 0 }
      END { if (ok && uri != "") print uri }' "$file" | head -n 1)
    if [ -n "$mirror" ]; then
      echo "$mirror"
      return
    fi
  done
  grep -hE '^deb .* bookworm ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
    | awk '{print $2; exit}'
}

# An image from an earlier version of this script had "/" with mode 0700 (mktemp's), which
# locks every non-root user out of the whole filesystem: such an image is made again.
if docker image inspect "$base_image" >/dev/null 2>&1 \
  && [ "$(docker run --rm "$base_image" stat -c %a / 2>/dev/null)" != 755 ]; then
  step "base image $base_image has a root directory non-root users cannot enter: rebuilding it"
  docker image rm -f "$test_base_image" "$base_image" >/dev/null 2>&1 || true
fi
if docker image inspect "$base_image" >/dev/null 2>&1; then
  step "base image present: $base_image"
else
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no Debian bookworm mirror in /etc/apt/sources.list.d/ (set GEADMIN_DEBIAN_MIRROR)"
  root=$(mktemp -d /var/tmp/geadmin-debootstrap.XXXXXX)
  trap '$sudo rm -rf "$root"' EXIT
  step "debootstrap bookworm from $mirror into $root"
  $sudo debootstrap --variant=minbase --include=ca-certificates,curl bookworm "$root" "$mirror" \
    >"$root.log" 2>&1 || {
    tail -n 20 "$root.log" >&2
    die "debootstrap failed (full log $root.log)"
  }
  $sudo rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  $sudo chmod 755 "$root"  # mktemp made it 0700: it becomes the image's "/"
  step "importing $root as $base_image"
  $sudo tar -C "$root" -c . | docker import - "$base_image" >/dev/null \
    || die "docker import failed"
  $sudo rm -rf "$root" "$root.log"
  trap - EXIT
fi

# 4. test base image ----------------------------------------------------------------------
if docker image inspect "$test_base_image" >/dev/null 2>&1; then
  step "test base image present: $test_base_image"
else
  [ -r "$host_ca_bundle" ] || die "cannot read the host CA bundle $host_ca_bundle"
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  cp "$host_ca_bundle" "$context/ca-certificates.crt"
  cat >"$context/Dockerfile" <<EOF
FROM $base_image
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \\
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \\
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
CMD ["/bin/bash"]
EOF
  step "building $test_base_image (FROM $base_image, trusts the host CA bundle)"
  # The output (and the client's "legacy builder is deprecated" notice) only when it fails.
  if ! output=$(docker build -q -t "$test_base_image" "$context" 2>&1); then
    echo "$output" >&2
    die "docker build of $test_base_image failed"
  fi
  rm -rf "$context"
  trap - EXIT
fi
# 5. disk --------------------------------------------------------------------------------
if docker builder prune -f --filter "until=${cache_hours}h" >/dev/null 2>&1 \
  && docker image prune -f >/dev/null 2>&1; then
  step "build cache unused for ${cache_hours} h and dangling images pruned"
else
  step "could not prune the build cache (docker builder prune failed): the disk may fill"
fi
step "ready: $base_image, $test_base_image"
