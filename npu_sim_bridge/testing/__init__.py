"""Test and benchmark helpers: builders of realistic TF1 graph-mode training graphs (see models)."""
