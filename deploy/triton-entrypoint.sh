#!/bin/sh
# Entry point of the triton images: start two helpers, then become tritonserver (its
# arguments are this script's), so the server gets the container's signals directly.
#
# --log-file=PATH  Triton then writes its log to PATH only (the volume the dashboard's
#                  explainer reads). `tail -F` copies it to stdout, so `docker logs`,
#                  `docker compose logs` and the Stack page's compose driver still see it.
# TRITON_LOAD_MODELS="*" (or "a,b")  load those models once the server is live, in parallel
#                  with a per-model timeout (triton-load-models.py). It runs at every start of
#                  the container, so a restarted Triton serves its models again by itself.
#
# Never an open repository API (its load takes file uploads: code as Triton's user): without
# --http-restricted-api among the arguments, TRITON_ADMIN_KEY adds the restricted-API flags
# every geadmin stack uses (docs/security.md); with neither, the container refuses to start,
# unless TRITON_OPEN_API=1 says an open server is wanted.
set -eu
log_file=""
http_port=8000
restricted=""
repositories=""  # Triton's --model-repository paths, ':'-separated, for the loader to skip trials
for arg in "$@"; do
  case "$arg" in
    --log-file=*) log_file=${arg#--log-file=} ;;
    --http-port=*) http_port=${arg#--http-port=} ;;
    --http-restricted-api=*) restricted=1 ;;
    --model-repository=*) repositories="$repositories${repositories:+:}${arg#--model-repository=}" ;;
  esac
done

if [ -z "$restricted" ]; then
  if [ -n "${TRITON_ADMIN_KEY:-}" ]; then
    groups=model-repository,model-config,shared-memory,logging,trace
    set -- "$@" "--http-restricted-api=$groups:admin-key=$TRITON_ADMIN_KEY" \
      "--grpc-restricted-protocol=$groups:admin-key=$TRITON_ADMIN_KEY"
  elif [ "${TRITON_OPEN_API:-}" != "1" ]; then
    echo "triton-entrypoint: refusing to start Triton with its repository API open to whoever reaches" \
      "port $http_port (a load can upload code): set TRITON_ADMIN_KEY (the restricted-API flags are" \
      "added), pass --http-restricted-api/--grpc-restricted-protocol yourself, or set TRITON_OPEN_API=1" >&2
    exit 64
  fi
fi

# Regions a killed predecessor left (python backend shared memory) would clash with ours.
rm -f /dev/shm/triton_python_backend_shm_region_* 2>/dev/null || true

if [ -n "$log_file" ]; then
  mkdir -p "$(dirname "$log_file")"
  touch "$log_file"
  tail -n 0 -F "$log_file" 2>/dev/null &
fi
if [ -n "${TRITON_LOAD_MODELS:-}" ]; then
  TRITON_MODEL_REPOSITORIES="$repositories" TRITON_LOG_FILE="$log_file" \
    python3 /usr/local/lib/geadmin/triton-load-models.py --url "http://127.0.0.1:$http_port" &
fi
exec tritonserver "$@"
