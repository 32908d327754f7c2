"""The workspace database's schema, as its ordered migrations (applied by `geadmin.db.connect`).

`PRAGMA user_version` counts how many are applied. Add a table by appending a migration; never
edit one that has shipped: a workspace that already ran it would never see the change.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    """One step of the schema; `statements` run in order inside the migration transaction."""

    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration("audit log", (
        """CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,              -- UTC, TIME_FORMAT
            who TEXT NOT NULL,             -- OS user, or the dashboard's signed-in user
            origin TEXT NOT NULL,          -- cli, dashboard, local
            server TEXT NOT NULL,          -- the Triton URL ('' when none was involved)
            model TEXT NOT NULL,
            action TEXT NOT NULL,          -- apply, rollback, load, unload, reload, ...
            result TEXT NOT NULL,          -- ok, failed, rolled_back, refused
            message TEXT NOT NULL DEFAULT '',
            diff TEXT NOT NULL DEFAULT ''  -- unified diff of the config change, if any
        )""",
        "CREATE INDEX audit_by_time ON audit (at)",
        "CREATE INDEX audit_by_model ON audit (model, at)",
    )),
    Migration("config revisions", (
        """CREATE TABLE config_revisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            repository TEXT NOT NULL,      -- the model repository's resolved path
            model TEXT NOT NULL,
            number INTEGER NOT NULL,       -- 1, 2, ... per (repository, model)
            at TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            content BLOB NOT NULL,         -- the file's exact bytes
            who TEXT NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            UNIQUE (repository, model, number)
        )""",
    )),
    Migration("telemetry samples", (
        # geadmin.telemetry.history.record: one row per sampler interval (resolution_s 0) or per
        # downsampled bucket (resolution_s 60). `at` is the end of the window, epoch seconds;
        # the window is [at - span_s, at]. gap = 1: no data there (Triton down, restarted).
        """CREATE TABLE telemetry_model (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,          -- the /metrics URL sampled
            at REAL NOT NULL,
            span_s REAL NOT NULL,
            resolution_s INTEGER NOT NULL DEFAULT 0,
            model TEXT NOT NULL,
            version TEXT NOT NULL,
            gap INTEGER NOT NULL DEFAULT 0,
            inferences_per_s REAL, requests_per_s REAL, failures_per_s REAL,
            executions_per_s REAL, avg_batch_size REAL,
            avg_request_ms REAL, avg_queue_ms REAL, avg_compute_input_ms REAL,
            avg_compute_infer_ms REAL, avg_compute_output_ms REAL,
            p50_ms REAL, p90_ms REAL, p99_ms REAL, pending_requests REAL,
            failures_by_reason TEXT NOT NULL DEFAULT '{}'  -- JSON {reason: failed requests}
        )""",
        "CREATE INDEX telemetry_model_by_time ON telemetry_model (source, at)",
        """CREATE TABLE telemetry_server (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            at REAL NOT NULL,
            span_s REAL NOT NULL,
            resolution_s INTEGER NOT NULL DEFAULT 0,
            gap INTEGER NOT NULL DEFAULT 0,
            reason TEXT NOT NULL DEFAULT '',  -- why there is a gap
            cpu_utilization_pct REAL, cpu_memory_used_bytes REAL, cpu_memory_total_bytes REAL
        )""",
        "CREATE INDEX telemetry_server_by_time ON telemetry_server (source, at)",
        """CREATE TABLE telemetry_npu (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            at REAL NOT NULL,
            span_s REAL NOT NULL,
            resolution_s INTEGER NOT NULL DEFAULT 0,
            device INTEGER NOT NULL,
            npu_source TEXT NOT NULL,      -- npu-exporter, npu-smi, triton
            aicore_util_pct REAL, hbm_used_bytes REAL, hbm_total_bytes REAL,
            temperature_c REAL, power_w REAL
        )""",
        "CREATE INDEX telemetry_npu_by_time ON telemetry_npu (source, at)",
    )),
    Migration("perf runs", (
        # geadmin.ops.bench.results: one perf_analyzer load test and its measured points.
        """CREATE TABLE perf_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,              -- UTC, TIME_FORMAT: when the run started
            who TEXT NOT NULL,
            server TEXT NOT NULL,          -- the Triton URL perf_analyzer drove
            model TEXT NOT NULL,
            mode TEXT NOT NULL,            -- concurrency, request_rate
            label TEXT NOT NULL DEFAULT '',  -- e.g. "dynamic batching on"
            settings TEXT NOT NULL         -- JSON: geadmin.ops.bench.load_test.BenchSettings
        )""",
        "CREATE INDEX perf_runs_by_model ON perf_runs (model, at)",
        """CREATE TABLE perf_points (
            run_id INTEGER NOT NULL REFERENCES perf_runs (id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,      -- 0, 1, ... in the order measured
            load REAL NOT NULL,            -- the concurrency, or the request rate (requests/s)
            figures TEXT NOT NULL,         -- JSON: geadmin.ops.bench.results.BenchPoint
            PRIMARY KEY (run_id, ordinal)
        )""",
    )),
    Migration("probes, model states, objectives", (
        # geadmin.telemetry.history.watch: the sampler's synthetic requests and the states it saw.
        """CREATE TABLE probes (
            id INTEGER PRIMARY KEY,
            server TEXT NOT NULL,          -- the Triton URL probed
            model TEXT NOT NULL,
            at REAL NOT NULL,              -- epoch seconds
            ok INTEGER NOT NULL,
            latency_ms REAL,
            error TEXT NOT NULL DEFAULT '',
            input TEXT NOT NULL DEFAULT 'zeros'  -- zeros, or saved (the model's saved example)
        )""",
        "CREATE INDEX probes_by_model ON probes (server, model, at)",
        """CREATE TABLE model_states (
            server TEXT NOT NULL,
            model TEXT NOT NULL,
            state TEXT NOT NULL,           -- READY, LOADING, UNAVAILABLE, ...
            reason TEXT NOT NULL DEFAULT '',
            since REAL NOT NULL,           -- epoch seconds: when it entered this state
            seen REAL NOT NULL,            -- the last time the sampler read it
            operator_unload INTEGER NOT NULL DEFAULT 0,  -- not READY because an operator unloaded it
            PRIMARY KEY (server, model)
        )""",
        """CREATE TABLE probe_inputs (
            model TEXT PRIMARY KEY,        -- the model's saved example request (the Playground's)
            sources TEXT NOT NULL,         -- JSON {input: {kind, payload}}
            saved_at TEXT NOT NULL,
            who TEXT NOT NULL
        )""",
        """CREATE TABLE objectives (
            model TEXT PRIMARY KEY,
            p99_ms REAL,                   -- the p99 latency target, NULL: none
            error_budget REAL,             -- allowed failed fraction of requests, NULL: none
            set_at TEXT NOT NULL,
            who TEXT NOT NULL
        )""",
    )),
    Migration("tune runs", (
        # geadmin.ops.tune.results: one tuning run, its trials and its pick.
        """CREATE TABLE tune_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,              -- UTC, TIME_FORMAT: when the run started
            who TEXT NOT NULL,
            server TEXT NOT NULL,
            model TEXT NOT NULL,
            document TEXT NOT NULL         -- JSON: geadmin.ops.tune.search.TuneResult.to_json()
        )""",
        "CREATE INDEX tune_runs_by_model ON tune_runs (model, at)",
    )),
    Migration("model batching", (
        # geadmin.telemetry.history.watch: each READY model's dynamic batcher wait, as the prober read its
        # served config (the alert rules subtract it from the queue time: waiting is by design).
        """CREATE TABLE model_batching (
            server TEXT NOT NULL,
            model TEXT NOT NULL,
            max_queue_delay_s REAL NOT NULL,  -- dynamic_batching.max_queue_delay_microseconds / 1e6
            seen REAL NOT NULL,            -- epoch seconds: when the prober last read it
            PRIMARY KEY (server, model)
        )""",
    )),
    Migration("npu faults", (
        # geadmin.telemetry.history.faults: each fault code a source reported on a chip, from when
        # it was first seen to when it was last seen; present = 0: a later read of that source no
        # longer reported it (cleared). One row per (node, chip, code, source); code NULL: a chip
        # reported unhealthy without a code.
        """CREATE TABLE npu_faults (
            id INTEGER PRIMARY KEY,
            node TEXT NOT NULL,            -- '' for this host; a fleet member's node label
            chip INTEGER NOT NULL,         -- the device id ACL and npu_ge use
            code INTEGER,                  -- the driver's 32-bit code (npu_ge: the ACL error); NULL: none
            source TEXT NOT NULL,          -- npu-exporter, npu-smi, npu_ge
            healthy INTEGER,               -- the chip's health as the source said it; NULL: not said
            detail TEXT NOT NULL DEFAULT '',
            first_seen REAL NOT NULL,      -- epoch seconds
            last_seen REAL NOT NULL,
            present INTEGER NOT NULL DEFAULT 1
        )""",
        "CREATE UNIQUE INDEX npu_faults_key ON npu_faults (node, chip, IFNULL(code, -1), source)",
        "CREATE INDEX npu_faults_by_time ON npu_faults (last_seen)",
    )),
    Migration("npu fault impact", (
        # geadmin.telemetry.history.fault_impact: the sampler's fault watcher (geadmin.ops.npu.watch)
        # rewrites a server's rows at each read, so they say the faults present now and what each
        # model lost; geadmin's exporter leaves out rows not written again recently.
        """CREATE TABLE npu_fault_now (
            server TEXT NOT NULL,          -- the Triton whose watcher read it
            node TEXT NOT NULL,            -- the host ('' for the server's own)
            npu INTEGER NOT NULL,          -- the chip (the device id ACL and npu_ge use)
            code TEXT NOT NULL,            -- 0x%08X, 'ACL n', or 'none' (unhealthy without a code)
            level TEXT NOT NULL,           -- FaultLevel value
            counts INTEGER NOT NULL,       -- 1: a level that needs action, or the chip is unhealthy
            seen REAL NOT NULL,            -- epoch seconds: when the watcher last wrote it
            PRIMARY KEY (server, node, npu, code)
        )""",
        """CREATE TABLE npu_fault_loss (
            server TEXT NOT NULL,
            node TEXT NOT NULL,
            npu INTEGER NOT NULL,          -- the faulted chip
            code TEXT NOT NULL,
            level TEXT NOT NULL,
            model TEXT NOT NULL,
            instances_total INTEGER NOT NULL,  -- the model's instances on every chip of its server
            instances_lost INTEGER NOT NULL,   -- those the faults that count took
            down INTEGER NOT NULL,         -- 1: no healthy instance left
            seen REAL NOT NULL,
            PRIMARY KEY (server, node, npu, code, model)
        )""",
    )),
    Migration("captured arrivals", (
        # geadmin.telemetry.history.arrivals: one row per capture of a model's request arrivals
        # from Triton's trace files; the intervals replayed by `tune --objective`.
        """CREATE TABLE arrival_captures (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            server TEXT NOT NULL,          -- the Triton captured (its URL)
            model TEXT NOT NULL,
            window_start REAL NOT NULL,    -- epoch seconds
            window_end REAL NOT NULL,
            count INTEGER NOT NULL,        -- arrivals recorded (intervals + 1)
            intervals_us TEXT NOT NULL     -- the inter-arrival intervals, microseconds, comma-separated
        )""",
        "CREATE INDEX arrival_captures_by_model ON arrival_captures (model, window_end)",
    )),
    Migration("load tests cut short", (
        # geadmin.ops.bench.results: a sweep perf_analyzer stopped before its last load keeps the
        # points it measured and says why it stopped ('' for a whole run).
        "ALTER TABLE perf_runs ADD COLUMN cut_short TEXT NOT NULL DEFAULT ''",
    )),
    Migration("npu fault counters and per-chip losses", (
        # geadmin.telemetry.history.faults: a counted fault (npu_ge's counters since Triton
        # started) is present while its count rises: the count last read, and when it last rose.
        "ALTER TABLE npu_faults ADD COLUMN count REAL",
        "ALTER TABLE npu_faults ADD COLUMN last_rose REAL",
        # geadmin.telemetry.history.fault_impact: the model's instances on the faulted chip (the
        # per-chip figure; instances_lost is the model's loss over every faulted chip)
        "ALTER TABLE npu_fault_loss ADD COLUMN instances_on_chip INTEGER NOT NULL DEFAULT 0",
    )),
)
