"""The files of the TF1 view's import and attribute plumbing: a script's traceback leaves their frames out
when they end it (cli/run.py), and a warning points past them to the script's own line (contrib.py)."""

import os

PLUMBING_FILES = frozenset(convert(os.path.join(os.path.dirname(__file__), name))
                           for name in ("hook.py", "view.py", "contrib.py", "contrib_paths.py")
                           for convert in (os.path.abspath, os.path.realpath))
