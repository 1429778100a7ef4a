"""``python -m caderno.cli``: the same as the ``caderno`` console script."""

from caderno.cli.main import main

main()
