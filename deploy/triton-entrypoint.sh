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
set -eu
log_file=""
http_port=8000
repositories=""  # Triton's --model-repository paths, ':'-separated, for the loader to skip trials
for arg in "$@"; do
  case "$arg" in
    --log-file=*) log_file=${arg#--log-file=} ;;
    --http-port=*) http_port=${arg#--http-port=} ;;
    --model-repository=*) repositories="$repositories${repositories:+:}${arg#--model-repository=}" ;;
  esac
done

# Regions a killed predecessor left (python backend shared memory) would clash with ours.
rm -f /dev/shm/triton_python_backend_shm_region_* 2>/dev/null || true

if [ -n "$log_file" ]; then
  mkdir -p "$(dirname "$log_file")"
  touch "$log_file"
  tail -n 0 -F "$log_file" 2>/dev/null &
fi
if [ -n "${TRITON_LOAD_MODELS:-}" ]; then
  TRITON_MODEL_REPOSITORIES="$repositories" \
    python3 /usr/local/lib/geadmin/triton-load-models.py --url "http://127.0.0.1:$http_port" &
fi
exec tritonserver "$@"
