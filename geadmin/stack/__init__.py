"""Running the stack (layer 3): tritonserver and dashboard processes, the workspace, which
Triton a command targets.

- tritonserver.py, dashboard.py, supervisor.py, embedded.py   `geadmin up`'s own processes
- recording.py     the sampler, its probes and geadmin's metrics endpoint (`geadmin up`,
                   `geadmin sampler`)
- processes.py     ports, pids and health polls (process groups: geadmin.binaries)
- workspace.py     $GEADMIN_HOME; backends.py backend directories; log_discovery.py Triton's log
- drivers.py       one interface over the stack's services: local.py (`geadmin up`), and
                   compose.py (a compose project) with docker_cli.py (the CLI and its failure
                   table), docker_inspect.py (parsers) and compose_logs.py (Triton's log)
- target.py, choose.py, server_history.py   which server a command means, and its history
"""
