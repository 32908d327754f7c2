#!/bin/sh
# The real tritonserver ($REAL_TRITONSERVER) in a mount namespace with a /dev/shm of its own,
# as in a container that does not share the host's: a client's POSIX shared memory is not
# there. Needs root (unshare --mount), which the test machine has.
exec unshare --mount sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh "$REAL_TRITONSERVER" "$@"
