"""The two-way routers (R²Adapter's dense/graph router, r2a and r2a_embed) as a router family:
their family (family.py), training run and registration (register.py), and out-of-fold training
(folds.py)."""
