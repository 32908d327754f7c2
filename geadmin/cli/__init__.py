"""The `geadmin` command line: `main.py` routes to one module per sub-command."""
