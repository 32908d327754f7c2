"""Many Triton servers as one: where they are (discovery), what each serves (status), and
changes made to them a wave at a time (rollout)."""
