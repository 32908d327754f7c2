"""The model repository on disk (layer 1).

- layout.py         model directories and version layouts
- modelconfig.py    config.pbtxt <-> ModelConfig through the real protobuf (parse, print, JSON)
- positions.py      where every field sits in the text (the one user of protobuf's private parser)
- rewrite.py        a config edited through form controls, written back keeping comments
- knobs.py          the knobs operators turn, read from and written into a config text
- templates.py      new models from templates
- validate.py       the validator: schema, Triton's rules, npu_ge's, across models
- rules.py          the validator's vocabulary and registry
- triton_rules.py   Triton's own rules for a config
- cross_model.py    ensembles against the configs of the models they run
- npu_ge_params.py  what the npu_ge backend accepts: the one table
- npu_ge_checks.py  a config checked against that table
- code_fields.py    the fields that decide which code Triton runs
- store.py          a config read and written with conflict detection and a revision first
- paths.py          path safety: the one gate for names that come from users
- bounded.py        the one bounded reader for files a user names (regular files, at most a limit)
- atomic.py         atomic writes: temp file, fsync, rename, directory fsync; a rename that never replaces
- locks.py          one writer per model config, by a lock file in the workspace
- revisions.py      the config history: exact bytes kept before each overwrite
- trials.py         which model directories are the tuner's trial copies, and whose
"""
