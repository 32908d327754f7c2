"""The model repository on disk (layer 1).

- layout.py        model directories and version layouts
- modelconfig.py   config.pbtxt <-> ModelConfig through the real protobuf (parse, print, JSON)
- positions.py     where every field sits in the text (the one user of protobuf's private parser)
- rewrite.py       a config edited through form controls, written back keeping comments
- knobs.py         the knobs operators turn, read from and written into a config text
- templates.py     new models from templates
- validate.py      findings of the validator; rules.py its registry, triton_rules.py Triton's
                   rules, cross_model.py ensembles vs members, npu_ge_params.py / npu_ge_checks.py
                   what the npu_ge backend accepts
- store.py         a config read and written with conflict detection; paths.py path safety,
                   atomic.py atomic writes, locks.py per-model locks, revisions.py the history
"""
