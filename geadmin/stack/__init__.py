"""Running the stack (layer 3): tritonserver and dashboard processes, the workspace, which
Triton a command targets.

- tritonserver.py    start and stop a real `tritonserver`: its command line, environment and process
- triton_install.py  the wheel's `tritonserver` binary and the backend directory (python stub) it needs
- dashboard.py       the Streamlit dashboard as a child process
- supervisor.py      keep the embedded tritonserver running, as a process manager does
- embedded.py        `geadmin up`: tritonserver, dashboard, sampler in one
- startup_loads.py   `geadmin up`'s model loads after each start; a hung or Triton-killing load left out
- recording.py       the sampler, its probes and geadmin's metrics endpoint, started and stopped as one
- processes.py       ports, pids and health polls
- workspace.py       $GEADMIN_HOME, geadmin's own directory
- backends.py        extra backend directories for the embedded Triton
- log_discovery.py   which log explains a Triton given by URL alone
- drivers.py         one interface over a stack's services, whoever runs it
- local.py           the driver for this workspace's `geadmin up`
- compose.py         the driver for a compose project, through the docker CLI
- docker_cli.py      the docker CLI with a deadline, its failures through one table
- docker_inspect.py  what the docker CLI prints, parsed
- compose_logs.py    Triton's log from its compose container, and why a container does not serve
- choose.py          which driver the Stack page uses
- target.py          which Triton a command talks to, and its log and repository
- server_history.py  what happened to the server, told for an on-call operator
- server_verdict.py  the verdict with the stack's account of the server, for every face
- stack_audit.py     the embedded stack's own audit rows (how Triton ended, who stopped it)
"""
