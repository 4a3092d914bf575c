"""PySpark's Python worker daemon (`spark.python.daemon.module`), told first that
hypothesis is not for it (`strandline.startup`): every worker it forks imports kio
through our data source, and would otherwise pay for kio's hypothesis strategies
where the tests are installed. Nothing else is imported before the fork: PySpark
forbids threads there, and pandas and pyarrow start some when imported."""

from strandline.startup import skip_test_only_imports

skip_test_only_imports()

from pyspark.daemon import manager  # noqa: E402

if __name__ == "__main__":
    manager()
