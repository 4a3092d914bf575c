from strandline.cli.main import main

main()
