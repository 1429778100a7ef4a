"""``caderno`` on the command line (click): ``main`` in ``caderno.cli.main``.

Run as ``caderno …`` (the console script) or ``python -m caderno.cli …``.
"""
