"""`python -m strandline` and the `strandline` command."""

from strandline.startup import skip_test_only_imports

skip_test_only_imports()

from strandline.cli.main import main  # noqa: E402

if __name__ == "__main__":
    main()
