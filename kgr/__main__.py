from kgr.cli import main

main()
