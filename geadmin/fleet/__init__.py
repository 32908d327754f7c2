"""Many Triton servers as one (layer 3): where they are, who is trusted, what each serves, and
changes made a wave at a time.

- members.py             a member: one Triton server, where it was found, its labels
- discovery.py           any mix of sources, each a module with one `discover`
- dns.py                 `dns:HOST:PORT`: every address a name resolves to
- prometheus_targets.py  `prometheus:URL?job=JOB`: the active targets of a scrape job
- kubernetes.py          the Triton pods of a namespace, by label selector
- kubernetes_owners.py   whether a pod belongs to the workload a fleet names
- membership.py          who is trusted with the admin key: membership before keys
- readonly.py            a read-only member seen through Triton's open endpoints
- status.py              the model x server matrix, skew said
- config_skew.py         the config each server serves of a model, compared: which differ, in what
- polling.py             every member polled at once, each bounded by a deadline
- index_once.py          a rollout's client: one repository index per server per step
- probes.py              synthetic probes across the members
- preview.py             what a rollout would do, said before it starts
- gate.py                the health gate after each wave
- rollout.py             a change on every server, a wave at a time, judged after each
- wave.py                one wave applied: each server changed, journaled, recorded on it
- journal.py             a rollout's journal, written as it goes
- restore.py             the way back: every server a rollout cut short changed put back, on the
                         servers its journal names, keyed only where proven
- resume.py              the way forward: a rollout cut short run again as planned
- unresolved.py          a rollout left cut short: a new one refused, the fleet DEGRADED
- server_audit.py        a fleet change audited in each changed server's own workspace
- runs.py                a rollout running in the background for a page
- versions.py            a new model version across the fleet without a gap in serving, its
                         retire step journaled with its first
- pinning.py             the config a version rollout's way back writes: the old one, pinned to
                         the versions that served when it would serve the new directory
- npu_faults.py          NPU faults across a fleet: each member's faults on its node, one report
- capacity.py            capacity of every member, read only
"""
