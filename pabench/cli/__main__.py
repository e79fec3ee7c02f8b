from pabench.cli import main

main()
