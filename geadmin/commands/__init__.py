"""One module per `geadmin` sub-command; each exposes `register(subparsers)`."""
