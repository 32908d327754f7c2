"""What is down and why: failed loads explained, triage, model rows and details, ensembles."""
