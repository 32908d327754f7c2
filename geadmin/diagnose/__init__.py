"""What is down and why: failed loads explained, health and verdict, drift, model rows, ensembles."""
