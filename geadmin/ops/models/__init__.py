"""Changes to a model, each checked against what Triton reports afterwards.

- actions.py    load, unload and reload, audited by their outcome (and what else they took down)
- apply.py      a new config.pbtxt applied without taking a serving model down (rollback on failure)
- create.py     a new model from a template: directory, files, validation, first load
- reconcile.py  what an apply, a create or a rollout left behind when its process died
"""
