from gpufabric.cli.app import run

run()
