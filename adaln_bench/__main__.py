from adaln_bench.cli import main

main()
