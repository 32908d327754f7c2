"""Changes to a model, each checked against what Triton reports afterwards.

- actions.py    load, unload and reload, audited by their outcome (and what else they took down)
- apply.py      a new config.pbtxt applied without taking a serving model down (rollback on failure)
- apply_result.py  what an apply returns: its outcome, the audit result of each, what serves
- create.py     a new model from a template: directory, files, validation, first load
- reconcile.py  what an apply, a create or a rollout left behind when its process died
- change_plan.py  one plan of a config change for the CLI and the editor: findings, rollback
                target, impact, the question asked, a declined change audited as refused
- explained_load.py  a load followed through Triton's log, its failure explained
- preview.py    a config change served as a trial copy beside the live model, measured at the
                recorded rate: go / no-go with the evidence, nothing applied
- preview_report.py  what a preview found: both sides measured, the ensembles, the objective, the verdict
- put_back.py   the served config written back over a drifted file, audited
"""
