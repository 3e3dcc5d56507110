"""Benchmark construction (PROVE section 3) in plain Python: tuple canonicalisation, question
targets chosen from the scene graph, programs compiled from them, and the verdicts on pairs."""
