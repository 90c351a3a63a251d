from trnsim.cli import main

main()
