"""The reports that compare router families side by side: the routing plane's report
(plane.py), leave one corpus out (loco.py) and the corpora table (corpora.py)."""
