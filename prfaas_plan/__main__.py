"""``python -m prfaas_plan ...`` runs the command-line tool (the same as ``prfaas-plan``)."""

from .entry import main

main()
