from workbench.cli import run

run()
