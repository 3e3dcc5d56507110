"""Evaluation (PROVE section 4): responses scored for helpfulness and truthfulness, and the
guide's evaluators beside them."""
